/**
 * The dashboard's credentials: a login token works once and not after its hour; the session
 * cookie it becomes is accepted until it expires, survives a daemon restart (same bearer token),
 * and is refused when tampered with, when the bearer token changes, or when it was issued by the
 * daemon on another port.
 */
import type { IncomingMessage } from "node:http"
import { describe, expect, it } from "vitest"
import {
  cookieValue,
  loginTokensMax,
  loginTokenTtlMs,
  makeDashboardAuth,
  sessionCookieName,
  sessionTtlMs,
} from "../../src/transports/DashboardAuth.ts"

const request = (headers: Record<string, string>) => ({ headers }) as unknown as IncomingMessage
/** The Cookie header a browser sends back for a Set-Cookie value. */
const cookieHeaderOf = (setCookie: string) => setCookie.split(";", 1)[0]!

describe("login tokens", () => {
  it("work exactly once", () => {
    const auth = makeDashboardAuth("secret", () => 7437)
    const token = auth.mintLoginToken()
    expect(auth.redeemLoginToken(token)).toBe(true)
    expect(auth.redeemLoginToken(token)).toBe(false)
    expect(auth.redeemLoginToken("made-up")).toBe(false)
  })

  it("expire after an hour", () => {
    let now = 1_000_000
    const auth = makeDashboardAuth(
      "secret",
      () => 7437,
      () => now,
    )
    const token = auth.mintLoginToken()
    now += loginTokenTtlMs
    expect(auth.redeemLoginToken(token)).toBe(false)
  })

  it(`at most ${loginTokensMax} are outstanding; the oldest go first`, () => {
    const auth = makeDashboardAuth("secret", () => 7437)
    const first = auth.mintLoginToken()
    const rest = Array.from({ length: loginTokensMax }, () => auth.mintLoginToken())
    expect(auth.redeemLoginToken(first)).toBe(false)
    expect(auth.redeemLoginToken(rest.at(-1)!)).toBe(true)
  })
})

describe("session cookies", () => {
  it("are HttpOnly, SameSite=Strict and named for the port", () => {
    const auth = makeDashboardAuth("secret", () => 7437)
    const setCookie = auth.sessionCookie()
    expect(setCookie.startsWith(`${sessionCookieName(7437)}=`)).toBe(true)
    expect(setCookie).toContain("HttpOnly")
    expect(setCookie).toContain("SameSite=Strict")
    expect(setCookie).toContain("Path=/")
  })

  it("are accepted until they expire, also by a restarted daemon with the same bearer token", () => {
    let now = 5_000_000
    const auth = makeDashboardAuth(
      "secret",
      () => 7437,
      () => now,
    )
    const cookie = cookieHeaderOf(auth.sessionCookie())
    expect(auth.hasSession(request({ cookie }))).toBe(true)
    const restarted = makeDashboardAuth(
      "secret",
      () => 7437,
      () => now,
    )
    expect(restarted.hasSession(request({ cookie: `theme=dark; ${cookie}` }))).toBe(true)
    now += sessionTtlMs + 1
    expect(auth.hasSession(request({ cookie }))).toBe(false)
  })

  it("are refused when tampered with, under another bearer token, or from another port's daemon", () => {
    const auth = makeDashboardAuth("secret", () => 7437)
    const cookie = cookieHeaderOf(auth.sessionCookie())
    const [name, value] = [cookie.slice(0, cookie.indexOf("=")), cookie.slice(cookie.indexOf("=") + 1)]
    const parts = value.split(".")
    const longer = [parts[0], String(Number(parts[1]) + 1e9), parts[2], parts[3]].join(".")
    expect(auth.hasSession(request({ cookie: `${name}=${longer}` }))).toBe(false)
    expect(auth.hasSession(request({ cookie: `${name}=${value}x` }))).toBe(false)
    expect(auth.hasSession(request({}))).toBe(false)
    expect(makeDashboardAuth("other", () => 7437).hasSession(request({ cookie }))).toBe(false)
    const otherPort = makeDashboardAuth("secret", () => 7438)
    expect(otherPort.hasSession(request({ cookie: `${sessionCookieName(7438)}=${value}` }))).toBe(false)
    expect(otherPort.hasSession(request({ cookie }))).toBe(false)
  })
})

describe("bearer token", () => {
  it("is compared exactly", () => {
    const auth = makeDashboardAuth("secret", () => 7437)
    expect(auth.hasBearer(request({ authorization: "Bearer secret" }))).toBe(true)
    expect(auth.hasBearer(request({ authorization: "Bearer secre" }))).toBe(false)
    expect(auth.hasBearer(request({ authorization: "secret" }))).toBe(false)
  })
})

describe("cookie headers", () => {
  it("are parsed by name, and oversized ones are ignored", () => {
    expect(cookieValue("a=1; b=2", "b")).toBe("2")
    expect(cookieValue("a=1", "b")).toBeUndefined()
    expect(cookieValue(`b=${"x".repeat(10_000)}`, "b")).toBeUndefined()
  })
})
