/**
 * Plain `tools/call` requests are answered without the SDK (tools/DirectToolCalls.ts); everything
 * else reaches the SDK unchanged, and a cancelled call is never answered, as in the SDK.
 */

import { assert, describe, it } from "@effect/vitest"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"
import { Effect } from "effect"
import { answeringToolCalls } from "../../src/tools/DirectToolCalls.ts"

const fakeTransport = () => {
  const sent: Array<unknown> = []
  const transport: Transport = {
    start: async () => undefined,
    close: async () => transport.onclose?.(),
    send: async (message) => {
      sent.push(message)
    },
  }
  return { transport, sent }
}

const setup = () => {
  const { transport, sent } = fakeTransport()
  const passed: Array<unknown> = []
  const called: Array<unknown> = []
  let release: () => void = () => undefined
  const gate = new Promise<void>((resolve) => {
    release = resolve
  })
  const wrapped = answeringToolCalls(transport, async (name, args, id) => {
    called.push({ name, args, id })
    await gate
    return { content: [{ type: "text", text: "ok" }], structuredContent: { name } }
  })
  wrapped.onmessage = (message) => passed.push(message)
  const deliver = (message: unknown) => transport.onmessage?.(message as JSONRPCMessage)
  return { sent, passed, called, deliver, release, wrapped }
}

const settle = Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 0)))

describe("tools/call without the SDK", () => {
  it.effect("a plain call is answered directly with the SDK's response shape", () =>
    Effect.gen(function* () {
      const { sent, passed, called, deliver, release } = setup()
      deliver({ jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "t", arguments: { a: 1 } } })
      release()
      yield* settle
      assert.deepStrictEqual(passed, [])
      assert.deepStrictEqual(called, [{ name: "t", args: { a: 1 }, id: 7 }])
      assert.deepStrictEqual(sent, [
        {
          result: { content: [{ type: "text", text: "ok" }], structuredContent: { name: "t" } },
          jsonrpc: "2.0",
          id: 7,
        },
      ])
    }),
  )

  it.effect("anything but a plain call goes to the SDK untouched", () =>
    Effect.gen(function* () {
      const { sent, passed, called, deliver } = setup()
      const others = [
        { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: 5 } },
        { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "t", arguments: null } },
        { jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "t", task: { ttl: 5 } } },
        { jsonrpc: "2.0", id: 4, method: "tools/call", params: { name: "t", _meta: { other: 1 } } },
        { jsonrpc: "2.0", id: 1.5, method: "tools/call", params: { name: "t" } },
        { jsonrpc: "2.0", id: 6, method: "tools/call", params: { name: "t" }, extra: true },
        { jsonrpc: "2.0", id: 7, method: "tools/list" },
      ]
      for (const message of others) deliver(message)
      yield* settle
      assert.deepStrictEqual(passed, others)
      assert.deepStrictEqual(called, [])
      assert.deepStrictEqual(sent, [])
    }),
  )

  it.effect("a cancelled call, or one whose connection closed, is never answered", () =>
    Effect.gen(function* () {
      const { sent, passed, deliver, release, wrapped } = setup()
      deliver({ jsonrpc: "2.0", id: "a", method: "tools/call", params: { name: "t" } })
      deliver({ jsonrpc: "2.0", id: "b", method: "tools/call", params: { name: "t", _meta: { progressToken: 3 } } })
      const cancel = { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: "a" } }
      deliver(cancel)
      yield* Effect.promise(() => wrapped.close())
      release()
      yield* settle
      assert.deepStrictEqual(passed, [cancel])
      assert.deepStrictEqual(sent, [])
    }),
  )
})
