/**
 * The search indexer: keeps the search index of every store that has a `SearchSource` current
 * from the event bus, and answers searches.
 *
 * The index itself — full-text postings, vectors, the embedding model and search's persistence —
 * lives in the search thread (SearchThread.ts, IndexCore.ts), off the thread the store actors and
 * the transports share. What stays here is what needs the stores: each drain takes the committed
 * events from the bus, reads the groups they touched from the stores' views (`SearchSource.changes`)
 * and sends those documents to the thread. Stores publish before they acknowledge, and every
 * search first drains what was published, then asks the thread, which handles requests in order:
 * a search that follows an acknowledged write sees it, by words and by meaning. Others see it
 * within `backgroundDrainIntervalMs` plus the thread's work (docs/search.md, "Freshness").
 *
 * Where the index runs: a small memory's on the main thread, the same protocol over a
 * `MessageChannel`, so a daemon with a few thousand documents pays for no second JavaScript runtime
 * (about 30 MiB at 1,000 entities, docs/benchmarks.md, footprint); past `mainThreadDocumentsMax`
 * documents, in a worker thread of its own, where indexing and embedding never hold the event loop.
 * The place is chosen when the index starts (by the persisted index's document count) and the index
 * moves once, from the main thread to a worker, when it grows past the limit or events bring it a
 * burst of documents (`mainThreadBurstDocuments` within `mainThreadBurstMs`): under the lock, the
 * main thread's index flushes search's persistence and closes, the worker loads what was persisted
 * and only then is asked anything (an index without a data directory is rebuilt by scans instead).
 * It never moves back in the same process.
 *
 * Startup answers at once (cold) and warms in the background (a small index a moment later:
 * `mainThreadWarmUpAfterMs`): the thread loads the persisted documents and vectors, then, for each
 * store whose last sequence differs from what was persisted (or after a dropped event or a
 * source's "resync"), this side reconciles with a scan of the store. Handling is state-based (a
 * group's documents are re-read from the store's view), so events and scans may interleave in any
 * order; a scan result never overwrites a group an event refreshed after the scan began
 * (`touchedSince`). Health reports cold/warming/warm and the lag.
 */
import { existsSync } from "node:fs"
import { join } from "node:path"
import { Clock, Context, Duration, Effect, Fiber, Layer, PubSub, Semaphore } from "effect"
import { Router } from "../actors/Router.ts"
import type { StoreView } from "../stores/checkpoint/Checkpoint.ts"
import { type CommittedEvent, EventBus, followBus, isDomainEvent } from "../stores/EventBus.ts"
import type { EmbedderConfig, EmbedderStatus } from "./embedding/Embedder.ts"
import type { Reembedding } from "./embedding/ModelSwitch.ts"
import type { CoreStats, SearchRequest, ThreadMemory } from "./index/IndexCore.ts"
import type { AnySearchSource, GroupDocuments, SearchDocument } from "./index/SearchDocument.ts"
import type { IndexStats, Timeline } from "./index/SearchIndex.ts"
import { persistedDocumentCount } from "./persistence/SearchPersistence.ts"
import type { SearchHit } from "./ranking/Ranking.ts"
import { openSearchThread, type SearchThread } from "./thread/SearchThread.ts"

export type { SearchRequest } from "./index/IndexCore.ts"

/** How often the index catches up with the bus when nobody searches, while events come. */
export const backgroundDrainIntervalMs = 25
/** With nothing published, how long a store's reconcile (asked for after a failure) may wait. */
export const idleReconcileMs = 1000
/**
 * Events the background loop reads from the stores' views per turn of the event loop: between
 * turns, requests that arrived meanwhile are served (searches still drain it all).
 */
export const backgroundDrainSliceEvents = 64
/** Groups sent to the search thread per message while reconciling with a store. */
export const warmChunkGroups = 2000
/**
 * The most documents the index holds on the daemon's main thread (when its place is not
 * configured); past it, it moves to a worker thread of its own. At 10,000 documents a search scans
 * their vectors in about a millisecond, and loading them takes well under a second in 10 ms slices.
 */
export const mainThreadDocumentsMax = 10_000
/**
 * The most documents events may bring a main-thread index within `mainThreadBurstMs` before it
 * moves to a worker however small it is: a bulk of writes is a worker's to index. Indexed on the
 * main thread until the size limit, the 10k graph workload's first 10,000 documents took the main
 * thread's time from every call, and the index, its model and their garbage stayed in the main
 * thread's heap beside the worker's copy: moved after a burst, the workload took 2–5 % less time and
 * peaked 13–19 MiB lower on Node 20 (docs/benchmarks.md, "A burst of writes moves the index").
 * A memory that grows a little at a time keeps its index on the main thread up to the size limit,
 * and a restart places it by its size again.
 */
export const mainThreadBurstDocuments = 2_000
/** The window of `mainThreadBurstDocuments`. */
export const mainThreadBurstMs = 10_000

/** Where the indexer is. */
export type WarmState = "cold" | "warming" | "warm"

/** Health of search, for /api/stats and mem-stats. */
export interface SearchHealth {
  readonly state: WarmState
  /** Events committed by the stores that the index does not reflect yet. */
  readonly lagEvents: number
  /** Commit-to-index delay of the last indexed batch, ms. */
  readonly lastLagMs: number
  readonly maxLagMs: number
  readonly eventsApplied: number
  readonly reconciles: number
  /** Times the search thread stopped unasked and was replaced. */
  readonly threadRestarts: number
  readonly pendingEmbeddings: number
  readonly embedder: EmbedderStatus
  readonly index: IndexStats
  readonly storageBytes: number
  /** Re-embedding after a model change, while it runs and once finished (until the next start). */
  readonly reembedding?: Reembedding
  /** The heap of the thread the index runs in (the search thread's own, on a worker). */
  readonly memory?: ThreadMemory
  /** Where the index lives: its own worker thread, the daemon's main thread, or nowhere yet (started on first need). */
  readonly thread: "worker" | "main" | "not started"
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
    /** Asked of the search thread after everything sent before it. */
    readonly health: Effect.Effect<SearchHealth>
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
  /** The embedding model and how it runs (in the search thread). */
  readonly embedder?: EmbedderConfig
  /**
   * Run the index in a worker thread of its own (true) or on the calling thread (false); by
   * default on the calling thread up to `mainThreadDocumentsMax` documents, in a worker beyond.
   */
  readonly thread?: boolean
  /** The most documents the index holds on the calling thread by default (`mainThreadDocumentsMax`). */
  readonly mainThreadDocumentsMax?: number
  /** `mainThreadBurstDocuments` (tests change it). */
  readonly mainThreadBurstDocuments?: number
  /** `mainThreadBurstMs` (tests change it). */
  readonly mainThreadBurstMs?: number
  /** Starts the search thread (tests wrap it to stop a thread as a crash would). */
  readonly openThread?: typeof openSearchThread
  /**
   * An index on the calling thread warms up this long after the indexer starts (at once when
   * absent): loading it holds that thread (about 60 ms at 1,000 entities), and a daemon's first
   * exchanges with its client would wait behind it. A search, or a change to index, before then
   * starts it at once.
   */
  readonly mainThreadWarmUpAfterMs?: number
}

/** What a search thread that has not started reports: nothing indexed, no model loaded. */
const idleStats: CoreStats = {
  loaded: true,
  eventsApplied: 0,
  lastLagMs: 0,
  maxLagMs: 0,
  pendingEmbeddings: 0,
  embedder: { state: "unloaded" },
  index: {
    documents: 0,
    vectors: 0,
    terms: 0,
    sessions: 0,
    byStore: {},
    byKind: {},
    annReady: false,
    annBacklog: 0,
    vectorBytes: 0,
    termBytes: 0,
  },
  storageBytes: 0,
  seqs: {},
}

/**
 * What each of `events` (of `source`'s store) changed, read from `view`: a group two of them touch
 * is read once. Module-level, as the busiest work should be: the closure a drain makes to call it
 * stays small (docs/benchmarks.md, "Closures made for each call").
 */
const changesOf = (source: AnySearchSource, events: ReadonlyArray<CommittedEvent>, view: StoreView) => {
  const given = new Set<string>()
  const changes = []
  for (const committed of events)
    changes.push({
      committed,
      changes: isDomainEvent(committed) ? source.changes(committed.event, view, given) : [],
    })
  return changes
}

/** Starts the indexer and its thread; both stop (search's persistence flushed) when the scope closes. */
export const makeIndexer = (config: IndexerConfig) =>
  Effect.gen(function* () {
    const router = yield* Router
    // Subscribe before anything is read, so every change after the first scan arrives as an event.
    const bus = yield* EventBus
    const subscription = yield* bus.subscribe
    const lock = yield* Semaphore.make(1)
    const locked = <A, E, R>(effect: Effect.Effect<A, E, R>) => lock.withPermits(1)(effect)
    const sources = new Map(config.sources.map((source) => [source.definition.name, source]))
    const documentsMax = config.mainThreadDocumentsMax ?? mainThreadDocumentsMax
    const burstDocumentsMax = config.mainThreadBurstDocuments ?? mainThreadBurstDocuments
    const burstMs = config.mainThreadBurstMs ?? mainThreadBurstMs
    /**
     * The search thread starts on the first need — a persisted index to load, a document to index,
     * a search — so a daemon that has neither never pays for it (about 30 MiB and a few hundred
     * ms of CPU for a second JavaScript runtime, when it is a worker).
     */
    let thread: SearchThread | undefined
    /** Where the index runs; chosen when it first starts, and moved to "worker" once it outgrows the main thread. */
    let placement: "worker" | "main" | undefined
    const placementAtStart = (): "worker" | "main" => {
      if (config.thread !== undefined) return config.thread ? "worker" : "main"
      return persistedIndexExists() && persistedDocumentCount(join(config.dataDir!, "search", "lmdb")) > documentsMax
        ? "worker"
        : "main"
    }
    /** Changes were sent to a main-thread index since its size was last asked. */
    let sentSinceSizeCheck = false
    /** Documents events sent to a main-thread index since `burstStartedAt` (wall-clock: housekeeping). */
    let burstDocuments = 0
    let burstStartedAt = 0
    const countBurst = (groups: ReadonlyArray<GroupDocuments>) => {
      if (placement !== "main") return
      const now = Date.now()
      if (now - burstStartedAt > burstMs) {
        burstDocuments = 0
        burstStartedAt = now
      }
      for (const group of groups) burstDocuments += group.documents.length
    }
    // Chosen now when it is the indexer's to choose: the warm-up of a main-thread index waits (`mainThreadWarmUpAfterMs`).
    if (config.thread === undefined) placement = placementAtStart()
    let loaded: Promise<Readonly<Record<string, number>>> | undefined
    let closing = false
    let threadRestarts = 0
    const ensureThread = (): SearchThread => {
      if (thread !== undefined) return thread
      placement ??= placementAtStart()
      sentSinceSizeCheck = placement === "main"
      const opened = (config.openThread ?? openSearchThread)(
        {
          stores: [...sources.keys()],
          dataDir: config.dataDir,
          // No batch worker of its own either way: on a worker the thread is already off the main
          // thread, and the main thread holds a small index (and a second model copy is ~20 MiB).
          embedder: { ...config.embedder, worker: false },
        },
        placement === "worker",
      )
      thread = opened
      // The first request a thread handles is the load of what was persisted (nothing, for a new one).
      loaded = opened.call({ op: "load" })
      // Awaited by warm-up when there was an index to load; a thread closed before it is loaded
      // rejects it, which is no failure of anyone's.
      loaded.catch(() => undefined)
      // Supervision: a thread that ends unasked (it should not; an out-of-memory error of its heap
      // would) is replaced at the next need, which loads what was persisted; every store is then
      // reconciled with a scan, as after a restart of the daemon, since the changes it had not yet
      // persisted are gone with it. Requests it had not answered fail; later ones go to the new one.
      void opened.ended.then((why) => {
        if (closing || thread !== opened) return
        thread = undefined
        loaded = undefined
        threadRestarts++
        for (const name of sources.keys()) reconcileLater(name)
        process.stderr.write(`mnemos: the search thread stopped (${why.message}); it restarts and catches up\n`)
      })
      return opened
    }
    yield* Effect.addFinalizer(() =>
      Effect.promise(async () => {
        closing = true
        await thread?.close()
      }),
    )
    /** Asks the thread; a thread that failed is a defect (search cannot go on without its index). */
    const ask = <A>(question: () => Promise<A>) => Effect.promise(question)
    function persistedIndexExists() {
      return config.dataDir !== undefined && existsSync(join(config.dataDir, "search", "lmdb"))
    }

    /** Set while the index moves to a worker: health waits for it instead of asking a closing thread. */
    let moving: Promise<void> | undefined
    /**
     * Moves a main-thread index that has outgrown `documentsMax`, or was sent a burst of more than
     * `burstDocumentsMax` documents by events (`countBurst`), to a worker thread (called under
     * the lock, so nothing is sent meanwhile). The main thread's index closes first, flushing search's
     * persistence; the worker loads it before the lock is let go, so no search sees it half loaded.
     * Without a data directory nothing was persisted: every store is reconciled into the worker.
     */
    const moveToWorkerIfOutgrown = Effect.suspend(() => {
      const current = thread
      if (current === undefined || placement !== "main" || config.thread !== undefined || !sentSinceSizeCheck)
        return Effect.void
      sentSinceSizeCheck = false
      return ask(async () => {
        const documents = await current.call({ op: "count" })
        if ((documents <= documentsMax && burstDocuments <= burstDocumentsMax) || thread !== current) return
        let moved = () => {}
        moving = new Promise((resolve) => (moved = resolve))
        try {
          thread = undefined // so its end is not taken for a crash
          loaded = undefined
          await current.close()
          placement = "worker"
          const opened = ensureThread()
          // (`loaded` was set again by `ensureThread`.)
          await (loaded as Promise<unknown> | undefined)?.catch(() => undefined)
          if (config.dataDir === undefined) for (const name of sources.keys()) reconcileLater(name)
          // Documents the main thread had not embedded yet (not persisted) are embedded by the worker.
          opened.call({ op: "embedMissing" }).catch(() => undefined)
        } finally {
          moving = undefined
          moved()
        }
      })
    })

    const lastSeq = new Map<string, number>()
    /** Groups refreshed by events since a store's reconcile began (per store). */
    const touchedSince = new Map<string, Set<string>>()
    const needsReconcile = new Set<string>()
    /** Ends the background loop's sleep (set once it runs). */
    let wakeBackground = () => {}
    /** Asks for `name` to be reconciled by the background loop, at once (it may be asleep: `followBus`). */
    const reconcileLater = (name: string) => {
      needsReconcile.add(name)
      wakeBackground()
    }
    let state: WarmState = "cold"
    let reconciles = 0
    let warmed = false

    const storeOf = (source: AnySearchSource) => {
      try {
        return router.store(source.definition)
      } catch {
        return undefined // not run by this engine
      }
    }
    const appliedSeqOf = (store: string) => router.health().find((health) => health.name === store)?.appliedSeq ?? 0

    /** Reads what drained events changed, per store one read of its view, and sends it to the thread. */
    const applyEvents = (events: ReadonlyArray<CommittedEvent>) =>
      Effect.gen(function* () {
        const byStore = new Map<string, Array<CommittedEvent>>()
        for (const committed of events) {
          if (!sources.has(committed.store)) continue
          const list = byStore.get(committed.store)
          if (list === undefined) byStore.set(committed.store, [committed])
          else list.push(committed)
        }
        for (const [name, list] of byStore) {
          const source = sources.get(name)!
          const store = storeOf(source)
          if (store === undefined) continue
          const changes = yield* store
            .read((view: StoreView) => changesOf(source, list, view))
            .pipe(Effect.catch(() => Effect.succeed(undefined)))
          if (changes === undefined) {
            reconcileLater(name) // the store could not be read: catch up by a scan later
            continue
          }
          const touched = touchedSince.get(name)
          const groups: Array<GroupDocuments> = []
          let applied = 0
          for (const { committed, changes: changed } of changes) {
            const previous = lastSeq.get(name)
            if (previous !== undefined && committed.seq > previous + 1) reconcileLater(name) // the bus dropped events
            if (previous === undefined || committed.seq > previous) lastSeq.set(name, committed.seq)
            if (changed === "resync") {
              reconcileLater(name)
              continue
            }
            for (const group of changed) {
              touched?.add(group.group)
              groups.push(group)
            }
            applied++
          }
          // Removals of what was never indexed need no thread.
          if (thread !== undefined || groups.some((group) => group.documents.length > 0)) {
            sentSinceSizeCheck = true
            countBurst(groups)
            ensureThread().post({
              op: "apply",
              store: name,
              groups,
              seq: lastSeq.get(name)!,
              events: applied,
              at: list[0]!.at,
            })
          }
        }
      })

    const drain = Effect.gen(function* () {
      const events = yield* PubSub.takeUpTo(subscription, Number.MAX_SAFE_INTEGER)
      if (events.length > 0) yield* applyEvents(events)
    })
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
        const known = yield* locked(
          Effect.andThen(
            Effect.sync(() => touchedSince.set(name, touched)),
            ask(async () => {
              // A persisted index is loaded before it is compared with the scan (a restarted thread's too).
              if (thread === undefined && persistedIndexExists()) ensureThread()
              if (thread === undefined) return []
              const current = thread
              await loaded
              return current.call({ op: "groupsOf", store: name })
            }),
          ),
        )
        const seqBefore = appliedSeqOf(name)
        const scanned = yield* store
          .read((view) => [...source.scan(view)])
          .pipe(Effect.catch(() => Effect.succeed(undefined)))
        if (scanned === undefined) {
          touchedSince.delete(name)
          reconcileLater(name)
          return
        }
        const seen = new Set<string>()
        for (let start = 0; start < scanned.length; start += warmChunkGroups) {
          const chunk = scanned.slice(start, start + warmChunkGroups)
          yield* locked(
            Effect.suspend(() => {
              const groups: Array<GroupDocuments> = []
              for (const group of chunk) {
                seen.add(group.group)
                if (!touched.has(group.group)) groups.push(group)
              }
              sentSinceSizeCheck ||= groups.length > 0
              return groups.length === 0
                ? Effect.void
                : Effect.andThen(
                    ask(() => ensureThread().call({ op: "replace", store: name, groups })),
                    moveToWorkerIfOutgrown,
                  )
            }),
          )
        }
        yield* locked(
          Effect.suspend(() => {
            const gone = known
              .filter((group) => !seen.has(group) && !touched.has(group))
              .map((group) => ({ group, documents: [] }))
            touchedSince.delete(name)
            const seq = Math.max(lastSeq.get(name) ?? 0, seqBefore)
            lastSeq.set(name, seq)
            // Without a thread nothing of this store is indexed or persisted: the next start scans it again.
            if (thread === undefined) return Effect.void
            const current = thread
            current.post({ op: "setSeq", store: name, seq })
            return gone.length === 0
              ? Effect.void
              : ask(() => current.call({ op: "replace", store: name, groups: gone }))
          }),
        )
      })

    /** Loads what was persisted, then reconciles every store that moved on without us. */
    const warmUp = Effect.gen(function* () {
      if (config.mainThreadWarmUpAfterMs !== undefined && placement === "main")
        yield* Effect.sleep(Duration.millis(config.mainThreadWarmUpAfterMs))
      if (persistedIndexExists()) ensureThread()
      // A thread that stopped while loading is replaced; every store is then reconciled anyway.
      const persistedSeqs = loaded === undefined ? {} : yield* ask(() => loaded!.catch(() => ({})))
      for (const [name, seq] of Object.entries(persistedSeqs)) if (!lastSeq.has(name)) lastSeq.set(name, seq)
      state = "warming"
      for (const source of sources.values()) {
        const name = source.definition.name
        const store = storeOf(source)
        if (store === undefined) continue
        yield* store.read(() => undefined).pipe(Effect.ignore) // wait until the store has opened
        const persisted = persistedSeqs[name]
        if (persisted === undefined || persisted !== appliedSeqOf(name) || needsReconcile.has(name))
          yield* reconcile(source).pipe(Effect.catchCause(() => Effect.sync(() => reconcileLater(name))))
      }
      if (thread !== undefined) {
        const current = thread
        yield* ask(() => current.call({ op: "embedMissing" }).catch(() => null))
      }
      state = "warm"
      warmed = true
      if (needsReconcile.size > 0) wakeBackground()
    })

    const warmDone = yield* Effect.forkScoped(warmUp)

    // Background: catch up with the bus, reconcile stores that asked for it; an idle daemon's
    // indexer sleeps until something is published or a reconcile is asked for (`reconcileLater`).
    const background = followBus(bus, subscription, {
      intervalMs: backgroundDrainIntervalMs,
      idleStepMs: idleReconcileMs,
      pending: () => warmed && needsReconcile.size > 0,
      step: Effect.gen(function* () {
        yield* drainInSlices
        yield* locked(moveToWorkerIfOutgrown)
        if (warmed)
          for (const name of [...needsReconcile]) {
            const source = sources.get(name)
            if (source !== undefined) yield* reconcile(source)
          }
      }).pipe(Effect.catchCause((cause) => Effect.logWarning(`search indexer: ${cause}`))),
    })
    wakeBackground = background.wake
    yield* Effect.forkScoped(background.run)
    // Last: send what was published, so the thread's flush at close holds the newest state.
    yield* Effect.addFinalizer(() => locked(drain).pipe(Effect.ignore))

    /** Drains under the lock, then sends `question`: it reaches the thread after every change before it. */
    const afterDrainAsk = <A>(question: () => Promise<A>) =>
      Effect.flatMap(locked(Effect.andThen(drain, Effect.sync(question))), (answer) => Effect.promise(() => answer))
    /** The load of what was persisted that has ended (`loaded`'s), if any. */
    let loadEnded: Promise<unknown> | undefined
    /**
     * Starts the thread if need be and, for an index on this thread, waits until its load of what
     * was persisted has ended (a small index: well under a second), so that a question in a
     * daemon's first moments, before its warm-up (`mainThreadWarmUpAfterMs`), finds what was
     * persisted. A worker answers between the slices of its load (seconds at 100,000 records). The
     * wait is outside the lock: the question itself is still sent under it, in order with changes.
     */
    const untilLoaded = Effect.suspend(() => {
      if (thread !== undefined && (placement !== "main" || loaded === undefined || loaded === loadEnded))
        return Effect.void
      return Effect.flatMap(
        locked(
          Effect.sync(() => {
            ensureThread()
            return placement === "main" ? loaded : undefined
          }),
        ),
        (loading) => {
          if (loading === undefined) return Effect.void
          const ended = () => {
            loadEnded = loading
          }
          return Effect.promise(() => loading.then(ended, ended))
        },
      )
    })
    /** Asks the thread after draining, starting it if need be (see `untilLoaded`). */
    const afterDrain = <A>(question: (thread: SearchThread) => Promise<A>) =>
      Effect.andThen(
        untilLoaded,
        afterDrainAsk(() => question(ensureThread())),
      )
    /** Like `afterDrain`, but without a thread answers `idle` (nothing is indexed). */
    const afterDrainOr = <A>(idle: A, question: (thread: SearchThread) => Promise<A>) =>
      afterDrainAsk(() => (thread === undefined ? Promise.resolve(idle) : question(thread)))

    const search = (request: SearchRequest) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const result = yield* afterDrain((thread) => thread.call({ op: "search", request, now }))
        return { hits: result.hits, warm: state === "warm", semantic: result.semantic } satisfies SearchResponse
      })

    /**
     * The thread's counts, without the indexer's lock (which a reconcile holds while the persisted
     * index loads: seconds at 100,000 documents). A thread moving to a worker is not asked while it
     * closes: the move is waited for, and a thread closed under the question is asked again.
     */
    const threadStats = async (): Promise<{ current: SearchThread | undefined; core: CoreStats }> => {
      for (;;) {
        await moving
        const current = thread
        if (current === undefined) return { current, core: idleStats }
        try {
          return { current, core: await current.call({ op: "stats" }) }
        } catch (error) {
          if (thread === current && moving === undefined) throw error
        }
      }
    }

    // Not drained first: health reports the lag, it does not shorten it.
    const health = Effect.gen(function* () {
      const { current, core } = yield* ask(threadStats)
      let lagEvents = 0
      // Without a thread, what was drained needed none: only what is not drained yet is behind.
      const indexedSeq = (name: string) => (current === undefined ? lastSeq.get(name) : core.seqs[name]) ?? 0
      for (const name of sources.keys()) lagEvents += Math.max(0, appliedSeqOf(name) - indexedSeq(name))
      return {
        state,
        lagEvents,
        lastLagMs: core.lastLagMs,
        maxLagMs: core.maxLagMs,
        eventsApplied: core.eventsApplied,
        reconciles,
        threadRestarts,
        pendingEmbeddings: core.pendingEmbeddings,
        embedder: core.embedder,
        index: core.index,
        storageBytes: core.storageBytes,
        ...(core.reembedding !== undefined ? { reembedding: core.reembedding } : {}),
        ...(core.memory !== undefined ? { memory: core.memory } : {}),
        thread: current === undefined ? "not started" : (placement ?? "main"),
      } satisfies SearchHealth
    })

    return SearchIndexer.of({
      search,
      documents: (ids) =>
        afterDrainOr(
          ids.map(() => undefined),
          (thread) => thread.call({ op: "documents", ids }),
        ),
      timeline: (ids, window) =>
        afterDrainOr(
          ids.map(() => undefined),
          (thread) => thread.call({ op: "timeline", ids, window }),
        ),
      health,
      sync: Effect.asVoid(afterDrainOr(idleStats, (thread) => thread.call({ op: "stats" }))),
      awaitWarm: Effect.asVoid(Effect.exit(Fiber.join(warmDone))),
      // Without a thread there are no search files (one is started at startup when there are).
      compact: afterDrainOr({ bytesBefore: 0, bytesAfter: 0 }, (thread) => thread.call({ op: "compact" })),
    })
  })

/** The indexer as a layer. */
export const layer = (config: IndexerConfig): Layer.Layer<SearchIndexer, never, Router | EventBus> =>
  Layer.effect(SearchIndexer, makeIndexer(config))
