/**
 * `tools/call` requests answered without the MCP SDK's request machinery: the one call every agent
 * makes over and over. Through the SDK, one call ran seven Zod parses (the params check, three
 * message-kind guards, the handler's request schema twice, the result schema) before and after
 * the tool's own Schema decode; here the envelope gets a plain structural check and the
 * arguments are decoded once, by the tool's Schema, in the handler.
 *
 * Which requests take this path: a JSON-RPC 2.0 request (no keys beyond jsonrpc, id, method,
 * params; an id that is a string or a safe integer) for `tools/call` whose params hold only
 * `name` (a string), `arguments` (absent or a plain object) and `_meta` (absent, or holding at
 * most a valid `progressToken`). Anything else — task-augmented calls, odd envelopes, bad params
 * — goes on to the SDK (and tools/ParamsCheck.ts) exactly as before, so every error code and
 * message for bad input is the SDK's. A request taken here is a subset of what the SDK accepts,
 * and its answer is the one the SDK would send: the same `{ result, jsonrpc, id }` object, the
 * result checked against the SDK's result schema only when it is not the plain shape the session
 * builds.
 *
 * Cancellation behaves as in the SDK: a request the client cancels (`notifications/cancelled`),
 * or whose connection closes, is never answered. Answers go through the inner transport, so they
 * are counted wherever answers are counted (DrainingTransport.ts).
 */
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import {
  type CallToolResult,
  CallToolResultSchema,
  ErrorCode,
  type JSONRPCMessage,
  McpError,
  type MessageExtraInfo,
} from "@modelcontextprotocol/sdk/types.js"
import { TransportWrapper } from "../transports/TransportWrapper.ts"

/** Answers one tool call: the tool's name, its raw arguments, the request's id. */
export type CallTool = (
  name: string,
  args: Record<string, unknown> | undefined,
  requestId: string | number,
) => Promise<CallToolResult>

/** `inner`, with plain `tools/call` requests answered by `callTool` instead of the SDK. */
export const answeringToolCalls = (inner: Transport, callTool: CallTool): Transport =>
  new DirectToolCallTransport(inner, callTool)

const envelopeKeys = new Set(["jsonrpc", "id", "method", "params"])
const paramsKeys = new Set(["name", "arguments", "_meta"])

const isPlainObject = (value: unknown): value is Record<string, unknown> => {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false
  const prototype = Object.getPrototypeOf(value)
  return prototype === Object.prototype || prototype === null
}

const onlyKeys = (value: Record<string, unknown>, allowed: ReadonlySet<string>): boolean => {
  for (const key in value) if (!allowed.has(key)) return false
  return true
}

const isRequestId = (id: unknown): id is string | number =>
  typeof id === "string" || (typeof id === "number" && Number.isSafeInteger(id))

const isPlainMeta = (meta: unknown): boolean => {
  if (meta === undefined) return true
  if (!isPlainObject(meta)) return false
  for (const key in meta) if (key !== "progressToken") return false
  const token = meta.progressToken
  return token === undefined || isRequestId(token)
}

interface PlainCall {
  readonly id: string | number
  readonly name: string
  readonly args: Record<string, unknown> | undefined
}

/** The call, when `message` is a `tools/call` request this path takes (see the module docs). */
const plainCall = (message: unknown): PlainCall | undefined => {
  if (!isPlainObject(message) || message.method !== "tools/call" || message.jsonrpc !== "2.0") return undefined
  if (!isRequestId(message.id) || !onlyKeys(message, envelopeKeys)) return undefined
  const params = message.params
  if (!isPlainObject(params) || !onlyKeys(params, paramsKeys) || typeof params.name !== "string") return undefined
  const args = params.arguments
  if (args !== undefined && (!isPlainObject(args) || Object.hasOwn(args, "__proto__"))) return undefined
  if (!isPlainMeta(params._meta)) return undefined
  return { id: message.id, name: params.name, args }
}

/** The id a `notifications/cancelled` names, if `message` is one. */
const cancelledId = (message: JSONRPCMessage): unknown =>
  "method" in message && message.method === "notifications/cancelled" && !("id" in message)
    ? (message.params as { requestId?: unknown } | undefined)?.requestId
    : undefined

/** The shape the session's answers have; anything else is checked as the SDK checks it. */
const isPlainResult = (result: CallToolResult): boolean =>
  isPlainObject(result) &&
  Array.isArray(result.content) &&
  (result.structuredContent === undefined || isPlainObject(result.structuredContent)) &&
  (result.isError === undefined || typeof result.isError === "boolean")

/** The result as the SDK's tools/call handler returns it (its result schema applied). */
const checkedResult = (result: CallToolResult): unknown => {
  if (isPlainResult(result)) return result
  const checked = CallToolResultSchema.safeParse(result)
  if (checked.success) return checked.data
  throw new McpError(ErrorCode.InvalidParams, `Invalid tools/call result: ${checked.error.message}`)
}

class DirectToolCallTransport extends TransportWrapper {
  /** Calls in flight by request id: `true` once cancelled (their answer is dropped). */
  private readonly inFlight = new Map<string | number, boolean>()

  constructor(
    inner: Transport,
    private readonly callTool: CallTool,
  ) {
    super(inner)
  }

  protected receive(message: JSONRPCMessage, extra?: MessageExtraInfo): void {
    const call = plainCall(message)
    if (call === undefined) {
      const cancelled = cancelledId(message)
      if (cancelled !== undefined && this.inFlight.has(cancelled as string | number))
        this.inFlight.set(cancelled as string | number, true)
      this.onmessage?.(message, extra)
      return
    }
    this.inFlight.set(call.id, false)
    // As the SDK's Protocol: a synchronous throw becomes an error answer too.
    Promise.resolve()
      .then(() => this.callTool(call.name, call.args, call.id))
      .then(
        (result) => this.answer(call.id, () => ({ result: checkedResult(result), jsonrpc: "2.0", id: call.id })),
        (error: { code?: unknown; message?: string; data?: unknown }) =>
          this.answer(call.id, () => ({
            jsonrpc: "2.0",
            id: call.id,
            error: {
              code: Number.isSafeInteger(error.code) ? (error.code as number) : ErrorCode.InternalError,
              message: error.message ?? "Internal error",
              ...(error.data !== undefined && { data: error.data }),
            },
          })),
      )
      .catch((error: unknown) =>
        this.onerror?.(new Error(`Failed to send response: ${error instanceof Error ? error.message : String(error)}`)),
      )
  }

  private async answer(id: string | number, response: () => unknown): Promise<void> {
    const cancelled = this.inFlight.get(id)
    this.inFlight.delete(id)
    if (cancelled !== false) return
    let message: unknown
    try {
      message = response()
    } catch (error) {
      const failure = error as { code?: unknown; message?: string }
      message = {
        jsonrpc: "2.0",
        id,
        error: {
          code: Number.isSafeInteger(failure.code) ? failure.code : ErrorCode.InternalError,
          message: failure.message ?? "Internal error",
        },
      }
    }
    await this.inner.send(message as JSONRPCMessage)
  }

  protected override closed(): void {
    for (const id of this.inFlight.keys()) this.inFlight.set(id, true)
  }
}
