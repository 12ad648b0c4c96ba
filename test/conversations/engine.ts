/**
 * An engine on a temporary data directory with an MCP client connected in-process: the real
 * stack (Engine layer → Router → store actors; McpSession with the catalogue; SDK client over an
 * in-memory transport), without a child process. `close()` shuts the engine down as a process
 * exit would (drain, flush, unlock); opening the same directory again is a restart.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js"
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import { type Context, Effect, Exit, Layer, Scope } from "effect"
import * as Engine from "../../src/Engine.ts"
import type { AnyStoreDefinition } from "../../src/stores/StoreDefinition.ts"
import { catalogue } from "../../src/tools/Catalogue.ts"
import { type SessionServices, startSession } from "../../src/tools/McpSession.ts"

/** A tool call's result, parsed. */
export interface Reply {
  readonly isError: boolean
  readonly text: string
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON answers
  readonly json: any
  readonly structured: Record<string, unknown> | undefined
}

/** A running engine with a connected client. */
export interface TestEngine {
  readonly dir: string
  readonly client: Client
  readonly context: Context.Context<SessionServices>
  readonly call: (name: string, args: unknown) => Promise<Reply>
  /** Calls and fails unless the result is not an error. */
  readonly ok: (name: string, args: unknown) => Promise<Reply>
  /** Runs an effect with the engine's services. */
  readonly run: <A, E>(effect: Effect.Effect<A, E, SessionServices>) => Promise<A>
  readonly close: () => Promise<void>
}

const tempDirs: Array<string> = []

/** A fresh temporary directory, removed by `removeTempDirs`. */
export const tempDir = (prefix = "mnemos-conv-"): string => {
  const dir = mkdtempSync(join(process.env.MNEMOS_TEST_DIR ?? tmpdir(), prefix))
  tempDirs.push(dir)
  return dir
}

export const removeTempDirs = (): void => {
  for (const dir of tempDirs.splice(0)) rmSync(dir, { recursive: true, force: true })
}

/** Parses a CallToolResult. */
export const parseResult = (raw: CallToolResult): Reply => {
  const first = raw.content?.[0]
  const text = first !== undefined && first.type === "text" ? first.text : ""
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  return {
    isError: raw.isError === true,
    text,
    json,
    structured: raw.structuredContent as Record<string, unknown> | undefined,
  }
}

/** Opens an engine on `dir` (a fresh directory by default) and connects a client. */
export const openEngine = async (
  dir: string = tempDir(),
  stores?: ReadonlyArray<AnyStoreDefinition>,
): Promise<TestEngine> => {
  const scope = Effect.runSync(Scope.make())
  // The engine provides every service the conversation tools use; the cast covers session
  // services other stores' tools may add before the engine layer does.
  const context = (await Effect.runPromise(
    Layer.buildWithScope(
      Layer.fresh(
        Engine.layer({
          dataDir: dir,
          command: "mnemos test",
          ...(stores !== undefined ? { stores } : {}),
          search: { worker: false },
        }),
      ),
      scope,
    ),
  )) as Context.Context<SessionServices>
  const run = <A, E>(effect: Effect.Effect<A, E, SessionServices>) =>
    Effect.runPromise(effect.pipe(Effect.provideContext(context)))
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair()
  await run(startSession(serverSide, { tools: catalogue, transport: "test" }).pipe(Scope.provide(scope)))
  const client = new Client({ name: "conversations-test", version: "0" })
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
