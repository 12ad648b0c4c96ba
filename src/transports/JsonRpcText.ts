/**
 * One JSON-RPC message as text, the way every transport that reads text (WebSocket frames,
 * stdio lines) decodes it and answers what it cannot take, so that no message goes unanswered:
 *
 *   not JSON                        -32700 Parse error, id null (none can be read)
 *   JSON but not a JSON-RPC message -32600 Invalid Request, with its id when it has a usable one
 *   longer than the limit           -32600, with its id when it can be found (`idOfCutMessage`)
 *
 * as JSON-RPC 2.0 §5.1 says: an error whose request id cannot be determined carries id null.
 */
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"

/** Largest JSON-RPC message accepted as one WebSocket frame or one stdio line, in bytes. */
export const jsonRpcMessageBytesMax = 16 * 1024 * 1024

/** JSON-RPC's error codes for what a transport refuses. */
export const parseErrorCode = -32700
export const invalidRequestCode = -32600

/** A request id a reply can carry: a string, a number, or null when none can be read. */
export type ReplyId = string | number | null

/** Why a message is refused, and whom to tell. */
export interface Refusal {
  readonly id: ReplyId
  readonly code: number
  readonly error: string
}

/** A message, or why it is refused. */
export type Decoded = { readonly message: JSONRPCMessage } | Refusal

/** Why a message that is JSON but not JSON-RPC 2.0 is refused. */
export const notJsonRpc = "not a JSON-RPC 2.0 message"

/** The id of a (decoded or raw) message, when a reply can carry it; else null. */
export const replyIdOf = (value: unknown): ReplyId => {
  if (typeof value !== "object" || value === null || !("id" in value)) return null
  const id = (value as { id: unknown }).id
  return typeof id === "string" || typeof id === "number" ? id : null
}

/** Decodes one message's text. */
export const decodeJsonRpcText = (text: string): Decoded => {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch (error) {
    return {
      id: null,
      code: parseErrorCode,
      error: `not JSON: ${error instanceof Error ? error.message : String(error)}`,
    }
  }
  const message = jsonRpcMessageOf(parsed)
  if (message === undefined) return { id: replyIdOf(parsed), code: invalidRequestCode, error: notJsonRpc }
  return { message }
}

/** The refusal of a message of `bytes` bytes, above the limit. */
export const tooLong = (id: ReplyId, bytes: number, bytesMax = jsonRpcMessageBytesMax): Refusal => ({
  id,
  code: invalidRequestCode,
  error: `message of ${bytes} bytes exceeds the limit of ${bytesMax} bytes`,
})

/** How much of each end of a message too long to read is kept to find its id. */
export const cutMessageEndBytes = 1024

const idValue = String.raw`("(?:[^"\\]|\\.)*"|-?\d+)`
/** `"id"` as the first member (or the second, after `"jsonrpc"`): certainly the top-level id. */
const idAtStart = new RegExp(String.raw`^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*${idValue}`)
/** `"id"` as the last member, before the final brace (as the MCP SDK writes its requests). */
const idAtEnd = new RegExp(String.raw`,\s*"id"\s*:\s*${idValue}\s*\}\s*$`)

/**
 * The id of a message too long to be read whole, from its first and last bytes (`cutMessageEndBytes` each): found when it is
 * the object's first member (after `"jsonrpc"`) or its last one, where it cannot be a nested one.
 */
export const idOfCutMessage = (head: string, tail: string): ReplyId => {
  const match = idAtStart.exec(head) ?? idAtEnd.exec(tail)
  if (match === null) return null
  try {
    const id = JSON.parse(match[1]!) as unknown
    return typeof id === "string" || typeof id === "number" ? id : null
  } catch {
    return null
  }
}

/** The JSON-RPC error reply for a refused message. */
export const errorReply = (id: ReplyId, code: number, message: string) => ({
  jsonrpc: "2.0" as const,
  id,
  error: { code, message },
})

/** A request's id (JSON-RPC allows a string or a number). */
export type RequestId = string | number

/** A request: a method and an id (a notification has no id). */
export const isRequest = (message: JSONRPCMessage): message is JSONRPCMessage & { id: RequestId; method: string } =>
  "method" in message && "id" in message
/** An answer to a request: an id and no method. */
export const isResponse = (message: JSONRPCMessage): message is JSONRPCMessage & { id: RequestId } =>
  !("method" in message) && "id" in message && message.id !== undefined

/** The request a `notifications/cancelled` names: the SDK never answers it. */
export const cancelledRequestId = (message: JSONRPCMessage): RequestId | undefined => {
  if (!("method" in message) || message.method !== "notifications/cancelled" || "id" in message) return undefined
  const requestId = (message.params as { requestId?: unknown } | undefined)?.requestId
  return typeof requestId === "string" || typeof requestId === "number" ? requestId : undefined
}

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)
const isIdValue = (value: unknown): value is RequestId =>
  typeof value === "string" || (typeof value === "number" && Number.isSafeInteger(value))
const hasOnlyKeys = (value: Record<string, unknown>, keys: ReadonlySet<string>): boolean => {
  for (const key in value) if (!keys.has(key)) return false
  return true
}
const requestKeys = new Set(["jsonrpc", "id", "method", "params"])
const notificationKeys = new Set(["jsonrpc", "method", "params"])
const resultKeys = new Set(["jsonrpc", "id", "result"])
const errorKeys = new Set(["jsonrpc", "id", "error"])
/** `params` or `result`: a plain object whose `_meta`, if any, is one with a valid progress token. */
const isPayload = (value: unknown): boolean => {
  if (!isPlainObject(value)) return false
  const meta = value._meta
  if (meta === undefined) return true
  return isPlainObject(meta) && (meta.progressToken === undefined || isIdValue(meta.progressToken))
}

/**
 * `value` as a JSON-RPC message, by plain structural checks of the envelope the SDK's
 * `JSONRPCMessageSchema` checks (strict objects: no keys beyond the kind's own; ids strings or
 * integers; `params`/`result` plain objects), without its Zod union; undefined when it is none.
 * Each method's params are checked later, by the SDK's request schemas or the tool's own Schema.
 */
export const jsonRpcMessageOf = (value: unknown): JSONRPCMessage | undefined => {
  if (!isPlainObject(value) || value.jsonrpc !== "2.0") return undefined
  if ("method" in value) {
    if (typeof value.method !== "string" || (value.params !== undefined && !isPayload(value.params))) return undefined
    if ("id" in value)
      return isIdValue(value.id) && hasOnlyKeys(value, requestKeys) ? (value as JSONRPCMessage) : undefined
    return hasOnlyKeys(value, notificationKeys) ? (value as JSONRPCMessage) : undefined
  }
  if ("result" in value)
    return isIdValue(value.id) && isPayload(value.result) && hasOnlyKeys(value, resultKeys)
      ? (value as JSONRPCMessage)
      : undefined
  const error = value.error
  return (value.id === undefined || isIdValue(value.id)) &&
    isPlainObject(error) &&
    Number.isSafeInteger(error.code) &&
    typeof error.message === "string" &&
    hasOnlyKeys(value, errorKeys)
    ? (value as JSONRPCMessage)
    : undefined
}
