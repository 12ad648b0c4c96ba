/**
 * The daemon's one HTTP server: MCP over Streamable HTTP (`/mcp`), legacy SSE (`GET /sse` +
 * `POST /messages`) and WebSocket (`/ws`), plus `/ping` and the REST API.
 *
 * Owns the listening socket and the live MCP sessions (each in its own scope, closed when its
 * transport closes, when SessionTable.ts closes it — idle too long, or evicted to admit another
 * client — or when the server stops). It is thin: it checks who may talk (Host and Origin
 * against DNS rebinding; the data directory's bearer token on every route but `/ping`, on every
 * address — loopback is no boundary between the users of one machine), bounds every body and
 * frame (but the conversations import, which streams to disk: ConversationTransferApi.ts) and the
 * time its headers and body may take to arrive (HttpBodies.ts), and
 * hands MCP messages to sessions and REST calls (and terminal telemetry) to `RestApi`.
 * `/ping` answers before the search indexes are warm. The dashboard (`GET /`, `/api/*` behind its
 * session cookie or the bearer token, the `/events` live feed) is `DashboardServer`'s.
 */
import { randomUUID } from "node:crypto"
import {
  createServer,
  type IncomingMessage,
  type Server as NodeHttpServer,
  type ServerResponse,
  STATUS_CODES,
} from "node:http"
import { type AddressInfo, isIP } from "node:net"
import { isAbsolute } from "node:path"
// Loaded on first use: the SDK's SSE transport is for old clients only.
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import { type Context, Effect, Exit, Scope } from "effect"
import { WebSocketServer } from "ws"
import { buildInfo } from "../cli/BuildInfo.ts"
import { isInitializeRequest } from "../tools/McpServer.ts"
import { type SessionOptions, startSession } from "../tools/McpSession.ts"
import type { SessionServices } from "../tools/Tool.ts"
import { hasBearerToken, sameSecret } from "./BearerToken.ts"
import { makeConversationTransferApi } from "./ConversationTransferApi.ts"
import { makeDashboardServer } from "./DashboardServer.ts"
import { Drain } from "./DrainingTransport.ts"
import { guardBodyArrival, readJsonBody, sendJson, serverTimeouts } from "./HttpBodies.ts"
import { handleRest } from "./RestApi.ts"
import { reportActivity } from "./SessionActivity.ts"
import {
  makeSessionTable,
  type SessionHandle,
  type SessionKind,
  sessionIdleMs,
  sessionSweepMs,
  sessionsMax,
} from "./SessionTable.ts"
import { SseTransport } from "./SseTransport.ts"
import { StreamableHttpTransport } from "./StreamableHttpTransport.ts"
import type { Telemetry } from "./Telemetry.ts"
import { frameBytesHardMax, WebSocketTransport } from "./WebSocketTransport.ts"

/** What a client refused for want of a free session is told to wait before trying again (Retry-After). */
export const sessionRetryAfterSeconds = 5
/** How long shutdown waits for requests already received to be answered before closing connections. */
export const shutdownGraceMs = 10_000

/** Longest working directory a client may name (`x-mnemos-cwd`). */
export const workingDirBytesMax = 4096

/**
 * The working directory the shim sends with its connection (`x-mnemos-cwd`, URI-encoded): an
 * absolute path, or nothing. Used only to find git context, as a call's own `cwd` would be.
 */
export const workingDirOf = (req: IncomingMessage): string | undefined => {
  const header = req.headers["x-mnemos-cwd"]
  if (typeof header !== "string" || header.length > workingDirBytesMax * 3) return undefined
  try {
    const dir = decodeURIComponent(header)
    return isAbsolute(dir) && !dir.includes("\0") && Buffer.byteLength(dir) <= workingDirBytesMax ? dir : undefined
  } catch {
    return undefined
  }
}

/** How the server is set up. */
export interface HttpServerConfig {
  readonly host: string
  readonly port: number
  readonly dataDir: string
  /**
   * The data directory's bearer token: required on every request but `/ping` (the dashboard's
   * pages and login excepted; its API takes the session cookie, which this token keys, instead).
   */
  readonly token: string
  readonly tools: SessionOptions["tools"]
  /** Resources every session offers beside the knowledge graph. */
  readonly resources?: SessionOptions["resources"]
  /** Serves `POST /terminal/telemetry` and the telemetry counters of `/api/stats` when set. */
  readonly telemetry?: Telemetry["Service"]
}

/** A running server. */
export interface RunningHttpServer {
  readonly port: number
  readonly sessions: () => number
  /** A fresh single-use dashboard login token (`/?token=...`). */
  readonly dashboardLoginToken: () => string
  readonly close: () => Promise<void>
}

const loopbackHosts = new Set(["127.0.0.1", "localhost", "::1", "[::1]"])

/**
 * True for an address that only this machine can reach. Only IP literals count beyond the fixed
 * names: "127.0.0.1.evil.example" starts like one but is a DNS name an attacker controls.
 */
export const isLoopback = (host: string): boolean =>
  loopbackHosts.has(host) || (isIP(host) === 4 && host.startsWith("127."))

/** The host name of a Host header, lower-cased: host names are case-insensitive (RFC 3986 §3.2.2). */
const hostnameOf = (hostHeader: string): string => {
  const header = hostHeader.toLowerCase()
  if (header.startsWith("[")) return header.slice(0, header.indexOf("]") + 1)
  const colon = header.lastIndexOf(":")
  return colon === -1 ? header : header.slice(0, colon)
}

/** Starts the server; it stops when the scope closes (closing every session). */
export const startHttpServer = (
  config: HttpServerConfig,
): Effect.Effect<RunningHttpServer, Error, SessionServices | Scope.Scope> =>
  Effect.gen(function* () {
    const context: Context.Context<SessionServices> = yield* Effect.context<SessionServices>()
    const sessions = makeSessionTable()
    const streamable = new Map<
      string,
      { readonly transport: StreamableHttpTransport; readonly handle: SessionHandle }
    >()
    const sse = new Map<string, SseTransport>()
    const drain = new Drain()
    const dashboard = yield* makeDashboardServer({
      bearerToken: config.token,
      port: () => port(),
      tools: config.tools,
      readJsonBody,
      sendJson,
    })
    const conversationTransfers = makeConversationTransferApi({ dataDir: config.dataDir, context, sendJson })

    /**
     * Runs an MCP session on `transport` until it closes (or the table closes it: idle, evicted);
     * undefined when there is no room or the server is shutting down.
     */
    const host = (
      transport: Transport,
      kind: SessionKind,
      clientId?: string,
      workingDir?: string,
    ): Promise<SessionHandle | undefined> => {
      if (drain.draining || !sessions.makeRoom()) return Promise.resolve(undefined)
      const scope = Scope.makeUnsafe()
      const handle = sessions.add(kind, () => Effect.runPromise(Scope.close(scope, Exit.void)))
      if (handle === undefined) return Promise.resolve(undefined)
      const closeScope = () => {
        if (handle.remove()) Effect.runFork(Scope.close(scope, Exit.void))
      }
      return Effect.runPromiseWith(context)(
        startSession(drain.wrap(reportActivity(transport, handle)), {
          tools: config.tools,
          transport: kind,
          ...(clientId !== undefined ? { clientId } : {}),
          ...(workingDir !== undefined ? { workingDir } : {}),
          ...(config.resources !== undefined ? { resources: config.resources } : {}),
        }).pipe(Scope.provide(scope)),
      ).then(
        (server) => {
          const previous = server.onclose
          server.onclose = () => {
            previous?.()
            closeScope()
          }
          return handle
        },
        () => {
          closeScope()
          return undefined
        },
      )
    }
    /** Why a new session cannot be admitted, for the client that asked. */
    const noRoom = () =>
      drain.draining
        ? "the mnemos daemon is shutting down"
        : `too many sessions: all ${sessionsMax} MCP sessions of this daemon are busy (each has a request in flight or an open stream); try again later`
    const refuseSession = (res: ServerResponse) =>
      sendJson(res, 503, { error: noRoom() }, { "retry-after": String(sessionRetryAfterSeconds) })
    /** An exchange of a session with its client, open until `res` closes. */
    const exchange = (handle: SessionHandle, res: ServerResponse) => void res.once("close", handle.begin())

    const allowedHost = (req: IncomingMessage): boolean => {
      const header = req.headers.host
      if (header === undefined) return false
      const hostname = hostnameOf(header)
      return isLoopback(hostname) || hostname === config.host.toLowerCase()
    }
    const allowedOrigin = (req: IncomingMessage): boolean => {
      const origin = req.headers.origin
      if (origin === undefined) return true // not a browser
      try {
        const url = new URL(origin)
        return (isLoopback(url.hostname) || url.hostname === config.host) && Number(url.port || 80) === port()
      } catch {
        return false
      }
    }
    /** The bearer header, or (for WebSocket clients that cannot set headers) `?token=` on `/ws`. */
    const authorized = (req: IncomingMessage, queryToken?: string | null): boolean =>
      hasBearerToken(req, config.token) ||
      (queryToken !== undefined && queryToken !== null && sameSecret(queryToken, config.token))
    /** Refuses the request (and says why) unless it may proceed. */
    const refusal = (
      req: IncomingMessage,
      needsToken: boolean,
      queryToken?: string | null,
    ): [number, string] | undefined => {
      if (!allowedHost(req)) return [403, "Host header not allowed (DNS rebinding protection)"]
      if (!allowedOrigin(req)) return [403, "Origin not allowed"]
      if (needsToken && !authorized(req, queryToken))
        return [
          401,
          `a bearer token is required: send "Authorization: Bearer <token>", the token being the content of ${config.dataDir}/token`,
        ]
      return undefined
    }
    /** Refuses the request (and says why) unless it may proceed. */
    const admit = (req: IncomingMessage, res: ServerResponse, needsToken: boolean): boolean => {
      const refused = refusal(req, needsToken)
      if (refused === undefined) return true
      sendJson(res, refused[0], { error: refused[1] }, refused[0] === 401 ? { "www-authenticate": "Bearer" } : {})
      return false
    }

    const handleMcp = async (req: IncomingMessage, res: ServerResponse) => {
      const sessionId = req.headers["mcp-session-id"]
      const existing = typeof sessionId === "string" ? streamable.get(sessionId) : undefined
      if (existing !== undefined) {
        exchange(existing.handle, res)
        if (req.method !== "POST") return existing.transport.handleRequest(req, res)
        const body = await readJsonBody(req, res)
        if (body === undefined) return
        return existing.transport.handleRequest(req, res, body.value)
      }
      // The MCP spec: a session the server ended answers 404, and the client starts a new one.
      if (sessionId !== undefined)
        return sendJson(res, 404, {
          jsonrpc: "2.0",
          id: null,
          error: {
            code: -32001,
            message: `Session not found: it ended, was idle for ${sessionIdleMs / 60_000} minutes, or was closed to admit another client; send initialize without Mcp-Session-Id to start a new one`,
          },
        })
      if (req.method !== "POST")
        return sendJson(res, 400, {
          jsonrpc: "2.0",
          id: null,
          error: { code: -32000, message: "Bad Request: missing Mcp-Session-Id (send initialize first)" },
        })
      const body = await readJsonBody(req, res)
      if (body === undefined) return
      if (!isInitializeRequest(body.value))
        return sendJson(res, 400, {
          jsonrpc: "2.0",
          id: null,
          error: { code: -32000, message: "Bad Request: no valid session ID (send initialize first)" },
        })
      let handle: SessionHandle | undefined
      const transport: StreamableHttpTransport = new StreamableHttpTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => {
          if (handle !== undefined) streamable.set(id, { transport, handle })
        },
        onsessionclosed: (id) => void streamable.delete(id),
      })
      transport.onclose = () => {
        if (transport.sessionId !== undefined) streamable.delete(transport.sessionId)
      }
      handle = await host(transport, "streamable-http")
      if (handle === undefined) return refuseSession(res)
      exchange(handle, res)
      return transport.handleRequest(req, res, body.value)
    }

    const handleSse = async (req: IncomingMessage, res: ServerResponse, url: URL) => {
      if (req.method === "GET" && url.pathname === "/sse") {
        const transport = new SseTransport("/messages", res)
        sse.set(transport.sessionId, transport)
        transport.onclose = () => void sse.delete(transport.sessionId)
        if ((await host(transport, "sse")) !== undefined) return
        sse.delete(transport.sessionId)
        if (!res.headersSent) refuseSession(res)
        return
      }
      if (url.pathname !== "/messages" || req.method !== "POST")
        return sendJson(
          res,
          405,
          { error: "open the stream with GET /sse, and post messages to /messages" },
          { allow: url.pathname === "/sse" ? "GET" : "POST" },
        )
      const transport = sse.get(url.searchParams.get("sessionId") ?? "")
      if (transport === undefined) return sendJson(res, 404, { error: "unknown SSE session" })
      const body = await readJsonBody(req, res)
      if (body === undefined) return
      return transport.handlePost(req, res, body.value, body.bytes)
    }

    const server: NodeHttpServer = createServer(serverTimeouts, (req, res) => {
      guardBodyArrival(req, res)
      const url = new URL(req.url ?? "/", "http://localhost")
      const route = url.pathname
      const isApi = route.startsWith("/api/")
      const needsToken = route !== "/ping" && !isApi && !dashboard.isPublic(req, url)
      if (!admit(req, res, needsToken)) return
      if (isApi && !dashboard.mayUseApi(req))
        return sendJson(
          res,
          401,
          { error: "log in to the dashboard (mnemos dashboard) or send the bearer token of the data directory" },
          { "www-authenticate": "Bearer" },
        )
      const done = (promise: Promise<unknown> | undefined) =>
        void Promise.resolve(promise).catch((error: unknown) => {
          if (!res.headersSent) sendJson(res, 500, { error: error instanceof Error ? error.message : String(error) })
        })
      if (route === "/ping")
        return sendJson(res, 200, {
          status: "ok",
          service: "mnemos",
          version: buildInfo().version,
          dataDir: config.dataDir,
          pid: process.pid,
        })
      if (route === "/mcp") return done(handleMcp(req, res))
      if (route === "/sse" || route === "/messages") return done(handleSse(req, res, url))
      return done(
        dashboard.handle(req, res, url).then((handled) =>
          handled
            ? undefined
            : handleRest(req, res, url, {
                context,
                readJsonBody,
                sendJson,
                conversationTransfers,
                ...(config.telemetry !== undefined ? { telemetry: config.telemetry } : {}),
              }),
        ),
      )
    })

    const wss = new WebSocketServer({ noServer: true, maxPayload: frameBytesHardMax })
    server.on("upgrade", (req, socket, head) => {
      const url = new URL(req.url ?? "/", "http://localhost")
      const refuse = (status: number, message: string) => {
        const challenge = status === 401 ? "www-authenticate: Bearer\r\n" : ""
        socket.end(
          `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? "Refused"}\r\ncontent-type: text/plain\r\n${challenge}connection: close\r\n\r\n${message}\n`,
        )
      }
      if (url.pathname === "/events") {
        const refused = refusal(req, false) ?? (dashboard.mayUseApi(req) ? undefined : ([401, "Unauthorized"] as const))
        if (refused !== undefined) return refuse(refused[0], refused[1])
        return dashboard.upgrade(req, socket, head)
      }
      if (url.pathname !== "/ws") return refuse(404, "Not Found")
      const refused = refusal(req, true, url.searchParams.get("token"))
      if (refused !== undefined) return refuse(refused[0], refused[1])
      // Refused before the upgrade, so a client knows nothing it sends was taken (the upgrade and
      // `host` run in this same tick: the room made here is still free there).
      if (drain.draining || !sessions.makeRoom()) return refuse(503, noRoom())
      wss.handleUpgrade(req, socket, head, (ws) => {
        const transport = new WebSocketTransport(ws)
        const clientId = url.searchParams.get("client") ?? undefined
        const validClient = clientId !== undefined && /^[A-Za-z0-9_-]{8,128}$/.test(clientId) ? clientId : undefined
        void host(transport, "ws", validClient, workingDirOf(req)).then((handle) => {
          if (handle === undefined) ws.close(1013, "too many sessions")
        })
      })
    })

    yield* Effect.callback<void, Error>((resume) => {
      server.once("error", (error) => resume(Effect.fail(error)))
      server.listen(config.port, config.host, () => resume(Effect.void))
    })
    const port = () => (server.address() as AddressInfo).port
    const sweeper = setInterval(() => sessions.sweep(), sessionSweepMs)
    sweeper.unref()

    /**
     * Answers what was already received (within `shutdownGraceMs`), then closes everything. It
     * keeps listening while it drains: a Streamable HTTP client answers the server's own requests
     * (roots/list) with new POSTs, and an in-flight tool call may be waiting for one.
     */
    const close = async () => {
      await drain.drain(shutdownGraceMs)
      dashboard.close()
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()))
      clearInterval(sweeper)
      for (const client of wss.clients) client.close(1001, "the mnemos daemon is shutting down")
      await sessions.closeAll()
      for (const client of wss.clients) client.terminate()
      server.closeAllConnections()
      await stopped
    }
    yield* Effect.addFinalizer(() => Effect.promise(close))
    return {
      port: port(),
      sessions: sessions.size,
      dashboardLoginToken: dashboard.mintLoginToken,
      close,
    } satisfies RunningHttpServer
  })
