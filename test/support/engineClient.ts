/**
 * An engine on a data directory with an MCP client connected in-process: the real stack (Engine
 * layer → Router → store actors; McpSession with the whole catalogue; an SDK client over an
 * in-memory transport), without a child process. `close()` shuts the engine down as a process
 * exit would (drain, flush, unlock); opening the same directory again is a restart. The
 * conversation, engineering and search test harnesses open it with their own defaults.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js"
import { type CallToolResult, ListRootsRequestSchema } from "@modelcontextprotocol/sdk/types.js"
import { type Context, Effect, Exit, Layer, Scope } from "effect"
import * as Engine from "../../src/Engine.ts"
import type { AnyStoreDefinition } from "../../src/stores/StoreDefinition.ts"
import { catalogue } from "../../src/tools/Catalogue.ts"
import { startSession } from "../../src/tools/McpSession.ts"
import type { SessionServices } from "../../src/tools/Tool.ts"

/** A tool call's result, parsed. */
export interface Reply {
  readonly isError: boolean
  readonly text: string
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON answers
  readonly json: any
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON answers
  readonly structured: any
}

/** A running engine with a connected client. */
export interface TestEngine {
  readonly dir: string
  readonly client: Client
  readonly context: Context.Context<SessionServices>
  readonly call: (name: string, args: unknown) => Promise<Reply>
  /** Calls and throws unless the call succeeded. */
  readonly ok: (name: string, args: unknown) => Promise<Reply>
  /** Runs an effect with the engine's services. */
  readonly run: <A, E>(effect: Effect.Effect<A, E, SessionServices>) => Promise<A>
  readonly close: () => Promise<void>
}

/** Parses a CallToolResult: its first text, that text as JSON when it is, and the structured content. */
export const parseResult = (raw: CallToolResult): Reply => {
  const first = raw.content?.[0]
  const text = first !== undefined && first.type === "text" ? first.text : ""
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  return { isError: raw.isError === true, text, json, structured: raw.structuredContent }
}

/** How the engine and its client are opened. */
export interface EngineClientOptions {
  /** The client's name and version (its identity in the audit ledger: `name/version via test`). */
  readonly clientName: string
  readonly clientVersion: string
  /** The client's first root, when it should offer one (the project and git context come from it). */
  readonly rootDir?: string
  readonly stores?: ReadonlyArray<AnyStoreDefinition>
  readonly search?: Engine.EngineConfig["search"]
}

/** Opens an engine on `dir` and connects a client. */
export const openEngineClient = async (dir: string, options: EngineClientOptions): Promise<TestEngine> => {
  const scope = Effect.runSync(Scope.make())
  // The engine provides every service the tools use; the cast covers session services other
  // stores' tools may add before the engine layer does.
  const context = (await Effect.runPromise(
    Layer.buildWithScope(
      Layer.fresh(
        Engine.layer({
          dataDir: dir,
          command: "mnemos test",
          ...(options.stores !== undefined ? { stores: options.stores } : {}),
          // Search's index on this thread (the same protocol, over a MessageChannel) unless asked:
          // a worker thread started from source loads effect and tsx again, over a second a start.
          search: { thread: false, ...options.search },
        }),
      ),
      scope,
    ),
  )) as Context.Context<SessionServices>
  const run = <A, E>(effect: Effect.Effect<A, E, SessionServices>) =>
    Effect.runPromise(effect.pipe(Effect.provideContext(context)))
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair()
  await run(startSession(serverSide, { tools: catalogue, transport: "test" }).pipe(Scope.provide(scope)))
  const { rootDir } = options
  const client = new Client(
    { name: options.clientName, version: options.clientVersion },
    { capabilities: rootDir !== undefined ? { roots: {} } : {} },
  )
  if (rootDir !== undefined)
    client.setRequestHandler(ListRootsRequestSchema, async () => ({
      roots: [{ uri: `file://${rootDir}`, name: "root" }],
    }))
  await client.connect(clientSide)
  const call = async (name: string, args: unknown) =>
    parseResult((await client.callTool({ name, arguments: args as Record<string, unknown> })) as CallToolResult)
  return {
    dir,
    client,
    context,
    call,
    ok: async (name, args) => {
      const reply = await call(name, args)
      if (reply.isError) throw new Error(`${name} failed: ${reply.text}`)
      return reply
    },
    run,
    close: async () => {
      await client.close().catch(() => undefined)
      await Effect.runPromise(Scope.close(scope, Exit.void))
    },
  }
}
