/**
 * No client can lock the others out of the daemon: Streamable HTTP sessions that are opened and
 * never closed (a leaky client; a script) do not keep a new client out — at the cap of 1,024
 * sessions the least recently used idle one is closed to admit it, and its old id then answers 404
 * (start a new session), as the MCP spec says. Only when every session is busy (a request in flight
 * or an open stream: a Streamable HTTP GET stream) is a new
 * client refused, with a message saying so — and a `mnemos mcp` shim then says so on stderr and
 * answers its client with that error instead of hanging, as it does for any refusal (a wrong
 * token: 401). WebSocket connections that never send anything are idle sessions like the others:
 * they do not keep a new client out either.
 */
import { writeFileSync } from "node:fs"
import { type ClientRequest, request as httpRequest } from "node:http"
import { join } from "node:path"
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"
import { describe, expect, it } from "vitest"
import WebSocket from "ws"
import { sessionsMax } from "../../src/transports/SessionTable.ts"
import {
  authHeaders,
  callTool,
  connectClient,
  rawHttp,
  sharedDaemon,
  startDaemon,
  startRawShim,
  tempDir,
  waitFor,
} from "./harness.ts"

const daemon = sharedDaemon()

const initialize = JSON.stringify({
  jsonrpc: "2.0",
  id: 0,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "leaky", version: "1" } },
})
const mcpHeaders = () => ({
  "content-type": "application/json",
  accept: "application/json, text/event-stream",
  ...authHeaders(daemon().dataDir),
})

/** Opens a Streamable HTTP session and never closes it; its id. */
const leakSession = async (): Promise<string> => {
  const response = await rawHttp({
    host: "127.0.0.1",
    port: daemon().port,
    method: "POST",
    path: "/mcp",
    headers: mcpHeaders(),
    body: initialize,
  })
  expect(response.status, response.text).toBe(200)
  return response.headers["mcp-session-id"] as string
}

const errorOf = (answer: JSONRPCMessage | undefined) =>
  (answer as { error?: { message: string } } | undefined)?.error?.message ?? `no error in ${JSON.stringify(answer)}`

describe("sessions that are opened and never closed", () => {
  it(`${sessionsMax} leaked Streamable HTTP sessions: new clients still get in, the oldest idle one is closed (404)`, async () => {
    // The first is opened alone, so it is the least recently used: sessions opened 64 at once
    // reach the daemon in any order.
    const leaked: Array<string> = [await leakSession()]
    while (leaked.length < sessionsMax)
      leaked.push(
        ...(await Promise.all(Array.from({ length: Math.min(64, sessionsMax - leaked.length) }, leakSession))),
      )
    expect(new Set(leaked).size).toBe(sessionsMax)

    for (const kind of ["streamable-http", "sse", "ws"] as const) {
      const client = await connectClient(kind, daemon().url, { name: `after-the-leak-${kind}` })
      const result = await callTool(client, "search_nodes", { query: "anything" })
      expect(result.isError, result.text).toBe(false)
      await client.close()
    }
    const shim = await startRawShim(daemon().dataDir, daemon().port)
    const listed = await shim.request("tools/list", {})
    expect("result" in listed, JSON.stringify(listed)).toBe(true)
    await shim.close()

    // The least recently used leaked sessions made room; their ids now answer 404.
    const oldest = await rawHttp({
      host: "127.0.0.1",
      port: daemon().port,
      method: "POST",
      path: "/mcp",
      headers: { ...mcpHeaders(), "mcp-session-id": leaked[0]!, "mcp-protocol-version": "2025-06-18" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }),
    })
    expect(oldest.status).toBe(404)
    expect(oldest.text).toContain("initialize")
    const newest = await rawHttp({
      host: "127.0.0.1",
      port: daemon().port,
      method: "POST",
      path: "/mcp",
      headers: { ...mcpHeaders(), "mcp-session-id": leaked.at(-1)!, "mcp-protocol-version": "2025-06-18" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }),
    })
    expect(newest.status, newest.text).toBe(200)
  })
})

/** Opens `/ws` on `url` with the token of `dataDir`, and sends nothing. */
const openSilentSocket = (url: string, dataDir: string) =>
  new Promise<WebSocket>((resolve, reject) => {
    const socket = new WebSocket(`${url.replace(/^http/, "ws")}/ws`, { headers: authHeaders(dataDir) })
    socket.once("open", () => resolve(socket))
    socket.once("error", reject)
  })

describe("WebSocket connections that never initialise", () => {
  it(`${sessionsMax} of them: new clients of every transport still get in, the oldest silent ones are closed`, async () => {
    const silent = await startDaemon()
    const sockets: Array<WebSocket> = [await openSilentSocket(silent.url, silent.dataDir)]
    while (sockets.length < sessionsMax)
      sockets.push(
        ...(await Promise.all(
          Array.from({ length: Math.min(64, sessionsMax - sockets.length) }, () =>
            openSilentSocket(silent.url, silent.dataDir),
          ),
        )),
      )
    const firstClosed = new Promise<number>((resolve) => sockets[0]!.once("close", (code) => resolve(code)))
    for (const kind of ["streamable-http", "sse", "ws"] as const) {
      const client = await connectClient(kind, silent.url, { name: `after-the-silent-${kind}` })
      const result = await callTool(client, "search_nodes", { query: "anything" })
      expect(result.isError, result.text).toBe(false)
      await client.close()
    }
    // The least recently used silent connection made room: it was closed.
    expect(await firstClosed).toBeGreaterThan(0)
    for (const socket of sockets) socket.close()
  })
})

/** Opens a Streamable HTTP session and keeps its GET stream open; resolves once the stream is open. */
const holdStream = async (port: number, dataDir: string): Promise<ClientRequest> => {
  const opened = await rawHttp({
    host: "127.0.0.1",
    port,
    method: "POST",
    path: "/mcp",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      ...authHeaders(dataDir),
    },
    body: initialize,
  })
  expect(opened.status, opened.text).toBe(200)
  const sessionId = opened.headers["mcp-session-id"] as string
  return new Promise((resolve, reject) => {
    const request = httpRequest({
      host: "127.0.0.1",
      port,
      method: "GET",
      path: "/mcp",
      headers: {
        accept: "text/event-stream",
        "mcp-session-id": sessionId,
        "mcp-protocol-version": "2025-06-18",
        ...authHeaders(dataDir),
      },
    })
    request.once("response", (response) => {
      expect(response.statusCode).toBe(200)
      response.resume()
      resolve(request)
    })
    request.once("error", reject)
    request.end()
  })
}

describe("every session busy", () => {
  it("a new client is refused with a clear message; a shim says so and answers with the error, then gets in once room is made", async () => {
    const busy = await startDaemon()
    const streams: Array<ClientRequest> = []
    for (let batch = 0; batch < sessionsMax / 64; batch++)
      streams.push(...(await Promise.all(Array.from({ length: 64 }, () => holdStream(busy.port, busy.dataDir)))))

    const refused = await rawHttp({
      host: "127.0.0.1",
      port: busy.port,
      method: "POST",
      path: "/mcp",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        ...authHeaders(busy.dataDir),
      },
      body: initialize,
    })
    expect(refused.status).toBe(503)
    expect(refused.text).toContain(`all ${sessionsMax}`)
    expect(refused.headers["retry-after"]).toBeDefined()

    const shim = await startRawShim(busy.dataDir, busy.port)
    expect(errorOf(shim.answers.get("r1")?.[0])).toContain("too many sessions")
    await waitFor("the shim's explanation on stderr", () =>
      shim.stderr().includes("too many sessions") ? true : undefined,
    )

    // Room is made (a stream ends, its session is idle): the shim gets in on its own and answers again.
    streams.pop()!.destroy()
    const answer = await waitFor(
      "an answer through the shim",
      async () => {
        const reply = await shim.request("initialize", {
          protocolVersion: "2025-06-18",
          capabilities: {},
          clientInfo: { name: "late", version: "1" },
        })
        return "result" in reply ? reply : undefined
      },
      30_000,
      500,
    )
    expect("result" in answer).toBe(true)
    await shim.close()
    for (const stream of streams) stream.destroy()
  })
})

describe("a shim refused by its daemon", () => {
  it("a wrong token: the shim says so on stderr and answers every request with the error, never hangs", async () => {
    const elsewhere = tempDir()
    writeFileSync(join(elsewhere, "token"), "not-the-token", { mode: 0o600 })
    const shim = await startRawShim(elsewhere, daemon().port, ["--no-start"])
    expect(errorOf(shim.answers.get("r1")?.[0])).toMatch(/refused.*401/)
    const call = await shim.request("tools/call", { name: "read_graph", arguments: {} })
    expect(errorOf(call)).toMatch(/401/)
    expect(shim.stderr()).toMatch(/refused the connection: 401/)
    await shim.close()
  })
})
