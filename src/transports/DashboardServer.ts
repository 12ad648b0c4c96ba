/**
 * The dashboard inside the daemon's HTTP server: the single-page app at `GET /`, the login that
 * turns a one-time token into a session cookie, the `/events` WebSocket of committed events, the
 * dashboard's own endpoints, and the view reads of `DashboardApi.ts`.
 *
 *   GET  /?token=T                 redeems a login token: sets the session cookie, 303 to `/`
 *                                  (an unknown or used token: 303 to `/?login=expired`)
 *   GET  /, /assets/*              the app (no login needed: it holds no data)
 *   GET  /api/dashboard/session    200 when the caller may use the API (the page's login probe)
 *   POST /api/dashboard/token      a fresh login token (bearer token only: `mnemos dashboard`)
 *   GET  /api/dashboard/metrics    write rate per second, search latencies, open pages
 *   GET  /events (WebSocket)       the live feed (see DashboardEvents.ts)
 *
 * Everything under `/api/` and `/events` needs the session cookie or the data directory's bearer
 * token, on loopback too: a page on another site cannot read memory through the browser (Origin
 * and Host are checked by the server before anything here runs).
 */
import type { IncomingMessage, ServerResponse } from "node:http"
import type { Duplex } from "node:stream"
import { type Context, Effect, type Scope } from "effect"
import type { SessionServices, Tool } from "../tools/Tool.ts"
import { handleDashboardApi } from "./DashboardApi.ts"
import { makeDashboardAssets, pageSecurityHeaders } from "./DashboardAssets.ts"
import { makeDashboardAuth } from "./DashboardAuth.ts"
import { makeDashboardEvents } from "./DashboardEvents.ts"

/** Search durations kept for the Stats view. */
export const searchSamplesMax = 500

/** How the dashboard is set up. */
export interface DashboardConfig {
  /** The data directory's bearer token: it keys the session cookies and is accepted beside them. */
  readonly bearerToken: string
  /** The port the server listens on (names the cookie). */
  readonly port: () => number
  readonly tools: ReadonlyArray<Tool<never, SessionServices>>
  readonly readJsonBody: (
    req: IncomingMessage,
    res: ServerResponse,
    bytesMax?: number,
  ) => Promise<{ value: unknown } | undefined>
  readonly sendJson: (res: ServerResponse, status: number, body: unknown) => void
}

/** The dashboard, as the HTTP server uses it. */
export interface DashboardServer {
  /** A fresh single-use login token (printed by `mnemos serve` in the dashboard URL). */
  readonly mintLoginToken: () => string
  /** True for the app's own files and the login: served without credentials. */
  readonly isPublic: (req: IncomingMessage, url: URL) => boolean
  /** True when the request may use `/api/*` and `/events`. */
  readonly mayUseApi: (req: IncomingMessage) => boolean
  /** Answers a dashboard route; false when `url` is not one (the REST API takes it). */
  readonly handle: (req: IncomingMessage, res: ServerResponse, url: URL) => Promise<boolean>
  /** Takes over the upgrade of `/events` (credentials already checked). */
  readonly upgrade: (req: IncomingMessage, socket: Duplex, head: Buffer) => void
  readonly close: () => void
}

const isAssetPath = (pathname: string) =>
  pathname === "/" || pathname === "/index.html" || pathname === "/favicon.svg" || pathname.startsWith("/assets/")

/** Starts the dashboard's live feed; everything stops when the scope closes. */
export const makeDashboardServer = (
  config: DashboardConfig,
): Effect.Effect<DashboardServer, never, SessionServices | Scope.Scope> =>
  Effect.gen(function* () {
    const context: Context.Context<SessionServices> = yield* Effect.context<SessionServices>()
    const auth = makeDashboardAuth(config.bearerToken, config.port)
    const assets = makeDashboardAssets()
    const events = yield* makeDashboardEvents
    const searches: Array<{ readonly at: number; readonly ms: number }> = []

    const redirect = (res: ServerResponse, location: string, headers: Record<string, string> = {}) => {
      res.writeHead(303, { location, "cache-control": "no-store", ...pageSecurityHeaders, ...headers })
      res.end()
    }
    const login = (req: IncomingMessage, res: ServerResponse, token: string) => {
      if (auth.redeemLoginToken(token)) return redirect(res, "/", { "set-cookie": auth.sessionCookie() })
      // A used link opened again by someone already logged in is harmless: just go in.
      return redirect(res, auth.hasSession(req) ? "/" : "/?login=expired")
    }
    const metrics = () => {
      const now = Date.now()
      const recent = searches.filter((sample) => sample.at > now - 10 * 60_000).map((sample) => sample.ms)
      const sorted = [...recent].sort((a, b) => a - b)
      const quantile = (q: number) =>
        sorted.length === 0 ? null : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
      return {
        at: now,
        writes: events.rates(),
        search: { count: recent.length, p50Ms: quantile(0.5), p95Ms: quantile(0.95), recentMs: recent.slice(-60) },
        pagesOpen: events.clients(),
        process: { uptimeSeconds: Math.round(process.uptime()), rssBytes: process.memoryUsage.rss() },
      }
    }

    const handle = async (req: IncomingMessage, res: ServerResponse, url: URL): Promise<boolean> => {
      const path = url.pathname
      if (req.method === "GET" && path === "/" && url.searchParams.has("token")) {
        login(req, res, url.searchParams.get("token") ?? "")
        return true
      }
      if (isAssetPath(path)) return assets.serve(req, res, path)
      switch (path) {
        case "/api/dashboard/session":
          config.sendJson(res, 200, { ok: true, port: config.port(), via: auth.hasSession(req) ? "cookie" : "bearer" })
          return true
        case "/api/dashboard/token":
          if (req.method !== "POST") config.sendJson(res, 405, { error: "POST to mint a login token" })
          else if (!auth.hasBearer(req))
            config.sendJson(res, 403, { error: "minting a login token needs the bearer token" })
          else {
            const token = auth.mintLoginToken()
            config.sendJson(res, 200, { token, path: `/?token=${token}` })
          }
          return true
        case "/api/dashboard/metrics":
          config.sendJson(res, 200, metrics())
          return true
      }
      return handleDashboardApi(req, res, url, {
        context,
        tools: config.tools,
        readJsonBody: config.readJsonBody,
        sendJson: config.sendJson,
        searched: (ms) => {
          searches.push({ at: Date.now(), ms })
          if (searches.length > searchSamplesMax) searches.shift()
        },
      })
    }

    return {
      mintLoginToken: auth.mintLoginToken,
      isPublic: (req, url) => (req.method === "GET" || req.method === "HEAD") && isAssetPath(url.pathname),
      mayUseApi: (req) => auth.hasSession(req) || auth.hasBearer(req),
      handle,
      upgrade: (req, socket, head) =>
        events.webSocketServer.handleUpgrade(req, socket, head, (ws) => events.attach(ws)),
      close: events.close,
    }
  })
