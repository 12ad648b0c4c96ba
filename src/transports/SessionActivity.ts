/**
 * Tells the session table (SessionTable.ts) what a session's client is doing, on every transport:
 * each request is an exchange open from its arrival to its answer (or its cancellation), and the
 * session counts as initialized once its `initialize` request is answered without an error. A
 * TransportWrapper.ts: it keeps the inner transport's handlers and passes every message on.
 */
import type { Transport, TransportSendOptions } from "@modelcontextprotocol/sdk/shared/transport.js"
import type { JSONRPCMessage, MessageExtraInfo } from "@modelcontextprotocol/sdk/types.js"
import { cancelledRequestId, isRequest, isResponse, type RequestId } from "./JsonRpcText.ts"
import type { SessionHandle } from "./SessionTable.ts"
import { TransportWrapper } from "./TransportWrapper.ts"

type Id = RequestId

class SessionActivityTransport extends TransportWrapper {
  /** The end of each open exchange, by request id. */
  private readonly open = new Map<Id, () => void>()
  private initializeId: Id | undefined

  constructor(
    inner: Transport,
    private readonly handle: SessionHandle,
  ) {
    super(inner)
  }

  protected receive(message: JSONRPCMessage, extra?: MessageExtraInfo): void {
    if (isRequest(message) && !this.open.has(message.id)) {
      this.open.set(message.id, this.handle.begin())
      if (message.method === "initialize") this.initializeId = message.id
    }
    const cancelled = cancelledRequestId(message)
    if (cancelled !== undefined) this.settle(cancelled)
    this.onmessage?.(message, extra)
  }

  private settle(id: Id): void {
    this.open.get(id)?.()
    this.open.delete(id)
  }

  protected override closed(): void {
    for (const end of this.open.values()) end()
    this.open.clear()
  }

  override async send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    try {
      await this.inner.send(message, options)
    } finally {
      if (isResponse(message)) {
        if (message.id === this.initializeId && "result" in message) this.handle.initialized()
        this.settle(message.id)
      }
    }
  }
}

/** `transport`, reporting its client's requests to the session `handle`. */
export const reportActivity = (transport: Transport, handle: SessionHandle): Transport =>
  new SessionActivityTransport(transport, handle)
