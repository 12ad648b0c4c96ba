/**
 * An MCP SDK `Transport` over one WebSocket (the `ws` package): one JSON-RPC message per text
 * frame, both ways. Used by the daemon for each `/ws` connection and by the `mnemos mcp` shim.
 *
 * Limits: a frame above `frameBytesMax` is answered with a JSON-RPC error for its id (when it can
 * be read) and dropped — the connection stays usable; `ws` itself closes a connection whose frame
 * exceeds `frameBytesHardMax` (code 1009), before the frame is buffered whole.
 */
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import { type JSONRPCMessage, JSONRPCMessageSchema } from "@modelcontextprotocol/sdk/types.js"
import type { RawData, WebSocket } from "ws"

/** Largest JSON-RPC message accepted in one frame. */
export const frameBytesMax = 16 * 1024 * 1024
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

  constructor(private readonly socket: WebSocket) {}

  async start(): Promise<void> {
    if (this.started) throw new Error("WebSocketTransport already started")
    this.started = true
    this.socket.on("message", (data, isBinary) => this.receive(data, isBinary))
    this.socket.on("close", () => this.onclose?.())
    this.socket.on("error", (error) => this.onerror?.(error))
  }

  private receive(data: RawData, isBinary: boolean): void {
    const problem = this.problemWith(data, isBinary)
    if ("message" in problem) this.onmessage?.(problem.message)
    else this.reject(problem.id, problem.error, problem.code)
  }

  /** The decoded message, or why the frame is refused (with the request id when it could be read). */
  private problemWith(
    data: RawData,
    isBinary: boolean,
  ): { message: JSONRPCMessage } | { id: unknown; error: string; code: number } {
    if (isBinary) return { id: undefined, error: "binary frames are not accepted; send JSON-RPC as text", code: -32600 }
    const bytes = byteLengthOf(data)
    let parsed: unknown
    try {
      parsed = JSON.parse(textOf(data))
    } catch (error) {
      return {
        id: undefined,
        error: `frame is not JSON: ${error instanceof Error ? error.message : String(error)}`,
        code: -32700,
      }
    }
    const id =
      typeof parsed === "object" && parsed !== null && "id" in parsed ? (parsed as { id: unknown }).id : undefined
    if (bytes > frameBytesMax) {
      return { id, error: `message of ${bytes} bytes exceeds the limit of ${frameBytesMax} bytes`, code: -32600 }
    }
    const message = JSONRPCMessageSchema.safeParse(parsed)
    if (!message.success) return { id, error: `not a JSON-RPC 2.0 message: ${message.error.message}`, code: -32600 }
    return { message: message.data }
  }

  private reject(id: unknown, message: string, code = -32600): void {
    const validId = typeof id === "string" || typeof id === "number" ? id : null
    this.onerror?.(new Error(message))
    if (validId === null) return
    this.socket.send(JSON.stringify({ jsonrpc: "2.0", id: validId, error: { code, message } }))
  }

  send(message: JSONRPCMessage): Promise<void> {
    return new Promise((resolve, reject) => {
      if (this.socket.readyState !== this.socket.OPEN) return reject(new Error("WebSocket is not open"))
      this.socket.send(JSON.stringify(message), (error) => (error ? reject(error) : resolve()))
    })
  }

  async close(): Promise<void> {
    if (this.socket.readyState === this.socket.CLOSED) return
    await new Promise<void>((resolve) => {
      this.socket.once("close", () => resolve())
      this.socket.close(1000)
    })
  }
}
