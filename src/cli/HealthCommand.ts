/**
 * `mnemos health`: the condition of every store, the search index and the privacy filter.
 *
 * When the data directory's daemon answers, its `/api/stats` is shown (the live numbers, including
 * the privacy filter's counts since the daemon started). When nothing owns the data directory, the
 * stores are opened here (recovery runs as it would at a start; the lock is held meanwhile) and
 * their health is shown. When another process owns it without a daemon (`serve --stdio`), that is
 * said. Exit code 1 when a store is not running (corrupt, unavailable), else 0.
 */
import { existsSync } from "node:fs"
import { Console, Effect, Layer, Option, Schema } from "effect"
import { Command, Flag } from "effect/cli"
import * as Router from "../actors/Router.ts"
import type { StoreHealth } from "../actors/StoreActor.ts"
import { domainStores } from "../Engine.ts"
import { privacySettings } from "../privacy/PrivacyFilter.ts"
import type { SearchHealth } from "../search/Indexer.ts"
import type { ThreadMemory } from "../search/index/IndexCore.ts"
import { isOwnerAlive, lockDataDir, readLockOwner, resolveDataDir } from "../stores/datadir/DataDir.ts"
import * as EventBus from "../stores/EventBus.ts"
import { layerNode } from "../stores/wal/WalFs.ts"
import { type DaemonInfo, pingDaemon, readDaemonInfo, readToken } from "../transports/Daemon.ts"
import { dataDirFlag } from "./ServeCommand.ts"

/** How long `/api/stats` may take. */
const statsTimeoutMs = 5_000

/** A store is not in a serving state; the report was printed. */
export class HealthProblem extends Schema.TaggedError<HealthProblem>()("HealthProblem", { message: Schema.String }) {}

/** The data directory's daemon, when it answers for that directory. */
export const runningDaemon = (dataDir: string): Promise<DaemonInfo | undefined> => {
  const info = readDaemonInfo(dataDir)
  if (info === undefined) return Promise.resolve(undefined)
  return pingDaemon(info).then((answer) => (answer?.dataDir === dataDir ? info : undefined))
}

/** GET `/api/stats` of the daemon (with the bearer token when the data directory has one). */
export const fetchDaemonStats = async (dataDir: string, daemon: DaemonInfo): Promise<Record<string, unknown>> => {
  const host = daemon.host.includes(":") ? `[${daemon.host}]` : daemon.host
  const token = readToken(dataDir)
  const response = await fetch(`http://${host}:${daemon.port}/api/stats`, {
    headers: token !== undefined ? { authorization: `Bearer ${token}` } : {},
    signal: AbortSignal.timeout(statsTimeoutMs),
  })
  if (!response.ok) throw new Error(`/api/stats answered ${response.status}`)
  return (await response.json()) as Record<string, unknown>
}

/** The stores of `dataDir`, opened in this process (recovery included) for the life of the scope. */
export const localStores = (dataDir: string, command: string) =>
  Router.layer({ dataDir, stores: domainStores }).pipe(
    Layer.provide(EventBus.layer),
    Layer.provide(layerNode),
    Layer.provide(Layer.effectDiscard(lockDataDir(dataDir, command))),
  )

const describeStore = (store: StoreHealth): string => {
  const parts = [`${store.name.padEnd(14)} ${store.state.padEnd(11)} applied seq ${store.appliedSeq}`]
  if (store.restarts > 0) parts.push(`${store.restarts} restart(s)`)
  if (store.wal !== undefined) parts.push(`log ${store.wal.segments} segment(s), ${store.wal.bytes} bytes`)
  if (store.recovery?.tornTail !== undefined)
    parts.push(`torn tail cut at start (${store.recovery.tornTail.bytesCut} bytes)`)
  // Absent from a daemon of an earlier version.
  const released = store.mappedPagesReleased ?? 0
  if (released > 0) parts.push(`file pages let go ${released} time(s) once idle`)
  if (store.lastError !== undefined) parts.push(`last error: ${store.lastError}`)
  return parts.join(", ")
}

const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`

/** A thread's heap: used, committed, and its young generation (held at a fixed size: YoungGeneration.ts). */
const heapOf = (memory: ThreadMemory) =>
  `${mib(memory.heapUsedBytes)} used of ${mib(memory.heapTotalBytes)}` +
  // A daemon of an earlier version does not report it.
  (memory.youngGenerationBytes === undefined ? "" : ` (young generation ${mib(memory.youngGenerationBytes)})`)

/**
 * The daemon's search index (`/api/stats` `omniSearch`) and the heaps that hold it, in one line:
 * its state, where it runs, what it holds and what it costs in memory.
 */
const describeSearchIndex = (search: SearchHealth, mainThread: ThreadMemory | undefined): string => {
  const where = { main: "on the main thread", worker: "on a worker thread", "not started": "not started" }[
    search.thread
  ]
  const parts = [
    `search index: ${search.state}, ${where}`,
    // A daemon of an earlier version does not report the full-text index's bytes.
    `${search.index.documents} document(s)${search.index.termBytes === undefined ? "" : ` (full text ${mib(search.index.termBytes)})`}, ${search.index.vectors} vector(s) (${mib(search.index.vectorBytes)})`,
  ]
  if (search.pendingEmbeddings > 0) parts.push(`${search.pendingEmbeddings} waiting for the model`)
  if (search.lagEvents > 0) parts.push(`${search.lagEvents} event(s) behind`)
  if (search.memory !== undefined && search.thread === "worker") parts.push(`its heap ${heapOf(search.memory)}`)
  if (mainThread !== undefined) parts.push(`main thread's heap ${heapOf(mainThread)}`)
  return parts.join(", ")
}

const notServing = (stores: ReadonlyArray<StoreHealth>) =>
  stores.filter((store) => store.state !== "running" && store.state !== "starting")

const printPrivacy = (privacy: unknown) =>
  Effect.gen(function* () {
    const settings = privacySettings()
    const configured = `built-in kinds${settings.disabledKinds.length > 0 ? ` (off: ${settings.disabledKinds.join(", ")})` : ""}${settings.customPatterns.length > 0 ? `, custom: ${settings.customPatterns.map((pattern) => pattern.name).join(", ")}` : ""}`
    if (typeof privacy !== "object" || privacy === null) {
      yield* Console.log(`privacy filter: ${configured}; counts are kept by the daemon while it runs`)
      return
    }
    const stats = privacy as {
      privateSpansDropped?: number
      secretsRedacted?: number
      redactedByKind?: Record<string, number>
    }
    const kinds = Object.entries(stats.redactedByKind ?? {})
      .map(([kind, count]) => `${kind} ${count}`)
      .join(", ")
    yield* Console.log(
      `privacy filter: ${stats.privateSpansDropped ?? 0} <private> span(s) dropped, ${stats.secretsRedacted ?? 0} secret(s) redacted${kinds !== "" ? ` (${kinds})` : ""}`,
    )
  })

export const healthCommand = Command.make(
  "health",
  {
    dataDir: dataDirFlag,
    json: Flag.Boolean("json").pipe(Flag.withDescription("Print JSON"), Flag.withDefault(false)),
  },
  Effect.fn(function* ({ dataDir, json }) {
    const location = resolveDataDir(Option.getOrUndefined(dataDir))
    if (!existsSync(location.path)) {
      yield* Console.log(`no data directory at ${location.path} yet (the first start creates it)`)
      return
    }
    const daemon = yield* Effect.promise(() => runningDaemon(location.path))
    let stores: ReadonlyArray<StoreHealth>
    let report: Record<string, unknown>
    if (daemon !== undefined) {
      report = yield* Effect.tryPromise({
        try: () => fetchDaemonStats(location.path, daemon),
        catch: (error) =>
          new HealthProblem({
            message: `the daemon (pid ${daemon.pid}) did not give its stats: ${error instanceof Error ? error.message : String(error)}`,
          }),
      })
      stores = (report.stores as ReadonlyArray<StoreHealth> | undefined) ?? []
      report = { source: `daemon pid ${daemon.pid} on ${daemon.host}:${daemon.port}`, ...report }
    } else {
      const owner = readLockOwner(location.path)
      if (owner !== undefined && isOwnerAlive(owner))
        return yield* new HealthProblem({
          message: `${location.path} is in use by mnemos process ${owner.pid} (${owner.command}) without a daemon to ask; its health is only visible to that process`,
        })
      stores = yield* Effect.gen(function* () {
        const router = yield* Router.Router
        // A read waits until the store has opened (or refused to): then its health is settled.
        yield* Effect.forEach(domainStores, (definition) =>
          Effect.ignore(router.store(definition).read(() => undefined)),
        )
        return router.health()
      }).pipe(Effect.provide(Layer.fresh(localStores(location.path, "mnemos health"))))
      report = { source: "opened in this process (no daemon running)", stores }
    }
    if (json) yield* Console.log(JSON.stringify({ dataDir: location.path, ...report }, null, 2))
    else {
      yield* Console.log(`data directory: ${location.path} (${String(report.source)})`)
      for (const store of stores) yield* Console.log(`  ${describeStore(store)}`)
      if (typeof report.omniSearch === "object" && report.omniSearch !== null)
        yield* Console.log(
          describeSearchIndex(report.omniSearch as SearchHealth, report.mainThread as ThreadMemory | undefined),
        )
      if (typeof report.search === "object" && report.search !== null)
        yield* Console.log(`search_nodes: ${JSON.stringify(report.search)}`)
      yield* printPrivacy(report.privacy)
    }
    const bad = notServing(stores)
    if (bad.length > 0)
      return yield* new HealthProblem({
        message: `${bad.map((store) => `store "${store.name}" is ${store.state}`).join("; ")}; run mnemos doctor for the fix`,
      })
  }),
).pipe(Command.withDescription("Show the health of every store, the search index and the privacy filter"))
