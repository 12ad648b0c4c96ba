/**
 * `mnemos serve`: run the engine on a data directory until SIGINT/SIGTERM.
 *
 * As a daemon (the default) it serves MCP over Streamable HTTP, SSE and WebSocket, and the REST
 * API, on `--host`:`--port` (127.0.0.1:7437). If that port already has a mnemos daemon for the
 * same data directory, it says so and exits 0; if anything else holds the port, it exits 1 with
 * a clear message. Binding beyond loopback requires the bearer token (generated into the data
 * directory). With `--stdio` the engine speaks MCP on stdin/stdout in this process instead
 * (embedded mode, one agent, no network); logs go to stderr only. Either way the data
 * directory's lock is held for the life of the process, and shutdown answers in-flight work and
 * flushes before exiting 0.
 */
import { resolve } from "node:path"
import { Console, Effect, Layer, Option, Schema } from "effect"
import { Command, Flag } from "effect/cli"
import * as Engine from "../Engine.ts"
import { resolveDataDir } from "../stores/DataDir.ts"
import { catalogue } from "../tools/Catalogue.ts"
import { defaultHost, defaultPort, ensureToken, ping, removeDaemonInfo, writeDaemonInfo } from "../transports/Daemon.ts"
import { isLoopback, startHttpServer } from "../transports/HttpServer.ts"
import { serveStdio } from "../transports/Stdio.ts"
import { versionLine } from "./BuildInfo.ts"
import { shutdownSignal } from "./Main.ts"

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
  Flag.withDescription(
    `Address to listen on (default ${defaultHost}); anything but loopback requires the bearer token`,
  ),
  Flag.withDefault(defaultHost),
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

const runDaemon = (dataDir: string, host: string, port: number) =>
  Effect.gen(function* () {
    const token = isLoopback(host) ? undefined : ensureToken(dataDir)
    const server = yield* startHttpServer({
      host,
      port,
      dataDir,
      tools: catalogue,
      ...(token !== undefined ? { token } : {}),
    }).pipe(
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
    writeDaemonInfo(dataDir, { pid: process.pid, host, port: server.port, startedAt: new Date().toISOString() })
    yield* Effect.addFinalizer(() => Effect.sync(() => removeDaemonInfo(dataDir)))
    const base = `http://${host.includes(":") ? `[${host}]` : host}:${server.port}`
    yield* Console.log(`mnemos daemon listening on ${base}`)
    yield* Console.log(`  dashboard:        ${base}/`)
    yield* Console.log(
      `  MCP (HTTP):       ${base}/mcp   (SSE: ${base}/sse, WebSocket: ${base.replace("http", "ws")}/ws)`,
    )
    if (token !== undefined) yield* Console.log(`  bearer token:     in ${dataDir}/token (required on every request)`)
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
  },
  Effect.fn(function* ({ dataDir, stdio, port, host }) {
    const location = resolveDataDir(Option.getOrUndefined(dataDir))
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
    })
    yield* Effect.gen(function* () {
      yield* Console.error(`mnemos ${versionLine()}`)
      yield* Console.error(`data directory: ${location.path} (from ${location.source})`)
      const reason = stdio
        ? yield* Effect.raceFirst(serveStdio({ tools: catalogue }).pipe(Effect.as("stdin closed")), shutdownSignal)
        : yield* runDaemon(location.path, host, port)
      yield* Console.error(`${reason}: shutting down (finishing in-flight writes, flushing)`)
    }).pipe(Effect.scoped, Effect.provide(Layer.fresh(engine)))
  }),
).pipe(Command.withDescription("Run the memory engine on a data directory until interrupted (daemon, or --stdio)"))
