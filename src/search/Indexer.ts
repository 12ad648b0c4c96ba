/**
 * The search indexer: keeps the search index of every store that has a `SearchSource` current
 * from the event bus, off the write path, and answers searches.
 *
 * Owns the in-memory `SearchIndex` and search's persistence (documents, vectors, per-store
 * sequence). All index changes and searches run under one lock. Every search first drains the
 * events already published — stores publish before they acknowledge — and embeds what they
 * changed, so a search that follows an acknowledged write sees it, by words and by meaning. The
 * model loads on the first need (a document to embed, a search by meaning), not at startup; if it
 * is not up within `modelWaitMs` (a first-run build), documents wait for it in the background and
 * are found by words meanwhile.
 * A background loop drains every `backgroundDrainIntervalMs`, so the bus never drops events
 * for this subscriber under a steady write load.
 *
 * Startup answers at once (cold) and warms in the background: load the persisted documents and
 * vectors, then, for each store whose last sequence differs from what was persisted (or after a
 * dropped event or a source's "resync"), reconcile with a scan of the store. Handling is
 * state-based (a group's documents are re-read from the store's view), so events and scans may
 * interleave in any order; a scan result never overwrites a group an event refreshed after the
 * scan began (`touchedSince`). Health reports cold/warming/warm and the lag.
 */
import { Clock, Context, Duration, Effect, Fiber, Layer, PubSub, Semaphore } from "effect"
import { type CommittedEvent, EventBus, isDomainEvent } from "../actors/EventBus.ts"
import { Router } from "../actors/Router.ts"
import type { StoreView } from "../stores/Checkpoint.ts"
import { Embedder } from "./Embedder.ts"
import type { SearchFilter, SearchHit, SearchMode } from "./Ranking.ts"
import type { AnySearchSource, GroupDocuments, SearchDocument } from "./SearchDocument.ts"
import { type IndexStats, noVector, type PendingEmbedding, SearchIndex, type Timeline } from "./SearchIndex.ts"
import {
  makeMemoryPersistence,
  openLmdbPersistence,
  type PersistedGroup,
  type SearchPersistence,
} from "./SearchPersistence.ts"

/** How often the index catches up with the bus when nobody searches. */
export const backgroundDrainIntervalMs = 25
/**
 * Events the background loop applies per lock hold. Indexing shares the event loop with the
 * stores and the transports: between holds, requests that arrived meanwhile are served, so a call
 * waits behind at most one slice of indexing, not a whole backlog (searches still drain it all).
 */
export const backgroundDrainSliceEvents = 16
/** Groups applied per lock hold while reconciling with a store (searches interleave between chunks). */
export const warmChunkGroups = 2000
/** Longest run of loading persisted documents before the event loop gets a turn (requests wait at most this). */
export const warmSliceMs = 10
/** Texts per embedding request to the worker. */
export const embedChunkTexts = 512
/** How long indexing waits for the model to load before its documents wait in the background. */
export const modelWaitMs = 5_000

/** Where the indexer is. */
export type WarmState = "cold" | "warming" | "warm"

/** Health of search, for /api/stats and mem-stats. */
export interface SearchHealth {
  readonly state: WarmState
  /** Events committed by the stores that the index does not reflect yet. */
  readonly lagEvents: number
  /** Commit-to-index delay of the last drained batch, ms. */
  readonly lastLagMs: number
  readonly maxLagMs: number
  readonly eventsApplied: number
  readonly reconciles: number
  readonly pendingEmbeddings: number
  readonly embedder: ReturnType<Embedder["Service"]["status"]>
  readonly index: IndexStats
  readonly storageBytes: number
}

/** A search request, already validated. */
export interface SearchRequest {
  readonly query: string
  readonly mode: SearchMode
  readonly filter: SearchFilter
  readonly limit: number
}

/** Hits and how complete they are. */
export interface SearchResponse {
  readonly hits: ReadonlyArray<SearchHit>
  readonly warm: boolean
  /** False when the query had no embedding (model loading or failed, or no known word). */
  readonly semantic: boolean
}

/** Search over every store. */
export class SearchIndexer extends Context.Service<
  SearchIndexer,
  {
    readonly search: (request: SearchRequest) => Effect.Effect<SearchResponse>
    readonly documents: (ids: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<SearchDocument | undefined>>
    readonly timeline: (
      ids: ReadonlyArray<string>,
      window: number,
    ) => Effect.Effect<ReadonlyArray<Timeline | undefined>>
    readonly health: () => SearchHealth
    /** Drains and embeds everything published so far (what every search does first). */
    readonly sync: Effect.Effect<void>
    /** Waits until warm-up is over. */
    readonly awaitWarm: Effect.Effect<void>
    /**
     * Rewrites search's files with what is indexed now (after draining), so no removed document
     * survives on disk (see SearchPersistence's `compact`).
     */
    readonly compact: Effect.Effect<{ readonly bytesBefore: number; readonly bytesAfter: number }>
  }
>()("mnemos/search/SearchIndexer") {}

/** How the indexer is set up. */
export interface IndexerConfig {
  readonly sources: ReadonlyArray<AnySearchSource>
  /** Persist under `<dataDir>/search/lmdb`; in memory only when absent. */
  readonly dataDir?: string
}

/** Starts the indexer; it stops (flushing its persistence) when the scope closes. */
export const makeIndexer = (config: IndexerConfig) =>
  Effect.gen(function* () {
    const router = yield* Router
    const embedder = yield* Embedder
    // Subscribe before anything is read, so every change after the first scan arrives as an event.
    const subscription = yield* (yield* EventBus).subscribe
    const lock = yield* Semaphore.make(1)
    const persistence: SearchPersistence =
      config.dataDir === undefined ? makeMemoryPersistence() : openLmdbPersistence(`${config.dataDir}/search/lmdb`)
    yield* Effect.addFinalizer(() => Effect.promise(() => persistence.close().catch(() => undefined)))

    const index = new SearchIndex()
    const sources = new Map(config.sources.map((source) => [source.definition.name, source]))
    const lastSeq = new Map<string, number>()
    /** Groups refreshed by events since a store's reconcile began (per store). */
    const touchedSince = new Map<string, Set<string>>()
    const needsReconcile = new Set<string>()
    let state: WarmState = "cold"
    let eventsApplied = 0
    let reconciles = 0
    let lastLagMs = 0
    let maxLagMs = 0
    let pendingEmbeddings = 0
    let warmed = false
    let modelId: string | undefined

    const storeOf = (source: AnySearchSource) => {
      try {
        return router.store(source.definition)
      } catch {
        return undefined // not run by this engine
      }
    }
    const appliedSeqOf = (store: string) => router.health().find((health) => health.name === store)?.appliedSeq ?? 0

    /** Replaces a group in the index and in persistence; returns what needs embedding. */
    const applyGroup = (store: string, change: GroupDocuments): Array<PendingEmbedding> => {
      const before = index.groupIds(store, change.group)
      const changed: Array<SearchDocument> = []
      const pending = index.replaceGroup(store, change.group, change.documents, changed)
      const now = new Set(change.documents.map((document) => document.id))
      for (const id of before)
        if (!now.has(id)) {
          persistence.removeDocument(store, change.group, id)
          persistence.removeVector(id)
        }
      // Only what changed is written: an entity with 5,000 observations gaining one writes one.
      for (const document of changed) persistence.putDocument(change.group, document)
      return pending
    }

    /** Documents waiting for the model to load (by id: the latest content wins). */
    const deferred = new Map<string, PendingEmbedding>()

    /**
     * Embeds `pending` and whatever waited for the model, and stores the vectors that are still
     * current; a text with no known word is stored as "no vector" so it is not tried again. The
     * first call loads the model; when it is not ready within `modelWaitMs` (a first-run build),
     * the documents wait for it in `deferred` and the background loop embeds them once it is.
     */
    const embed = (pending: ReadonlyArray<PendingEmbedding>) =>
      Effect.gen(function* () {
        if (pending.length === 0 && deferred.size === 0) return
        const model = yield* embedder.ready.pipe(Effect.timeoutOption(Duration.millis(modelWaitMs)))
        if (model._tag === "None") {
          for (const item of pending) deferred.set(item.id, item)
          return
        }
        if (model.value.state !== "ready") return // failed: found by words only, as the health says
        const all = [...deferred.values(), ...pending]
        deferred.clear()
        for (let start = 0; start < all.length; start += embedChunkTexts) {
          const chunk = all.slice(start, start + embedChunkTexts)
          pendingEmbeddings += chunk.length
          const vectors = yield* embedder.embedBatch(chunk.map((item) => item.text)).pipe(
            Effect.catch((error) =>
              Effect.logWarning(`search: embedding failed: ${error.message}`).pipe(Effect.as(undefined)),
            ),
            Effect.ensuring(Effect.sync(() => (pendingEmbeddings -= chunk.length))),
          )
          if (vectors === undefined) continue
          vectors.forEach((vector, i) => {
            const item = chunk[i]!
            const stored = vector ?? noVector
            if (index.setVector(item.id, item.hash, stored)) persistence.putVector(item.id, item.hash, stored)
          })
        }
      })

    /** Applies drained events: per store, one read of its view for all of them. */
    const applyEvents = (events: ReadonlyArray<CommittedEvent>) =>
      Effect.gen(function* () {
        const byStore = new Map<string, Array<CommittedEvent>>()
        for (const committed of events) {
          if (!sources.has(committed.store)) continue
          const list = byStore.get(committed.store)
          if (list === undefined) byStore.set(committed.store, [committed])
          else list.push(committed)
        }
        const pending: Array<PendingEmbedding> = []
        const now = yield* Clock.currentTimeMillis
        for (const [name, list] of byStore) {
          const source = sources.get(name)!
          const store = storeOf(source)
          if (store === undefined) continue
          const changes = yield* store
            .read((view: StoreView) =>
              list.map((committed) => ({
                committed,
                changes: isDomainEvent(committed) ? source.changes(committed.event, view) : [],
              })),
            )
            .pipe(Effect.catch(() => Effect.succeed(undefined)))
          if (changes === undefined) {
            needsReconcile.add(name) // the store could not be read: catch up by a scan later
            continue
          }
          const touched = touchedSince.get(name)
          for (const { committed, changes: groups } of changes) {
            const previous = lastSeq.get(name)
            if (previous !== undefined && committed.seq > previous + 1) needsReconcile.add(name) // the bus dropped events
            if (previous === undefined || committed.seq > previous) lastSeq.set(name, committed.seq)
            if (groups === "resync") {
              needsReconcile.add(name)
              continue
            }
            for (const group of groups) {
              touched?.add(group.group)
              pending.push(...applyGroup(name, group))
            }
            eventsApplied++
          }
          persistence.setSeq(name, lastSeq.get(name)!)
          const lag = Math.max(0, now - list[0]!.at)
          lastLagMs = lag
          maxLagMs = Math.max(maxLagMs, lag)
        }
        yield* embed(pending)
      })

    const drain = Effect.gen(function* () {
      const events = yield* PubSub.takeUpTo(subscription, Number.MAX_SAFE_INTEGER)
      if (events.length > 0) yield* applyEvents(events)
    })
    const locked = <A, E, R>(effect: Effect.Effect<A, E, R>) => lock.withPermits(1)(effect)
    /** The background's drain: slices of `backgroundDrainSliceEvents`, the event loop served between them. */
    const drainInSlices = Effect.gen(function* () {
      while (true) {
        const taken = yield* locked(
          Effect.gen(function* () {
            const events = yield* PubSub.takeUpTo(subscription, backgroundDrainSliceEvents)
            if (events.length > 0) yield* applyEvents(events)
            return events.length
          }),
        )
        if (taken < backgroundDrainSliceEvents) return
        yield* Effect.yieldNow
      }
    })

    /** Makes `store`'s groups equal to a scan of it, in chunks; events may interleave. */
    const reconcile = (source: AnySearchSource) =>
      Effect.gen(function* () {
        const name = source.definition.name
        const store = storeOf(source)
        if (store === undefined) return
        reconciles++
        needsReconcile.delete(name)
        const touched = new Set<string>()
        touchedSince.set(name, touched)
        const known = yield* locked(Effect.sync(() => index.groupsOf(name)))
        const seqBefore = appliedSeqOf(name)
        const scanned = yield* store
          .read((view) => [...source.scan(view)])
          .pipe(Effect.catch(() => Effect.succeed(undefined)))
        if (scanned === undefined) {
          touchedSince.delete(name)
          needsReconcile.add(name)
          return
        }
        const seen = new Set<string>()
        for (let start = 0; start < scanned.length; start += warmChunkGroups) {
          const chunk = scanned.slice(start, start + warmChunkGroups)
          yield* locked(
            Effect.gen(function* () {
              const pending: Array<PendingEmbedding> = []
              for (const group of chunk) {
                seen.add(group.group)
                if (!touched.has(group.group)) pending.push(...applyGroup(name, group))
              }
              yield* embed(pending)
            }),
          )
          yield* Effect.yieldNow
        }
        yield* locked(
          Effect.sync(() => {
            for (const group of known)
              if (!seen.has(group) && !touched.has(group)) applyGroup(name, { group, documents: [] })
            touchedSince.delete(name)
            const seq = Math.max(lastSeq.get(name) ?? 0, seqBefore)
            lastSeq.set(name, seq)
            persistence.setSeq(name, seq)
          }),
        )
      })

    /** Loads what was persisted, then reconciles every store that moved on without us. */
    const warmUp = Effect.gen(function* () {
      modelId = yield* embedder.modelId
      const modelChanged = modelId !== undefined && persistence.modelId() !== modelId
      if (modelChanged) yield* Effect.promise(() => persistence.clearVectors())
      if (modelId !== undefined) persistence.setModelId(modelId)
      const persistedSeqs = new Map<string, number | undefined>()
      for (const name of sources.keys()) persistedSeqs.set(name, persistence.seq(name))
      const load = (group: PersistedGroup) => {
        if (!sources.has(group.store)) {
          for (const document of group.documents) {
            persistence.removeDocument(group.store, group.group, document.id)
            persistence.removeVector(document.id)
          }
          return
        }
        if (index.groupIds(group.store, group.group).length > 0) return // an event got there first
        index.replaceGroup(group.store, group.group, group.documents)
        for (const document of group.documents) {
          const stored = modelChanged ? undefined : persistence.vector(document.id)
          if (stored !== undefined) index.setVector(document.id, stored.hash, stored.vector)
        }
      }
      // In slices of `warmSliceMs`, yielding to the event loop between them: requests are answered
      // while a large index loads, each waiting at most one slice.
      const persisted = persistence.groups()[Symbol.iterator]()
      let loaded = false
      while (!loaded) {
        yield* locked(
          Effect.sync(() => {
            const sliceEnd = performance.now() + warmSliceMs
            while (performance.now() < sliceEnd) {
              const next = persisted.next()
              if (next.done === true) {
                loaded = true
                return
              }
              load(next.value)
            }
          }),
        )
        yield* Effect.yieldNow
      }
      for (const [name, seq] of persistedSeqs) if (seq !== undefined && !lastSeq.has(name)) lastSeq.set(name, seq)
      state = "warming"
      for (const source of sources.values()) {
        const name = source.definition.name
        const store = storeOf(source)
        if (store === undefined) continue
        yield* store.read(() => undefined).pipe(Effect.ignore) // wait until the store has opened
        const persisted = persistedSeqs.get(name)
        if (persisted === undefined || persisted !== appliedSeqOf(name) || needsReconcile.has(name))
          yield* reconcile(source)
      }
      const missing = yield* locked(Effect.sync(() => index.missingVectors()))
      for (let start = 0; start < missing.length; start += warmChunkGroups) {
        yield* locked(embed(missing.slice(start, start + warmChunkGroups)))
        yield* Effect.yieldNow
      }
      state = "warm"
      warmed = true
    })

    const warmDone = yield* Effect.forkScoped(warmUp)

    // Background: catch up with the bus, reconcile stores that asked for it, grow the ANN index.
    yield* Effect.forkScoped(
      Effect.forever(
        Effect.gen(function* () {
          yield* Effect.sleep(Duration.millis(backgroundDrainIntervalMs))
          yield* drainInSlices
          if (warmed)
            for (const name of [...needsReconcile]) {
              const source = sources.get(name)
              if (source !== undefined) yield* reconcile(source)
            }
          if (deferred.size > 0 && embedder.status().state === "ready") yield* locked(embed([]))
          if (index.vectors.annBacklogSize > 0 || (!index.vectors.annReady && index.vectors.size > 0))
            yield* locked(Effect.sync(() => index.vectors.buildAnnStep()))
        }).pipe(Effect.catchCause((cause) => Effect.logWarning(`search indexer: ${cause}`))),
      ),
    )
    // Last: flush what was drained so a restart finds the newest state.
    yield* Effect.addFinalizer(() => locked(drain).pipe(Effect.ignore))

    const sync = locked(drain)

    const search = (request: SearchRequest) =>
      Effect.gen(function* () {
        const vector =
          request.mode === "lexical"
            ? undefined
            : yield* embedder.embedQuery(request.query).pipe(Effect.catch(() => Effect.succeed(undefined)))
        const now = yield* Clock.currentTimeMillis
        const hits = yield* locked(
          Effect.gen(function* () {
            yield* drain
            return index.search({
              text: request.query,
              mode: request.mode,
              filter: request.filter,
              limit: request.limit,
              vector,
              now,
              aligner: embedder.aligner(),
            })
          }),
        )
        return { hits, warm: state === "warm", semantic: vector !== undefined } satisfies SearchResponse
      })

    const health = (): SearchHealth => {
      let lagEvents = 0
      for (const name of sources.keys()) lagEvents += Math.max(0, appliedSeqOf(name) - (lastSeq.get(name) ?? 0))
      return {
        state,
        lagEvents,
        lastLagMs,
        maxLagMs,
        eventsApplied,
        reconciles,
        pendingEmbeddings: pendingEmbeddings + deferred.size,
        embedder: embedder.status(),
        index: index.stats(),
        storageBytes: persistence.sizeBytes(),
      }
    }

    return SearchIndexer.of({
      search,
      documents: (ids) =>
        locked(
          Effect.andThen(
            drain,
            Effect.sync(() => ids.map((id) => index.get(id))),
          ),
        ),
      timeline: (ids, window) =>
        locked(
          Effect.andThen(
            drain,
            Effect.sync(() => ids.map((id) => index.timeline(id, window))),
          ),
        ),
      health,
      sync,
      awaitWarm: Effect.asVoid(Effect.exit(Fiber.join(warmDone))),
      compact: locked(
        Effect.andThen(
          drain,
          Effect.promise(() => persistence.compact()),
        ),
      ),
    })
  })

/** The indexer as a layer. */
export const layer = (config: IndexerConfig): Layer.Layer<SearchIndexer, never, Router | EventBus | Embedder> =>
  Layer.effect(SearchIndexer, makeIndexer(config))
