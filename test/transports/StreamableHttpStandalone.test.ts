/**
 * The GET stream of a Streamable HTTP session (StreamableHttpTransport.ts) whose client does not
 * read it, over real sockets on loopback: what the server sends unrelated to a request waits for
 * the stream to drain instead of piling up in it, and once the client reads, every message comes,
 * in order.
 */
import { createServer, type IncomingMessage, type Server as NodeServer, request } from "node:http"
import type { AddressInfo } from "node:net"
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"
import { afterEach, describe, expect, it } from "vitest"
import { readJsonBody } from "../../src/transports/HttpBodies.ts"
import { StreamableHttpTransport } from "../../src/transports/StreamableHttpTransport.ts"
import { onSseEvents } from "../support/gatedTransports.ts"

const closers: Array<() => Promise<unknown>> = []
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close()
})

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** An initialized session on a loopback server, and its client's GET stream: what it received. */
const sessionWithStream = async () => {
  const transport = new StreamableHttpTransport({ sessionIdGenerator: () => "standalone-session" })
  const server = new Server({ name: "standalone", version: "1.0.0" }, { capabilities: {} })
  await server.connect(transport)
  const http: NodeServer = createServer(async (req, res) => {
    if (req.method !== "POST") return transport.handleRequest(req, res)
    const body = await readJsonBody(req, res)
    if (body !== undefined) transport.handleRequest(req, res, body.value)
  })
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve))
  closers.push(async () => {
    await server.close()
    http.closeAllConnections()
    await new Promise((resolve) => http.close(resolve))
  })
  const port = (http.address() as AddressInfo).port
  const accept = "application/json, text/event-stream"
  const initialized = await new Promise<IncomingMessage>((resolve, reject) =>
    request({ port, path: "/mcp", method: "POST", headers: { accept, "content-type": "application/json" } }, resolve)
      .on("error", reject)
      .end(
        JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "initialize",
          params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } },
        }),
      ),
  )
  initialized.resume()
  const sessionId = initialized.headers["mcp-session-id"] as string
  const stream = await new Promise<IncomingMessage>((resolve, reject) =>
    request({ port, path: "/mcp", headers: { accept: "text/event-stream", "mcp-session-id": sessionId } }, resolve)
      .on("error", reject)
      .end(),
  )
  closers.push(async () => stream.destroy())
  expect(stream.statusCode).toBe(200)
  const received: Array<JSONRPCMessage> = []
  onSseEvents(stream, (_event, data) => received.push(JSON.parse(data)))
  return { transport, stream, received }
}

describe("a Streamable HTTP GET stream its client does not read", () => {
  it("holds back what is sent on it, then carries all of it in order once the client reads", async () => {
    const { transport, stream, received } = await sessionWithStream()
    stream.pause()
    const count = 2_000
    const padding = "n".repeat(16 * 1024)
    let sent = 0
    const sends = Array.from({ length: count }, (_, n) =>
      transport
        .send({ jsonrpc: "2.0", method: "notifications/message", params: { level: "info", data: { n, padding } } })
        .then(() => {
          sent++
        }),
    )
    for (let turn = 0; turn < 20; turn++) await sleep(25)
    // What the socket's buffers and the stream's mark take (about 4 MiB here), not all 32 MiB.
    expect(sent).toBeGreaterThan(0)
    expect(sent).toBeLessThan(count / 2)
    stream.resume()
    await Promise.all(sends)
    for (let waited = 0; received.length < count && waited < 30_000; waited += 20) await sleep(20)
    expect(
      received.map((message) => (message as unknown as { params: { data: { n: number } } }).params.data.n),
    ).toEqual(Array.from({ length: count }, (_, n) => n))
  })

  it("lets the senders waiting on it go once it closes", async () => {
    const { transport, stream } = await sessionWithStream()
    stream.pause()
    const padding = "n".repeat(16 * 1024)
    const sends = Array.from({ length: 1_000 }, (_, n) =>
      transport.send({
        jsonrpc: "2.0",
        method: "notifications/message",
        params: { level: "info", data: { n, padding } },
      }),
    )
    await sleep(200)
    stream.destroy()
    await Promise.all(sends)
  })
})
