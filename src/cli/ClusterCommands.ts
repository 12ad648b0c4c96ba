/**
 * `mnemos cluster join | leave | status`: moving a memory into a shared one (NATS JetStream) and out.
 *
 * `join` moves the data directory's local memory into a shared memory whose streams are empty for
 * the stores it holds: each store's whole state is published as snapshot messages (JetStreamWal's
 * `publishSnapshot`), the local stores are set aside in `<dataDir>/pre-join-<time>/`, and the data
 * directory becomes a replica that loads them back from the streams on its next start, which then
 * removes the copy (src/cluster/PreJoinCopies.ts). Other daemons joining the same memory load them too. A store the shared memory already
 * holds is not merged: the join refuses before it changes anything.
 *
 * `leave` keeps a local copy: the stores catch up with their streams, LMDB is flushed, and the
 * membership is forgotten, so the next start writes a local log again, after the last sequence the
 * copy holds. With `--offline` (NATS unreachable), the copy is what the data directory last applied.
 *
 * Both run while no process owns the data directory (stop the daemon first).
 */
import { existsSync, mkdirSync, renameSync } from "node:fs"
import { join } from "node:path"
import { Console, Effect, Layer, Option, Schema } from "effect"
import { Command, Flag } from "effect/cli"
import * as Router from "../actors/Router.ts"
import { domainStores } from "../Engine.ts"
import { isOwnerAlive, lockDataDir, readLockOwner, resolveDataDir } from "../stores/datadir/DataDir.ts"
import * as EventBus from "../stores/EventBus.ts"
import { snapshotRecordType } from "../stores/StoreKernel.ts"
import {
  newDaemonId,
  preJoinCopyPrefix,
  readMembership,
  removeMembership,
  storesHoldingData,
  writeMembership,
} from "../stores/shared/SharedMemory.ts"
import { layerNode } from "../stores/wal/WalFs.ts"
import { runningDaemon } from "./HealthCommand.ts"
import {
  natsCredsFlag,
  natsFlag,
  natsPrefixFlag,
  natsReplicasFlag,
  noNatsFlags,
  resolveNats,
  settingsOf,
} from "./NatsFlags.ts"
import { dataDirFlag } from "./ServeCommand.ts"

/** A cluster command could not do what it was asked; the message says why and what to do. */
export class ClusterProblem extends Schema.TaggedError<ClusterProblem>()("ClusterProblem", {
  message: Schema.String,
}) {}

const allKeys = { start: "", end: "\u{10FFFF}" }

/** Nothing may own the data directory while its stores are moved. */
const mustBeStopped = (dataDir: string) =>
  Effect.gen(function* () {
    const daemon = yield* Effect.promise(() => runningDaemon(dataDir))
    if (daemon !== undefined)
      return yield* new ClusterProblem({
        message: `the daemon (pid ${daemon.pid}) serves ${dataDir}: stop it first (its stores are moved)`,
      })
    const owner = readLockOwner(dataDir)
    if (owner !== undefined && isOwnerAlive(owner))
      return yield* new ClusterProblem({
        message: `${dataDir} is in use by mnemos process ${owner.pid} (${owner.command}): stop it first`,
      })
  })

/** The stores of `dataDir`, opened in this process on `logs` (their file logs when it provides none). */
const openStores = <Out, Failure>(dataDir: string, command: string, logs: Layer.Layer<Out, Failure>) =>
  Router.layer({ dataDir, stores: domainStores }).pipe(
    Layer.provide(logs),
    Layer.provide(EventBus.layer),
    Layer.provide(layerNode),
    Layer.provide(Layer.effectDiscard(lockDataDir(dataDir, command))),
  )

/** Waits until every store opened (or refused to): their state is then settled. */
const allOpened = Effect.gen(function* () {
  const router = yield* Router.Router
  for (const definition of domainStores) yield* router.store(definition).read(() => undefined)
  return router
})

/** The JetStream logs and the NATS connection, loaded when a command needs them (a local daemon never does). */
const sharedModules = async () => {
  const [{ jetStreamLogs, publishSnapshot }, Nats, { currentStreamOf }] = await Promise.all([
    import("../stores/wal/JetStreamWal.ts"),
    import("../stores/shared/Nats.ts"),
    import("../stores/shared/StoreGenerations.ts"),
  ])
  return { jetStreamLogs, publishSnapshot, currentStreamOf, Nats }
}

const joinCommand = Command.make(
  "join",
  {
    dataDir: dataDirFlag,
    nats: natsFlag,
    natsPrefix: natsPrefixFlag,
    natsReplicas: natsReplicasFlag,
    natsCreds: natsCredsFlag,
  },
  Effect.fn(function* ({ dataDir, ...flags }) {
    const location = resolveDataDir(Option.getOrUndefined(dataDir))
    const dir = location.path
    yield* mustBeStopped(dir)
    const membership = readMembership(dir)
    const resolved = resolveNats(flags, dir)
    const settings = settingsOf(resolved, membership?.daemonId ?? newDaemonId())
    if (settings === undefined)
      return yield* new ClusterProblem({ message: "name the shared memory's NATS servers with --nats URL[,URL...]" })
    if (membership !== undefined)
      return yield* new ClusterProblem({
        message: `${dir} is a replica of the shared memory "${membership.prefix}" already`,
      })
    const holding = yield* storesHoldingData(dir)
    const { publishSnapshot, currentStreamOf, Nats } = yield* Effect.promise(sharedModules)
    const nats = yield* Nats.makeNats(settings)
    // Refuse before anything changes: a store the shared memory holds is not merged.
    const taken: Array<string> = []
    for (const store of holding) {
      const info = yield* Effect.promise(() =>
        currentStreamOf(nats, store)
          .then((name) => nats.manager.streams.info(name))
          .catch(() => undefined),
      )
      if (info !== undefined && info.state.last_seq > 0) taken.push(store)
    }
    if (taken.length > 0)
      return yield* new ClusterProblem({
        message: `the shared memory "${settings.prefix}" already holds the stores ${taken.join(", ")}, which ${dir} holds too: stores are not merged (docs/scaling.md shows how to bring the graph over with export/import)`,
      })
    // The local state, whole (the log's tail replayed), read with the stores open on their file logs.
    const states = yield* Effect.gen(function* () {
      const router = yield* allOpened
      const states = new Map<string, ReadonlyArray<readonly [string, unknown]>>()
      for (const definition of domainStores) {
        if (!holding.includes(definition.name)) continue
        const entries = yield* router
          .store(definition)
          .read((view) => [...view.getRange(allKeys)].map(({ key, value }) => [key, value] as const))
        states.set(definition.name, entries)
      }
      return states
    }).pipe(Effect.scoped, Effect.provide(Layer.fresh(openStores(dir, "mnemos cluster join", Layer.empty))))
    yield* Console.log(
      `moving ${dir} into the shared memory "${settings.prefix}" on NATS ${settings.servers.join(", ")}`,
    )
    for (const [store, entries] of states) {
      const sent = yield* Effect.tryPromise({
        try: () => publishSnapshot(nats, store, entries, snapshotRecordType),
        catch: (error) =>
          new ClusterProblem({
            message: `could not move store "${store}" in (nothing of it stays in the shared memory, ${dir} is unchanged): ${error instanceof Error ? error.message : String(error)}`,
          }),
      })
      yield* Console.log(
        `  ${store.padEnd(14)} ${String(sent.entries).padStart(8)} keys in ${sent.messages} message(s)`,
      )
    }
    // The local copies go aside (the replica loads the same state back from the streams on its start).
    const aside = join(dir, `${preJoinCopyPrefix}${new Date().toISOString().replace(/[:.]/g, "-")}`)
    yield* Effect.try({
      try: () => {
        mkdirSync(aside, { recursive: true, mode: 0o700 })
        for (const name of ["stores", "search"])
          if (existsSync(join(dir, name))) renameSync(join(dir, name), join(aside, name))
      },
      catch: (error) =>
        new ClusterProblem({
          message: `the stores are in the shared memory, but ${dir}'s local copies could not be set aside in ${aside} (${error instanceof Error ? error.message : String(error)}): move ${dir}/stores and ${dir}/search there by hand, then write nothing else before \`mnemos cluster join\` again`,
        }),
    })
    writeMembership(dir, {
      prefix: settings.prefix,
      servers: settings.servers,
      daemonId: settings.daemonId,
      joinedAt: new Date().toISOString(),
    })
    yield* Console.log(
      `done: ${dir} is a replica of "${settings.prefix}" (this daemon: ${settings.daemonId}); the local stores are kept in ${aside} until its first start has loaded them from the shared memory; start it with mnemos serve`,
    )
  }, Effect.scoped),
).pipe(
  Command.withDescription("Move this data directory's memory into a shared memory on NATS JetStream (docs/scaling.md)"),
)

const leaveCommand = Command.make(
  "leave",
  {
    dataDir: dataDirFlag,
    offline: Flag.Boolean("offline").pipe(
      Flag.withDescription("NATS is unreachable: keep what this data directory last applied"),
      Flag.withDefault(false),
    ),
  },
  Effect.fn(function* ({ dataDir, offline }) {
    const location = resolveDataDir(Option.getOrUndefined(dataDir))
    const dir = location.path
    yield* mustBeStopped(dir)
    const membership = readMembership(dir)
    if (membership === undefined)
      return yield* new ClusterProblem({ message: `${dir} is not a replica of a shared memory` })
    const settings = settingsOf(resolveNats(noNatsFlags, dir), membership.daemonId)!
    if (!offline) {
      const { jetStreamLogs, Nats } = yield* Effect.promise(sharedModules)
      const logs = jetStreamLogs.pipe(Layer.provideMerge(Nats.layer(settings)))
      const positions = yield* Effect.gen(function* () {
        const router = yield* allOpened
        return router.health().map((store) => `${store.name} ${store.appliedSeq}`)
      }).pipe(
        Effect.scoped,
        Effect.provide(Layer.fresh(openStores(dir, "mnemos cluster leave", logs))),
        Effect.mapError(
          (error) =>
            new ClusterProblem({
              message: `could not catch up with "${membership.prefix}" (${String(error)}); \`mnemos cluster leave --offline\` keeps what ${dir} last applied`,
            }),
        ),
      )
      yield* Console.log(`caught up with "${membership.prefix}": ${positions.join(", ")}`)
    }
    removeMembership(dir)
    yield* Console.log(
      `done: ${dir} holds a local copy of "${membership.prefix}" and writes its own log from now on (start it without --nats)`,
    )
  }),
).pipe(Command.withDescription("Leave the shared memory, keeping a local copy of it (docs/scaling.md)"))

const statusCommand = Command.make(
  "status",
  { dataDir: dataDirFlag },
  Effect.fn(function* ({ dataDir }) {
    const location = resolveDataDir(Option.getOrUndefined(dataDir))
    const membership = readMembership(location.path)
    if (membership === undefined) yield* Console.log(`${location.path}: a local memory (not in a shared one)`)
    else
      yield* Console.log(
        `${location.path}: a replica of "${membership.prefix}" on NATS ${membership.servers.join(", ")} since ${membership.joinedAt} (this daemon: ${membership.daemonId}); \`mnemos doctor\` checks it`,
      )
  }),
).pipe(Command.withDescription("Say whether this data directory is a replica of a shared memory, and which"))

export const clusterCommand = Command.make("cluster").pipe(
  Command.withDescription("Move a memory into a shared one on NATS JetStream and out (join, leave, status)"),
  Command.withSubcommands([joinCommand, leaveCommand, statusCommand]),
)
