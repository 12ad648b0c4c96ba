/**
 * A WebSocket client that sends faster than it reads is held back (RequestGate.ts), over real
 * sockets on loopback: while it reads nothing, the server starts only the requests whose answers
 * fit what the socket can take; once it reads, every request is answered, in order.
 */
import { once } from "node:events"
import type { AddressInfo } from "node:net"
import { afterEach, describe, expect, it } from "vitest"
import { WebSocket, WebSocketServer } from "ws"
import { WebSocketTransport } from "../../src/transports/WebSocketTransport.ts"
import { answerEveryRequest } from "../support/gatedTransports.ts"

const closers: Array<() => Promise<unknown>> = []
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close()
})

/** A server transport on one accepted socket, and a client socket connected to it. */
const connected = async () => {
  const server = new WebSocketServer({ host: "127.0.0.1", port: 0 })
  closers.push(() => new Promise((resolve) => server.close(resolve)))
  await once(server, "listening")
  const accepted = once(server, "connection")
  const client = new WebSocket(`ws://127.0.0.1:${(server.address() as AddressInfo).port}`)
  closers.push(async () => client.terminate())
  await once(client, "open")
  const [socket] = (await accepted) as [WebSocket]
  const transport = new WebSocketTransport(socket)
  await transport.start()
  return { transport, client }
}

describe("a WebSocket client that does not read", () => {
  it("gets no more requests started than the socket can take answers for, then every answer in order once it reads", async () => {
    const { transport, client } = await connected()
    const started = answerEveryRequest(transport, "a".repeat(1024 * 1024))
    // The client stops reading, then sends 100 requests, each answered with 1 MiB.
    const received: Array<number> = []
    client.on("message", (data) => received.push(JSON.parse(String(data)).id))
    ;(client as unknown as { _socket: { pause: () => void; resume: () => void } })._socket.pause()
    const count = 100
    for (let id = 1; id <= count; id++) client.send(JSON.stringify({ jsonrpc: "2.0", id, method: "tools/call" }))
    // Let the server read every request and fill the socket's buffers.
    for (let turn = 0; turn < 20; turn++) await new Promise((resolve) => setTimeout(resolve, 25))
    // The first answers fill the socket past its mark (4 started here; 35 when only the bound of
    // requests in flight held the client back).
    expect(started.length).toBeLessThan(16)
    expect(transport.heldCount()).toBe(count - started.length)
    ;(client as unknown as { _socket: { resume: () => void } })._socket.resume()
    for (let waited = 0; received.length < count && waited < 30_000; waited += 20)
      await new Promise((resolve) => setTimeout(resolve, 20))
    expect(started).toEqual(Array.from({ length: count }, (_, i) => i + 1))
    expect(received).toEqual(Array.from({ length: count }, (_, i) => i + 1))
  })
})
