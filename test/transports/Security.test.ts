/**
 * Who may talk to the daemon: Host and Origin are checked on every endpoint against DNS
 * rebinding; bodies and frames are bounded, and an oversized frame is answered with an error on a
 * connection that stays usable; on every address — loopback included, since any local user can
 * reach loopback — every endpoint but /ping wants the bearer token from the data directory (mode
 * 0600), its scheme in any case; and UDP stays on loopback.
 */
import { createSocket } from "node:dgram"
import { statSync } from "node:fs"
import { networkInterfaces } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import WebSocket from "ws"
import { frameBytesMax } from "../../src/transports/WebSocketTransport.ts"
import {
  authHeaders,
  callTool,
  cleanup,
  connectClient,
  type DaemonProcess,
  getJson,
  networkTransports,
  rawHttp,
  sleep,
  startDaemon,
  waitFor,
} from "./harness.ts"

const externalIpv4 = Object.values(networkInterfaces())
  .flat()
  .find((address) => address !== undefined && address.family === "IPv4" && !address.internal)?.address

const initialize = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "security-test", version: "1" } },
})
const mcpHeaders = { "content-type": "application/json", accept: "application/json, text/event-stream" }

/** One request per kind of HTTP endpoint, each of which would succeed if admitted. */
const endpoints: ReadonlyArray<{ method: string; path: string; body?: string; headers?: Record<string, string> }> = [
  { method: "POST", path: "/mcp", body: initialize, headers: mcpHeaders },
  { method: "GET", path: "/sse" },
  { method: "GET", path: "/api/stats" },
  { method: "GET", path: "/api/graph" },
  { method: "GET", path: "/api/search?q=x" },
  { method: "GET", path: "/api/version" },
  {
    method: "POST",
    path: "/terminal/telemetry",
    body: JSON.stringify({ command: "ls", exit_code: 0, cwd: "/" }),
    headers: { "content-type": "application/json" },
  },
  {
    method: "POST",
    path: "/gate/set",
    body: JSON.stringify({ action: "push", status: "blocked" }),
    headers: { "content-type": "application/json" },
  },
  { method: "GET", path: "/gate/list" },
  { method: "GET", path: "/ping" },
]
/** Answers 404 when admitted (the gate does not exist), so it is checked apart from `endpoints`. */
const gateVerify: (typeof endpoints)[number] = { method: "GET", path: "/gate/verify?action=push" }

/** Opens `/ws` (or `path`) with these headers; the HTTP status of a refused upgrade, or 101. */
const upgradeStatus = (url: string, headers: Record<string, string>, path = "/ws"): Promise<number> =>
  new Promise((resolve, reject) => {
    const socket = new WebSocket(`${url.replace(/^http/, "ws")}${path}`, { headers })
    socket.once("open", () => {
      socket.close()
      resolve(101)
    })
    socket.once("unexpected-response", (_request, response) => {
      resolve(response.statusCode ?? 0)
      socket.terminate()
    })
    socket.once("error", (error) => {
      if (socket.readyState !== WebSocket.CLOSED) reject(error)
    })
  })

let daemon: DaemonProcess
beforeAll(async () => {
  daemon = await startDaemon()
})
afterAll(cleanup)

describe("Host and Origin (DNS rebinding)", () => {
  it("every endpoint admits the daemon's own Host and Origin", async () => {
    for (const endpoint of endpoints) {
      const response = await rawHttp({
        host: "127.0.0.1",
        port: daemon.port,
        ...endpoint,
        headers: { ...endpoint.headers, ...authHeaders(daemon.dataDir), origin: `http://127.0.0.1:${daemon.port}` },
      })
      expect(response.status, `${endpoint.method} ${endpoint.path}: ${response.text}`).toBeLessThan(300)
    }
    expect(
      await upgradeStatus(daemon.url, { ...authHeaders(daemon.dataDir), origin: `http://localhost:${daemon.port}` }),
    ).toBe(101)
  })

  it("host names are case-insensitive: Host LOCALHOST is the daemon's own", async () => {
    for (const endpoint of endpoints) {
      const response = await rawHttp({
        host: "127.0.0.1",
        port: daemon.port,
        ...endpoint,
        headers: { ...endpoint.headers, ...authHeaders(daemon.dataDir), host: `LOCALHOST:${daemon.port}` },
      })
      expect(response.status, `${endpoint.method} ${endpoint.path}: ${response.text}`).toBeLessThan(300)
    }
    expect(
      await upgradeStatus(daemon.url, {
        ...authHeaders(daemon.dataDir),
        host: `LocalHost:${daemon.port}`,
        origin: `http://LOCALHOST:${daemon.port}`,
      }),
    ).toBe(101)
  })

  it.each([
    "evil.example",
    "127.0.0.1.evil.example", // a rebinding name that resolves to 127.0.0.1
    "localhost.evil.example",
    "192.0.2.77",
  ])("every endpoint refuses Host %s with 403", async (foreign) => {
    for (const endpoint of endpoints) {
      const response = await rawHttp({
        host: "127.0.0.1",
        port: daemon.port,
        ...endpoint,
        headers: { ...endpoint.headers, host: `${foreign}:${daemon.port}` },
      })
      expect(response.status, `${endpoint.method} ${endpoint.path} with Host ${foreign}`).toBe(403)
    }
    expect(await upgradeStatus(daemon.url, { host: `${foreign}:${daemon.port}` })).toBe(403)
  })

  it.each([
    "http://evil.example",
    "http://127.0.0.1.evil.example", // port filled in below
    "https://localhost", // right host, wrong port
    "null",
  ])("every endpoint refuses Origin %s with 403", async (origin) => {
    const withPort = origin.includes("evil.example") ? `${origin}:${daemon.port}` : origin
    for (const endpoint of endpoints.filter((endpoint) => endpoint.path !== "/ping")) {
      const response = await rawHttp({
        host: "127.0.0.1",
        port: daemon.port,
        ...endpoint,
        headers: { ...endpoint.headers, origin: withPort },
      })
      expect(response.status, `${endpoint.method} ${endpoint.path} with Origin ${withPort}`).toBe(403)
    }
    expect(await upgradeStatus(daemon.url, { origin: withPort })).toBe(403)
  })
})

describe("the bearer token on loopback", () => {
  const token = () => authHeaders(daemon.dataDir).authorization!.slice("Bearer ".length)

  it("every endpoint but /ping refuses a request without the token, with a wrong one, or another scheme", async () => {
    for (const authorization of [undefined, "Bearer wrong-token", `Basic ${token()}`, `Bearer${token()}`]) {
      for (const endpoint of [...endpoints, gateVerify]) {
        const response = await rawHttp({
          host: "127.0.0.1",
          port: daemon.port,
          ...endpoint,
          headers: { ...endpoint.headers, ...(authorization !== undefined ? { authorization } : {}) },
        })
        if (endpoint.path === "/ping") expect(response.status).toBe(200)
        else {
          expect(response.status, `${endpoint.method} ${endpoint.path} (${authorization})`).toBe(401)
          expect(response.headers["www-authenticate"]).toBe("Bearer")
        }
      }
      const headers: Record<string, string> = authorization !== undefined ? { authorization } : {}
      expect(await upgradeStatus(daemon.url, headers)).toBe(401)
      expect(await upgradeStatus(daemon.url, headers, "/events")).toBe(401)
    }
    // A POST to an SSE session needs the token too (the session id alone is not enough).
    const messages = await rawHttp({
      host: "127.0.0.1",
      port: daemon.port,
      method: "POST",
      path: "/messages?sessionId=x",
    })
    expect(messages.status).toBe(401)
  })

  it.each(["Bearer", "bearer", "BEARER", "bEaReR"])("the scheme %s is accepted, on every endpoint", async (scheme) => {
    const authorization = `${scheme} ${token()}`
    for (const endpoint of endpoints) {
      const response = await rawHttp({
        host: "127.0.0.1",
        port: daemon.port,
        ...endpoint,
        headers: { ...endpoint.headers, authorization },
      })
      expect(response.status, `${endpoint.method} ${endpoint.path} with ${scheme}: ${response.text}`).toBeLessThan(300)
    }
    const verify = await rawHttp({ host: "127.0.0.1", port: daemon.port, ...gateVerify, headers: { authorization } })
    expect([200, 403, 404]).toContain(verify.status)
    expect(await upgradeStatus(daemon.url, { authorization })).toBe(101)
    expect(await upgradeStatus(daemon.url, { authorization }, "/events")).toBe(101)
  })

  it("a WebSocket client that cannot set headers passes the token in the query", async () => {
    expect(await upgradeStatus(daemon.url, {}, `/ws?token=${token()}`)).toBe(101)
    expect(await upgradeStatus(daemon.url, {}, "/ws?token=wrong")).toBe(401)
  })
})

describe("size limits", () => {
  it("a WebSocket frame above the limit is answered with an error for its id; the connection stays usable", async () => {
    const socket = new WebSocket(`${daemon.url.replace(/^http/, "ws")}/ws`, { headers: authHeaders(daemon.dataDir) })
    await new Promise((resolve, reject) => {
      socket.once("open", resolve)
      socket.once("error", reject)
    })
    const answers = new Map<unknown, { result?: { isError?: boolean }; error?: { message: string } }>()
    socket.on("message", (data) => {
      const message = JSON.parse(data.toString()) as { id?: unknown }
      if (message.id !== undefined) answers.set(message.id, message as never)
    })
    const answerTo = (id: unknown) => waitFor(`the answer to ${String(id)}`, () => answers.get(id), 30_000)
    socket.send(initialize)
    await answerTo(1)
    socket.send(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }))
    const search = (id: number, query: string) =>
      JSON.stringify({
        jsonrpc: "2.0",
        id,
        method: "tools/call",
        params: { name: "search_nodes", arguments: { query } },
      })

    socket.send(search(2, "x".repeat(frameBytesMax + 1024)))
    expect((await answerTo(2)).error?.message).toMatch(/exceeds the limit/)
    socket.send("{ this is not json")
    socket.send(Buffer.from([1, 2, 3]), { binary: true })
    socket.send(search(3, "still usable"))
    const after = await answerTo(3)
    expect(after.error).toBeUndefined()
    expect(after.result?.isError ?? false).toBe(false)
    expect(socket.readyState).toBe(WebSocket.OPEN)
    socket.close()
  })

  it("an HTTP body above the limit is refused with 413, and the server keeps serving", async () => {
    const big = Buffer.alloc(16 * 1024 * 1024 + 1, 0x20)
    const mcp = await rawHttp({
      host: "127.0.0.1",
      port: daemon.port,
      method: "POST",
      path: "/mcp",
      body: big,
      headers: { ...mcpHeaders, ...authHeaders(daemon.dataDir) },
    }).catch(
      () => ({ status: 413 }), // the server may close the socket while the body is still being written
    )
    expect(mcp.status).toBe(413)
    const telemetry = await rawHttp({
      host: "127.0.0.1",
      port: daemon.port,
      method: "POST",
      path: "/terminal/telemetry",
      body: JSON.stringify({ command: "ls", exit_code: 0, cwd: "/", output_tail: "z".repeat(70 * 1024) }),
      headers: { "content-type": "application/json", ...authHeaders(daemon.dataDir) },
    })
    expect(telemetry.status).toBe(413)
    expect((await getJson(`${daemon.url}/ping`)).status).toBe(200)
  })
})

describe.skipIf(externalIpv4 === undefined)("bound beyond loopback", () => {
  let remote: DaemonProcess
  let token: string
  beforeAll(async () => {
    remote = await startDaemon({ host: externalIpv4! })
    token = (await import("node:fs")).readFileSync(join(remote.dataDir, "token"), "utf8").trim()
  })

  it("the token is generated into the data directory, readable by its owner only", () => {
    expect(statSync(join(remote.dataDir, "token")).mode & 0o777).toBe(0o600)
    expect(token.length).toBeGreaterThanOrEqual(32)
  })

  it("every endpoint but /ping refuses a request without the token (or with a wrong one)", async () => {
    for (const authorization of [undefined, "Bearer wrong-token", `Basic ${token}`]) {
      for (const endpoint of endpoints) {
        const response = await rawHttp({
          host: remote.host,
          port: remote.port,
          ...endpoint,
          headers: { ...endpoint.headers, ...(authorization !== undefined ? { authorization } : {}) },
        })
        if (endpoint.path === "/ping") expect(response.status).toBe(200)
        else expect(response.status, `${endpoint.method} ${endpoint.path} (${authorization})`).toBe(401)
      }
      expect(await upgradeStatus(remote.url, authorization !== undefined ? { authorization } : {})).toBe(401)
    }
  })

  it("with the token, MCP works over Streamable HTTP, SSE and WebSocket", async () => {
    for (const kind of networkTransports) {
      const client = await connectClient(kind, remote.url, { headers: { authorization: `Bearer ${token}` } })
      const result = await callTool(client, "create_entities", {
        entities: [{ name: `remote-${kind}`, entityType: "t", observations: [] }],
      })
      expect(result.isError, result.text).toBe(false)
      await client.close()
    }
    const stats = await getJson(`${remote.url}/api/stats`, { headers: { authorization: `Bearer ${token}` } })
    expect(stats.status).toBe(200)
  })

  it("UDP still listens on loopback only", async () => {
    const statsOf = async () =>
      (
        (await getJson(`${remote.url}/api/stats`, { headers: { authorization: `Bearer ${token}` } })).body as {
          telemetry: { udp: { port: number; received: number } }
        }
      ).telemetry.udp
    const port = (await statsOf()).port
    expect(port).toBe(remote.udpPort)
    const socket = createSocket("udp4")
    const datagram = JSON.stringify({ file: "/a.ts", line: 1, col: 1, session: "s" })
    socket.on("error", () => undefined) // ICMP port unreachable from the external address
    await new Promise<void>((resolve) => socket.send(datagram, port, externalIpv4!, () => resolve()))
    await new Promise<void>((resolve) => socket.send(datagram, port, "127.0.0.1", () => resolve()))
    await waitFor("the loopback datagram", async () => ((await statsOf()).received >= 1 ? true : undefined))
    await sleep(200)
    expect((await statsOf()).received).toBe(1)
    socket.close()
  })
})
