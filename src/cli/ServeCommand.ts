/**
 * `mnemos serve`: run the engine on a data directory until SIGINT/SIGTERM.
 *
 * As a daemon (the default) it serves MCP over Streamable HTTP, SSE and WebSocket, and the REST
 * API, on `--host`:`--port` (127.0.0.1:7437). If that port already has a mnemos daemon for the
 * same data directory, it says so and exits 0; if anything else holds the port, it exits 1 with
 * a clear message. Every request but `/ping` needs the data directory's bearer token (generated
 * into it, mode 0600), on loopback too: any local user can reach loopback, so only whoever can
 * read the data directory may talk to its daemon (the dashboard logs in with a cookie it keys).
 * It prints a one-time login
 * link to the dashboard (`mnemos dashboard` mints more). Editor focus datagrams are read on loopback UDP `--udp-port` (default: the HTTP
 * port + 1); if that port is taken the daemon says so and runs without them. With `--stdio` the
 * engine speaks MCP on stdin/stdout in this process instead (embedded mode, one agent, no
 * network); logs go to stderr only. Either way the data
 * directory's lock is held for the life of the process, and shutdown answers in-flight work and
 * flushes before exiting 0.
 */
import { resolve } from "node:path"
import { Console, Effect, Layer, Option, Schema } from "effect"
import { Command, Flag } from "effect/cli"
import * as Engine from "../Engine.ts"
import * as EditorServices from "../editor/EditorServices.ts"
import { layerFromTelemetry } from "../editor/TelemetryFeeds.ts"
import { encoderConfigOf } from "../search/EncoderLoader.ts"
import { resolveDataDir } from "../stores/DataDir.ts"
import { catalogue, defaultToolsets, toolsets as knownToolsets, selectTools } from "../tools/Catalogue.ts"
import { defaultHost, defaultPort, ensureToken, ping, removeDaemonInfo, writeDaemonInfo } from "../transports/Daemon.ts"
import { isLoopback, startHttpServer } from "../transports/HttpServer.ts"
import { serveStdio } from "../transports/Stdio.ts"
import { makeTelemetry, Telemetry, telemetryResources } from "../transports/Telemetry.ts"
import { startUdpListener } from "../transports/Udp.ts"
import { versionLine } from "./BuildInfo.ts"
import { shutdownSignal } from "./Main.ts"
import {
  natsCredsFlag,
  natsFlag,
  natsPrefixFlag,
  natsReplicasFlag,
  recordMembership,
  sharedMemoryFor,
} from "./NatsFlags.ts"

/** `--data-dir`, shared by every command that opens a data directory. */
export const dataDirFlag = Flag.String("data-dir").pipe(
  Flag.withDescription(
    "Data directory (default: $MNEMOS_DATA_DIR, else $XDG_DATA_HOME/mnemos, else ~/.local/share/mnemos)",
  ),
  Flag.optional,
)
/** `--port` of the daemon. */
export const portFlag = Flag.Int("port").pipe(
  Flag.withDescription(`HTTP port of the daemon (default ${defaultPort})`),
  Flag.withDefault(defaultPort),
)
/** `--host` of the daemon. */
export const hostFlag = Flag.String("host").pipe(
  Flag.withDescription(`Address to listen on (default ${defaultHost}); every request but /ping needs the bearer token`),
  Flag.withDefault(defaultHost),
)

/** `--udp-port` of the editor focus listener. */
export const udpPortFlag = Flag.Int("udp-port").pipe(
  Flag.withDescription("Loopback UDP port for editor focus datagrams (default: the HTTP port + 1)"),
  Flag.optional,
)

/** `--nvim`: the Neovim instance the editor tools talk to. */
export const nvimFlag = Flag.String("nvim").pipe(
  Flag.withDescription(
    "Neovim RPC address (socket path or host:port) for the nvim_* tools (default: $NVIM, else the last focused Neovim)",
  ),
  Flag.optional,
)
/** `--nvim-allow-lua`: let agents run Lua in Neovim (audited). */
export const nvimAllowLuaFlag = Flag.Boolean("nvim-allow-lua").pipe(
  Flag.withDescription(
    "Enable nvim_execute_lua (arbitrary Lua in the editor; every call audited to nvim-lua-audit.jsonl)",
  ),
  Flag.withDefault(false),
)

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

/** `--toolsets`: which toolsets `tools/list` shows. */
/** `--model DIR`: a local sentence model to embed with instead of the built-in GloVe model. */
export const modelFlag = Flag.String("model").pipe(
  Flag.withDescription(
    "A local sentence model directory to embed with (model.onnx + tokenizer.json, e.g. all-MiniLM-L6-v2); default: the built-in GloVe model, or $MNEMOS_MODEL",
  ),
  Flag.optional,
)

/** The embedding model of `--model` or $MNEMOS_MODEL (the built-in one without either). */
const modelOf = (flag: Option.Option<string>) => {
  const dir = Option.getOrUndefined(flag) ?? process.env.MNEMOS_MODEL
  if (dir === undefined || dir === "") return Effect.succeed(undefined)
  return Effect.try({
    try: () => encoderConfigOf(resolve(dir)),
    catch: (error) => new ServeFailed({ message: error instanceof Error ? error.message : String(error) }),
  })
}

export const toolsetsFlag = Flag.String("toolsets").pipe(
  Flag.withDescription(
    `Comma-separated toolsets to offer (${knownToolsets.join(", ")}; "all"); default: ${defaultToolsets.join(",")}`,
  ),
  Flag.optional,
)

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
    // The data directory's token guards every route but /ping, on every address.
    const token = ensureToken(dataDir)
    const telemetry = yield* makeTelemetry
    const server = yield* startHttpServer({
      host,
      port,
      dataDir,
      tools,
      resources: telemetryResources(telemetry),
      telemetry,
      token,
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
    yield* Console.log(`  bearer token:     in ${dataDir}/token (required on every request but /ping)`)
    yield* Console.log(`MCP client configuration (stdio, through the daemon):\n${clientConfig(dataDir)}`)
    return yield* shutdownSignal
  })

export const serveCommand = Command.make(
  "serve",
  {
    dataDir: dataDirFlag,
    stdio: Flag.Boolean("stdio").pipe(
      Flag.withDescription("Speak MCP on stdin/stdout in this process (embedded mode)"),
      Flag.withDefault(false),
    ),
    port: portFlag,
    host: hostFlag,
    udpPort: udpPortFlag,
    toolsets: toolsetsFlag,
    nvim: nvimFlag,
    nvimAllowLua: nvimAllowLuaFlag,
    model: modelFlag,
    nats: natsFlag,
    natsPrefix: natsPrefixFlag,
    natsReplicas: natsReplicasFlag,
    natsCreds: natsCredsFlag,
  },
  Effect.fn(function* ({ dataDir, stdio, port, host, udpPort, toolsets, nvim, nvimAllowLua, model, ...natsFlags }) {
    const location = resolveDataDir(Option.getOrUndefined(dataDir))
    const tools = yield* toolsOf(toolsets)
    const encoder = yield* modelOf(model)
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
      ...(encoder === undefined ? {} : { search: { model: encoder } }),
      ...(nats === undefined ? {} : { nats }),
    })
    yield* Effect.gen(function* () {
      yield* Console.error(`mnemos ${versionLine()}`)
      yield* Console.error(`data directory: ${location.path} (from ${location.source})`)
      if (shared !== undefined) {
        // The stores opened in the shared memory (the engine is up): this data directory is a replica now.
        if (shared.joining) recordMembership(location.path, shared.settings)
        yield* Console.error(
          `shared memory "${shared.settings.prefix}" on NATS ${shared.settings.servers.join(", ")} (this daemon: ${shared.settings.daemonId})`,
        )
      }
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
  }),
).pipe(Command.withDescription("Run the memory engine on a data directory until interrupted (daemon, or --stdio)"))
