/**
 * The engine: everything that holds state, assembled for one data directory.
 *
 * Takes the data directory's lock first (a second owner fails with the owner's pid), then starts
 * the event bus and the router with every domain store. Closing the layer's scope drains every
 * store's mailbox, flushes, and releases the lock last.
 */
import { Effect, Layer } from "effect"
import * as Router from "./actors/Router.ts"
import type { StoreOptions } from "./actors/StoreActor.ts"
import { conversationState } from "./conversations/ConversationState.ts"
import { conversationStore } from "./conversations/ConversationStore.ts"
import * as AuditLedger from "./engineering/AuditLedger.ts"
import { auditState, auditStore } from "./engineering/AuditStore.ts"
import { engineeringStores, recordStores } from "./engineering/EngineeringStores.ts"
import * as RecordExpiry from "./engineering/RecordExpiry.ts"
import { recordState } from "./engineering/RecordState.ts"
import * as GraphSearch from "./graph/GraphSearch.ts"
import { graphState } from "./graph/GraphState.ts"
import { graphStore } from "./graph/GraphStore.ts"
import type { EncoderConfig } from "./search/embedding/EncoderLoader.ts"
import * as SearchIndexer from "./search/Indexer.ts"
import { searchSources } from "./search/SearchSources.ts"
import type { openSearchThread } from "./search/thread/SearchThread.ts"
import { DataDirError, lockDataDir } from "./stores/datadir/DataDir.ts"
import * as EventBus from "./stores/EventBus.ts"
import { type StateSchema, withKernelKeys } from "./stores/StateSchema.ts"
import type { AnyStoreDefinition } from "./stores/StoreDefinition.ts"
import type { NatsSettings } from "./stores/shared/NatsSettings.ts"
import { readMembership } from "./stores/shared/SharedMemory.ts"
import { layerNode } from "./stores/wal/WalFs.ts"

/** The domain stores every engine runs. */
export const domainStores: ReadonlyArray<AnyStoreDefinition> = [graphStore, conversationStore, ...engineeringStores]

/** What each domain store's state may hold, by store name (a full archive import checks it). */
export const domainStates: ReadonlyMap<string, StateSchema> = new Map(
  [
    [graphStore.name, graphState] as const,
    [conversationStore.name, conversationState] as const,
    ...recordStores.map((store) => [store.name, recordState(store.kinds)] as const),
    [auditStore.name, auditState] as const,
  ].map(([name, state]) => [name, withKernelKeys(state)]),
)

/** How to build an engine. */
export interface EngineConfig {
  readonly dataDir: string
  /** What the lock file says about its owner, e.g. "mnemos serve". */
  readonly command: string
  readonly stores?: ReadonlyArray<AnyStoreDefinition>
  readonly storeOptions?: Partial<Omit<StoreOptions, "dir">>
  /**
   * Search: the embedding model (default: the static GloVe model) and where the index runs: true,
   * a worker thread of its own; false, the main thread (same protocol); by default the main thread
   * while it holds at most `mainThreadDocumentsMax` documents, a worker thread beyond (Indexer.ts).
   */
  readonly search?: {
    readonly model?: EncoderConfig
    readonly thread?: boolean
    /** The most documents a default-placed index holds on the main thread (tests lower it). */
    readonly mainThreadDocumentsMax?: number
    /** The burst of documents that moves a default-placed index off the main thread (Indexer.ts; tests change it). */
    readonly mainThreadBurstDocuments?: number
    readonly mainThreadBurstMs?: number
    /** Starts the search thread (tests wrap it, to stop a thread as a crash would). */
    readonly openThread?: typeof openSearchThread
    /** How long after the start a small index warms up (Indexer.ts; at once by default). */
    readonly mainThreadWarmUpAfterMs?: number
  }
  /** search_nodes' read model (GraphSearch.ts): tests shorten its build's slices. */
  readonly graphSearch?: GraphSearch.GraphSearchOptions
  /** A shared memory: every store's log is a JetStream stream on these NATS servers (docs/scaling.md). */
  readonly nats?: NatsSettings
}

/**
 * The stores' logs on JetStream and their writer leases (each store's writes decided by one daemon,
 * the others forwarding to it), with the NATS connection (also offered to the engine's other parts:
 * health, the cluster's presence). Loaded only for a shared memory: a local daemon never loads the
 * NATS client.
 */
const sharedLogsLayer = (settings: NatsSettings) =>
  Layer.unwrap(
    Effect.promise(async () => {
      const [{ jetStreamLogs }, Nats, WriterLeases] = await Promise.all([
        import("./stores/wal/JetStreamWal.ts"),
        import("./stores/shared/Nats.ts"),
        import("./cluster/WriterLeases.ts"),
      ])
      return Layer.mergeAll(jetStreamLogs, WriterLeases.layer).pipe(Layer.provideMerge(Nats.layer(settings)))
    }),
  )

/**
 * A data directory that is a replica of a shared memory opens only in it: its stores are positions in
 * the shared streams, and writing a local log beside them would fork the memory's history.
 */
const refuseSharedMemberAlone = (config: Omit<EngineConfig, "search">) =>
  Effect.suspend(() => {
    const membership = config.nats === undefined ? readMembership(config.dataDir) : undefined
    if (membership === undefined) return Effect.void
    return Effect.fail(
      new DataDirError({
        reason: "Config",
        path: config.dataDir,
        message: `${config.dataDir} is a replica of the shared memory "${membership.prefix}" (${membership.servers.join(", ")}): ${config.command} runs through its daemon (mnemos serve) or after mnemos cluster leave`,
      }),
    )
  })

/**
 * The stores alone: the lock, the event bus, the router with every store and the audit feed (and,
 * for a shared memory, the stores' logs on JetStream). What a command that moves records in or out
 * needs (`mnemos import`, `export`): search is not kept current by it (no index in memory, no
 * embedding model), and the next full engine reconciles search with the stores when it starts.
 */
export const storesLayer = (config: Omit<EngineConfig, "search">) => {
  const lock = Layer.effectDiscard(
    Effect.andThen(refuseSharedMemberAlone(config), lockDataDir(config.dataDir, config.command)),
  )
  const router = Router.layer({
    dataDir: config.dataDir,
    stores: config.stores ?? domainStores,
    ...(config.storeOptions !== undefined ? { storeOptions: config.storeOptions } : {}),
  })
  const logs = config.nats === undefined ? Layer.empty : sharedLogsLayer(config.nats)
  // The audit feed subscribes before the stores start, so it sees what they re-publish while recovering.
  return router.pipe(
    Layer.provideMerge(logs),
    Layer.provideMerge(AuditLedger.feedLayer),
    Layer.provideMerge(EventBus.layer),
    Layer.provide(layerNode),
    Layer.provide(lock),
  )
}

/** The engine's services: the router (with its stores), the event bus and the graph search. */
export const layer = (config: EngineConfig) => {
  const core = storesLayer(config)
  const search = SearchIndexer.layer({
    sources: searchSources,
    dataDir: config.dataDir,
    ...(config.search?.model !== undefined ? { embedder: { model: config.search.model } } : {}),
    ...(config.search?.thread !== undefined ? { thread: config.search.thread } : {}),
    ...(config.search?.mainThreadDocumentsMax !== undefined
      ? { mainThreadDocumentsMax: config.search.mainThreadDocumentsMax }
      : {}),
    ...(config.search?.mainThreadBurstDocuments !== undefined
      ? { mainThreadBurstDocuments: config.search.mainThreadBurstDocuments }
      : {}),
    ...(config.search?.mainThreadBurstMs !== undefined ? { mainThreadBurstMs: config.search.mainThreadBurstMs } : {}),
    ...(config.search?.openThread !== undefined ? { openThread: config.search.openThread } : {}),
    ...(config.search?.mainThreadWarmUpAfterMs !== undefined
      ? { mainThreadWarmUpAfterMs: config.search.mainThreadWarmUpAfterMs }
      : {}),
  })
  // A shared memory's daemons say they are there (the dashboard's panel); loaded only for one.
  const presence =
    config.nats === undefined
      ? Layer.empty
      : Layer.unwrap(Effect.promise(async () => (await import("./cluster/Presence.ts")).layer))
  // A replica's first start confirms its join: the copies `cluster join` set aside are removed.
  const preJoin =
    config.nats === undefined
      ? Layer.empty
      : Layer.unwrap(Effect.promise(async () => (await import("./cluster/PreJoinCopies.ts")).layer(config.dataDir)))
  // A compaction of a shared store rewrites this daemon's search files too.
  const compactionFollower =
    config.nats === undefined
      ? Layer.empty
      : Layer.unwrap(Effect.promise(async () => (await import("./cluster/CompactionFollower.ts")).layer))
  return Layer.mergeAll(
    GraphSearch.layerWith(config.graphSearch),
    AuditLedger.layer,
    RecordExpiry.layer(recordStores),
    presence,
    preJoin,
    compactionFollower,
  ).pipe(Layer.provideMerge(search), Layer.provideMerge(core))
}

/** What `compactAll` did, per store and for search. */
export interface CompactAllReport {
  readonly stores: ReadonlyArray<{
    readonly store: string
    readonly keys: number
    readonly bytesBefore: number
    readonly bytesAfter: number
  }>
  readonly search: { readonly bytesBefore: number; readonly bytesAfter: number }
}

/**
 * Compacts the named stores (every store when none is named) one after another, then search's files:
 * afterwards nothing deleted (or overwritten, or expired) before the call is in any file of the data
 * directory but the audit ledger's names and ids (docs/durability.md, "Deleted means gone").
 */
export const compactAll = (names?: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    // Notes whose time ran out while no sweep came by are deleted first, like any deleted record.
    yield* RecordExpiry.sweepDue(recordStores)
    const router = yield* Router.Router
    const stores = []
    for (const store of names ?? router.names()) stores.push({ store, ...(yield* router.compact(store)) })
    const search = yield* (yield* SearchIndexer.SearchIndexer).compact
    return { stores, search } satisfies CompactAllReport
  })
