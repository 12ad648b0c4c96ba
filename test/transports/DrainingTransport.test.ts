/**
 * The shutdown drain in isolation, over a fake transport: it counts requests until they are
 * answered (or cancelled), `drain()` waits for exactly those, requests that arrive while draining
 * are never dispatched, handlers set on the inner transport before wrapping still run, and the
 * wait is bounded by its timeout.
 */
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"
import { assert, describe, it } from "vitest"
import { Drain } from "../../src/transports/DrainingTransport.ts"

/** A transport whose incoming side the test drives and whose outgoing side it records. */
const fakeTransport = () => {
  const sent: Array<JSONRPCMessage> = []
  const inner: Transport = {
    start: async () => undefined,
    send: async (message) => {
      sent.push(message)
    },
    close: async () => inner.onclose?.(),
  }
  return { inner, sent, receive: (message: JSONRPCMessage) => inner.onmessage?.(message) }
}

const request = (id: number): JSONRPCMessage => ({ jsonrpc: "2.0", id, method: "tools/call", params: {} })
const answer = (id: number): JSONRPCMessage => ({ jsonrpc: "2.0", id, result: {} })
const settled = async (promise: Promise<unknown>) => {
  let done = false
  void promise.then(() => {
    done = true
  })
  await new Promise((resolve) => setImmediate(resolve))
  return done
}

describe("Drain", () => {
  it("waits for the requests received before it, and only for those", async () => {
    const drain = new Drain()
    const fake = fakeTransport()
    const wrapped = drain.wrap(fake.inner)
    const dispatched: Array<unknown> = []
    wrapped.onmessage = (message) => dispatched.push("id" in message ? message.id : undefined)
    fake.receive(request(1))
    fake.receive(request(2))
    fake.receive({ jsonrpc: "2.0", method: "notifications/initialized" })
    assert.strictEqual(drain.pending(), 2)
    await wrapped.send(answer(1))
    assert.strictEqual(drain.pending(), 1)

    const drained = drain.drain(10_000)
    assert.isFalse(await settled(drained))
    fake.receive(request(3)) // arrives while draining: never dispatched, never waited for
    assert.deepStrictEqual(dispatched, [1, 2, undefined])
    assert.strictEqual(drain.pending(), 1)
    await wrapped.send(answer(2))
    assert.isTrue(await settled(drained))
  })

  it("stops waiting for a request the client cancels", async () => {
    const drain = new Drain()
    const fake = fakeTransport()
    drain.wrap(fake.inner).onmessage = () => undefined
    fake.receive(request(7))
    const drained = drain.drain(10_000)
    assert.isFalse(await settled(drained))
    fake.receive({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 7, reason: "gone" } })
    assert.isTrue(await settled(drained))
  })

  it("forgets a closed transport's requests, and keeps the handlers set before wrapping", async () => {
    const drain = new Drain()
    const fake = fakeTransport()
    const calls: Array<string> = []
    fake.inner.onclose = () => calls.push("bookkeeping")
    const wrapped = drain.wrap(fake.inner)
    wrapped.onclose = () => calls.push("session")
    wrapped.onmessage = () => undefined
    fake.receive(request(1))
    const drained = drain.drain(10_000)
    await wrapped.close()
    assert.deepStrictEqual(calls, ["bookkeeping", "session"])
    assert.isTrue(await settled(drained))
  })

  it("gives up after its timeout", async () => {
    const drain = new Drain()
    const fake = fakeTransport()
    drain.wrap(fake.inner).onmessage = () => undefined
    fake.receive(request(1))
    const started = Date.now()
    await drain.drain(50)
    assert.isAtLeast(Date.now() - started, 45)
    assert.strictEqual(drain.pending(), 1)
  })

  it("resolves at once when nothing is in flight", async () => {
    assert.isTrue(await settled(new Drain().drain(10_000)))
  })
})
