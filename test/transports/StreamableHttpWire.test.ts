/**
 * The daemon's own Streamable HTTP transport (src/transports/StreamableHttpTransport.ts) answers on
 * the wire as the MCP SDK's `StreamableHTTPServerTransport` does. The same raw requests go to both,
 * each serving one session of the same SDK `Server` in this process (bodies read as the daemon
 * reads them: HttpBodies.ts), and the status, content type, session header and body must be equal:
 * the refusals (406, 415, 400, 404, 405, 409), 202 for notifications, SSE answers for requests (a
 * batch's stream ends after its last answer), a server→client request and a progress notification
 * on the POST's own stream, unrelated messages on the GET stream, DELETE. Then the same refusals
 * against a running daemon's `/mcp`.
 */
import { createServer, type IncomingMessage, type Server as NodeServer, request, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import { CallToolRequestSchema, ListRootsResultSchema } from "@modelcontextprotocol/sdk/types.js"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { readJsonBody } from "../../src/transports/HttpBodies.ts"
import { StreamableHttpTransport } from "../../src/transports/StreamableHttpTransport.ts"
import { authHeaders, sharedDaemon } from "./harness.ts"

type Kind = "sdk" | "native"
interface Session {
  readonly transport: { handleRequest(req: IncomingMessage, res: ServerResponse, body?: unknown): unknown }
  readonly server: Server
}

/** An SDK server whose one tool reports progress, asks the client for its roots, and answers with them. */
const makeServer = (): Server => {
  const server = new Server({ name: "wire", version: "1.0.0" }, { capabilities: { tools: { listChanged: true } } })
  server.setRequestHandler(CallToolRequestSchema, async (call, extra) => {
    const progressToken = call.params._meta?.progressToken
    if (progressToken !== undefined)
      await extra.sendNotification({ method: "notifications/progress", params: { progressToken, progress: 1 } })
    const roots =
      call.params.name === "roots" ? await extra.sendRequest({ method: "roots/list" }, ListRootsResultSchema) : {}
    return { content: [{ type: "text", text: JSON.stringify(roots) }] }
  })
  return server
}

let sessionNumber = 0
const sessions = new Map<Kind, Session>()
/** A fresh session of each kind, with session ids the two share (so the answers can be compared). */
const newSessions = async () => {
  const id = `session-${++sessionNumber}`
  for (const kind of ["sdk", "native"] as const) {
    const options = { sessionIdGenerator: () => id }
    const transport = kind === "sdk" ? new StreamableHTTPServerTransport(options) : new StreamableHttpTransport(options)
    const server = makeServer()
    await server.connect(transport)
    sessions.set(kind, { transport, server })
  }
  return id
}

let http: NodeServer
let port = 0
beforeAll(async () => {
  http = createServer(async (req, res) => {
    const session = sessions.get(req.url === "/sdk" ? "sdk" : "native")!
    if (req.method !== "POST") return session.transport.handleRequest(req, res)
    const body = await readJsonBody(req, res)
    if (body !== undefined) await session.transport.handleRequest(req, res, body.value)
  })
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve))
  port = (http.address() as AddressInfo).port
})
afterAll(async () => {
  for (const { server } of sessions.values()) await server.close()
  http.closeAllConnections()
  await new Promise((resolve) => http.close(resolve))
})

/** An answer as a client sees it: the parts compared, and the SSE events in order. */
interface Answer {
  readonly status: number
  readonly contentType: string | undefined
  readonly sessionId: string | undefined
  readonly allow: string | undefined
  readonly cacheControl: string | undefined
  readonly body: string
  readonly events: Array<Record<string, unknown>>
}

const jsonHeaders = { "content-type": "application/json", accept: "application/json, text/event-stream" }

/**
 * One request. An SSE answer is read until it ends, but for a GET stream, which is read until
 * `eventsWanted` events came (then closed), or (`eventsWanted: 0`) left open, its answer resolved at
 * once; `onEvent` may answer a server→client request (on the same server).
 */
const send = (
  path: string,
  options: {
    readonly method?: string
    readonly headers?: Record<string, string>
    readonly body?: unknown
    readonly raw?: string
    readonly eventsWanted?: number
    readonly onEvent?: (event: Record<string, unknown>) => void
    readonly onOpen?: () => void
  } = {},
  target: { readonly port: number; readonly headers?: Record<string, string> } = { port },
): Promise<Answer> =>
  new Promise((resolve, reject) => {
    const text = options.raw ?? (options.body === undefined ? undefined : JSON.stringify(options.body))
    const req = request(
      {
        host: "127.0.0.1",
        port: target.port,
        path,
        method: options.method ?? "POST",
        headers: { ...target.headers, ...options.headers },
      },
      (res) => {
        let body = ""
        const events: Array<Record<string, unknown>> = []
        const answer = (): Answer => ({
          status: res.statusCode!,
          contentType: res.headers["content-type"],
          sessionId: res.headers["mcp-session-id"] as string | undefined,
          allow: res.headers.allow,
          cacheControl: res.headers["cache-control"],
          body: res.headers["content-type"] === "text/event-stream" ? "" : body,
          events,
        })
        options.onOpen?.()
        res.setEncoding("utf8")
        res.on("data", (chunk: string) => {
          body += chunk
          for (let end = body.indexOf("\n\n"); end !== -1; end = body.indexOf("\n\n")) {
            const block = body.slice(0, end)
            body = body.slice(end + 2)
            const data = /^event: message\ndata: (.*)$/s.exec(block)?.[1]
            if (data === undefined) continue
            const event = JSON.parse(data) as Record<string, unknown>
            events.push(event)
            options.onEvent?.(event)
            if (events.length === options.eventsWanted) {
              res.destroy()
              resolve(answer())
            }
          }
        })
        res.on("end", () => resolve(answer()))
        if (options.eventsWanted === 0) resolve(answer())
      },
    )
    req.on("error", reject)
    req.end(text)
  })

const initialize = (id: number | string = 1) => ({
  jsonrpc: "2.0",
  id,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: { roots: {} }, clientInfo: { name: "wire", version: "1" } },
})
const call = (id: number, name: string, meta?: Record<string, unknown>) => ({
  jsonrpc: "2.0",
  id,
  method: "tools/call",
  params: { name, arguments: {}, ...(meta !== undefined ? { _meta: meta } : {}) },
})
const initialized = { jsonrpc: "2.0", method: "notifications/initialized" }

/** Sends the same request to both transports (the SDK's first); both answers, to compare. */
const both = async (build: (kind: Kind) => Parameters<typeof send>[1]): Promise<Record<Kind, Answer>> => ({
  sdk: await send("/sdk", build("sdk")),
  native: await send("/native", build("native")),
})

/** A session of each kind, initialized; its id. */
const initializedSessions = async (): Promise<string> => {
  const id = await newSessions()
  const answers = await both(() => ({ headers: jsonHeaders, body: initialize() }))
  expect(answers.native).toEqual(answers.sdk)
  await both(() => ({ headers: { ...jsonHeaders, "mcp-session-id": id }, body: initialized }))
  return id
}

describe("the native Streamable HTTP transport answers as the SDK's", () => {
  it("initialize: refused without Accept (406) or with another Content-Type (415), then answered on SSE with the session id", async () => {
    const id = await newSessions()
    const refusals = [
      { headers: { "content-type": "application/json", accept: "application/json" }, body: initialize() },
      { headers: { "content-type": "text/plain", accept: jsonHeaders.accept }, body: initialize() },
      { headers: jsonHeaders },
      { headers: jsonHeaders, body: { jsonrpc: "2.0", id: 1 } },
      { headers: jsonHeaders, body: [initialize(1), initialize(2)] },
      { headers: jsonHeaders, body: Array.from({ length: 101 }, () => initialized) },
    ]
    const statuses: Array<number> = []
    for (const refusal of refusals) {
      const answers = await both(() => refusal)
      expect(answers.native).toEqual(answers.sdk)
      statuses.push(answers.native.status)
    }
    expect(statuses).toEqual([406, 415, 400, 400, 400, 400])
    const answers = await both(() => ({
      headers: { ...jsonHeaders, "content-type": "application/json; charset=utf-8" },
      body: initialize(),
    }))
    expect(answers.native).toEqual(answers.sdk)
    expect(answers.native).toMatchObject({ status: 200, contentType: "text/event-stream", sessionId: id })
    expect(answers.native.events).toEqual([
      expect.objectContaining({
        id: 1,
        result: expect.objectContaining({ serverInfo: { name: "wire", version: "1.0.0" } }),
      }),
    ])
  })

  it("after initialize: the session header and protocol version are checked; a second initialize is refused; notifications get 202", async () => {
    const id = await initializedSessions()
    const withSession = { ...jsonHeaders, "mcp-session-id": id }
    const cases = [
      { headers: jsonHeaders, body: call(2, "echo") },
      { headers: { ...jsonHeaders, "mcp-session-id": "another" }, body: call(2, "echo") },
      { headers: { ...withSession, "mcp-protocol-version": "1999-01-01" }, body: call(2, "echo") },
      { headers: withSession, body: initialize(3) },
      { headers: withSession, body: [initialized, { jsonrpc: "2.0", method: "notifications/roots/list_changed" }] },
      { headers: withSession, body: [] },
      { headers: withSession, method: "PUT", body: initialized },
      { headers: { ...withSession, accept: "application/json" }, method: "GET" },
    ]
    const statuses: Array<number> = []
    for (const request of cases) {
      const answers = await both(() => request)
      expect(answers.native).toEqual(answers.sdk)
      statuses.push(answers.native.status)
    }
    expect(statuses).toEqual([400, 404, 400, 400, 202, 202, 405, 406])
  })

  it("a batch of requests is answered on one SSE stream that ends after the last answer; progress goes on it too", async () => {
    const id = await initializedSessions()
    const answers = await both(() => ({
      headers: { ...jsonHeaders, "mcp-session-id": id, "mcp-protocol-version": "2025-06-18" },
      body: [call(2, "echo", { progressToken: "p" }), initialized, call(3, "echo")],
    }))
    expect(answers.native).toEqual(answers.sdk)
    expect(answers.native.events.map((event) => event.id ?? event.method).sort()).toEqual([
      2,
      3,
      "notifications/progress",
    ])
  })

  it("a server→client request during a call (roots/list) goes on the call's stream, and the call is answered there once the client answers", async () => {
    const id = await initializedSessions()
    const headers = { ...jsonHeaders, "mcp-session-id": id }
    const answers = await both((kind) => ({
      headers,
      body: call(2, "roots"),
      onEvent: (event) => {
        if (event.method !== "roots/list") return
        void send(`/${kind}`, {
          headers,
          body: { jsonrpc: "2.0", id: event.id, result: { roots: [{ uri: "file:///tmp/wire" }] } },
        })
      },
    }))
    expect(answers.native).toEqual(answers.sdk)
    expect(answers.native.events).toEqual([
      expect.objectContaining({ method: "roots/list" }),
      expect.objectContaining({
        id: 2,
        result: { content: [{ type: "text", text: '{"roots":[{"uri":"file:///tmp/wire"}]}' }] },
      }),
    ])
  })

  it("GET opens the stream for unrelated messages, one at a time (409); DELETE ends the session (then 404)", async () => {
    const id = await initializedSessions()
    const headers = { accept: "text/event-stream", "mcp-session-id": id }
    for (const kind of ["sdk", "native"] as const) {
      const server = sessions.get(kind)!.server
      const stream = send(`/${kind}`, {
        method: "GET",
        headers,
        eventsWanted: 1,
        onOpen: () => void server.sendToolListChanged(),
      })
      const answer = await stream
      expect(answer).toMatchObject({ status: 200, contentType: "text/event-stream", sessionId: id })
      expect(answer.events).toEqual([{ jsonrpc: "2.0", method: "notifications/tools/list_changed" }])
    }
    const open = await both(() => ({ method: "GET", headers, eventsWanted: 0 }))
    expect(open.native).toEqual(open.sdk)
    const second = await both(() => ({ method: "GET", headers, eventsWanted: 0 }))
    expect(second.native).toEqual(second.sdk)
    expect(second.native.status).toBe(409)
    const deleted = await both(() => ({ method: "DELETE", headers }))
    expect(deleted.native).toEqual(deleted.sdk)
    expect(deleted.native.status).toBe(200)
    const after = await both(() => ({ headers: { ...jsonHeaders, "mcp-session-id": id }, body: call(9, "echo") }))
    expect(after.native).toEqual(after.sdk)
    expect(after.native.status).toBe(404)
  })
})

describe("the daemon's /mcp", () => {
  const daemon = sharedDaemon()

  it("refuses as the SDK's transport does: 406, 415, wrong protocol version, a second GET stream (409)", async () => {
    const reference = await initializedSessions()
    const target = { port: daemon().port, headers: authHeaders(daemon().dataDir) }
    const opened = await send("/mcp", { headers: jsonHeaders, body: initialize() }, target)
    const id = opened.sessionId!
    expect(opened).toMatchObject({ status: 200, contentType: "text/event-stream" })
    await send("/mcp", { headers: { ...jsonHeaders, "mcp-session-id": id }, body: initialized }, target)
    const cases = (session: string): Array<Parameters<typeof send>[1]> => [
      {
        headers: { "content-type": "application/json", accept: "application/json", "mcp-session-id": session },
        body: call(2, "read_graph"),
      },
      {
        headers: { "content-type": "text/plain", accept: jsonHeaders.accept, "mcp-session-id": session },
        body: call(2, "read_graph"),
      },
      {
        headers: { ...jsonHeaders, "mcp-session-id": session, "mcp-protocol-version": "1999-01-01" },
        body: call(2, "read_graph"),
      },
      { headers: { ...jsonHeaders, "mcp-session-id": session }, body: { jsonrpc: "2.0", id: 1 } },
      { method: "GET", headers: { accept: "text/event-stream", "mcp-session-id": session }, eventsWanted: 0 },
      { method: "GET", headers: { accept: "text/event-stream", "mcp-session-id": session }, eventsWanted: 0 },
    ]
    const expected = await Promise.all(cases(reference).map((request) => send("/sdk", request)))
    const actual: Array<Answer> = []
    for (const request of cases(id)) actual.push(await send("/mcp", request, target))
    const comparable = (answer: Answer) => ({
      ...answer,
      sessionId: undefined,
      body: answer.body.replaceAll(reference, id),
    })
    expect(actual.map(comparable)).toEqual(expected.map(comparable))
    expect(actual.map((answer) => answer.status)).toEqual([406, 415, 400, 400, 200, 409])
  })
})
