/**
 * Graceful shutdown for MCP sessions: every session's transport is wrapped so the server knows
 * which client requests are in flight (received, not yet answered), can stop taking new ones,
 * and can wait until the in-flight ones are answered before it closes connections.
 *
 * Invariants: a request received before `drain()` is dispatched and its answer is sent (or the
 * client cancels it: then it is no longer waited for); one received after is not dispatched and
 * not answered — the connection closes under it, which a
 * client sees as "connection closed" (the `mnemos mcp` shim resends it to the next daemon, which
 * applies it once). The wrapper is a TransportWrapper.ts: it keeps the inner transport's handlers.
 */
import type { Transport, TransportSendOptions } from "@modelcontextprotocol/sdk/shared/transport.js"
import type { JSONRPCMessage, MessageExtraInfo } from "@modelcontextprotocol/sdk/types.js"
import { cancelledRequestId, isRequest, isResponse, type RequestId } from "./JsonRpcText.ts"
import { TransportWrapper } from "./TransportWrapper.ts"

type Id = RequestId

/** Tracks the in-flight requests of many transports and drains them together. */
export class Drain {
  private readonly inFlight = new Map<DrainingTransport, Set<Id>>()
  private readonly idleWaiters = new Set<() => void>()
  draining = false

  /** Wraps `inner` so its requests are tracked. */
  wrap(inner: Transport): Transport {
    return new DrainingTransport(inner, this)
  }

  /** Requests received and not yet answered, over every transport. */
  pending(): number {
    let count = 0
    for (const ids of this.inFlight.values()) count += ids.size
    return count
  }

  /** Stops dispatching new requests; resolves once every in-flight one is answered, or after `timeoutMs`. */
  drain(timeoutMs: number): Promise<void> {
    this.draining = true
    return new Promise((resolve) => {
      const finish = () => {
        clearTimeout(timer)
        this.idleWaiters.delete(finish)
        resolve()
      }
      const timer = setTimeout(finish, timeoutMs)
      this.idleWaiters.add(finish)
      this.settle()
    })
  }

  /** @internal */
  received(transport: DrainingTransport, id: Id): void {
    const ids = this.inFlight.get(transport) ?? new Set<Id>()
    ids.add(id)
    this.inFlight.set(transport, ids)
  }

  /** @internal */
  answered(transport: DrainingTransport, id: Id): void {
    this.inFlight.get(transport)?.delete(id)
    this.settle()
  }

  /** @internal */
  closed(transport: DrainingTransport): void {
    this.inFlight.delete(transport)
    this.settle()
  }

  private settle(): void {
    if (this.idleWaiters.size === 0 || this.pending() > 0) return
    for (const waiter of [...this.idleWaiters]) waiter()
  }
}

class DrainingTransport extends TransportWrapper {
  constructor(
    inner: Transport,
    private readonly drain: Drain,
  ) {
    super(inner)
  }

  protected receive(message: JSONRPCMessage, extra?: MessageExtraInfo): void {
    if (isRequest(message)) {
      if (this.drain.draining) return
      this.drain.received(this, message.id)
    }
    // A cancelled request is never answered (the SDK drops its result): stop waiting for it.
    const cancelled = cancelledRequestId(message)
    if (cancelled !== undefined) this.drain.answered(this, cancelled)
    this.onmessage?.(message, extra)
  }

  protected override closed(): void {
    this.drain.closed(this)
  }

  override async send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    try {
      await this.inner.send(message, options)
    } finally {
      if (isResponse(message)) this.drain.answered(this, message.id)
    }
  }
}
