/**
 * The idempotency key of a request from a client with a stable identity (the `?client=` id of a
 * WebSocket connection): what makes a retried write apply once (stores/Idempotency.ts).
 *
 * The key binds the client id to the request itself: its JSON-RPC id, the project it runs in,
 * its method and its parameters (the privacy-filtered arguments, `_meta` left out: a progress
 * token says nothing about what the request does), canonically ordered and hashed. So:
 * - a resend of the same request under the same id (a shim's retry after a reconnect, or after
 *   the daemon crashed) has the same key and gets the first reply without being applied again;
 * - another request under an id the client used before (a restarted agent counting from 1 again)
 *   has another key and is a new request, applied and answered on its own;
 * - an identical request under a reused id within the store's memory of keys (24 h) is taken for
 *   a retry: it is indistinguishable from one.
 * Key length is fixed whatever the id's length: the client id (at most 128 characters) and a
 * SHA-256 in base64url.
 */
import { createHash } from "node:crypto"

/** What a request is, for its key. */
export interface KeyedRequest {
  readonly requestId: string | number
  readonly project: string
  readonly method: string
  readonly params: unknown
}

/**
 * JSON with every object's keys sorted (by UTF-16 code units), so two encodings of the same value (keys in
 * another order) give the same text. `undefined` members are left out, as JSON.stringify does.
 */
export const canonicalJson = (value: unknown): string => {
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null"
  if (Array.isArray(value))
    return `[${value.map((item) => (item === undefined ? "null" : canonicalJson(item))).join(",")}]`
  const entries = Object.entries(value)
    .filter(([, item]) => item !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  return `{${entries.map(([key, item]) => `${JSON.stringify(key)}:${canonicalJson(item)}`).join(",")}}`
}

const withoutMeta = (params: unknown): unknown => {
  if (params === null || typeof params !== "object" || Array.isArray(params) || !("_meta" in params)) return params
  const { _meta: _, ...rest } = params as Record<string, unknown>
  return rest
}

/** The idempotency key of `request` from client `clientId`. */
export const retryKey = (clientId: string, request: KeyedRequest): string => {
  const fingerprint = createHash("sha256")
    .update(canonicalJson([request.requestId, request.project, request.method, withoutMeta(request.params)]))
    .digest("base64url")
  return `${clientId}:${fingerprint}`
}
