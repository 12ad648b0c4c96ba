/**
 * An MCP SDK `Transport` over newline-delimited JSON-RPC on a readable and a writable stream
 * (stdin/stdout): what `serve --stdio` and the `mnemos mcp` shim speak to their client. It
 * replaces the SDK's StdioServerTransport, which drops a line it cannot parse without a word and
 * closes the whole transport at its first line over 10 MiB.
 *
 * Every line is taken or answered (JsonRpcText.ts): not JSON is -32700 (id null), not a JSON-RPC
 * message -32600 (with its id when it has one), and a line longer than `stdioLineBytesMax` -32600
 * with its id when one can be found at either end of the line. A line over the limit is never
 * held whole: past the limit only its first and last `cutMessageEndBytes` are kept while the rest
 * streams by, so memory stays bounded whatever a client writes. Blank lines are ignored, a
 * trailing CR is dropped. The transport never closes itself: its owner ends it with the input.
 *
 * At the end of the input a last line without its newline is taken too, then `onend` is called;
 * `whenAnswered()` tells when every request taken so far has its answer written (or was
 * cancelled), so that an owner can answer what it read before it stops: a script that pipes a
 * request and closes its end at once gets its answer.
 *
 * A client that writes faster than it reads is held back (RequestGate.ts): a request starts only
 * while few enough are unanswered and stdout's buffer is under its mark; the others wait, and past
 * a bound of them stdin is not read, so memory stays bounded whatever the client does.
 *
 * When the output fails (EPIPE: the client is gone, killed with its requests in flight), answers
 * are dropped rather than waited on: the requests still run to their end, so `whenAnswered()`
 * resolves once they have, and the process that waits for it stops (and frees its data directory)
 * then, not after `inputEndGraceMs`.
 */
import type { Readable, Writable } from "node:stream"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"
import { drained } from "./Drained.ts"
import { jsonPieceChars, jsonPieces } from "./JsonPieces.ts"
import {
  cutMessageEndBytes,
  decodeJsonRpcText,
  errorReply,
  idOfCutMessage,
  isResponse,
  jsonRpcMessageBytesMax,
  type ReplyId,
  tooLong,
} from "./JsonRpcText.ts"
import { RequestGate } from "./RequestGate.ts"

/**
 * The characters of an answer's text contents (a tool's `content`, a resource's `contents`): what
 * makes an answer large. The structured content beside a tool's text is about as long as it.
 */
const textChars = (message: JSONRPCMessage): number => {
  const result = (message as { result?: unknown }).result
  if (typeof result !== "object" || result === null) return 0
  let chars = 0
  for (const list of [(result as { content?: unknown }).content, (result as { contents?: unknown }).contents])
    if (Array.isArray(list))
      for (const item of list) {
        const text = (item as { text?: unknown } | null)?.text
        if (typeof text === "string") chars += text.length
      }
  return chars
}

/**
 * How long a stdio server waits, once its input has ended, for the answers to the requests it
 * read: a long call (a reindex, an import) finishes; one stuck for longer is given up.
 */
export const inputEndGraceMs = 60_000

/** Longest line taken, in bytes (the limit of a WebSocket message too). */
export const stdioLineBytesMax = jsonRpcMessageBytesMax

const newline = 0x0a

/** What is kept of a line past the limit: its length, first and last bytes. */
interface CutLine {
  bytes: number
  readonly head: Buffer
  tail: Buffer
}

/** A Transport over newline-delimited JSON-RPC. */
export class StdioLineTransport implements Transport {
  onclose?: () => void
  onerror?: (error: Error) => void
  onmessage?: (message: JSONRPCMessage) => void
  private parts: Array<Buffer> = []
  private partsBytes = 0
  private cut: CutLine | undefined
  private started = false
  private ended = false
  /** Called once the input has ended, its last line was taken and every request it held started. */
  onend?: () => void
  /** Set once the output failed or closed: nothing written reaches the client any more. */
  private outputGone = false
  private readonly gate = new RequestGate(
    (message) => {
      try {
        this.onmessage?.(message)
      } catch (error) {
        this.onerror?.(error instanceof Error ? error : new Error(String(error)))
      }
    },
    (reading) => {
      if (this.closed) return
      if (reading) this.input.resume()
      else this.input.pause()
    },
  )

  constructor(
    private readonly input: Readable = process.stdin,
    private readonly output: Writable = process.stdout,
    private readonly lineBytesMax = stdioLineBytesMax,
  ) {}

  async start(): Promise<void> {
    if (this.started) throw new Error("StdioLineTransport already started")
    this.started = true
    this.input.on("data", this.onData)
    this.input.on("error", this.onInputError)
    this.input.once("end", this.onInputEnd)
    this.output.on("error", this.onOutputGone)
    this.output.once("close", this.onOutputGone)
  }

  /** The client's end of the output is gone: writes waiting for its "drain" would wait for ever. */
  private readonly onOutputGone = () => {
    this.outputGone = true
    this.gate.setOutputGone()
  }

  /** Requests read and not yet started (RequestGate.ts). */
  heldCount(): number {
    return this.gate.heldCount()
  }

  /**
   * Resolves true once every request taken so far is answered or cancelled, or false after
   * `timeoutMs` with some still unanswered.
   */
  whenAnswered(timeoutMs: number): Promise<boolean> {
    return this.gate.whenAnswered(timeoutMs)
  }

  /** How many requests taken are not answered yet. */
  unansweredCount(): number {
    return this.gate.unansweredCount()
  }

  private readonly onInputEnd = () => {
    if (this.ended) return
    this.ended = true
    if (this.parts.length > 0 || this.cut !== undefined) this.endLine()
    this.gate.inputEnded(() => this.onend?.())
  }

  private readonly onInputError = (error: Error) => this.onerror?.(error)

  private readonly onData = (chunk: Buffer | string) => {
    const bytes = typeof chunk === "string" ? Buffer.from(chunk, "utf8") : chunk
    let from = 0
    for (let end = bytes.indexOf(newline, from); end !== -1; end = bytes.indexOf(newline, from)) {
      this.take(bytes.subarray(from, end))
      this.endLine()
      from = end + 1
    }
    if (from < bytes.length) this.take(bytes.subarray(from))
  }

  /** Adds part of the current line, switching to keeping only its ends once it is too long. */
  private take(part: Buffer): void {
    if (this.cut !== undefined) {
      this.cut.bytes += part.length
      this.cut.tail = lastBytes(Buffer.concat([this.cut.tail, part]), cutMessageEndBytes)
      return
    }
    if (this.partsBytes + part.length <= this.lineBytesMax) {
      this.parts.push(part)
      this.partsBytes += part.length
      return
    }
    const sofar = Buffer.concat([...this.parts, part])
    this.cut = {
      bytes: sofar.length,
      head: Buffer.from(sofar.subarray(0, cutMessageEndBytes)),
      tail: lastBytes(sofar, cutMessageEndBytes),
    }
    this.parts = []
    this.partsBytes = 0
  }

  private endLine(): void {
    const cut = this.cut
    const parts = this.parts
    this.cut = undefined
    this.parts = []
    this.partsBytes = 0
    if (cut !== undefined) {
      const id = idOfCutMessage(cut.head.toString("utf8"), cut.tail.toString("utf8").replace(/\r$/, ""))
      const refused = tooLong(id, cut.bytes, this.lineBytesMax)
      this.reply(refused.id, refused.code, refused.error)
      return
    }
    const line = Buffer.concat(parts).toString("utf8").replace(/\r$/, "")
    if (line.trim() === "") return
    const decoded = decodeJsonRpcText(line)
    if ("message" in decoded) this.gate.receive(decoded.message, line.length)
    else this.reply(decoded.id, decoded.code, decoded.error)
  }

  private reply(id: ReplyId, code: number, message: string): void {
    this.onerror?.(new Error(message))
    void this.write(`${JSON.stringify(errorReply(id, code, message))}\n`)
  }

  /** Resolves once the output is not full any more (drained, or gone); set while it is full. */
  private roomAgain: Promise<void> | undefined

  private write(text: string): Promise<void> {
    if (this.outputGone || this.output.destroyed) return Promise.resolve()
    if (this.output.write(text)) return this.roomAgain ?? Promise.resolve()
    this.gate.setOutputFull(true)
    this.roomAgain ??= drained(this.output).then(() => {
      this.roomAgain = undefined
      this.gate.setOutputFull(false)
    })
    return this.roomAgain
  }

  async send(message: JSONRPCMessage): Promise<void> {
    try {
      if (textChars(message) <= jsonPieceChars) await this.write(`${JSON.stringify(message)}\n`)
      else {
        // Written in one turn, so no other answer's line comes between its pieces (JsonPieces.ts).
        // A value JSON cannot hold (a bug) throws after the first pieces are out: the line is
        // ended all the same, so the client loses that answer and not the lines after it.
        try {
          for (const piece of jsonPieces(message)) void this.write(piece)
        } finally {
          await this.write("\n")
        }
      }
    } finally {
      if (isResponse(message)) this.gate.answered(message.id)
    }
  }

  /** Set by `close`: the input is not read again. */
  private closed = false

  async close(): Promise<void> {
    this.closed = true
    this.gate.close()
    this.input.off("data", this.onData)
    this.input.off("error", this.onInputError)
    this.input.off("end", this.onInputEnd)
    this.output.off("error", this.onOutputGone)
    this.output.off("close", this.onOutputGone)
    if (this.input.listenerCount("data") === 0) this.input.pause()
    this.parts = []
    this.cut = undefined
    this.onclose?.()
  }
}

const lastBytes = (buffer: Buffer, count: number): Buffer =>
  Buffer.from(buffer.subarray(Math.max(0, buffer.length - count)))
