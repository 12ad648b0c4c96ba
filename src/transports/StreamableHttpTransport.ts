/**
 * The server side of MCP's Streamable HTTP transport, written straight over Node's
 * `IncomingMessage`/`ServerResponse`: one session's POSTs, its GET stream and its DELETE.
 *
 * Its wire behaviour is the SDK's `StreamableHTTPServerTransport` (webStandardStreamableHttp.js)
 * without an event store — the same status codes, headers and JSON-RPC errors, checked in the same
 * order (test/transports/StreamableHttpWire.test.ts runs the same requests against both) — without
 * the SDK's cost per POST: a web `Request` built from the Node request, the body re-checked against
 * a Zod union and several Zod message guards, and the answer piped through a `ReadableStream`.
 * Here the body, parsed once by the HTTP server, gets plain structural checks (JsonRpcText.ts) and
 * the answer is written to the `ServerResponse` itself.
 *
 * - A POST of notifications and responses only is answered 202. A POST holding requests is
 *   answered with an SSE stream (`event: message`), which carries every server message related to
 *   one of its requests (a `roots/list` sent during a tool call, progress) and ends with the answer
 *   to the last of them.
 * - The GET stream carries the messages related to no request; one at a time per session (409).
 * - The session id is issued on `initialize` and required after it (400 without, 404 another);
 *   an `mcp-protocol-version` header must name a version the SDK supports (400).
 * - Deliberately absent: resumability (no event store, no `Last-Event-ID` replay, no priming
 *   events), JSON answers instead of SSE (`enableJsonResponse`), stateless mode, and the SDK's own
 *   Host/Origin checks (HttpServer.ts makes them for every route).
 *
 * A stream whose client went away is dropped: what is sent on it later is discarded, and the last
 * answer a dropped POST stream would have carried fails `send` (as in the SDK). `close()` ends
 * every stream.
 *
 * The GET stream of a client that does not read it is not written past `standaloneBufferedBytesMark`:
 * `send` waits for it to drain (or close) first, so the sender is held back rather than the stream
 * buffering for ever — a session with its GET stream open is never idle (SessionTable.ts), and its
 * subscription's `notifications/resources/updated`, one per batch of writes, grew the daemon's memory
 * with every write for as long as the stream stayed open. Its keepalive comment is skipped meanwhile.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http"
import type { Transport, TransportSendOptions } from "@modelcontextprotocol/sdk/shared/transport.js"
import type { JSONRPCMessage, MessageExtraInfo } from "@modelcontextprotocol/sdk/types.js"
import { isInitializeRequest, supportedProtocolVersions } from "../tools/McpServer.ts"
import { drained } from "./Drained.ts"
import { isRequest, jsonRpcMessageOf, type RequestId } from "./JsonRpcText.ts"
import { isJsonContentType } from "./MediaType.ts"
import { armSseKeepAlive, sseKeepAliveMs } from "./SseKeepAlive.ts"

/** Messages one POST may carry as a JSON-RPC batch (the MCP SDK's limit). */
export const batchMessagesMax = 100

/** Bytes waiting to go out on the GET stream past which `send` waits for them to go before it writes. */
export const standaloneBufferedBytesMark = 64 * 1024

/** How a session's transport is told about its id. */
export interface StreamableHttpOptions {
  readonly sessionIdGenerator: () => string
  readonly onsessioninitialized?: (sessionId: string) => void
  readonly onsessionclosed?: (sessionId: string) => void
  /** Interval of the `: keepalive` comment on an open stream (the SDK's 15 s by default). */
  readonly keepAliveMs?: number
}

/** One open SSE answer: a POST's (with the requests it still owes an answer) or the GET stream. */
interface SseStream {
  readonly res: ServerResponse
  readonly unanswered: Set<RequestId>
  /** Whether its 200 and SSE headers are written (a POST's are, with its first event). */
  headed: boolean
  open: boolean
  keepAlive: NodeJS.Timeout | undefined
}

const sseHeaders = (sessionId: string | undefined): Record<string, string> => ({
  "content-type": "text/event-stream",
  "cache-control": "no-cache, no-transform",
  connection: "keep-alive",
  "x-accel-buffering": "no",
  ...(sessionId !== undefined ? { "mcp-session-id": sessionId } : {}),
})

const eventOf = (message: JSONRPCMessage): string => `event: message\ndata: ${JSON.stringify(message)}\n\n`

/** A refusal, written as the SDK writes it. */
class Refused {
  constructor(
    readonly status: number,
    readonly code: number,
    readonly message: string,
    readonly headers: Record<string, string> = {},
    readonly data?: string,
  ) {}
}

const headerOf = (headers: IncomingHttpHeaders, name: string): string | undefined => {
  const value = headers[name]
  return Array.isArray(value) ? value.join(", ") : value
}

/** One Streamable HTTP session's transport (see the module's docblock). */
export class StreamableHttpTransport implements Transport {
  onclose?: () => void
  onerror?: (error: Error) => void
  onmessage?: <T extends JSONRPCMessage>(message: T, extra?: MessageExtraInfo) => void
  sessionId?: string
  private started = false
  private initialized = false
  private closed = false
  /** The POST stream that owes each request's answer. */
  private readonly streamOfRequest = new Map<RequestId, SseStream>()
  private readonly streams = new Set<SseStream>()
  private standalone: SseStream | undefined

  constructor(private readonly options: StreamableHttpOptions) {}

  async start(): Promise<void> {
    if (this.started) throw new Error("Transport already started")
    this.started = true
  }

  /** Answers one HTTP request of this session; `parsedBody` is a POST's body, parsed (undefined when empty). */
  handleRequest(req: IncomingMessage, res: ServerResponse, parsedBody?: unknown): void {
    const refused = this.closed ? new Refused(404, -32001, "Session not found") : this.route(req, res, parsedBody)
    if (refused === undefined) return
    if (refused.status !== 404 || !this.closed) this.onerror?.(new Error(refused.message))
    const error = {
      code: refused.code,
      message: refused.message,
      ...(refused.data !== undefined ? { data: refused.data } : {}),
    }
    const text = JSON.stringify({ jsonrpc: "2.0", error, id: null })
    res.writeHead(refused.status, { "content-type": "application/json", ...refused.headers }).end(text)
  }

  private route(req: IncomingMessage, res: ServerResponse, parsedBody: unknown): Refused | undefined {
    switch (req.method) {
      case "POST":
        return this.post(req, res, parsedBody)
      case "GET":
        return this.get(req, res)
      case "DELETE":
        return this.delete(req, res)
      default:
        return new Refused(405, -32000, "Method not allowed.", { allow: "GET, POST, DELETE" })
    }
  }

  private post(req: IncomingMessage, res: ServerResponse, body: unknown): Refused | undefined {
    const accept = req.headers.accept
    if (!accept?.includes("application/json") || !accept.includes("text/event-stream"))
      return new Refused(406, -32000, "Not Acceptable: Client must accept both application/json and text/event-stream")
    const contentType = req.headers["content-type"]
    if (contentType !== "application/json" && !isJsonContentType(contentType))
      return new Refused(415, -32000, "Unsupported Media Type: Content-Type must be application/json")
    if (body === undefined) return new Refused(400, -32700, "Parse error: Invalid JSON")
    if (Array.isArray(body) && body.length > batchMessagesMax)
      return new Refused(400, -32600, `Invalid Request: Batch must not exceed ${batchMessagesMax} messages`)
    const messages: Array<JSONRPCMessage> = []
    for (const value of Array.isArray(body) ? body : [body]) {
      const message = jsonRpcMessageOf(value)
      if (message === undefined) return new Refused(400, -32700, "Parse error: Invalid JSON-RPC message")
      messages.push(message)
    }
    if (messages.some(isInitializeRequest)) {
      if (this.initialized && this.sessionId !== undefined)
        return new Refused(400, -32600, "Invalid Request: Server already initialized")
      if (messages.length > 1)
        return new Refused(400, -32600, "Invalid Request: Only one initialization request is allowed")
      this.sessionId = this.options.sessionIdGenerator()
      this.initialized = true
      this.options.onsessioninitialized?.(this.sessionId)
    } else {
      const refused = this.checkSession(req)
      if (refused !== undefined) return refused
    }
    const extra: MessageExtraInfo = { requestInfo: { headers: req.headers } }
    const requestIds = messages.filter(isRequest).map((message) => message.id)
    if (requestIds.length === 0) {
      for (const message of messages) this.onmessage?.(message, extra)
      res.writeHead(202).end()
      return undefined
    }
    // The headers go out with the first event (or keep-alive): the answer usually follows at once.
    const stream = this.open(res, new Set(requestIds), false)
    for (const id of requestIds) this.streamOfRequest.set(id, stream)
    try {
      for (const message of messages) this.onmessage?.(message, extra)
    } catch (error) {
      for (const id of requestIds) this.streamOfRequest.delete(id)
      if (stream.headed) {
        this.onerror?.(error as Error)
        this.end(stream)
        return undefined
      }
      this.drop(stream)
      return new Refused(400, -32700, "Parse error", {}, String(error))
    }
    return undefined
  }

  private get(req: IncomingMessage, res: ServerResponse): Refused | undefined {
    if (!req.headers.accept?.includes("text/event-stream"))
      return new Refused(406, -32000, "Not Acceptable: Client must accept text/event-stream")
    const refused = this.checkSession(req)
    if (refused !== undefined) return refused
    if (this.standalone !== undefined)
      return new Refused(409, -32000, "Conflict: Only one SSE stream is allowed per session")
    this.standalone = this.open(res, new Set(), true)
    res.flushHeaders()
    return undefined
  }

  private delete(req: IncomingMessage, res: ServerResponse): Refused | undefined {
    const refused = this.checkSession(req)
    if (refused !== undefined) return refused
    if (this.sessionId !== undefined) this.options.onsessionclosed?.(this.sessionId)
    void this.close()
    res.writeHead(200).end()
    return undefined
  }

  /** The session header (and protocol version) of a request after `initialize`. */
  private checkSession(req: IncomingMessage): Refused | undefined {
    if (!this.initialized) return new Refused(400, -32000, "Bad Request: Server not initialized")
    const sessionId = headerOf(req.headers, "mcp-session-id")
    if (!sessionId) return new Refused(400, -32000, "Bad Request: Mcp-Session-Id header is required")
    if (sessionId !== this.sessionId) return new Refused(404, -32001, "Session not found")
    const version = headerOf(req.headers, "mcp-protocol-version")
    if (version !== undefined && !supportedProtocolVersions.includes(version))
      return new Refused(
        400,
        -32000,
        `Bad Request: Unsupported protocol version: ${version} (supported versions: ${supportedProtocolVersions.join(", ")})`,
      )
    return undefined
  }

  private open(res: ServerResponse, unanswered: Set<RequestId>, headed: boolean): SseStream {
    if (headed) res.writeHead(200, sseHeaders(this.sessionId))
    const stream: SseStream = { res, unanswered, headed, open: true, keepAlive: undefined }
    stream.keepAlive = armSseKeepAlive(this.options.keepAliveMs ?? sseKeepAliveMs, () => {
      if (stream.open && res.writableLength <= standaloneBufferedBytesMark) this.head(stream).write(": keepalive\n\n")
    })
    this.streams.add(stream)
    res.once("close", () => this.drop(stream))
    return stream
  }

  /** Forgets a stream (its client went away, or it ended). */
  private drop(stream: SseStream): void {
    stream.open = false
    clearInterval(stream.keepAlive)
    this.streams.delete(stream)
    if (this.standalone === stream) this.standalone = undefined
  }

  /** The stream's response, its headers written. */
  private head(stream: SseStream): ServerResponse {
    if (!stream.headed) {
      stream.headed = true
      stream.res.writeHead(200, sseHeaders(this.sessionId))
    }
    return stream.res
  }

  private end(stream: SseStream, lastEvent?: string): void {
    const open = stream.open
    this.drop(stream)
    if (open) this.head(stream).end(lastEvent)
  }

  async send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    const isAnswer = !("method" in message)
    const requestId = isAnswer ? (message as { id?: RequestId }).id : options?.relatedRequestId
    if (requestId === undefined) {
      if (isAnswer)
        throw new Error("Cannot send a response on a standalone SSE stream unless resuming a previous client request")
      return this.sendUnrelated(eventOf(message))
    }
    const stream = this.streamOfRequest.get(requestId)
    if (stream === undefined) throw new Error(`No connection established for request ID: ${String(requestId)}`)
    if (isAnswer) {
      this.streamOfRequest.delete(requestId)
      stream.unanswered.delete(requestId)
      if (stream.unanswered.size === 0) {
        if (!stream.open && !this.closed)
          throw new Error(`No connection established for request ID: ${String(requestId)}`)
        return this.end(stream, eventOf(message))
      }
    }
    if (stream.open) this.head(stream).write(eventOf(message))
  }

  /** Writes `event` on the GET stream, if one is open, once what waits on it is under the mark. */
  private async sendUnrelated(event: string): Promise<void> {
    let stream = this.standalone
    while (stream?.open === true && stream.res.writableLength > standaloneBufferedBytesMark) {
      await drained(stream.res)
      stream = this.standalone
    }
    if (stream?.open === true) stream.res.write(event)
  }

  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    // Requests still owed an answer keep their (ended) stream: an answer sent after the close is
    // dropped quietly, as the SDK's transport drops it, rather than failing `send`.
    for (const stream of [...this.streams]) this.end(stream)
    this.onclose?.()
  }
}
