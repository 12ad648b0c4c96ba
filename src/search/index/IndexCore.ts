/**
 * The search index's own thread of work: the in-memory `SearchIndex`, search's persistence
 * (documents, vectors, per-store sequence) and the embedding model, and every operation on them.
 *
 * It runs in the search thread (SearchThread.ts), fed by the indexer on the daemon's main thread
 * (Indexer.ts) with the documents of committed events, already read from the stores' views. It
 * knows nothing of stores or the event bus: it is told which groups to replace and answers
 * searches. Every operation runs under one lock, and operations run in the order they arrive, so a
 * search that arrives after a group replacement sees it. Loading what was persisted goes on in
 * slices of `warmSliceMs` under the same lock, so searches are answered meanwhile (not warm yet).
 *
 * The index keeps its documents whole in persistence only (SearchIndex.ts), and reads them for
 * the hits shown: reads map the file's pages, so once warm, `tick` lets go of them when no read
 * came for `releaseMappedPagesIdleMs`, and after every `releaseMappedPagesWritesMax` writes (which
 * map the pages their transactions walk) or once such a run of writes pauses.
 *
 * The model loads on the first need (a document to embed, a search by meaning); if it is not up
 * within `modelWaitMs` (a first-run build), documents wait for it in `deferred` and are found by
 * words meanwhile; `tick` embeds them once it is, and grows the ANN index in small steps.
 *
 * A start with another model than the vectors were made with (`mnemos model use`, `--model`)
 * switches models without a gap (ModelSwitch.ts): the previous model and its vectors answer while
 * `tick` re-embeds every document with the new one, and the two are swapped once it is done
 * (`reembedding` in the stats). When the previous model cannot be loaded any more, its vectors
 * are dropped and `embedMissing` re-embeds everything: searches are answered by words meanwhile,
 * and by meaning for what is re-embedded.
 */
import { getHeapSpaceStatistics } from "node:v8"
import { Clock, Duration, Effect, Scope, Semaphore } from "effect"
import { Embedder, type EmbedderStatus } from "../embedding/Embedder.ts"
import { type ModelSwitch, makeModelSwitch, previousModelConfig, type Reembedding } from "../embedding/ModelSwitch.ts"
import { makeMemoryPersistence } from "../persistence/MemoryPersistence.ts"
import { openLmdbPersistence, type PersistedGroup, type SearchPersistence } from "../persistence/SearchPersistence.ts"
import type { SearchFilter, SearchHit, SearchMode } from "../ranking/Ranking.ts"
import { documentKey, groupKey } from "./DocumentStore.ts"
import type { GroupDocuments, SearchDocument } from "./SearchDocument.ts"
import { type IndexStats, keptVector, type PendingEmbedding, SearchIndex, type Timeline } from "./SearchIndex.ts"

/** Longest run of loading persisted documents before other work gets a turn (searches wait at most this). */
export const warmSliceMs = 10
/**
 * How long the index goes without reading search's file before it lets go of the pages its reads
 * mapped (the documents of the hits shown, a timeline, the documents a change compares): each read
 * maps the pages around it, about 40 KiB a document read at 100,000 entities, and they would stay
 * in the daemon's resident set (SearchPersistence.ts `releaseMappedPages`).
 */
export const releaseMappedPagesIdleMs = 2_000
/**
 * Puts and removes of search's file after which the index lets go of its mapped pages even while
 * writes go on (a bulk of `create_entities`: at 40,000 documents their transactions had mapped
 * 52-63 MiB of the file, docs/benchmarks.md, "The 10k graph workload's peak"). Each release waits,
 * under the core's lock, for the writes so far to be committed, then reopens the environment.
 */
export const releaseMappedPagesWritesMax = 1_024
/**
 * The least time between two such releases: each costs a commit and a reopen, and released every
 * 1,024 writes alone, 32 agents writing at 3,300 calls/s paid for six a second (6 % fewer calls,
 * 14 % more CPU a call in `npm run bench -- writes`).
 */
export const releaseMappedPagesWritesEveryMs = 1_000
/**
 * How long the index goes without a write (or a read) before it lets go of the pages a run of at
 * least `releaseMappedPagesWritesMax` writes mapped, rather than waiting `releaseMappedPagesIdleMs`:
 * a bulk of writes maps the whole file (random keys walk every page), and once it pauses nothing
 * will use those pages soon. At the end of the 10k graph workload's writes they were 26 MiB of the
 * daemon's resident set for the 2 s after them (docs/benchmarks.md, "Pages a bulk of writes
 * mapped, let go when it pauses").
 */
export const releaseMappedPagesWritesPauseMs = 250
/** Texts per embedding call. */
export const embedChunkTexts = 512
/** How long indexing waits for the model to load before its documents wait in the background. */
export const modelWaitMs = 5_000

/** A search request, already validated. */
export interface SearchRequest {
  readonly query: string
  readonly mode: SearchMode
  readonly filter: SearchFilter
  readonly limit: number
}

/** Hits, and whether the query had an embedding. */
export interface CoreSearchResult {
  readonly hits: ReadonlyArray<SearchHit>
  /** False when the query had no embedding (model loading or failed, or no known word). */
  readonly semantic: boolean
}

/** What the index thread reports of itself. */
export interface CoreStats {
  readonly loaded: boolean
  readonly eventsApplied: number
  /** Commit-to-index delay of the last applied batch, ms (measured when it was indexed). */
  readonly lastLagMs: number
  readonly maxLagMs: number
  readonly pendingEmbeddings: number
  readonly embedder: EmbedderStatus
  readonly index: IndexStats
  readonly storageBytes: number
  /** Per store, the last sequence the index reflects. */
  readonly seqs: Readonly<Record<string, number>>
  /** Set when this start found vectors of another model: how far re-embedding everything has got. */
  readonly reembedding?: Reembedding
  /** The memory of the thread the index runs in (its own V8 heap on the search thread). */
  readonly memory?: ThreadMemory
}

/** One thread's V8 heap and the buffers it holds, in bytes. */
export interface ThreadMemory {
  readonly heapUsedBytes: number
  readonly heapTotalBytes: number
  /** Array buffers' backing stores and other memory V8 objects hold outside the heap. */
  readonly externalBytes: number
  readonly arrayBuffersBytes: number
  /** Used bytes per V8 heap space (old, new, code, large objects, ...). */
  readonly spaces: Readonly<Record<string, number>>
  /** The young generation's room (V8's `new_space`, both semi-spaces), used or not. */
  readonly youngGenerationBytes: number
}

/** The calling thread's heap, as `ThreadMemory`. */
export const threadMemory = (): ThreadMemory => {
  const usage = process.memoryUsage()
  const spaces = getHeapSpaceStatistics()
  return {
    heapUsedBytes: usage.heapUsed,
    heapTotalBytes: usage.heapTotal,
    externalBytes: usage.external,
    arrayBuffersBytes: usage.arrayBuffers,
    spaces: Object.fromEntries(spaces.map((space) => [space.space_name, space.space_used_size])),
    youngGenerationBytes: spaces.find((space) => space.space_name === "new_space")?.space_size ?? 0,
  }
}

/** How the core is set up. */
export interface CoreConfig {
  /** The stores that have a search source; persisted groups of any other store are dropped. */
  readonly stores: ReadonlyArray<string>
  /** Persist under `<dataDir>/search/lmdb`; in memory only when absent. */
  readonly dataDir?: string | undefined
  /** Texts per step of re-embedding after a model change (default `reembedChunkTexts`; tests lower it). */
  readonly reembedChunkTexts?: number | undefined
  /** `releaseMappedPagesIdleMs` (tests lower it). */
  readonly releaseMappedPagesIdleMs?: number | undefined
  /** `releaseMappedPagesWritesMax` (tests lower it). */
  readonly releaseMappedPagesWritesMax?: number | undefined
  /** `releaseMappedPagesWritesEveryMs` (tests lower it). */
  readonly releaseMappedPagesWritesEveryMs?: number | undefined
  /** `releaseMappedPagesWritesPauseMs` (tests change it). */
  readonly releaseMappedPagesWritesPauseMs?: number | undefined
}

/** Builds the core; it flushes and closes its persistence when the scope closes. */
export const makeIndexCore = (config: CoreConfig) =>
  Effect.gen(function* () {
    const embedder = yield* Embedder
    const scope = yield* Scope.Scope
    const lock = yield* Semaphore.make(1)
    const locked = <A, E, R>(effect: Effect.Effect<A, E, R>) => lock.withPermits(1)(effect)
    /** Warm-up is over (and let go of the pages the load mapped). */
    let warm = false
    /** When an operation last read search's file since its mapped pages were let go (none: undefined). */
    let readAt: number | undefined
    /** `locked`, for an operation that reads search's file (documents, their JSON to compare). */
    const reading = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      locked(effect).pipe(
        Effect.ensuring(
          Effect.flatMap(Clock.currentTimeMillis, (now) =>
            Effect.sync(() => {
              readAt = now
            }),
          ),
        ),
      )
    const writesMax = config.releaseMappedPagesWritesMax ?? releaseMappedPagesWritesMax
    const writesEveryMs = config.releaseMappedPagesWritesEveryMs ?? releaseMappedPagesWritesEveryMs
    const writesPauseMs = config.releaseMappedPagesWritesPauseMs ?? releaseMappedPagesWritesPauseMs
    /** When writes last let go of the pages (wall-clock: housekeeping, not domain time). */
    let releasedForWritesAt = 0
    const persistence: SearchPersistence =
      config.dataDir === undefined ? makeMemoryPersistence() : openLmdbPersistence(`${config.dataDir}/search/lmdb`)
    yield* Effect.addFinalizer(() => Effect.promise(() => persistence.close().catch(() => undefined)))
    const index = new SearchIndex(undefined, persistence)
    const stores = new Set(config.stores)
    let loaded = false
    let eventsApplied = 0
    let lastLagMs = 0
    let maxLagMs = 0
    let pendingEmbeddings = 0
    /** Per store, the last sequence the index reflects (what health's lag is measured against). */
    const seqs = new Map<string, number>()
    const setSeq = (store: string, seq: number) => {
      seqs.set(store, seq)
      persistence.setSeq(store, seq)
    }
    /** The model change this start found, when the previous model answers until the new one is done. */
    let modelSwitch: ModelSwitch | undefined
    /** The model change this start found when the previous model could not answer, and its progress. */
    let reembedding: Reembedding | undefined
    /** The model that embeds queries and documents for the vectors searches use now. */
    const live = () => modelSwitch?.previous() ?? embedder
    /** Documents waiting for the model to load (by id: the latest content wins). */
    const deferred = new Map<string, PendingEmbedding>()

    /**
     * Groups replaced while the persisted index loads: what was persisted of them is older (the
     * load reads a snapshot taken when it began), so the load skips them — a group deleted
     * meanwhile must not come back from it.
     */
    let replacedWhileLoading: Set<string> | undefined = new Set()

    /**
     * Replaces a group in the index, which writes its documents to persistence (the index's
     * document store; a document removed there takes its vectors with it); returns what needs
     * embedding.
     */
    const applyGroup = (store: string, change: GroupDocuments): Array<PendingEmbedding> => {
      // While the load runs, the group's persisted documents may not be in the index yet (and the
      // load will skip them now): the ones this change drops go from persistence here, or a record
      // removed during a warm start stayed findable after the next. The index removes its own.
      const key = groupKey(store, change.group)
      let unloaded: ReadonlyArray<string> = []
      if (replacedWhileLoading !== undefined && !replacedWhileLoading.has(key)) {
        const held = new Set(index.groupIds(store, change.group))
        unloaded = persistence.groupDocumentIds(store, change.group).filter((id) => !held.has(id))
        replacedWhileLoading.add(key)
      }
      // Only what changed is written: an entity with 5,000 observations gaining one writes one.
      const pending = index.replaceGroup(store, change.group, change.documents)
      if (unloaded.length > 0) {
        const now = new Set(change.documents.map((document) => document.id))
        for (const id of unloaded) if (!now.has(id)) persistence.removeDocument(store, change.group, id)
      }
      return pending
    }

    /**
     * Embeds `pending` and whatever waited for the model, and stores the vectors that are still
     * current; a text with no known word is stored as "no vector" so it is not tried again. During
     * a model switch, with both models.
     */
    const embed = (pending: ReadonlyArray<PendingEmbedding>) => Effect.gen(() => embedSteps(pending))
    // Made once, not per call as an inline `Effect.gen(function* ...)` would be: the thread's
    // busiest code was compiled again after every full collection (docs/benchmarks.md, "Closures
    // made for each call").
    const embedSteps = function* (pending: ReadonlyArray<PendingEmbedding>) {
      if (pending.length === 0 && deferred.size === 0) return
      const embedder = live()
      const model = yield* embedder.ready.pipe(Effect.timeoutOption(Duration.millis(modelWaitMs)))
      if (model._tag === "None") {
        for (const item of pending) deferred.set(item.id, item)
        return
      }
      const embedNext = (items: ReadonlyArray<PendingEmbedding>) =>
        modelSwitch?.previous() !== undefined ? modelSwitch.embedNext(items) : Effect.void
      // Failed: found by words only, as the health says (the new model's vectors are made even so).
      if (model.value.state !== "ready") return yield* embedNext(pending)
      const all = [...deferred.values(), ...pending]
      deferred.clear()
      for (let start = 0; start < all.length; start += embedChunkTexts) {
        const chunk = all.slice(start, start + embedChunkTexts)
        pendingEmbeddings += chunk.length
        const texts: Array<string> = []
        for (const item of chunk) texts.push(item.text)
        const vectors = yield* embedder.embedBatch(texts).pipe(
          Effect.catch((error) =>
            Effect.logWarning(`search: embedding failed: ${error.message}`).pipe(Effect.as(undefined)),
          ),
          Effect.ensuring(Effect.sync(() => (pendingEmbeddings -= chunk.length))),
        )
        if (vectors === undefined) continue
        for (let i = 0; i < vectors.length; i++) {
          const item = chunk[i]!
          const stored = keptVector(vectors[i])
          // Keyed where the document is now (`keyOf`): it may have moved since `pending` was read.
          if (index.setVector(item.id, item.hash, stored))
            persistence.putVector(index.keyOf(item.id)!, item.hash, stored)
        }
      }
      yield* embedNext(all)
    }

    /** Replaces `groups` of `store` in the index and in persistence, embedding what they need. */
    const replaceGroups = (store: string, groups: ReadonlyArray<GroupDocuments>) =>
      Effect.suspend(() => replaceGroupsNow(store, groups))
    const replaceGroupsNow = (store: string, groups: ReadonlyArray<GroupDocuments>) => {
      const pending: Array<PendingEmbedding> = []
      for (const group of groups) pending.push(...applyGroup(store, group))
      return Effect.andThen(embed(pending), releaseAfterWrites)
    }

    /**
     * Under the lock, once warm: lets go of the pages a run of writes mapped, every `writesMax`
     * writes and at most once every `writesEveryMs` (a bulk of writes never leaves the index idle
     * long enough for `tick` to).
     */
    const releaseAfterWrites = Effect.suspend(() => {
      if (!warm || persistence.writesSinceMappedPagesReleased() < writesMax) return Effect.void
      if (Date.now() - releasedForWritesAt < writesEveryMs) return Effect.void
      return Effect.promise(async () => {
        readAt = undefined
        await persistence.releaseMappedPages()
        releasedForWritesAt = Date.now()
      })
    })

    /**
     * Applies committed events' changes of one store: `groups` replace what the index holds, `seq`
     * becomes the store's persisted position, `at` (the first event's commit time) gives the lag.
     */
    const apply = (store: string, groups: ReadonlyArray<GroupDocuments>, seq: number, events: number, at: number) =>
      reading(
        Effect.gen(function* () {
          setSeq(store, seq)
          eventsApplied += events
          yield* replaceGroups(store, groups)
          const lag = Math.max(0, (yield* Clock.currentTimeMillis) - at)
          lastLagMs = lag
          maxLagMs = Math.max(maxLagMs, lag)
        }),
      )

    /** Replaces groups found by a scan of a store (reconciling). */
    const replace = (store: string, groups: ReadonlyArray<GroupDocuments>) => reading(replaceGroups(store, groups))

    /**
     * Compares the model of the stored vectors with the embedder's: the same, or a change with the
     * previous model still there (a switch, resumed if one was under way), or a change without it
     * (its vectors dropped, unless the new model's made so far can take their place).
     */
    const planModel = Effect.gen(function* () {
      const target = yield* embedder.modelId
      if (target === undefined) return
      const to = { id: target, config: yield* embedder.model }
      const previous = persistence.model()
      if (previous === undefined || previous.id === target) {
        // Also empties what a switch cut short between its commit and its clean-up left behind.
        yield* Effect.promise(() => persistence.dropNextModel())
        persistence.setModel(to)
        return
      }
      const previousConfig = previousModelConfig(previous, config.dataDir)
      if (previousConfig !== undefined) {
        modelSwitch = yield* makeModelSwitch(
          {
            index,
            persistence,
            next: embedder,
            locked,
            scope,
            dataDir: config.dataDir,
            chunkTexts: config.reembedChunkTexts,
          },
          previous,
          previousConfig,
          to,
        )
        return
      }
      reembedding = { from: previous.id, to: target, done: 0, total: 0, finished: false, previousModel: "unavailable" }
      if (persistence.nextModel()?.id === target) yield* Effect.promise(() => persistence.switchToNextModel())
      else {
        yield* Effect.promise(() => persistence.clearVectors())
        yield* Effect.promise(() => persistence.dropNextModel())
        persistence.setModel(to)
      }
    })

    /**
     * Loads what was persisted, in slices; returns each store's persisted sequence (what the
     * indexer compares with the store to decide on a reconcile).
     */
    const load = Effect.gen(function* () {
      yield* planModel
      const persistedSeqs: Record<string, number> = {}
      for (const name of stores) {
        const seq = persistence.seq(name)
        if (seq !== undefined) {
          persistedSeqs[name] = seq
          if (!seqs.has(name)) seqs.set(name, seq)
        }
      }
      const loadGroup = (group: PersistedGroup) => {
        if (!stores.has(group.store)) {
          for (const document of group.documents) persistence.removeDocument(group.store, group.group, document.id)
          return
        }
        if (replacedWhileLoading?.has(groupKey(group.store, group.group))) return // an event got there first
        index.loadGroup(group.store, group.group, group.documents)
        for (const document of group.documents) {
          const stored = persistence.vector(documentKey(group.store, group.group, document.id))
          if (stored !== undefined) index.setVector(document.id, stored.hash, stored.vector)
        }
      }
      const persisted = persistence.groups()[Symbol.iterator]()
      let done = false
      while (!done) {
        yield* locked(
          Effect.sync(() => {
            const sliceEnd = performance.now() + warmSliceMs
            while (performance.now() < sliceEnd) {
              const next = persisted.next()
              if (next.done === true) {
                done = true
                return
              }
              loadGroup(next.value)
            }
          }),
        )
        yield* Effect.yieldNow
      }
      loaded = true
      replacedWhileLoading = undefined
      return persistedSeqs
    })

    /** Lets go of the file's pages mapped so far (under the lock: nothing writes meanwhile). */
    const releaseMappedPages = locked(
      Effect.promise(async () => {
        readAt = undefined
        await persistence.releaseMappedPages()
      }),
    )
    const idleMs = config.releaseMappedPagesIdleMs ?? releaseMappedPagesIdleMs
    /**
     * When `tick` lets go of the mapped pages, once warm and after an operation mapped some: `idleMs`
     * after the last one, or `writesPauseMs` after it when a run of `writesMax` writes mapped them.
     */
    const releaseDueAt = (): number | undefined => {
      if (!warm || readAt === undefined) return undefined
      const afterWrites = persistence.writesSinceMappedPagesReleased() >= writesMax
      return readAt + (afterWrites ? Math.min(writesPauseMs, idleMs) : idleMs)
    }

    /**
     * Embeds every document still without a vector, in chunks (the end of warm-up); then lets go of
     * the persisted file's pages that the load and the reconciles mapped (SearchPersistence.ts).
     */
    const embedMissing = Effect.gen(function* () {
      const missing = yield* locked(Effect.sync(() => index.missingVectors()))
      const progress = (done: number) => {
        if (reembedding !== undefined && !reembedding.finished)
          reembedding = { ...reembedding, done, total: missing.length, finished: done === missing.length }
      }
      progress(0)
      for (let start = 0; start < missing.length; start += embedChunkTexts * 4) {
        yield* locked(embed(missing.slice(start, start + embedChunkTexts * 4)))
        progress(Math.min(missing.length, start + embedChunkTexts * 4))
        yield* Effect.yieldNow
      }
      yield* releaseMappedPages
      warm = true
    })

    /**
     * Background work: documents that waited for the model, a step of re-embedding, one of the ANN
     * index; once warm, letting go of the pages reads mapped when none came for `idleMs` (or writes
     * mapped, `writesPauseMs` after a run of them, `releaseDueAt`). Answers
     * when it has work again: `"soon"` (a step is left, or documents wait for the model to load),
     * in so many ms (the pages' release), or `"idle"` (nothing until a request brings some).
     */
    const tick: Effect.Effect<TickAfter> = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const releaseAt = releaseDueAt()
      if (releaseAt !== undefined && now >= releaseAt) yield* releaseMappedPages
      if (deferred.size > 0 && live().status().state === "ready") yield* locked(embed([]))
      if (loaded && modelSwitch !== undefined) yield* modelSwitch.step
      if (index.vectors.annBehind) yield* locked(Effect.sync(() => index.vectors.buildAnnStep()))
      const switching = loaded && modelSwitch !== undefined && !modelSwitch.progress().finished
      if (deferred.size > 0 || switching || index.vectors.annBehind) return "soon"
      const nextReleaseAt = releaseDueAt()
      return nextReleaseAt !== undefined ? Math.max(0, nextReleaseAt - now) : "idle"
    })

    const embedQuery = (model: Embedder["Service"], request: SearchRequest) =>
      request.mode === "lexical"
        ? Effect.succeed(undefined)
        : model.embedQuery(request.query).pipe(Effect.catch(() => Effect.succeed(undefined)))

    const search = (request: SearchRequest, now: number) =>
      Effect.gen(function* () {
        const model = live()
        const early = yield* embedQuery(model, request)
        return yield* reading(
          Effect.gen(function* () {
            // The models were swapped meanwhile: the query is embedded again, as the vectors are now.
            const vector = live() === model ? early : yield* embedQuery(live(), request)
            const hits = index.search({
              text: request.query,
              mode: request.mode,
              filter: request.filter,
              limit: request.limit,
              vector,
              now,
              aligner: live().aligner(),
            })
            return { hits, semantic: vector !== undefined } satisfies CoreSearchResult
          }),
        )
      })

    const stats = (): CoreStats => ({
      loaded,
      eventsApplied,
      lastLagMs,
      maxLagMs,
      pendingEmbeddings: pendingEmbeddings + deferred.size,
      embedder: embedder.status(),
      index: index.stats(),
      storageBytes: persistence.sizeBytes(),
      seqs: Object.fromEntries(seqs),
      memory: threadMemory(),
      ...(modelSwitch !== undefined
        ? { reembedding: modelSwitch.progress() }
        : reembedding !== undefined
          ? { reembedding }
          : {}),
    })

    return {
      load,
      apply,
      replace,
      setSeq: (store: string, seq: number) => locked(Effect.sync(() => setSeq(store, seq))),
      groupsOf: (store: string) => locked(Effect.sync(() => index.groupsOf(store))),
      embedMissing,
      tick,
      search,
      documentCount: Effect.sync(() => index.size),
      documents: (ids: ReadonlyArray<string>): Effect.Effect<ReadonlyArray<SearchDocument | undefined>> =>
        reading(Effect.sync(() => ids.map((id) => index.get(id)))),
      timeline: (ids: ReadonlyArray<string>, window: number): Effect.Effect<ReadonlyArray<Timeline | undefined>> =>
        reading(Effect.sync(() => ids.map((id) => index.timeline(id, window)))),
      stats: locked(Effect.sync(stats)),
      compact: locked(Effect.promise(() => persistence.compact())),
    }
  })

/** The core's operations. */
export type IndexCore = Effect.Success<ReturnType<typeof makeIndexCore>>

/** When the core has background work again (`tick`): soon, in so many ms, or not before a request. */
export type TickAfter = "soon" | number | "idle"
