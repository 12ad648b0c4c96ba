/**
 * The session's protocol (tools/McpServer.ts), on the wire it sends: initialize's negotiation,
 * answers and errors in the SDK's shapes, -32601 and -32602 naming each bad field, cancelled and
 * orphaned requests never answered, requests to the client answered, timed out or cut by a close —
 * and its protocol versions and initialize check the same as the MCP SDK's.
 */

import { assert, describe, it } from "@effect/vitest"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import {
  type JSONRPCMessage,
  LATEST_PROTOCOL_VERSION,
  SUPPORTED_PROTOCOL_VERSIONS,
  isInitializeRequest as sdkIsInitializeRequest,
} from "@modelcontextprotocol/sdk/types.js"
import { Effect } from "effect"
import fc from "fast-check"
import { beforeAll } from "vitest"
import { CallToolParams, ListParams } from "../../src/tools/McpParams.ts"
import {
  errorCodes,
  isInitializeRequest,
  latestProtocolVersion,
  McpProtocolError,
  McpServer,
  supportedProtocolVersions,
} from "../../src/tools/McpServer.ts"

const seed = Number(process.env.FC_SEED ?? Date.now() % 2 ** 31)
beforeAll(() => console.log(`McpServer: fast-check seed ${seed} (rerun with FC_SEED=${seed})`))

const settle = Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 0)))

const setup = (options: { readonly capabilities?: Record<string, unknown>; readonly instructions?: string } = {}) => {
  const sent: Array<Record<string, unknown>> = []
  const transport: Transport = {
    start: async () => undefined,
    close: async () => transport.onclose?.(),
    send: async (message) => {
      sent.push(message as Record<string, unknown>)
    },
  }
  const server = new McpServer(
    { name: "mnemos", version: "1" },
    { capabilities: options.capabilities ?? { tools: {} }, ...options },
  )
  const called: Array<unknown> = []
  let release: () => void = () => undefined
  const gate = new Promise<void>((resolve) => {
    release = resolve
  })
  server.handle("tools/call", CallToolParams, async (params, extra) => {
    called.push({ params, id: extra.requestId })
    await gate
    if (params.name === "fails") throw new Error("it broke")
    if (params.name === "refuses") throw new McpProtocolError(errorCodes.invalidParams, "not that one")
    return { content: [{ type: "text", text: "ok" }] }
  })
  const deliver = (message: unknown) => transport.onmessage?.(message as JSONRPCMessage)
  return { server, transport, sent, called, deliver, release }
}

const connected = (options?: Parameters<typeof setup>[0]) =>
  Effect.gen(function* () {
    const session = setup(options)
    yield* Effect.promise(() => session.server.connect(session.transport))
    return session
  })

describe("an MCP session's protocol", () => {
  it.effect("initialize answers the asked version when supported, else the latest; initialized is told", () =>
    Effect.gen(function* () {
      const { server, sent, deliver } = yield* connected({ capabilities: { tools: {} }, instructions: "be kind" })
      let initialized = 0
      server.oninitialized = () => {
        initialized++
      }
      const clientInfo = { name: "c", version: "2" }
      deliver({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: "2024-11-05", capabilities: { roots: {} }, clientInfo },
      })
      deliver({
        jsonrpc: "2.0",
        id: 2,
        method: "initialize",
        params: { protocolVersion: "1999-01-01", capabilities: {}, clientInfo },
      })
      deliver({ jsonrpc: "2.0", method: "notifications/initialized" })
      yield* settle
      assert.deepStrictEqual(sent, [
        {
          result: {
            protocolVersion: "2024-11-05",
            capabilities: { tools: {} },
            serverInfo: { name: "mnemos", version: "1" },
            instructions: "be kind",
          },
          jsonrpc: "2.0",
          id: 1,
        },
        {
          result: {
            protocolVersion: latestProtocolVersion,
            capabilities: { tools: {} },
            serverInfo: { name: "mnemos", version: "1" },
            instructions: "be kind",
          },
          jsonrpc: "2.0",
          id: 2,
        },
      ])
      assert.strictEqual(initialized, 1)
      assert.deepStrictEqual(server.clientInfo(), clientInfo)
      assert.deepStrictEqual(server.clientCapabilities(), {})
    }),
  )

  it.effect("answers in the SDK's shapes: a result, a thrown error's own code, else -32603", () =>
    Effect.gen(function* () {
      const { sent, called, deliver, release } = yield* connected()
      deliver({
        jsonrpc: "2.0",
        id: 7,
        method: "tools/call",
        params: { name: "t", arguments: { a: 1 }, _meta: { progressToken: 1 } },
      })
      deliver({ jsonrpc: "2.0", id: "x", method: "tools/call", params: { name: "fails" } })
      deliver({ jsonrpc: "2.0", id: 9, method: "tools/call", params: { name: "refuses" } })
      deliver({ jsonrpc: "2.0", id: 10, method: "ping" })
      release()
      yield* settle
      assert.deepStrictEqual(called[0], {
        params: { name: "t", arguments: { a: 1 }, _meta: { progressToken: 1 } },
        id: 7,
      })
      assert.deepStrictEqual(sent, [
        { result: {}, jsonrpc: "2.0", id: 10 },
        { result: { content: [{ type: "text", text: "ok" }] }, jsonrpc: "2.0", id: 7 },
        { jsonrpc: "2.0", id: "x", error: { code: errorCodes.internalError, message: "it broke" } },
        { jsonrpc: "2.0", id: 9, error: { code: errorCodes.invalidParams, message: "MCP error -32602: not that one" } },
      ])
    }),
  )

  it.effect("an unknown method is -32601; params that do not fit are -32602 naming each field; no handler runs", () =>
    Effect.gen(function* () {
      const { sent, called, deliver, release } = yield* connected()
      deliver({ jsonrpc: "2.0", id: 1, method: "resources/list" })
      deliver({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: 5 } })
      deliver({ jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "t", arguments: [1] } })
      deliver({ jsonrpc: "2.0", id: 4, method: "tools/call", params: { arguments: null } })
      deliver({ jsonrpc: "2.0", id: 5, method: "initialize", params: { protocolVersion: 1, capabilities: {} } })
      release()
      yield* settle
      assert.deepStrictEqual(called, [])
      const errors = sent.map((reply) => reply.error as { code: number; message: string })
      assert.deepStrictEqual(errors[0], { code: errorCodes.methodNotFound, message: "Method not found" })
      assert.deepStrictEqual(
        errors.slice(1).map((error) => error.code),
        [-32602, -32602, -32602, -32602],
      )
      assert.strictEqual(errors[1]!.message, "Invalid params for tools/call: params.name: Expected string")
      assert.match(errors[2]!.message, /^Invalid params for tools\/call: params\.arguments: /)
      assert.match(errors[3]!.message, /params\.name: Missing key; params\.arguments: /)
      assert.match(errors[4]!.message, /params\.protocolVersion: Expected string; params\.clientInfo: Missing key/)
    }),
  )

  it.effect("a task-augmented call is refused when the server offers no tasks", () =>
    Effect.gen(function* () {
      const { sent, called, deliver } = yield* connected()
      deliver({ jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "t", task: { ttl: 5 } } })
      yield* settle
      assert.deepStrictEqual(called, [])
      assert.deepStrictEqual(sent, [
        {
          jsonrpc: "2.0",
          id: 3,
          error: {
            code: errorCodes.internalError,
            message: "Server does not support task creation (required for tools/call)",
          },
        },
      ])
    }),
  )

  it.effect("a cancelled call, or one whose connection closed, is never answered; the session is told it closed", () =>
    Effect.gen(function* () {
      const { server, transport, sent, called, deliver, release } = yield* connected()
      let closed = 0
      server.onclose = () => {
        closed++
      }
      deliver({ jsonrpc: "2.0", id: "a", method: "tools/call", params: { name: "t" } })
      deliver({ jsonrpc: "2.0", id: "b", method: "tools/call", params: { name: "t" } })
      deliver({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: "a" } })
      yield* settle
      assert.strictEqual(called.length, 2)
      yield* Effect.promise(() => transport.close())
      release()
      yield* settle
      assert.deepStrictEqual(sent, [])
      assert.strictEqual(closed, 1)
    }),
  )

  it.effect("a request to the client is answered by id, refused with its error, or cut by a close", () =>
    Effect.gen(function* () {
      const { server, transport, sent, deliver } = yield* connected()
      const answered = server.request("roots/list", undefined, { relatedRequestId: 4 })
      const refused = server.request("roots/list", { cursor: "c" })
      const cut = server.request("roots/list", undefined)
      yield* settle
      assert.deepStrictEqual(sent, [
        { method: "roots/list", jsonrpc: "2.0", id: 0 },
        { method: "roots/list", params: { cursor: "c" }, jsonrpc: "2.0", id: 1 },
        { method: "roots/list", jsonrpc: "2.0", id: 2 },
      ])
      deliver({ jsonrpc: "2.0", id: 0, result: { roots: [] } })
      deliver({ jsonrpc: "2.0", id: 1, error: { code: -32601, message: "no roots here" } })
      assert.deepStrictEqual(yield* Effect.promise(() => answered), { roots: [] })
      // Answered once: the same id again is reported, not taken.
      const errors: Array<string> = []
      server.onerror = (error) => errors.push(error.message)
      deliver({ jsonrpc: "2.0", id: 0, result: { roots: [{ uri: "file:///x" }] } })
      assert.match(errors[0] ?? "", /unknown message ID/)
      const refusal = yield* Effect.promise(() =>
        refused.then(
          () => undefined,
          (error: unknown) => error,
        ),
      )
      assert.instanceOf(refusal, McpProtocolError)
      assert.strictEqual((refusal as McpProtocolError).code, -32601)
      yield* Effect.promise(() => transport.close())
      const closing = yield* Effect.promise(() =>
        cut.then(
          () => undefined,
          (error: unknown) => error,
        ),
      )
      assert.strictEqual((closing as McpProtocolError).code, errorCodes.connectionClosed)
    }),
  )

  it.effect("a request to the client that is not answered in time is cancelled and fails -32001", () =>
    Effect.gen(function* () {
      const { server, sent, deliver } = yield* connected()
      const errors: Array<string> = []
      server.onerror = (error) => errors.push(error.message)
      const failure = yield* Effect.promise(() =>
        server.request("roots/list", undefined, { timeoutMs: 5 }).then(
          () => undefined,
          (error: unknown) => error,
        ),
      )
      assert.strictEqual((failure as McpProtocolError).code, errorCodes.requestTimeout)
      assert.deepStrictEqual(sent.at(-1), {
        jsonrpc: "2.0",
        method: "notifications/cancelled",
        params: { requestId: 0, reason: "timed out" },
      })
      // A late answer is reported, not taken for another request.
      deliver({ jsonrpc: "2.0", id: 0, result: {} })
      assert.match(errors[0] ?? "", /unknown message ID/)
    }),
  )

  it("refuses a handler for a method whose capability it does not declare", () => {
    const server = new McpServer({ name: "m", version: "1" }, { capabilities: { tools: {} } })
    assert.throws(() => server.handle("resources/list", ListParams, () => ({})), /resources capability/)
  })

  it("speaks the protocol versions of the MCP SDK it is tested with", () => {
    assert.deepStrictEqual(supportedProtocolVersions, SUPPORTED_PROTOCOL_VERSIONS)
    assert.strictEqual(latestProtocolVersion, LATEST_PROTOCOL_VERSION)
  })

  it("tells an initialize request as the SDK does", () => {
    const anything = fc.oneof(
      fc.constant(undefined),
      fc.string(),
      fc.integer(),
      fc.constant(null),
      fc.array(fc.string()),
    )
    const request = fc.record(
      {
        jsonrpc: fc.constant("2.0"),
        id: fc.integer(),
        method: fc.oneof(fc.constant("initialize"), fc.constant("ping")),
        params: fc.oneof(
          anything,
          fc.record(
            {
              protocolVersion: fc.oneof(fc.constantFrom(...SUPPORTED_PROTOCOL_VERSIONS), anything),
              capabilities: fc.oneof(fc.constant({}), fc.constant({ roots: { listChanged: true } }), anything),
              clientInfo: fc.oneof(
                fc.record(
                  { name: fc.oneof(fc.string(), anything), version: fc.oneof(fc.string(), anything) },
                  { requiredKeys: [] },
                ),
                anything,
              ),
            },
            { requiredKeys: [] },
          ),
        ),
      },
      { requiredKeys: ["jsonrpc", "id", "method"] },
    )
    fc.assert(
      fc.property(request, (value) => isInitializeRequest(value) === sdkIsInitializeRequest(value)),
      { seed, numRuns: 500 },
    )
  })
})
