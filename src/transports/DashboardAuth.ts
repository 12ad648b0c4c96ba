/**
 * Who may use the dashboard: one-time login tokens that become a session cookie.
 *
 * The daemon mints a login token at start (printed in the dashboard URL) and whenever
 * `mnemos dashboard` asks for one (`POST /api/dashboard/token`, bearer only). A login token is
 * random, lives `loginTokenTtlMs`, and works once: `GET /?token=` trades it for the session
 * cookie and forgets it. At most `loginTokensMax` are outstanding; minting more drops the oldest.
 *
 * The session cookie needs no server state: it is `v1.<expiresAt>.<nonce>.<mac>`, the MAC an
 * HMAC-SHA256 of the port and the rest, keyed by the data directory's bearer token. So it survives
 * a daemon restart on the same port (the page reconnects without a new login) and dies when the
 * token file is replaced. The cookie is HttpOnly and SameSite=Strict, and its name carries the
 * port: browsers do not separate cookies by port, and two daemons on one machine must neither
 * overwrite nor accept each other's sessions.
 */
import { createHmac, randomBytes } from "node:crypto"
import type { IncomingMessage } from "node:http"
import { hasBearerToken, sameSecret } from "./BearerToken.ts"

/** How long a login token stays usable. */
export const loginTokenTtlMs = 60 * 60 * 1000
/** Most login tokens outstanding at once. */
export const loginTokensMax = 64
/** How long a dashboard session lasts. */
export const sessionTtlMs = 30 * 24 * 60 * 60 * 1000
/** Longest cookie header examined. */
const cookieHeaderCharsMax = 8192

/** The dashboard's credentials. */
export interface DashboardAuth {
  /** A fresh single-use login token. */
  readonly mintLoginToken: () => string
  /** Uses up a login token; true when it was valid. */
  readonly redeemLoginToken: (token: string) => boolean
  /** The `Set-Cookie` value of a fresh session. */
  readonly sessionCookie: () => string
  /** True when the request carries a valid session cookie. */
  readonly hasSession: (req: IncomingMessage) => boolean
  /** True when the request carries the data directory's bearer token. */
  readonly hasBearer: (req: IncomingMessage) => boolean
}

/** The value of cookie `name` in a Cookie header. */
export const cookieValue = (header: string | undefined, name: string): string | undefined => {
  if (header === undefined || header.length > cookieHeaderCharsMax) return undefined
  for (const part of header.split(";")) {
    const eq = part.indexOf("=")
    if (eq !== -1 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim()
  }
  return undefined
}

/** The session cookie's name for a daemon on `port`. */
export const sessionCookieName = (port: number): string => `mnemos_dashboard_${port}`

/** Makes the dashboard's credentials from the bearer token; `port` names the cookie. */
export const makeDashboardAuth = (bearerToken: string, port: () => number, now = Date.now): DashboardAuth => {
  const loginTokens = new Map<string, number>()
  // The port is part of what is signed: a session of one daemon is no session of another.
  const mac = (payload: string) => createHmac("sha256", bearerToken).update(`${port()}.${payload}`).digest("base64url")

  const prune = () => {
    const time = now()
    for (const [token, expiresAt] of loginTokens) if (expiresAt <= time) loginTokens.delete(token)
    while (loginTokens.size >= loginTokensMax) loginTokens.delete(loginTokens.keys().next().value!)
  }

  return {
    mintLoginToken: () => {
      prune()
      const token = randomBytes(24).toString("base64url")
      loginTokens.set(token, now() + loginTokenTtlMs)
      return token
    },
    redeemLoginToken: (token) => {
      const expiresAt = loginTokens.get(token)
      if (expiresAt === undefined) return false
      loginTokens.delete(token)
      return expiresAt > now()
    },
    sessionCookie: () => {
      const payload = `v1.${now() + sessionTtlMs}.${randomBytes(12).toString("base64url")}`
      return `${sessionCookieName(port())}=${payload}.${mac(payload)}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${Math.floor(sessionTtlMs / 1000)}`
    },
    hasSession: (req) => {
      const value = cookieValue(req.headers.cookie, sessionCookieName(port()))
      if (value === undefined) return false
      const parts = value.split(".")
      if (parts.length !== 4 || parts[0] !== "v1") return false
      const payload = parts.slice(0, 3).join(".")
      return sameSecret(parts[3]!, mac(payload)) && Number(parts[1]) > now()
    },
    hasBearer: (req) => hasBearerToken(req, bearerToken),
  }
}
