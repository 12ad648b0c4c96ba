/**
 * The legacy SSE transport (SseTransport.ts) over real sockets on loopback: a client that posts
 * without reading its stream gets no more requests started than the stream can take answers for,
 * and past the bound of held requests its posted requests are refused (503, Retry-After) — not
 * taken — while its notifications still are; once it reads, every answer comes, in order. Posts the
 * transport cannot take are refused with a status that says why.
 */
import { once } from "node:events"
import { createServer, type IncomingMessage, request, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"
import { afterEach, describe, expect, it } from "vitest"
import { readJsonBody } from "../../src/transports/HttpBodies.ts"
import { heldBytesMax } from "../../src/transports/RequestGate.ts"
import { SseTransport } from "../../src/transports/SseTransport.ts"
import { answerEveryRequest, onSseEvents } from "../support/gatedTransports.ts"

const closers: Array<() => Promise<unknown>> = []
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close()
})

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** A server of one SSE session, and a client whose stream is open: its endpoint, and what it received. */
const connected = async (keepAliveMs?: number) => {
  let transport: SseTransport | undefined
  const server: Server = createServer(async (req, res) => {
    if (req.method === "GET") {
      transport = new SseTransport("/messages", res, keepAliveMs)
      await transport.start()
      return
    }
    const body = await readJsonBody(req, res)
    if (body !== undefined) transport!.handlePost(req, res, body.value, body.bytes)
  })
  server.listen(0, "127.0.0.1")
  await once(server, "listening")
  const port = (server.address() as AddressInfo).port
  closers.push(() => {
    server.closeAllConnections()
    return new Promise((resolve) => server.close(resolve))
  })
  const stream = await new Promise<IncomingMessage>((resolve) => request({ port, path: "/sse" }, resolve).end())
  closers.push(async () => stream.destroy())
  const received: Array<JSONRPCMessage> = []
  let endpoint: string | undefined
  onSseEvents(stream, (event, data) => {
    if (event === "endpoint") endpoint = data
    else received.push(JSON.parse(data))
  })
  while (endpoint === undefined) await sleep(5)
  const post = (body: string, contentType = "application/json") =>
    new Promise<{ status: number; headers: IncomingMessage["headers"]; text: string }>((resolve, reject) => {
      const sent = request(
        { port, path: endpoint, method: "POST", headers: { "content-type": contentType } },
        (res) => {
          let answer = ""
          res.on("data", (chunk: Buffer) => {
            answer += chunk.toString("utf8")
          })
          res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, text: answer }))
        },
      )
      sent.on("error", reject)
      sent.end(body)
    })
  return { transport: transport!, stream, received, post }
}

const requestText = (id: number, padding = "") =>
  JSON.stringify({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "read_graph", padding } })

describe("an SSE client that does not read its stream", () => {
  it("gets no more requests started than the stream can take answers for, then every answer in order once it reads", async () => {
    const { transport, stream, received, post } = await connected()
    const started = answerEveryRequest(transport, "a".repeat(1024 * 1024))
    stream.pause()
    const count = 100
    for (let id = 1; id <= count; id++) expect((await post(requestText(id))).status).toBe(202)
    for (let turn = 0; turn < 20; turn++) await sleep(25)
    // The first answers fill the stream past its mark (4 started here; 35 when only the bound of
    // requests in flight held the client back).
    expect(started.length).toBeLessThan(16)
    expect(transport.heldCount()).toBe(count - started.length)
    stream.resume()
    for (let waited = 0; received.length < count && waited < 30_000; waited += 20) await sleep(20)
    expect(started).toEqual(Array.from({ length: count }, (_, i) => i + 1))
    expect(received.map((message) => (message as { id: number }).id)).toEqual(
      Array.from({ length: count }, (_, i) => i + 1),
    )
  })

  it("past the bound of held requests has its requests refused, not taken, and its notifications taken", async () => {
    const { transport, stream, received, post } = await connected()
    const passed: Array<JSONRPCMessage> = []
    transport.onmessage = (message) => {
      passed.push(message)
      if ("id" in message)
        void transport
          .send({ jsonrpc: "2.0", id: message.id, result: { answer: "b".repeat(512 * 1024) } } as JSONRPCMessage)
          .catch(() => undefined)
    }
    stream.pause()
    const padding = "p".repeat(256 * 1024)
    const statuses: Array<number> = []
    let refused: { status: number; headers: IncomingMessage["headers"]; text: string } | undefined
    let id = 0
    // Enough 256 KiB requests to hold more than the bound, whatever the stream took first.
    while (refused === undefined && id < 200) {
      const answer = await post(requestText(++id, padding))
      statuses.push(answer.status)
      if (answer.status !== 202) refused = answer
    }
    expect(refused?.status).toBe(503)
    expect(refused?.headers["retry-after"]).toBe("1")
    expect(JSON.parse(refused!.text).error).toMatch(/send it again/)
    const taken = id - 1
    expect(taken * padding.length).toBeGreaterThan(heldBytesMax)
    // A notification is taken while requests are refused.
    const notification = JSON.stringify({ jsonrpc: "2.0", method: "notifications/progress", params: { n: 1 } })
    expect((await post(notification)).status).toBe(202)
    expect(passed.some((message) => "method" in message && message.method === "notifications/progress")).toBe(true)
    // Once it reads, the refused request is taken when sent again, and every taken one is answered.
    stream.resume()
    for (let waited = 0; received.length < taken && waited < 30_000; waited += 20) await sleep(20)
    expect((await post(requestText(id, padding))).status).toBe(202)
    for (let waited = 0; received.length < id && waited < 30_000; waited += 20) await sleep(20)
    expect(received.map((message) => (message as { id: number }).id)).toEqual(
      Array.from({ length: id }, (_, i) => i + 1),
    )
  })
})

describe("an SSE post the transport cannot take", () => {
  it("is refused with a status that says why, and the session goes on", async () => {
    const { transport, received, post } = await connected()
    transport.onmessage = (message) => {
      if ("id" in message) void transport.send({ jsonrpc: "2.0", id: message.id, result: {} } as JSONRPCMessage)
    }
    const untyped = await post(requestText(1), "text/plain")
    expect(untyped.status).toBe(415)
    expect(JSON.parse(untyped.text).error).toMatch(/application\/json/)
    const invalid = await post(JSON.stringify({ jsonrpc: "2.0", id: 7, params: {} }))
    expect(invalid.status).toBe(400)
    expect(JSON.parse(invalid.text)).toEqual({
      jsonrpc: "2.0",
      id: 7,
      error: { code: -32600, message: "not a JSON-RPC 2.0 message" },
    })
    expect((await post(requestText(2))).status).toBe(202)
    for (let waited = 0; received.length < 1 && waited < 5_000; waited += 20) await sleep(20)
    expect(received).toEqual([{ jsonrpc: "2.0", id: 2, result: {} }])
  })
})

describe("an SSE stream with nothing to carry", () => {
  it("carries keepalive comments, which are no messages, and tells proxies not to buffer it", async () => {
    const { stream, received, post, transport } = await connected(50)
    transport.onmessage = (message) => {
      if ("id" in message) void transport.send({ jsonrpc: "2.0", id: message.id, result: {} } as JSONRPCMessage)
    }
    let raw = ""
    stream.on("data", (chunk: Buffer) => {
      raw += chunk.toString("utf8")
    })
    expect(stream.headers["x-accel-buffering"]).toBe("no")
    await sleep(300)
    expect(raw.split(": keepalive\n\n").length - 1).toBeGreaterThanOrEqual(2)
    expect((await post(requestText(1))).status).toBe(202)
    for (let waited = 0; received.length < 1 && waited < 5_000; waited += 20) await sleep(20)
    expect(received).toEqual([{ jsonrpc: "2.0", id: 1, result: {} }])
  })
})
