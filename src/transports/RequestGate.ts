/**
 * Holds back a client that writes faster than it reads, for a transport of one connection (stdio,
 * a WebSocket), so that the server's memory stays bounded whatever the client does.
 *
 * A request read is started only while fewer than `requestsInFlightMax` are unanswered and the
 * output has room (its buffer under its mark); the others are held, in order, as read, and past
 * `heldBytesMax` of them the transport stops reading its input until some are started. Without it
 * every answer of a client that sends without reading was buffered: 300 `read_graph` of 2,000
 * entities took a daemon from 172 to 940 MiB over stdio and to 1,014 MiB over a WebSocket
 * (docs/benchmarks.md, "A client that does not read").
 *
 * Anything but a request passes at once: the client's answers to the server's own requests (a
 * request waiting for the client's roots must get them) and its notifications. A cancellation
 * drops a held request, which is then never started; of a started one, counts it answered. The
 * input's end is told only once every held request was started, so that an owner waiting for the
 * answers (`whenAnswered`) waits for those too.
 */
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"
import { cancelledRequestId, isRequest, isResponse, type RequestId } from "./JsonRpcText.ts"

/** Requests started and not yet answered, at most, on one connection; more are held. */
export const requestsInFlightMax = 32

/** Bytes of held requests past which the connection's input is not read until some are started. */
export const heldBytesMax = 4 * 1024 * 1024

/** A request read and not yet started. */
interface Held {
  readonly message: JSONRPCMessage & { id: RequestId }
  readonly bytes: number
}

/** The gate of one connection's requests. */
export class RequestGate {
  /** Ids of the requests started and not yet answered (nor cancelled). */
  private readonly unanswered = new Set<RequestId>()
  private answeredWaiters: Array<() => void> = []
  /** Oldest first, from `heldFrom`. */
  private held: Array<Held | undefined> = []
  private heldFrom = 0
  private heldBytes = 0
  private outputFull = false
  private outputGone = false
  /** The input was paused for `heldBytesMax`. */
  private inputHeldBack = false
  /** The input ended while requests were held: called once they are started. */
  private onInputEnd: (() => void) | undefined
  private closed = false

  /**
   * @param pass hands a message to the session
   * @param readInput pauses (false) or resumes (true) the reading of the connection's input
   */
  constructor(
    private readonly pass: (message: JSONRPCMessage) => void,
    private readonly readInput: (reading: boolean) => void,
  ) {}

  /** A message read from the client, of `bytes` bytes: started, held, or passed on at once. */
  receive(message: JSONRPCMessage, bytes: number): void {
    if (this.closed) return
    if (isRequest(message) && (this.heldCount() > 0 || !this.mayStart())) {
      this.held.push({ message, bytes })
      this.heldBytes += bytes
      if (this.heldBytes > heldBytesMax && !this.inputHeldBack) {
        this.inputHeldBack = true
        this.readInput(false)
      }
      return
    }
    const cancelled = cancelledRequestId(message)
    if (cancelled !== undefined && this.dropHeld(cancelled)) return
    this.begin(message)
  }

  /** The answer to `id` was sent (or could not be): it counts as answered, and held requests may start. */
  answered(id: RequestId): void {
    this.settle(id)
  }

  /**
   * Sends `message` with `write`, which writes it and calls `done` once it is out (or failed);
   * `outputFull` says whether the output's buffer is over its mark. Resolves when it is out; an
   * answer counts as answered then (or once it failed).
   */
  send(
    message: JSONRPCMessage,
    write: (done: (error?: Error | null) => void) => void,
    outputFull: () => boolean,
  ): Promise<void> {
    const sent = new Promise<void>((resolve, reject) => {
      write((error) => {
        if (!outputFull()) this.setOutputFull(false)
        if (error) reject(error)
        else resolve()
      })
      if (outputFull()) this.setOutputFull(true)
    })
    if (!isResponse(message)) return sent
    const id = message.id
    return sent.finally(() => this.answered(id))
  }

  /** Whether the output's buffer is over its mark (a write returned false) or has room again. */
  setOutputFull(full: boolean): void {
    if (this.outputFull === full) return
    this.outputFull = full
    if (!full) this.startHeld()
  }

  /** The output failed or closed: answers go nowhere, so requests start as they may and are dropped. */
  setOutputGone(): void {
    this.outputGone = true
    this.startHeld()
  }

  /** The input ended: `onend` is called once every held request is started (at once if none is). */
  inputEnded(onend: () => void): void {
    if (this.heldCount() === 0) onend()
    else this.onInputEnd = onend
  }

  /** Requests read and not yet started. */
  heldCount(): number {
    return this.held.length - this.heldFrom
  }

  /** Requests started and not yet answered. */
  unansweredCount(): number {
    return this.unanswered.size
  }

  /**
   * Resolves true once every request started so far is answered or cancelled, or false after
   * `timeoutMs` with some still unanswered.
   */
  whenAnswered(timeoutMs: number): Promise<boolean> {
    if (this.unanswered.size === 0) return Promise.resolve(true)
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.answeredWaiters = this.answeredWaiters.filter((waiter) => waiter !== answered)
        resolve(false)
      }, timeoutMs)
      const answered = () => {
        clearTimeout(timer)
        resolve(true)
      }
      this.answeredWaiters.push(answered)
    })
  }

  /** Drops what is held and takes nothing more (the connection is closing). */
  close(): void {
    this.closed = true
    this.held = []
    this.heldFrom = 0
    this.heldBytes = 0
    this.onInputEnd = undefined
  }

  /** Whether a request read now may start: few enough are unanswered, and the output has room (or is gone). */
  private mayStart(): boolean {
    return this.unanswered.size < requestsInFlightMax && (!this.outputFull || this.outputGone)
  }

  /** Passes `message` to the session, counting a request as unanswered until its answer is sent. */
  private begin(message: JSONRPCMessage): void {
    if (isRequest(message)) this.unanswered.add(message.id)
    const cancelled = cancelledRequestId(message)
    if (cancelled !== undefined) this.settle(cancelled)
    this.pass(message)
  }

  private settle(id: RequestId): void {
    if (!this.unanswered.delete(id)) return
    if (this.unanswered.size === 0) {
      const waiters = this.answeredWaiters
      this.answeredWaiters = []
      for (const waiter of waiters) waiter()
    }
    this.startHeld()
  }

  /** Drops the held request `id` (cancelled before it started); whether there was one. */
  private dropHeld(id: RequestId): boolean {
    for (let i = this.heldFrom; i < this.held.length; i++) {
      const held = this.held[i]
      if (held?.message.id !== id) continue
      this.held.splice(i, 1)
      this.heldBytes -= held.bytes
      this.startHeld()
      return true
    }
    return false
  }

  /** Starts held requests while they may, then reads on (and tells of the input's end) once they allow. */
  private startHeld(): void {
    while (!this.closed && this.heldCount() > 0 && this.mayStart()) {
      const next = this.held[this.heldFrom]!
      this.held[this.heldFrom++] = undefined
      this.heldBytes -= next.bytes
      this.begin(next.message)
    }
    if (this.heldCount() === 0 && this.held.length > 0) {
      this.held = []
      this.heldFrom = 0
    }
    if (this.inputHeldBack && this.heldBytes <= heldBytesMax && !this.closed) {
      this.inputHeldBack = false
      this.readInput(true)
    }
    if (this.onInputEnd !== undefined && this.heldCount() === 0) {
      const onend = this.onInputEnd
      this.onInputEnd = undefined
      onend()
    }
  }
}
