/**
 * The data directory's bearer token on the wire: `Authorization: Bearer <token>`, the scheme in
 * any case (auth schemes are case-insensitive, RFC 9110 §11.1), compared in constant time.
 * Every endpoint of the daemon but `/ping` wants it, on loopback too (HttpServer.ts); the
 * dashboard's session cookie stands in for it on the dashboard's own routes (DashboardAuth.ts).
 */
import { timingSafeEqual } from "node:crypto"
import type { IncomingMessage } from "node:http"

const bearerHeader = /^bearer[ \t]+(\S+)[ \t]*$/i

/** The credential of a `Bearer` Authorization header, or undefined for any other header. */
export const bearerCredentialOf = (header: string | undefined): string | undefined =>
  header === undefined ? undefined : bearerHeader.exec(header)?.[1]

/** Whether `given` is `expected`, in time that does not depend on where they differ. */
export const sameSecret = (given: string, expected: string): boolean => {
  const a = Buffer.from(given)
  const b = Buffer.from(expected)
  return a.length === b.length && timingSafeEqual(a, b)
}

/** Whether the request carries `token` as its bearer credential. */
export const hasBearerToken = (req: IncomingMessage, token: string): boolean => {
  const given = bearerCredentialOf(req.headers.authorization)
  return given !== undefined && sameSecret(given, token)
}
