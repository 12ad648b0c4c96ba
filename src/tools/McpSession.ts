/**
 * One MCP session: the session's protocol (McpServer.ts) bound to the tool catalogue and the
 * engine, for one connected client over any transport (stdio, WebSocket, Streamable HTTP, SSE).
 *
 * Owns the session's project and resource subscriptions. The project comes from the client's MCP
 * roots when it offers them (the first root's directory name; re-read on roots/list_changed),
 * else "default"; it is resolved once, lazily, before the first call that needs it. Arguments are
 * decoded with each tool's Schema; a decoding failure, an unknown tool or a failing handler all
 * become `isError` results, so no input can crash the server. Committed graph events in the
 * session's project notify the client when it subscribed to `memory://knowledge-graph`. Extra
 * resources (the daemon's terminal and editor telemetry) come from `ResourceProvider`s: listed,
 * read as JSON, and announced to subscribed clients when their provider signals a change.
 * Prompts (`prompts/list`, `prompts/get`) are offered when a toolset of the session's tools has
 * one (see `promptsFor`). With a stable client id, each call carries a retry key bound to the
 * request itself (RetryKey.ts), so a retry applies once and a reused request id does not.
 */
import { basename } from "node:path"
import { fileURLToPath } from "node:url"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import type { CallToolResult, Resource } from "@modelcontextprotocol/sdk/types.js"
import { type Context, Effect, Exit, Fiber, PubSub, Result, Schema, Scope, Semaphore } from "effect"
import { Router } from "../actors/Router.ts"
import { buildInfo } from "../cli/BuildInfo.ts"
import { allProjectsMarker, auditStore, sessionAction } from "../engineering/AuditStore.ts"
import { readGraph } from "../graph/GraphQueries.ts"
import { type GraphEvent, graphStore } from "../graph/GraphStore.ts"
import { defaultProjectName } from "../graph/Model.ts"
import { filterPrivate } from "../privacy/PrivacyFilter.ts"
import { EventBus, isDomainEvent } from "../stores/EventBus.ts"
import { promptsFor } from "./Catalogue.ts"
import { CallToolParams, GetPromptParams, ListParams, UriParams } from "./McpParams.ts"
import { errorCodes, McpProtocolError, McpServer } from "./McpServer.ts"
import { retryKey } from "./RetryKey.ts"
import type { SessionServices, Tool, ToolCaller, ToolError } from "./Tool.ts"

/**
 * Answers that grow with the store (Tool.ts `answerScalesWithStore`: `read_graph`) made at once,
 * in the whole process; the others wait their turn. Each holds the graph's objects and its text
 * while it is made (12 MiB at 10,000 entities, 400 at 100,000): 32 `read_graph` at once on 10,000
 * took a daemon from 256 to 650 MiB (docs/benchmarks.md, "Store-sized answers made two at a time").
 */
export const storeSizedAnswersMax = 2
const storeSizedAnswers = Semaphore.makeUnsafe(storeSizedAnswersMax)

/** The resource holding the caller's whole graph. */
export const knowledgeGraphUri = "memory://knowledge-graph"

/** A resource beyond the knowledge graph, served as JSON; not scoped to the session's project. */
export interface ResourceProvider {
  readonly resource: Resource
  readonly read: Effect.Effect<unknown>
  /** Signals the URIs of changed resources; subscribers of this provider's URI are notified. */
  readonly changes: Effect.Effect<PubSub.Subscription<string>, never, Scope.Scope>
}

/** How a session is set up. */
export interface SessionOptions {
  readonly tools: ReadonlyArray<Tool<never, SessionServices>>
  /** Names the transport in the caller's identity ("stdio", "ws", ...). */
  readonly transport: string
  /**
   * A stable identity of the client across reconnects (the shim's `?client=` id). With it, every
   * write is keyed by (client, request id, the request), so a retried request is applied once.
   */
  readonly clientId?: string
  /** Resources offered beside the knowledge graph. */
  readonly resources?: ReadonlyArray<ResourceProvider>
  /**
   * The client's working directory, when the transport knows it (the process's own for stdio; the
   * shim's, sent with its connection): git context falls back to it when the client offers no
   * `file:` root and the call passes no `cwd`.
   */
  readonly workingDir?: string
}

const errorText = (tool: Tool<never, SessionServices> | undefined, error: ToolError): string =>
  tool?.errorFormat === "envelope"
    ? JSON.stringify({ status: "ERROR", error: { code: error.code, message: error.message } })
    : error.message

const isError = (text: string): CallToolResult => ({ content: [{ type: "text", text }], isError: true })

/** The project a root URI names: the last path segment of a file URI. */
export const projectFromRoot = (uri: string, name?: string): string | undefined => {
  try {
    const path = uri.startsWith("file:") ? fileURLToPath(uri) : new URL(uri).pathname
    const project = basename(path.replace(/[/\\]+$/, "")) || name
    return project !== undefined && project !== "" && !project.includes("\u0000") ? project : undefined
  } catch {
    return name
  }
}

/** The local directory of a `file:` root URI (git context binding runs there). */
export const rootDirOf = (uri: string): string | undefined => {
  try {
    return uri.startsWith("file:") ? fileURLToPath(uri) : undefined
  } catch {
    return undefined
  }
}

/** Starts a session on `transport`; it ends when the transport closes or the scope closes. */
export const startSession = (
  transport: Transport,
  options: SessionOptions,
): Effect.Effect<McpServer, never, SessionServices | Scope.Scope> =>
  Effect.gen(function* () {
    const context: Context.Context<SessionServices> = yield* Effect.context<SessionServices>()
    const run = <A, E>(effect: Effect.Effect<A, E, SessionServices>) => Effect.runPromiseExitWith(context)(effect)
    const prompts = promptsFor(options.tools)
    const server = new McpServer(
      { name: "mnemos", version: buildInfo().version },
      {
        capabilities: { tools: {}, resources: { subscribe: true }, ...(prompts.length > 0 ? { prompts: {} } : {}) },
        instructions:
          "mnemos is a durable memory for coding agents: a knowledge graph (entities, relations, observations) scoped to your project. Search before you create; add observations to existing entities instead of duplicating them.",
      },
    )
    const toolsByName = new Map(options.tools.map((tool) => [tool.definition.name, tool]))
    const subscriptions = new Set<string>()
    const providers = new Map((options.resources ?? []).map((provider) => [provider.resource.uri, provider]))
    let projectPromise: Promise<string> | undefined
    let rootDir: string | undefined

    /**
     * Asks the client for its roots. With the id of the request that needs the project, the ask
     * travels with that request (on Streamable HTTP: its POST's response stream; the standalone
     * GET stream may not be open yet, and a message sent there before it is would be lost).
     */
    const resolveProject = async (relatedRequestId?: string | number): Promise<string> => {
      if (server.clientCapabilities()?.roots === undefined) return defaultProjectName
      try {
        const { roots } = await server.request("roots/list", undefined, {
          timeoutMs: 5_000,
          ...(relatedRequestId !== undefined ? { relatedRequestId } : {}),
        })
        const first = Array.isArray(roots) ? (roots[0] as { uri?: unknown; name?: unknown } | undefined) : undefined
        if (typeof first?.uri !== "string") return defaultProjectName
        const name = typeof first.name === "string" ? first.name : undefined
        rootDir = rootDirOf(first.uri)
        return projectFromRoot(first.uri, name) ?? defaultProjectName
      } catch {
        return defaultProjectName
      }
    }
    const project = (relatedRequestId?: string | number) => (projectPromise ??= resolveProject(relatedRequestId))
    server.onNotification("notifications/roots/list_changed", () => {
      projectPromise = resolveProject()
    })

    // Who connected, over which transport: one audit entry per session (when the engine keeps a ledger).
    server.oninitialized = () => {
      const client = server.clientInfo()
      const who = `${client?.name ?? "unknown"}/${client?.version ?? "?"}`
      void run(
        Effect.gen(function* () {
          const router = yield* Router
          const ledger = yield* Effect.try(() => router.store(auditStore))
          yield* ledger.send({
            _tag: "Append",
            entries: [
              {
                store: "session",
                sourceSeq: 0,
                at: Date.now(),
                project: allProjectsMarker,
                who,
                tool: options.transport,
                action: sessionAction,
                summary: `MCP session started by ${who} over ${options.transport}${options.clientId !== undefined ? ` (client id ${options.clientId})` : ""}`,
              },
            ],
          })
        }),
      )
    }

    /** Who calls; with a stable client id, the request's retry key (RetryKey.ts) too. */
    const caller = async (requestId: string | number, method: string, params: unknown): Promise<ToolCaller> => {
      const client = server.clientInfo()
      const scope = await project(requestId)
      return {
        project: scope,
        ...(rootDir !== undefined
          ? { rootDir }
          : options.workingDir !== undefined
            ? { rootDir: options.workingDir }
            : {}),
        client: `${client?.name ?? "unknown"}/${client?.version ?? "?"} via ${options.transport}`,
        ...(options.clientId !== undefined
          ? { idempotencyKey: retryKey(options.clientId, { requestId, project: scope, method, params }) }
          : {}),
      }
    }

    server.handle("tools/list", ListParams, () => ({
      tools: options.tools.map((tool) => tool.definition) as never,
    }))

    /** Answers a tool call. */
    const callTool = async (
      name: string,
      args: Record<string, unknown> | undefined,
      requestId: string | number,
    ): Promise<CallToolResult> => {
      const tool = toolsByName.get(name)
      if (tool === undefined) return isError(`MCP error -32602: Tool ${name} not found`)
      if (tool.answerScalesWithStore !== true) return answerCall(tool, args, requestId)
      return Effect.runPromise(storeSizedAnswers.withPermit(Effect.promise(() => answerCall(tool, args, requestId))))
    }

    /** Runs `tool` on `args` and makes its answer. */
    const answerCall = async (
      tool: Tool<never, SessionServices>,
      args: Record<string, unknown> | undefined,
      requestId: string | number,
    ): Promise<CallToolResult> => {
      // The privacy filter runs before decoding, so no store ever sees a secret (privacy/PrivacyFilter.ts).
      const filtered = filterPrivate(args ?? {})
      const decoded = Schema.decodeUnknownResult(tool.args)(filtered)
      if (Result.isFailure(decoded)) {
        const message = `MCP error -32602: Input validation error: Invalid arguments for tool ${tool.definition.name}: ${decoded.failure.message}`
        return isError(
          tool.errorFormat === "envelope"
            ? JSON.stringify({ status: "ERROR", error: { code: "VALIDATION_ERROR", message } })
            : message,
        )
      }
      const exit = await run(
        tool.run(
          decoded.success,
          await caller(requestId, "tools/call", { name: tool.definition.name, arguments: filtered }),
        ),
      )
      if (Exit.isSuccess(exit)) {
        const { structured, text, images = [] } = exit.value
        return {
          content: [
            { type: "text", text: text ?? JSON.stringify(structured, null, 2) },
            ...images.map((image) => ({ type: "image" as const, data: image.data, mimeType: image.mimeType })),
          ],
          structuredContent: structured,
        }
      }
      const failure = exit.cause.reasons.find((reason) => reason._tag === "Fail")
      if (failure !== undefined && failure._tag === "Fail") return isError(errorText(tool, failure.error))
      // A defect: the caller gets a plain internal error, the operator the cause.
      await run(Effect.logError(`tool ${tool.definition.name} failed unexpectedly`, exit.cause))
      return isError(
        errorText(tool, {
          _tag: "ToolError",
          code: "INTERNAL_ERROR",
          message: "internal error: the call failed unexpectedly",
        } as ToolError),
      )
    }
    server.handle("tools/call", CallToolParams, (params, extra) =>
      callTool(params.name, params.arguments, extra.requestId),
    )

    if (prompts.length > 0) {
      const promptsByName = new Map(prompts.map((prompt) => [prompt.definition.name, prompt]))
      server.handle("prompts/list", ListParams, () => ({
        prompts: prompts.map((prompt) => prompt.definition) as never,
      }))
      server.handle("prompts/get", GetPromptParams, async (params, extra) => {
        const { name, arguments: given } = params
        const prompt = promptsByName.get(name)
        if (prompt === undefined) throw new McpProtocolError(errorCodes.invalidParams, `Prompt ${name} not found`)
        const args = given ?? {}
        const exit = await run(
          prompt.get(args, await caller(extra.requestId, "prompts/get", { name, arguments: args })),
        )
        if (Exit.isSuccess(exit)) return exit.value
        const failure = exit.cause.reasons.find((reason) => reason._tag === "Fail")
        if (failure?._tag !== "Fail")
          throw new McpProtocolError(errorCodes.internalError, "internal error: the prompt failed")
        // Arguments the prompt cannot take are the caller's to mend (-32602), as a missing prompt is.
        const callersFault = failure.error.code === "VALIDATION_ERROR" || failure.error.code === "NOT_FOUND"
        throw new McpProtocolError(
          callersFault ? errorCodes.invalidParams : errorCodes.internalError,
          failure.error.message,
        )
      })
    }

    server.handle("resources/list", ListParams, () => ({
      resources: [
        {
          uri: knowledgeGraphUri,
          name: "knowledge-graph",
          title: "Knowledge Graph",
          description: "The full knowledge graph with all entities and relations",
          mimeType: "application/json",
        },
        ...[...providers.values()].map((provider) => provider.resource),
      ],
    }))
    server.handle("resources/read", UriParams, async (params, extra) => {
      const { uri } = params
      const provider = providers.get(uri)
      if (provider !== undefined) {
        const value = await Effect.runPromise(provider.read)
        const text = JSON.stringify(value, null, 2)
        return { contents: [{ uri: provider.resource.uri, mimeType: "application/json", text }] }
      }
      if (uri !== knowledgeGraphUri) throw new McpProtocolError(errorCodes.invalidParams, `Resource ${uri} not found`)
      const scope = await project(extra.requestId)
      const exit = await run(
        Effect.gen(function* () {
          const router = yield* Router
          return yield* router.store(graphStore).read((view) => readGraph(view, scope))
        }),
      )
      if (Exit.isFailure(exit)) throw new Error(`cannot read the knowledge graph: ${String(exit.cause)}`)
      return {
        contents: [{ uri: knowledgeGraphUri, mimeType: "application/json", text: JSON.stringify(exit.value, null, 2) }],
      }
    })
    server.handle("resources/subscribe", UriParams, async (params, extra) => {
      const { uri } = params
      subscriptions.add(uri)
      if (uri === knowledgeGraphUri) await run(followGraph)
      await project(extra.requestId)
      return {}
    })
    server.handle("resources/unsubscribe", UriParams, (params) => {
      subscriptions.delete(params.uri)
      return {}
    })

    const bus = yield* EventBus
    const sessionScope = yield* Effect.scope
    /**
     * `notifications/resources/updated` for `uri`, at most one on its way at a time: the changes
     * made while one is being written are told by one more once it is out. A client that does not
     * read its stream then holds one notification, not one per batch of writes — a wait for it to
     * drain (StreamableHttpTransport.ts) would otherwise keep the bus's events for this session
     * until its subscription overflowed (`eventBusCapacity` of them). `updating` holds the resources
     * whose notification is on its way, true when another is owed once it is out.
     */
    const updating = new Map<string, boolean>()
    const tellUpdated = (uri: string): void => {
      if (updating.has(uri)) return void updating.set(uri, true)
      updating.set(uri, false)
      void server
        .notify("notifications/resources/updated", { uri })
        .catch(() => undefined)
        .finally(() => {
          const again = updating.get(uri) === true
          updating.delete(uri)
          if (again) tellUpdated(uri)
        })
    }
    /**
     * Follows committed events only once the client subscribed to the graph: a session that never
     * subscribes (most agents) costs the bus nothing, where a fiber per session woke for every write.
     */
    let notifier: Fiber.Fiber<never> | undefined
    let following = false
    const followGraph = Effect.gen(function* () {
      if (following) return
      following = true
      const events = yield* bus.subscribe
      notifier = yield* Effect.forkIn(
        Effect.forever(
          Effect.gen(function* () {
            const batch = yield* PubSub.takeAll(events)
            if (!subscriptions.has(knowledgeGraphUri) || projectPromise === undefined) return
            const scope = yield* Effect.promise(() => project())
            const relevant = batch.some(
              (committed) =>
                committed.store === graphStore.name &&
                isDomainEvent(committed) &&
                (committed.event as GraphEvent).project === scope,
            )
            if (relevant) tellUpdated(knowledgeGraphUri)
          }),
        ),
        sessionScope,
      )
    }).pipe(Scope.provide(sessionScope))

    const providerNotifiers = yield* Effect.forEach([...providers.keys()], (uri) =>
      Effect.gen(function* () {
        const changes = yield* providers.get(uri)!.changes
        return yield* Effect.forkScoped(
          Effect.forever(
            Effect.gen(function* () {
              const changed = yield* PubSub.takeAll(changes)
              if (subscriptions.has(uri) && changed.includes(uri)) tellUpdated(uri)
            }),
          ),
        )
      }),
    )

    yield* Effect.promise(() => server.connect(transport))
    yield* Effect.addFinalizer(() =>
      Effect.promise(() => server.close().catch(() => undefined)).pipe(
        Effect.andThen(Fiber.interruptAll([...(notifier ? [notifier] : []), ...providerNotifiers])),
      ),
    )
    return server
  })
