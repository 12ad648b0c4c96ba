/**
 * Requests whose params do not fit their method are answered here, before the MCP SDK sees them:
 * -32602 (Invalid params) with a message naming each bad field (`params.name: expected string,
 * received number`). The SDK parses a request with its handler's schema inside the handler, and a
 * failure there becomes -32603 (Internal error) carrying the validator's JSON dump — a client's
 * mistake reported as the server's.
 *
 * The wrapper chains, never replaces, handlers set on the inner transport before it (like
 * DrainingTransport.ts), and answers through the inner transport, so the answer is counted as an
 * answer wherever answers are counted.
 */
import type { Transport, TransportSendOptions } from "@modelcontextprotocol/sdk/shared/transport.js"
import type { JSONRPCMessage, MessageExtraInfo } from "@modelcontextprotocol/sdk/types.js"

/** The JSON-RPC code of a request whose params do not fit its method. */
export const invalidParamsCode = -32602

/** What is needed of a request schema (the SDK's Zod schemas). */
export interface RequestSchema {
  readonly safeParse: (
    value: unknown,
  ) =>
    | { readonly success: true }
    | { readonly success: false; readonly error: { readonly issues: ReadonlyArray<Issue> } }
}

interface Issue {
  readonly path: ReadonlyArray<PropertyKey>
  readonly message: string
}

/** The issues as one line: `params.name: expected string, received number; ...`. */
export const describeIssues = (issues: ReadonlyArray<Issue>): string =>
  issues
    .map(
      (issue) =>
        `${issue.path.map(String).join(".") || "(the request)"}: ${issue.message.replace(/^Invalid input: /, "")}`,
    )
    .join("; ")

/** `inner`, with each request of a method in `schemas` checked against its schema first. */
export const checkingParams = (inner: Transport, schemas: ReadonlyMap<string, RequestSchema>): Transport =>
  new ParamsCheckingTransport(inner, schemas)

class ParamsCheckingTransport implements Transport {
  onclose?: () => void
  onerror?: (error: Error) => void
  onmessage?: <T extends JSONRPCMessage>(message: T, extra?: MessageExtraInfo) => void
  setProtocolVersion?: (version: string) => void

  constructor(
    private readonly inner: Transport,
    schemas: ReadonlyMap<string, RequestSchema>,
  ) {
    const previousClose = inner.onclose
    const previousError = inner.onerror
    inner.onclose = () => {
      previousClose?.()
      this.onclose?.()
    }
    inner.onerror = (error) => {
      previousError?.(error)
      this.onerror?.(error)
    }
    inner.onmessage = (message, extra) => {
      const schema = "method" in message && "id" in message ? schemas.get(message.method) : undefined
      const checked = schema?.safeParse(message)
      if (checked === undefined || checked.success) return this.onmessage?.(message, extra)
      void inner
        .send({
          jsonrpc: "2.0",
          id: (message as { id: string | number }).id,
          error: {
            code: invalidParamsCode,
            message: `Invalid params for ${(message as { method: string }).method}: ${describeIssues(checked.error.issues)}`,
          },
        })
        .catch((error: unknown) => this.onerror?.(error instanceof Error ? error : new Error(String(error))))
    }
    if (inner.setProtocolVersion !== undefined)
      this.setProtocolVersion = (version) => inner.setProtocolVersion?.(version)
  }

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
