/**
 * A Transport around another, for layers that look at every incoming message (DrainingTransport.ts
 * counts requests in flight, SessionActivity.ts reports a session busy). It chains, never
 * replaces, the close and error handlers set on the inner transport before it (the HTTP server's
 * session bookkeeping), passes start, send, close, the session id and the protocol version
 * through, and hands each incoming message to `receive`, which decides whether `onmessage` sees it.
 */
import type { Transport, TransportSendOptions } from "@modelcontextprotocol/sdk/shared/transport.js"
import type { JSONRPCMessage, MessageExtraInfo } from "@modelcontextprotocol/sdk/types.js"

export abstract class TransportWrapper implements Transport {
  onclose?: () => void
  onerror?: (error: Error) => void
  onmessage?: <T extends JSONRPCMessage>(message: T, extra?: MessageExtraInfo) => void
  setProtocolVersion?: (version: string) => void

  constructor(protected readonly inner: Transport) {
    const previousClose = inner.onclose
    const previousError = inner.onerror
    inner.onclose = () => {
      previousClose?.()
      this.closed()
      this.onclose?.()
    }
    inner.onerror = (error) => {
      previousError?.(error)
      this.onerror?.(error)
    }
    inner.onmessage = (message, extra) => this.receive(message, extra)
    if (inner.setProtocolVersion !== undefined)
      this.setProtocolVersion = (version) => inner.setProtocolVersion?.(version)
  }

  /** An incoming message: pass it on (`this.onmessage`), or answer it here. */
  protected abstract receive(message: JSONRPCMessage, extra?: MessageExtraInfo): void

  /** The inner transport closed (before `onclose` is called). */
  protected closed(): void {}

  get sessionId(): string | undefined {
    return this.inner.sessionId
  }

  start(): Promise<void> {
    return this.inner.start()
  }

  send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    return this.inner.send(message, options)
  }

  close(): Promise<void> {
    return this.inner.close()
  }
}
