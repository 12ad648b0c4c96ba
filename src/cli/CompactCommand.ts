/**
 * `mnemos compact`: rewrites the stores' files (and search's) with the live data only, so nothing
 * deleted or overwritten is left in any file of the data directory (docs/durability.md, "Deleted
 * means gone"); a local data directory's `pre-join-*` copies (left by an earlier `cluster join`) are
 * removed too. Through the data directory's daemon when one runs (`POST /api/compact`), else with
 * the engine opened here (the lock is held meanwhile; search is warmed first, so what it dropped for
 * deletions made while no daemon ran is dropped before its files are rewritten).
 */
import { existsSync } from "node:fs"
import { Console, Effect, Option, Schema } from "effect"
import { Command, Flag } from "effect/cli"
import { type CompactAllReport, compactAll, layer as engineLayer } from "../Engine.ts"
import { SearchIndexer } from "../search/Indexer.ts"
import { isOwnerAlive, readLockOwner, resolveDataDir } from "../stores/datadir/DataDir.ts"
import { readMembership, removePreJoinCopies } from "../stores/shared/SharedMemory.ts"
import { readToken } from "../transports/Daemon.ts"
import { runningDaemon } from "./HealthCommand.ts"
import { dataDirFlag } from "./ServeCommand.ts"

/** How long the daemon may take to compact (it rewrites every store). */
const daemonCompactTimeoutMs = 30 * 60 * 1000

/** The compaction could not run; the message says why. */
export class CompactProblem extends Schema.TaggedError<CompactProblem>()("CompactProblem", {
  message: Schema.String,
}) {}

const mib = (bytes: number) => `${(bytes / (1024 * 1024)).toFixed(2)} MiB`

const printReport = (report: CompactAllReport) =>
  Effect.gen(function* () {
    for (const store of report.stores)
      yield* Console.log(
        `  ${store.store.padEnd(14)} ${String(store.keys).padStart(8)} keys  ${mib(store.bytesBefore)} → ${mib(store.bytesAfter)}`,
      )
    yield* Console.log(
      `  ${"search".padEnd(14)} ${"".padStart(8)}       ${mib(report.search.bytesBefore)} → ${mib(report.search.bytesAfter)}`,
    )
  })

const viaDaemon = (dataDir: string, daemon: { host: string; port: number }, stores: ReadonlyArray<string>) =>
  Effect.tryPromise({
    try: async () => {
      const host = daemon.host.includes(":") ? `[${daemon.host}]` : daemon.host
      const token = readToken(dataDir)
      const query = stores.length > 0 ? `?stores=${encodeURIComponent(stores.join(","))}` : ""
      const response = await fetch(`http://${host}:${daemon.port}/api/compact${query}`, {
        method: "POST",
        headers: token !== undefined ? { authorization: `Bearer ${token}` } : {},
        signal: AbortSignal.timeout(daemonCompactTimeoutMs),
      })
      const body = (await response.json()) as CompactAllReport | { error: string }
      if (!response.ok) throw new Error("error" in body ? body.error : `the daemon answered ${response.status}`)
      return body as CompactAllReport
    },
    catch: (error) =>
      new CompactProblem({
        message: `the daemon could not compact: ${error instanceof Error ? error.message : String(error)}`,
      }),
  })

export const compactCommand = Command.make(
  "compact",
  {
    dataDir: dataDirFlag,
    store: Flag.String("store").pipe(
      Flag.withDescription("Compact only this store (repeatable; default: every store)"),
      Flag.atLeast(0),
    ),
  },
  Effect.fn(function* ({ dataDir, store }) {
    const location = resolveDataDir(Option.getOrUndefined(dataDir))
    if (!existsSync(location.path))
      return yield* new CompactProblem({ message: `no data directory at ${location.path}` })
    const daemon = yield* Effect.promise(() => runningDaemon(location.path))
    let report: CompactAllReport
    if (daemon !== undefined) {
      yield* Console.log(`compacting through the daemon (pid ${daemon.pid}) of ${location.path} ...`)
      report = yield* viaDaemon(location.path, daemon, store)
    } else {
      const owner = readLockOwner(location.path)
      if (owner !== undefined && isOwnerAlive(owner))
        return yield* new CompactProblem({
          message: `${location.path} is in use by mnemos process ${owner.pid} (${owner.command}) without a daemon to ask; stop it, or compact through a daemon`,
        })
      yield* Console.log(`compacting ${location.path} (no daemon running: opened here) ...`)
      report = yield* Effect.gen(function* () {
        yield* (yield* SearchIndexer).awaitWarm
        return yield* compactAll(store.length > 0 ? store : undefined)
      }).pipe(
        Effect.scoped,
        Effect.provide(engineLayer({ dataDir: location.path, command: "mnemos compact" })),
        Effect.mapError((error) => new CompactProblem({ message: `could not compact: ${String(error)}` })),
      )
    }
    yield* printReport(report)
    // Copies an earlier `cluster join` set aside hold the stores as they were then (a replica
    // removes its own once its join is confirmed; one left in a local data directory is stale).
    if (readMembership(location.path) === undefined) {
      const removed = yield* Effect.try({
        try: () => removePreJoinCopies(location.path),
        catch: (error) => new CompactProblem({ message: `could not remove the pre-join copies: ${String(error)}` }),
      })
      if (removed.length > 0)
        yield* Console.log(`  removed the copies set aside by mnemos cluster join: ${removed.join(", ")}`)
    }
    yield* Console.log("done: nothing deleted is left in the stores' or search's files")
  }),
).pipe(
  Command.withDescription(
    "Rewrite the stores' and search's files with live data only, so nothing deleted is left on disk",
  ),
)
