/**
 * An MCP SDK `Transport` over one WebSocket (the `ws` package): one JSON-RPC message per text
 * frame, both ways. Used by the daemon for each `/ws` connection and by the `mnemos mcp` shim.
 *
 * Every frame is answered or taken (JsonRpcText.ts): a frame that is not JSON gets -32700, one
 * that is not a JSON-RPC message or is binary -32600, with its id when it has one (else id null),
 * and the connection stays usable. A frame above `frameBytesMax` is answered with a JSON-RPC error
 * for its id (when it can be read) and dropped; `ws` itself closes a connection whose frame
 * exceeds `frameBytesHardMax` (code 1009), before the frame is buffered whole.
 *
 * A client that sends faster than it reads is held back (RequestGate.ts): a request starts only
 * while few enough are unanswered and the socket has under `sendBufferedBytesMark` waiting to go
 * out; past a bound of held requests the socket is not read.
 */
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"
import type { RawData, WebSocket } from "ws"
import {
  type Decoded,
  decodeJsonRpcText,
  errorReply,
  invalidRequestCode,
  jsonRpcMessageBytesMax,
  type ReplyId,
  replyIdOf,
  tooLong,
} from "./JsonRpcText.ts"
import { RequestGate } from "./RequestGate.ts"

/** Bytes waiting to go out on the socket past which no further request starts until they have gone. */
export const sendBufferedBytesMark = 256 * 1024

/** Largest JSON-RPC message accepted in one frame. */
export const frameBytesMax = jsonRpcMessageBytesMax
/** Frames larger than this close the connection (they are not even buffered). */
export const frameBytesHardMax = 64 * 1024 * 1024

const textOf = (data: RawData): string =>
  Array.isArray(data) ? Buffer.concat(data).toString("utf8") : Buffer.from(data as ArrayBuffer).toString("utf8")

const byteLengthOf = (data: RawData): number =>
  Array.isArray(data) ? data.reduce((sum, part) => sum + part.length, 0) : (data as ArrayBuffer).byteLength

/** A Transport over an open (or opening) WebSocket. */
export class WebSocketTransport implements Transport {
  onclose?: () => void
  onerror?: (error: Error) => void
  onmessage?: (message: JSONRPCMessage) => void
  sessionId?: string
  private started = false
  private readonly gate = new RequestGate(
    (message) => this.onmessage?.(message),
    (reading) => {
      if (reading) this.socket.resume()
      else this.socket.pause()
    },
  )

  constructor(private readonly socket: WebSocket) {}

  async start(): Promise<void> {
    if (this.started) throw new Error("WebSocketTransport already started")
    this.started = true
    this.socket.on("message", (data, isBinary) => this.receive(data, isBinary))
    this.socket.on("close", () => {
      this.gate.close()
      this.onclose?.()
    })
    this.socket.on("error", (error) => this.onerror?.(error))
  }

  private receive(data: RawData, isBinary: boolean): void {
    const decoded = this.decode(data, isBinary)
    if ("message" in decoded) this.gate.receive(decoded.message, byteLengthOf(data))
    else this.reject(decoded.id, decoded.error, decoded.code)
  }

  /** The frame's message, or why it is refused (with the request id when it could be read). */
  private decode(data: RawData, isBinary: boolean): Decoded {
    if (isBinary)
      return { id: null, code: invalidRequestCode, error: "binary frames are not accepted; send JSON-RPC as text" }
    const decoded = decodeJsonRpcText(textOf(data))
    const bytes = byteLengthOf(data)
    if (bytes <= frameBytesMax) return decoded
    return tooLong("message" in decoded ? replyIdOf(decoded.message) : decoded.id, bytes)
  }

  private reject(id: ReplyId, message: string, code: number): void {
    this.onerror?.(new Error(message))
    if (this.socket.readyState === this.socket.OPEN) this.socket.send(JSON.stringify(errorReply(id, code, message)))
  }

  send(message: JSONRPCMessage): Promise<void> {
    return this.gate.send(
      message,
      (done) => {
        if (this.socket.readyState !== this.socket.OPEN) return done(new Error("WebSocket is not open"))
        this.socket.send(JSON.stringify(message), done)
      },
      () => this.socket.bufferedAmount > sendBufferedBytesMark,
    )
  }

  /** Requests read and not yet started (RequestGate.ts). */
  heldCount(): number {
    return this.gate.heldCount()
  }

  async close(): Promise<void> {
    if (this.socket.readyState === this.socket.CLOSED) return
    await new Promise<void>((resolve) => {
      this.socket.once("close", () => resolve())
      this.socket.close(1000)
    })
  }
}
