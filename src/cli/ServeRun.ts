/**
 * What `mnemos serve` runs (ServeCommand.ts holds its flags): the engine on a data directory, with
 * the daemon's transports or MCP on stdio, until SIGINT/SIGTERM or the end of stdin. Imported by
 * the command's handler only, so no other command loads the engine, the transports or the tools.
 */
import { resolve } from "node:path"
import { Console, Effect, Layer, Option, Schema } from "effect"
import * as Engine from "../Engine.ts"
import * as EditorServices from "../editor/EditorServices.ts"
import { layerFromTelemetry } from "../editor/TelemetryFeeds.ts"
import { encoderConfigOf } from "../search/EncoderLoader.ts"
import { resolveDataDir } from "../stores/DataDir.ts"
import { catalogue, defaultToolsets, toolsets as knownToolsets, selectTools } from "../tools/Catalogue.ts"
import { ensureToken, ping, removeDaemonInfo, writeDaemonInfo } from "../transports/Daemon.ts"
import { isLoopback, startHttpServer } from "../transports/HttpServer.ts"
import { serveStdio } from "../transports/Stdio.ts"
import { makeTelemetry, Telemetry, telemetryResources } from "../transports/Telemetry.ts"
import { startUdpListener } from "../transports/Udp.ts"
import { versionLine } from "./BuildInfo.ts"
import { shutdownSignal } from "./Main.ts"

/** The flags of `mnemos serve`, parsed. */
export interface ServeOptions {
  readonly dataDir: Option.Option<string>
  readonly stdio: boolean
  readonly port: number
  readonly host: string
  readonly udpPort: Option.Option<number>
  readonly toolsets: Option.Option<string>
  readonly nvim: Option.Option<string>
  readonly nvimAllowLua: boolean
  readonly model: Option.Option<string>
}

/** The daemon could not start. */
export class ServeFailed extends Schema.TaggedError<ServeFailed>()("ServeFailed", { message: Schema.String }) {}

/** The MCP client configuration that reaches this data directory through the stdio shim. */
export const clientConfig = (dataDir: string): string =>
  JSON.stringify(
    {
      mcpServers: {
        mnemos: {
          command: process.execPath,
          args: [...process.execArgv, resolve(process.argv[1] ?? "mnemos"), "mcp", "--data-dir", dataDir],
        },
      },
    },
    null,
    2,
  )

/** The loopback address UDP binds: the daemon's own when that is loopback, else 127.0.0.1. */
const udpHostFor = (host: string) =>
  isLoopback(host) && host !== "localhost" ? host.replace(/^\[|\]$/g, "") : "127.0.0.1"

/** The embedding model of `--model` or $MNEMOS_MODEL (the built-in one without either). */
const modelOf = (flag: Option.Option<string>) => {
  const dir = Option.getOrUndefined(flag) ?? process.env.MNEMOS_MODEL
  if (dir === undefined || dir === "") return Effect.succeed(undefined)
  return Effect.try({
    try: () => encoderConfigOf(resolve(dir)),
    catch: (error) => new ServeFailed({ message: error instanceof Error ? error.message : String(error) }),
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

const runDaemon = (
  dataDir: string,
  host: string,
  port: number,
  udpPort: number,
  tools: ReadonlyArray<(typeof catalogue)[number]> = catalogue,
) =>
  Effect.gen(function* () {
    // The data directory's token guards the dashboard's API everywhere, and everything beyond loopback.
    const apiToken = ensureToken(dataDir)
    const token = isLoopback(host) ? undefined : apiToken
    const telemetry = yield* makeTelemetry
    const server = yield* startHttpServer({
      host,
      port,
      dataDir,
      tools,
      resources: telemetryResources(telemetry),
      telemetry,
      apiToken,
      ...(token !== undefined ? { token } : {}),
    }).pipe(
      Effect.provide(layerFromTelemetry(telemetry)),
      Effect.catch((error) =>
        Effect.gen(function* () {
          if ((error as NodeJS.ErrnoException).code !== "EADDRINUSE")
            return yield* new ServeFailed({ message: `cannot listen on ${host}:${port}: ${error.message}` })
          const other = yield* Effect.promise(() => ping(host, port))
          const holder =
            other === undefined ? "another program" : `the mnemos daemon of ${other.dataDir} (pid ${other.pid})`
          return yield* new ServeFailed({
            message: `port ${port} on ${host} is in use by ${holder}; choose another with --port`,
          })
        }),
      ),
    )
    const udpHost = udpHostFor(host)
    const udp = yield* startUdpListener({ host: udpHost, port: udpPort }).pipe(
      Effect.provideService(Telemetry, telemetry),
      Effect.map((listener) => `udp://${udpHost}:${listener.port}`),
      Effect.catch((error) => Effect.succeed(`disabled (cannot bind ${udpHost}:${udpPort}: ${error.message})`)),
    )
    writeDaemonInfo(dataDir, { pid: process.pid, host, port: server.port, startedAt: new Date().toISOString() })
    yield* Effect.addFinalizer(() => Effect.sync(() => removeDaemonInfo(dataDir)))
    const base = `http://${host.includes(":") ? `[${host}]` : host}:${server.port}`
    yield* Console.log(`mnemos daemon listening on ${base}`)
    yield* Console.log(`  dashboard:        ${base}/?token=${server.dashboardLoginToken()}   (one-time login link)`)
    yield* Console.log(
      `  MCP (HTTP):       ${base}/mcp   (SSE: ${base}/sse, WebSocket: ${base.replace("http", "ws")}/ws)`,
    )
    yield* Console.log(`  editor focus:     ${udp}   (terminal: POST ${base}/terminal/telemetry)`)
    if (token !== undefined) yield* Console.log(`  bearer token:     in ${dataDir}/token (required on every request)`)
    yield* Console.log(`MCP client configuration (stdio, through the daemon):\n${clientConfig(dataDir)}`)
    return yield* shutdownSignal
  })

/** Runs `mnemos serve` until it is stopped. */
export const serve = Effect.fn(function* ({
  dataDir,
  stdio,
  port,
  host,
  udpPort,
  toolsets,
  nvim,
  nvimAllowLua,
  model,
}: ServeOptions) {
  const location = resolveDataDir(Option.getOrUndefined(dataDir))
  const tools = yield* toolsOf(toolsets)
  const encoder = yield* modelOf(model)
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
    ...(encoder === undefined ? {} : { search: { model: encoder } }),
  })
  yield* Effect.gen(function* () {
    yield* Console.error(`mnemos ${versionLine()}`)
    yield* Console.error(`data directory: ${location.path} (from ${location.source})`)
    const reason = stdio
      ? yield* Effect.raceFirst(serveStdio({ tools }).pipe(Effect.as("stdin closed")), shutdownSignal)
      : yield* runDaemon(
          location.path,
          host,
          port,
          Option.getOrElse(udpPort, () => port + 1),
          tools,
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
