/**
 * `mnemos serve` as a daemon (ServeRun.ts runs it): the HTTP server (MCP over Streamable HTTP, SSE
 * and WebSocket, the REST API, the dashboard), editor focus on UDP, `daemon.json` while it
 * listens, and the lines it prints at start; it returns when the process is asked to stop.
 */
import { resolve } from "node:path"
import { Console, Effect, Schema } from "effect"
import { keepActiveNvimFile } from "../editor/ActiveNvimFile.ts"
import { layerFromTelemetry } from "../editor/TelemetryFeeds.ts"
import type { catalogue } from "../tools/Catalogue.ts"
import { ensureToken, ping, removeDaemonInfo, writeDaemonInfo } from "../transports/Daemon.ts"
import { isLoopback, startHttpServer } from "../transports/HttpServer.ts"
import { makeTelemetry, Telemetry, telemetryResources } from "../transports/Telemetry.ts"
import { startUdpListener } from "../transports/Udp.ts"
import { shutdownSignal } from "./Main.ts"

/** The daemon could not start listening; the message says why. */
export class DaemonStartFailed extends Schema.TaggedError<DaemonStartFailed>()("DaemonStartFailed", {
  message: Schema.String,
}) {}

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

/**
 * Serves the engine on `host`:`port` (and UDP `udpPort`, whose focus keeps `activeNvimFile`
 * current) until SIGINT/SIGTERM; resolves with the signal.
 */
export const runDaemon = (
  dataDir: string,
  host: string,
  port: number,
  udpPort: number,
  tools: ReadonlyArray<(typeof catalogue)[number]>,
  activeNvimFile: string,
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
            return yield* new DaemonStartFailed({ message: `cannot listen on ${host}:${port}: ${error.message}` })
          const other = yield* Effect.promise(() => ping(host, port))
          const holder =
            other === undefined ? "another program" : `the mnemos daemon of ${other.dataDir} (pid ${other.pid})`
          return yield* new DaemonStartFailed({
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
    yield* keepActiveNvimFile(telemetry, activeNvimFile)
    writeDaemonInfo(dataDir, { pid: process.pid, host, port: server.port, startedAt: new Date().toISOString() })
    yield* Effect.addFinalizer(() => Effect.sync(() => removeDaemonInfo(dataDir)))
    const base = `http://${host.includes(":") ? `[${host}]` : host}:${server.port}`
    yield* Console.log(`mnemos daemon listening on ${base}`)
    yield* Console.log(`  dashboard:        ${base}/?token=${server.dashboardLoginToken()}   (one-time login link)`)
    yield* Console.log(
      `  MCP (HTTP):       ${base}/mcp   (SSE: ${base}/sse, WebSocket: ${base.replace("http", "ws")}/ws)`,
    )
    yield* Console.log(`  editor focus:     ${udp}   (terminal: POST ${base}/terminal/telemetry)`)
    yield* Console.log(`  active editor:    ${activeNvimFile}   (seed 002's active_nvim.txt)`)
    yield* Console.log(`  bearer token:     in ${dataDir}/token (required on every request but /ping)`)
    yield* Console.log(`MCP client configuration (stdio, through the daemon):\n${clientConfig(dataDir)}`)
    return yield* shutdownSignal
  })
