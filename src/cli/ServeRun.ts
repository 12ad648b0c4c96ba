/**
 * What `mnemos serve` runs (ServeCommand.ts holds its flags): the engine on a data directory, with
 * the daemon's transports or MCP on stdio, until SIGINT/SIGTERM or the end of stdin. Imported by
 * the command's handler only, so no other command loads the engine, the transports or the tools.
 */
import { resolve } from "node:path"
import { Console, Effect, Layer, Option, Schema } from "effect"
import * as Engine from "../Engine.ts"
import { resolveActiveNvimFile } from "../editor/ActiveNvimFile.ts"
import * as EditorServices from "../editor/EditorServices.ts"
import { boundHeapGrowth } from "../runtime/HeapGrowth.ts"
import { startIdleCollection } from "../runtime/IdleHeap.ts"
import { runNodeThreadsInBatchSoon } from "../runtime/ThreadPolicy.ts"
import { holdYoungGeneration } from "../runtime/YoungGeneration.ts"
import { encoderConfigOf } from "../search/embedding/EncoderLoader.ts"
import { chosenModel, modelDirOf } from "../search/embedding/ModelFolder.ts"
import { resolveDataDir } from "../stores/datadir/DataDir.ts"
import { defaultToolsets, toolsets as knownToolsets, selectTools } from "../tools/Catalogue.ts"
import { ping } from "../transports/Daemon.ts"
import { versionLine } from "./BuildInfo.ts"
import { shutdownSignal } from "./Main.ts"
import { type NatsFlags, recordMembership, sharedMemoryFor } from "./NatsFlags.ts"

/** The flags of `mnemos serve`, parsed. */
export interface ServeOptions extends NatsFlags {
  readonly dataDir: Option.Option<string>
  readonly stdio: boolean
  readonly port: number
  readonly host: string
  readonly udpPort: Option.Option<number>
  readonly activeNvimFile: Option.Option<string>
  readonly toolsets: Option.Option<string>
  readonly nvim: Option.Option<string>
  readonly nvimAllowLua: boolean
  readonly model: Option.Option<string>
}

/** `mnemos serve` cannot start as asked (an unknown toolset, a directory without a model). */
export class ServeFailed extends Schema.TaggedError<ServeFailed>()("ServeFailed", { message: Schema.String }) {}

/**
 * The embedding model: `--model DIR`, else $MNEMOS_MODEL, else the one `mnemos model use` chose in
 * the data directory's models folder, else the built-in one.
 */
const modelOf = (flag: Option.Option<string>, dataDir: string) => {
  const dir = Option.getOrUndefined(flag) ?? process.env.MNEMOS_MODEL
  const chosen = dir === undefined || dir === "" ? chosenModel(dataDir) : undefined
  if ((dir === undefined || dir === "") && chosen === undefined) return Effect.succeed(undefined)
  return Effect.try({
    try: () => encoderConfigOf(chosen !== undefined ? modelDirOf(dataDir, chosen) : resolve(dir!)),
    catch: (error) =>
      new ServeFailed({
        message: `${error instanceof Error ? error.message : String(error)}${chosen !== undefined ? ` (the model chosen with \`mnemos model use ${chosen}\`; pull it again, or \`mnemos model use builtin\`)` : ""}`,
      }),
  })
}

/** The tools of `--toolsets` (the default set without it); unknown names are refused. */
const toolsOf = (flag: Option.Option<string>) => {
  const names = Option.match(flag, {
    onNone: () => defaultToolsets,
    onSome: (text) => {
      const listed = text
        .split(",")
        .map((name) => name.trim())
        .filter((name) => name !== "")
      return listed.includes("all") ? knownToolsets : listed
    },
  })
  const { tools, unknown } = selectTools(names)
  if (unknown.length > 0)
    return Effect.fail(
      new ServeFailed({ message: `unknown toolset(s) ${unknown.join(", ")}; known: ${knownToolsets.join(", ")}` }),
    )
  if (tools.length === 0) return Effect.fail(new ServeFailed({ message: "--toolsets names no toolset" }))
  return Effect.succeed(tools)
}

/**
 * How long after its start a daemon with a small search index (on its main thread) loads it: after
 * a client's first exchanges (initialize, the lists, usually a first call), whose answers waited 40
 * ms behind the load on Node 22 at 1,000 entities (docs/benchmarks.md, footprint).
 */
export const searchWarmUpAfterMs = 250

/** Runs `mnemos serve` until it is stopped. */
export const serve = Effect.fn(function* ({
  dataDir,
  stdio,
  port,
  host,
  udpPort,
  activeNvimFile,
  toolsets,
  nvim,
  nvimAllowLua,
  model,
  ...natsFlags
}: ServeOptions) {
  // Before anything starts a thread: the ones there now are Node's own (V8's helpers among them)
  // and libuv's pool, which soon no longer take the CPU from the main thread when they wake
  // (ThreadPolicy.ts).
  runNodeThreadsInBatchSoon()
  const location = resolveDataDir(Option.getOrUndefined(dataDir))
  const tools = yield* toolsOf(toolsets)
  const encoder = yield* modelOf(model, location.path)
  const shared = yield* sharedMemoryFor(natsFlags, location.path)
  const nats = shared?.settings
  if (!stdio) {
    const running = yield* Effect.promise(() => ping(host, port))
    if (running !== undefined && running.dataDir === location.path) {
      yield* Console.log(`a mnemos daemon (pid ${running.pid}) already serves ${location.path} on ${host}:${port}`)
      return
    }
  }
  const engine = Engine.layer({
    dataDir: location.path,
    command: stdio ? "mnemos serve --stdio" : `mnemos serve --port ${port}`,
    search: { mainThreadWarmUpAfterMs: searchWarmUpAfterMs, ...(encoder === undefined ? {} : { model: encoder }) },
    ...(nats === undefined ? {} : { nats }),
  })
  // Every heap of the daemon grows to at most 1.5× what its last full collection kept (HeapGrowth.ts),
  // and its young generation stays at the size it has (YoungGeneration.ts).
  yield* Effect.sync(() => {
    boundHeapGrowth()
    holdYoungGeneration(true)
  })
  yield* Effect.gen(function* () {
    // The heap a quiet daemon no longer uses is given back (IdleHeap.ts).
    yield* Effect.acquireRelease(Effect.sync(startIdleCollection), (stop) => Effect.sync(stop))
    yield* Console.error(`mnemos ${versionLine()}`)
    yield* Console.error(`data directory: ${location.path} (from ${location.source})`)
    if (shared !== undefined) {
      // The stores opened in the shared memory (the engine is up): this data directory is a replica now.
      if (shared.joining) recordMembership(location.path, shared.settings)
      yield* Console.error(
        `shared memory "${shared.settings.prefix}" on NATS ${shared.settings.servers.join(", ")} (this daemon: ${shared.settings.daemonId})`,
      )
    }
    // Each mode loads only its own transports: stdio needs no HTTP server, a daemon no stdio session.
    const reason = stdio
      ? yield* Effect.flatMap(
          Effect.promise(() => import("../transports/Stdio.ts")),
          ({ serveStdio }) => Effect.raceFirst(serveStdio({ tools }).pipe(Effect.as("stdin closed")), shutdownSignal),
        )
      : yield* Effect.flatMap(
          Effect.promise(() => import("./DaemonRun.ts")),
          ({ runDaemon }) =>
            runDaemon(
              location.path,
              host,
              port,
              Option.getOrElse(udpPort, () => port + 1),
              tools,
              resolveActiveNvimFile(Option.getOrUndefined(activeNvimFile), location.path).path,
            ),
        )
    yield* Console.error(`${reason}: shutting down (finishing in-flight writes, flushing)`)
  }).pipe(
    Effect.scoped,
    Effect.provide(Layer.fresh(engine)),
    Effect.provide(
      EditorServices.layer({ dataDir: location.path, nvim: Option.getOrUndefined(nvim), allowLua: nvimAllowLua }),
    ),
  )
})
