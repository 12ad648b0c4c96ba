/**
 * The server side of one MCP session over any transport: what the MCP SDK's `Server` (and its
 * `Protocol`) did for mnemos, without them. Their module graph — the SDK's request and result
 * schemas, built with Zod when the module loads — cost every daemon's start about 11 ms before a
 * first answer, and each message went through Zod parses on its way in and out
 * (docs/benchmarks.md, "The MCP session without the SDK's server").
 *
 * What it does, as the SDK did (clients see the same wire):
 * - `initialize`: records the client's capabilities and name, and answers the protocol version it
 *   asked for when supported (else the latest), the server's capabilities, name and instructions.
 *   `notifications/initialized` calls `oninitialized`. `ping` answers `{}`.
 * - A request is answered by its method's handler once its params fit the method's Schema
 *   (McpParams.ts): `{ result, jsonrpc, id }`, or `{ jsonrpc, id, error }` when the handler throws —
 *   the error's own code when it has one (`McpProtocolError`), else -32603, and its message. An
 *   unknown method is -32601, params that do not fit -32602 naming each bad field.
 * - `notifications/cancelled` aborts the request it names: a cancelled request is never answered,
 *   nor is one still running when the connection closes.
 * - Requests to the client (`request`: mnemos asks for `roots/list`) time out, are answered by id,
 *   and fail with -32000 when the connection closes; notifications go out with `notify`.
 *
 * Messages arrive already checked as JSON-RPC 2.0 by the transports (JsonRpcText.ts); nothing a
 * client sends can throw out of here.
 */
import type { Transport, TransportSendOptions } from "@modelcontextprotocol/sdk/shared/transport.js"
import type { JSONRPCMessage, MessageExtraInfo } from "@modelcontextprotocol/sdk/types.js"
import { errorReply } from "../transports/JsonRpcText.ts"
import { AnyParams, InitializeParams, type ParamsCheck, type ParamsSchema, paramsCheck } from "./McpParams.ts"

/** The protocol versions a session speaks, newest first (those of the MCP SDK mnemos is tested with). */
export const supportedProtocolVersions: ReadonlyArray<string> = [
  "2025-11-25",
  "2025-06-18",
  "2025-03-26",
  "2024-11-05",
  "2024-10-07",
]
export const latestProtocolVersion = supportedProtocolVersions[0]!

/** JSON-RPC's and MCP's error codes a session answers with. */
export const errorCodes = {
  connectionClosed: -32000,
  requestTimeout: -32001,
  methodNotFound: -32601,
  invalidParams: -32602,
  internalError: -32603,
} as const

const initializeCheck = paramsCheck(InitializeParams)

/** Whether `value` is an `initialize` request whose params a session takes. */
export const isInitializeRequest = (value: unknown): boolean =>
  typeof value === "object" &&
  value !== null &&
  (value as { method?: unknown }).method === "initialize" &&
  initializeCheck((value as { params?: unknown }).params) === undefined

/** How long a request to the client waits for its answer unless told otherwise, in ms (the SDK's). */
export const clientRequestTimeoutMs = 60_000

/** An error answered with its own JSON-RPC code; its message reads as the SDK's `McpError`'s. */
export class McpProtocolError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(`MCP error ${code}: ${message}`)
    this.name = "McpError"
  }
}

export type RequestId = string | number
type Params = Record<string, unknown>

/** What a handler learns of its request. */
export interface RequestExtra {
  readonly requestId: RequestId
  /** Aborted when the client cancels the request or the connection closes. */
  readonly signal: AbortSignal
}

type Handler = (params: Params, extra: RequestExtra) => unknown

/** The server's name and version, as `initialize` answers them. */
export interface ServerInfo {
  readonly name: string
  readonly version: string
}

/** What `initialize` learned of the client. */
export interface ClientInfo {
  readonly name: string
  readonly version: string
}

/** The capability a method's handler needs the server to declare (a developer's error otherwise). */
const capabilityOf = (method: string): string | undefined =>
  method.startsWith("tools/")
    ? "tools"
    : method.startsWith("resources/")
      ? "resources"
      : method.startsWith("prompts/")
        ? "prompts"
        : undefined

const isObject = (value: unknown): value is Params => typeof value === "object" && value !== null

interface Outgoing {
  readonly resolve: (result: Params) => void
  readonly reject: (error: Error) => void
  readonly timer: NodeJS.Timeout
}

/** One session's protocol: bind handlers, then `connect` a transport. */
export class McpServer {
  private transport: Transport | undefined
  private readonly handlers = new Map<string, { readonly check: ParamsCheck; readonly handler: Handler }>()
  private readonly notificationHandlers = new Map<string, () => void>()
  /** Requests being answered, by id; aborting one drops its answer. */
  private readonly answering = new Map<RequestId, AbortController>()
  /** Requests to the client awaiting their answer, by id. */
  private readonly asking = new Map<number, Outgoing>()
  private nextRequestId = 0
  private client: { readonly capabilities: Params; readonly info: ClientInfo } | undefined
  oninitialized: (() => void) | undefined
  /** Called once the transport closed, after the session's requests were let go. */
  onclose: (() => void) | undefined
  onerror: ((error: Error) => void) | undefined

  constructor(
    private readonly info: ServerInfo,
    private readonly options: { readonly capabilities: Params; readonly instructions?: string },
  ) {
    this.handle("initialize", InitializeParams, (params) => this.initialize(params))
    this.handle("ping", AnyParams, () => ({}))
  }

  /**
   * Answers `method` with `handler` once a request's params fit `schema`; the handler gets them as
   * they arrived (members the schema does not name included), typed as the schema checked them.
   */
  handle<S extends ParamsSchema>(
    method: string,
    schema: S,
    handler: (params: S["Type"], extra: RequestExtra) => unknown,
  ): void {
    const capability = capabilityOf(method)
    if (capability !== undefined && this.options.capabilities[capability] === undefined)
      throw new Error(`a handler for ${method} needs the ${capability} capability`)
    this.handlers.set(method, { check: paramsCheck(schema), handler: handler as Handler })
  }

  /** Calls `handler` on each notification `method` from the client. */
  onNotification(method: string, handler: () => void): void {
    this.notificationHandlers.set(method, handler)
  }

  /** The client's capabilities, once it initialized. */
  clientCapabilities(): Params | undefined {
    return this.client?.capabilities
  }

  /** The client's name and version, once it initialized. */
  clientInfo(): ClientInfo | undefined {
    return this.client?.info
  }

  /** Takes `transport`'s messages (keeping the handlers set on it before) and starts it. */
  async connect(transport: Transport): Promise<void> {
    if (this.transport !== undefined) throw new Error("already connected to a transport")
    this.transport = transport
    const previousClose = transport.onclose
    const previousError = transport.onerror
    const previousMessage = transport.onmessage
    transport.onclose = () => {
      previousClose?.()
      this.closed()
    }
    transport.onerror = (error) => {
      previousError?.(error)
      this.onerror?.(error)
    }
    transport.onmessage = (message: JSONRPCMessage, extra?: MessageExtraInfo) => {
      previousMessage?.(message, extra)
      this.receive(message)
    }
    await transport.start()
  }

  /** Closes the transport (which ends the session). */
  async close(): Promise<void> {
    await this.transport?.close()
  }

  /** Sends a notification to the client. */
  notify(method: string, params: Params, options?: TransportSendOptions): Promise<void> {
    if (this.transport === undefined) return Promise.reject(new Error("Not connected"))
    return this.transport.send({ method, params, jsonrpc: "2.0" } as JSONRPCMessage, options)
  }

  /** Asks the client: resolves with its result, rejects with its error, a timeout or the connection's close. */
  request(
    method: string,
    params: Params | undefined,
    options: { readonly timeoutMs?: number; readonly relatedRequestId?: RequestId } = {},
  ): Promise<Params> {
    const transport = this.transport
    if (transport === undefined) return Promise.reject(new Error("Not connected"))
    const id = this.nextRequestId++
    const timeoutMs = options.timeoutMs ?? clientRequestTimeoutMs
    const sendOptions = options.relatedRequestId !== undefined ? { relatedRequestId: options.relatedRequestId } : {}
    return new Promise<Params>((resolve, reject) => {
      const timer = setTimeout(() => {
        if (!this.asking.delete(id)) return
        this.transport
          ?.send(
            { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: id, reason: "timed out" } },
            sendOptions,
          )
          .catch((error: unknown) => this.reportError("Failed to send cancellation", error))
        reject(new McpProtocolError(errorCodes.requestTimeout, "Request timed out", { timeout: timeoutMs }))
      }, timeoutMs)
      this.asking.set(id, { resolve, reject, timer })
      transport
        .send(
          { method, ...(params !== undefined ? { params } : {}), jsonrpc: "2.0", id } as JSONRPCMessage,
          sendOptions,
        )
        .catch((error: unknown) => {
          clearTimeout(timer)
          this.asking.delete(id)
          reject(error instanceof Error ? error : new Error(String(error)))
        })
    })
  }

  private initialize(params: typeof InitializeParams.Type): Params {
    const { protocolVersion, capabilities, clientInfo } = params
    this.client = { capabilities, info: clientInfo }
    return {
      protocolVersion: supportedProtocolVersions.includes(protocolVersion) ? protocolVersion : latestProtocolVersion,
      capabilities: this.options.capabilities,
      serverInfo: this.info,
      ...(this.options.instructions !== undefined ? { instructions: this.options.instructions } : {}),
    }
  }

  private receive(message: JSONRPCMessage): void {
    const { method, id, params } = message as { method?: unknown; id?: unknown; params?: unknown }
    if (typeof method === "string") {
      if (id === undefined) this.notified(method, params)
      else this.answer(id as RequestId, method, params)
    } else if (id !== undefined && id !== null) this.answered(message as { id: RequestId; result?: Params })
    else this.onerror?.(new Error(`Unknown message type: ${JSON.stringify(message)}`))
  }

  private answer(id: RequestId, method: string, params: unknown): void {
    const transport = this.transport
    const send = (reply: unknown) => transport?.send(reply as JSONRPCMessage)
    const bound = this.handlers.get(method)
    if (bound === undefined) {
      send(errorReply(id, errorCodes.methodNotFound, "Method not found"))?.catch((error: unknown) =>
        this.reportError("Failed to send an error response", error),
      )
      return
    }
    const given = params ?? {}
    const issues = bound.check(given)
    if (issues !== undefined) {
      send(errorReply(id, errorCodes.invalidParams, `Invalid params for ${method}: ${issues}`))?.catch(
        (error: unknown) => this.reportError("Failed to send an error response", error),
      )
      return
    }
    const controller = new AbortController()
    this.answering.set(id, controller)
    Promise.resolve()
      .then(() => {
        if (isObject((given as Params).task) && this.options.capabilities.tasks === undefined)
          throw new Error(`Server does not support task creation (required for ${method})`)
        return bound.handler(given as Params, { requestId: id, signal: controller.signal })
      })
      .then(
        (result) => (controller.signal.aborted ? undefined : send({ result, jsonrpc: "2.0", id })),
        (error: { code?: unknown; message?: unknown; data?: unknown }) =>
          controller.signal.aborted
            ? undefined
            : send({
                jsonrpc: "2.0",
                id,
                error: {
                  code: Number.isSafeInteger(error?.code) ? error.code : errorCodes.internalError,
                  message: typeof error?.message === "string" ? error.message : "Internal error",
                  ...(error?.data !== undefined ? { data: error.data } : {}),
                },
              }),
      )
      .catch((error: unknown) => this.reportError("Failed to send response", error))
      .finally(() => {
        if (this.answering.get(id) === controller) this.answering.delete(id)
      })
  }

  private notified(method: string, params: unknown): void {
    if (method === "notifications/cancelled") {
      const requestId = isObject(params) ? params.requestId : undefined
      if (typeof requestId === "string" || typeof requestId === "number") this.answering.get(requestId)?.abort()
      return
    }
    const handler = method === "notifications/initialized" ? this.oninitialized : this.notificationHandlers.get(method)
    if (handler === undefined) return
    Promise.resolve()
      .then(handler)
      .catch((error: unknown) => this.reportError("Uncaught error in notification handler", error))
  }

  private answered(response: {
    id: RequestId
    result?: Params
    error?: { code: number; message: string; data?: unknown }
  }): void {
    const id = Number(response.id)
    const asked = this.asking.get(id)
    if (asked === undefined) {
      this.onerror?.(new Error(`Received a response for an unknown message ID: ${JSON.stringify(response)}`))
      return
    }
    this.asking.delete(id)
    clearTimeout(asked.timer)
    if (response.error !== undefined)
      asked.reject(new McpProtocolError(response.error.code, response.error.message, response.error.data))
    else asked.resolve(response.result ?? {})
  }

  private closed(): void {
    this.transport = undefined
    for (const controller of this.answering.values()) controller.abort()
    this.answering.clear()
    const asking = [...this.asking.values()]
    this.asking.clear()
    for (const asked of asking) {
      clearTimeout(asked.timer)
      asked.reject(new McpProtocolError(errorCodes.connectionClosed, "Connection closed"))
    }
    this.onclose?.()
  }

  private reportError(what: string, error: unknown): void {
    this.onerror?.(new Error(`${what}: ${error instanceof Error ? error.message : String(error)}`))
  }
}
