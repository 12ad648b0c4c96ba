/**
 * The legacy MCP transport over HTTP (protocol 2024-11-05): a client opens `GET /sse`, is told on
 * that stream where to post (`event: endpoint`, `/messages?sessionId=…`), posts each JSON-RPC
 * message there (202 Accepted once taken) and reads every message of the server on the stream
 * (`event: message`). Its wire behaviour is the SDK's deprecated `SSEServerTransport`
 * (server/sse.js), which this replaces for what that one lacks: a bound on what a client that posts
 * without reading its stream makes the server hold.
 *
 * Such a client is held back as one on stdio or a WebSocket is (RequestGate.ts): a request starts
 * only while few enough are unanswered and the stream has under `streamBufferedBytesMark` waiting to
 * go out; the others are held, in order. Past the gate's bound of held requests a posted request is
 * refused with 503 and `Retry-After` — not taken, so the client knows to send it again — until some
 * have started; the client's answers and notifications are always taken (they hold nothing).
 * With the SDK's transport every answer was buffered in the stream: 300 `read_graph` of 2,000
 * entities took a daemon from 163 to 519 MiB, and each further one took more (docs/benchmarks.md,
 * "A client that does not read its SSE stream").
 *
 * A post that is not `application/json` is refused with 415 (a browser cannot send that across
 * origins without asking first); one that is not a JSON-RPC message with 400 and a JSON-RPC error.
 *
 * As on the Streamable HTTP streams (and unlike the SDK's transport), the stream carries a
 * `: keepalive` comment every 15 s while it has room, so that a proxy or a client that drops a
 * silent connection keeps it, and says `x-accel-buffering: no` to proxies that buffer answers.
 */
import { randomUUID } from "node:crypto"
import type { IncomingMessage, ServerResponse } from "node:http"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"
import { sendJson } from "./HttpBodies.ts"
import { errorReply, invalidRequestCode, isRequest, jsonRpcMessageOf, notJsonRpc, replyIdOf } from "./JsonRpcText.ts"
import { RequestGate } from "./RequestGate.ts"
import { armSseKeepAlive, sseKeepAliveMs } from "./SseKeepAlive.ts"

/** Bytes waiting to go out on the stream past which no further request starts until they have gone. */
export const streamBufferedBytesMark = 256 * 1024

/** What a refused post is told to wait before it sends again, in seconds. */
export const refusedRetryAfterSeconds = 1

/** One client's SSE session: its stream, and the posts that carry its messages. */
export class SseTransport implements Transport {
  onclose?: () => void
  onerror?: (error: Error) => void
  onmessage?: (message: JSONRPCMessage) => void
  readonly sessionId: string = randomUUID()
  private stream: ServerResponse | undefined
  private keepAlive: NodeJS.Timeout | undefined
  private closed = false
  /** False while the gate holds `heldBytesMax` of requests: posted requests are refused. */
  private takingRequests = true
  private readonly gate = new RequestGate(
    (message) => this.onmessage?.(message),
    (reading) => {
      this.takingRequests = reading
    },
  )

  /**
   * @param endpoint where the client posts its messages (the session id is added as `sessionId`)
   * @param response the answer to the client's `GET`, which becomes the stream
   * @param keepAliveMs how often the stream carries a keepalive comment (the SDK's 15 s)
   */
  constructor(
    private readonly endpoint: string,
    private readonly response: ServerResponse,
    private readonly keepAliveMs = sseKeepAliveMs,
  ) {}

  async start(): Promise<void> {
    if (this.stream !== undefined || this.closed) throw new Error("SseTransport already started")
    const stream = this.response
    stream.writeHead(200, {
      "content-type": "text/event-stream",
      "cache-control": "no-cache, no-transform",
      connection: "keep-alive",
      "x-accel-buffering": "no",
    })
    stream.write(`event: endpoint\ndata: ${this.endpoint}?sessionId=${this.sessionId}\n\n`)
    this.stream = stream
    this.keepAlive = armSseKeepAlive(this.keepAliveMs, () => {
      if (!stream.destroyed && stream.writableLength <= streamBufferedBytesMark) stream.write(": keepalive\n\n")
    })
    stream.on("close", () => this.end())
    stream.on("error", (error) => this.onerror?.(error))
  }

  /** A message the client posted, read as `body` (its JSON) of `bytes` bytes: taken (202) or refused. */
  handlePost(req: IncomingMessage, res: ServerResponse, body: unknown, bytes: number): void {
    const type = (req.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase()
    const message = jsonRpcMessageOf(body)
    if (this.stream === undefined) sendJson(res, 409, { error: "the session's event stream is not open" })
    else if (type !== "application/json")
      sendJson(res, 415, { error: `messages are posted as application/json, not ${type || "untyped"}` })
    else if (message === undefined) {
      const refused = errorReply(replyIdOf(body), invalidRequestCode, notJsonRpc)
      this.onerror?.(new Error(refused.error.message))
      sendJson(res, 400, refused)
    } else if (isRequest(message) && !this.takingRequests)
      sendJson(
        res,
        503,
        { error: "too many requests of this session wait for their answers to be read from its stream; send it again" },
        { "retry-after": String(refusedRetryAfterSeconds) },
      )
    else {
      this.gate.receive(message, bytes)
      res.writeHead(202, { "content-type": "text/plain" }).end("Accepted")
    }
  }

  send(message: JSONRPCMessage): Promise<void> {
    const stream = this.stream
    return this.gate.send(
      message,
      (done) => {
        if (stream === undefined || stream.destroyed || stream.writableEnded)
          return done(new Error("the session's event stream is closed"))
        stream.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`, done)
      },
      () => stream !== undefined && stream.writableLength > streamBufferedBytesMark,
    )
  }

  /** Requests taken and not yet started (RequestGate.ts). */
  heldCount(): number {
    return this.gate.heldCount()
  }

  async close(): Promise<void> {
    this.stream?.end()
    this.end()
  }

  private end(): void {
    if (this.closed) return
    this.closed = true
    this.stream = undefined
    clearInterval(this.keepAlive)
    this.gate.close()
    this.onclose?.()
  }
}
