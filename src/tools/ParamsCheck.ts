/**
 * Requests whose params do not fit their method are answered here, before the MCP SDK sees them:
 * -32602 (Invalid params) with a message naming each bad field (`params.name: expected string,
 * received number`). The SDK parses a request with its handler's schema inside the handler, and a
 * failure there becomes -32603 (Internal error) carrying the validator's JSON dump — a client's
 * mistake reported as the server's.
 *
 * The wrapper (transports/TransportWrapper.ts) answers through the inner transport, so the answer
 * is counted as an answer wherever answers are counted (DrainingTransport.ts).
 */
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import type { JSONRPCMessage, MessageExtraInfo } from "@modelcontextprotocol/sdk/types.js"
import { TransportWrapper } from "../transports/TransportWrapper.ts"

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

class ParamsCheckingTransport extends TransportWrapper {
  constructor(
    inner: Transport,
    private readonly schemas: ReadonlyMap<string, RequestSchema>,
  ) {
    super(inner)
  }

  protected receive(message: JSONRPCMessage, extra?: MessageExtraInfo): void {
    const schema = "method" in message && "id" in message ? this.schemas.get(message.method) : undefined
    const checked = schema?.safeParse(message)
    if (checked === undefined || checked.success) {
      this.onmessage?.(message, extra)
      return
    }
    const { id, method } = message as { id: string | number; method: string }
    void this.inner
      .send({
        jsonrpc: "2.0",
        id,
        error: {
          code: invalidParamsCode,
          message: `Invalid params for ${method}: ${describeIssues(checked.error.issues)}`,
        },
      })
      .catch((error: unknown) => this.onerror?.(error instanceof Error ? error : new Error(String(error))))
  }
}
