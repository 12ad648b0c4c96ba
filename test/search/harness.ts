/**
 * Search test harness: an engine on a temporary data directory (graph store only, so it starts
 * fast) with an MCP client in-process, and helpers to write graph records and call search tools.
 * `close()` shuts down like a process exit; opening the same directory again is a restart.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js"
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import { type Context, Effect, Exit, Layer, Scope } from "effect"
import * as Engine from "../../src/Engine.ts"
import { graphStore } from "../../src/graph/GraphStore.ts"
import { SearchIndexer } from "../../src/search/Indexer.ts"
import { catalogue } from "../../src/tools/Catalogue.ts"
import { type SessionServices, startSession } from "../../src/tools/McpSession.ts"

/** A tool call's result. */
export interface Reply {
  readonly isError: boolean
  readonly text: string
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON answers
  readonly structured: any
}

/** A running engine with a connected client. */
export interface SearchEngine {
  readonly dir: string
  readonly call: (name: string, args: Record<string, unknown>) => Promise<Reply>
  readonly ok: (name: string, args: Record<string, unknown>) => Promise<Reply>
  readonly run: <A, E>(effect: Effect.Effect<A, E, SessionServices>) => Promise<A>
  readonly indexer: () => Promise<SearchIndexer["Service"]>
  readonly close: () => Promise<void>
}

const dirs: Array<string> = []

/** A fresh temporary directory, removed by `removeTempDirs`. */
export const tempDir = (): string => {
  const dir = mkdtempSync(join(process.env.MNEMOS_TEST_DIR ?? tmpdir(), "mnemos-search-"))
  dirs.push(dir)
  return dir
}

export const removeTempDirs = (): void => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
}

/** Opens an engine on `dir` and connects a client; waits until search is warm. */
export const openSearchEngine = async (
  dir: string = tempDir(),
  search?: Engine.EngineConfig["search"],
): Promise<SearchEngine> => {
  const scope = Effect.runSync(Scope.make())
  const engine = Engine.layer({
    dataDir: dir,
    command: "mnemos test",
    stores: [graphStore],
    ...(search !== undefined ? { search } : {}),
  })
  const context = (await Effect.runPromise(
    Layer.buildWithScope(Layer.fresh(engine), scope),
  )) as unknown as Context.Context<SessionServices>
  const run = <A, E>(effect: Effect.Effect<A, E, SessionServices>) =>
    Effect.runPromise(effect.pipe(Effect.provideContext(context)))
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair()
  await run(startSession(serverSide, { tools: catalogue, transport: "test" }).pipe(Scope.provide(scope)))
  const client = new Client({ name: "search-test", version: "0" })
  await client.connect(clientSide)
  const call = async (name: string, args: Record<string, unknown>): Promise<Reply> => {
    const raw = (await client.callTool({ name, arguments: args })) as CallToolResult
    const first = raw.content?.[0]
    return {
      isError: raw.isError === true,
      text: first !== undefined && first.type === "text" ? first.text : "",
      structured: raw.structuredContent,
    }
  }
  const indexer = () =>
    run(
      Effect.gen(function* () {
        return yield* SearchIndexer
      }),
    )
  await run(
    Effect.gen(function* () {
      yield* (yield* SearchIndexer).awaitWarm
    }),
  )
  return {
    dir,
    call,
    ok: async (name, args) => {
      const reply = await call(name, args)
      if (reply.isError) throw new Error(`${name} failed: ${reply.text}`)
      return reply
    },
    run,
    indexer,
    close: async () => {
      await client.close().catch(() => undefined)
      await Effect.runPromise(Scope.close(scope, Exit.void))
    },
  }
}
