/**
 * Test harness for the engineering tools.
 *
 * - `openEngine`: the real stack in-process (Engine layer on a temporary data directory, an MCP
 *   session with the whole catalogue, an SDK client over an in-memory transport). `close()` shuts
 *   the engine down like a process exit (drain, flush, unlock); opening the directory again is a
 *   restart.
 * - `callTool`: runs one tool's Schema and handler inside an Effect, so tests can use the
 *   engine's services under `TestClock` (`it.effect`); `withEngine` provides a fresh engine.
 * - Git fixtures: real temporary repositories made with the `git` binary.
 */
import { execFileSync } from "node:child_process"
import { mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js"
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import { type Context, Effect, Exit, Layer, Schema, Scope } from "effect"
import * as EventBus from "../../src/actors/EventBus.ts"
import * as Router from "../../src/actors/Router.ts"
import * as Engine from "../../src/Engine.ts"
import * as AuditLedger from "../../src/engineering/AuditLedger.ts"
import { engineeringStores, recordStores } from "../../src/engineering/EngineeringStores.ts"
import * as RecordExpiry from "../../src/engineering/RecordExpiry.ts"
import { layerNode } from "../../src/stores/WalFs.ts"
import { catalogue } from "../../src/tools/Catalogue.ts"
import { type SessionServices, startSession } from "../../src/tools/McpSession.ts"
import { type ToolCaller, ToolError, type ToolOutput } from "../../src/tools/Tool.ts"

const tempDirs: Array<string> = []

/** A fresh temporary directory (real path), removed by `removeTempDirs`. */
export const tempDir = (prefix = "mnemos-eng-"): string => {
  const dir = realpathSync(mkdtempSync(join(process.env.MNEMOS_TEST_DIR ?? tmpdir(), prefix)))
  tempDirs.push(dir)
  return dir
}

/** Removes every directory made by `tempDir`. */
export const removeTempDirs = (): void => {
  for (const dir of tempDirs.splice(0)) rmSync(dir, { recursive: true, force: true })
}

/** A parsed tool result. */
export interface Reply {
  readonly isError: boolean
  readonly text: string
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON answers
  readonly json: any
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON answers
  readonly structured: any
}

const parse = (raw: CallToolResult): Reply => {
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

/** A running engine with a connected MCP client. */
export interface TestEngine {
  readonly dir: string
  readonly client: Client
  readonly call: (name: string, args: unknown) => Promise<Reply>
  /** Calls and throws unless the call succeeded. */
  readonly ok: (name: string, args: unknown) => Promise<Reply>
  /** Runs an effect with the engine's services. */
  readonly run: <A, E>(effect: Effect.Effect<A, E, SessionServices>) => Promise<A>
  readonly close: () => Promise<void>
}

/** Opens an engine on `dir` and connects a client named `clientName` whose first root is `rootDir`. */
export const openEngine = async (
  dir: string = tempDir(),
  options: { readonly clientName?: string; readonly rootDir?: string } = {},
): Promise<TestEngine> => {
  const scope = Effect.runSync(Scope.make())
  const context = (await Effect.runPromise(
    Layer.buildWithScope(Layer.fresh(Engine.layer({ dataDir: dir, command: "mnemos test" })), scope),
  )) as Context.Context<SessionServices>
  const run = <A, E>(effect: Effect.Effect<A, E, SessionServices>) =>
    Effect.runPromise(effect.pipe(Effect.provideContext(context)))
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair()
  await run(startSession(serverSide, { tools: catalogue, transport: "test" }).pipe(Scope.provide(scope)))
  const rootDir = options.rootDir
  const client = new Client(
    { name: options.clientName ?? "eng-test", version: "1" },
    { capabilities: rootDir !== undefined ? { roots: {} } : {} },
  )
  if (rootDir !== undefined) {
    const { ListRootsRequestSchema } = await import("@modelcontextprotocol/sdk/types.js")
    client.setRequestHandler(ListRootsRequestSchema, async () => ({
      roots: [{ uri: `file://${rootDir}`, name: "root" }],
    }))
  }
  await client.connect(clientSide)
  const call = async (name: string, args: unknown) =>
    parse((await client.callTool({ name, arguments: args as Record<string, unknown> })) as CallToolResult)
  return {
    dir,
    client,
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

/** The error code of a failed call (from the JSON envelope). */
export const codeOf = (reply: Reply): string | undefined => (reply.isError ? reply.json?.error?.code : undefined)

/** A caller for direct tool calls. */
export const testCaller = (overrides: Partial<ToolCaller> = {}): ToolCaller => ({
  project: "demo",
  client: "tester/1 via test",
  ...overrides,
})

/** Runs a tool's argument Schema and handler; a decoding failure is a VALIDATION_ERROR. */
export const callTool = (
  name: string,
  args: unknown,
  caller: ToolCaller = testCaller(),
): Effect.Effect<ToolOutput["structured"], ToolError, SessionServices> =>
  Effect.gen(function* () {
    const tool = catalogue.find((candidate) => candidate.definition.name === name)
    if (tool === undefined) return yield* Effect.die(new Error(`no tool ${name}`))
    const decoded = yield* Schema.decodeUnknownEffect(tool.args)(args).pipe(
      Effect.mapError((issue) => new ToolError({ code: "VALIDATION_ERROR", message: issue.message })),
    )
    return (yield* tool.run(decoded, caller)).structured
  })

/** The failure code of a direct call, or "ok". */
export const outcomeOf = <A>(effect: Effect.Effect<A, ToolError, SessionServices>) =>
  effect.pipe(
    Effect.map(() => "ok"),
    Effect.catch((error) => Effect.succeed(error.code)),
  )

/**
 * The engineering part of the engine (its stores, the event bus and the audit ledger, no graph
 * search) on `dir`. It has no background loops on the Effect clock, so `TestClock.adjust` can
 * jump days without waking anything thousands of times.
 */
export const engineeringEngine = (dir: string) => {
  const core = Router.layer({ dataDir: dir, stores: engineeringStores }).pipe(
    Layer.provideMerge(AuditLedger.feedLayer),
    Layer.provideMerge(EventBus.layer),
    Layer.provide(layerNode),
  )
  return Layer.merge(AuditLedger.layer, RecordExpiry.layer(recordStores)).pipe(Layer.provideMerge(core))
}

/** Provides a fresh engineering engine on `dir` to `effect` (under the caller's clock). */
export const withEngine = <A, E>(
  effect: Effect.Effect<A, E, SessionServices | RecordExpiry.RecordExpiry>,
  dir: string = tempDir(),
): Effect.Effect<A, E | unknown> =>
  (
    effect as Effect.Effect<
      A,
      E,
      Router.Router | EventBus.EventBus | AuditLedger.AuditLedger | RecordExpiry.RecordExpiry
    >
  ).pipe(Effect.provide(Layer.fresh(engineeringEngine(dir))))

// ---------------------------------------------------------------------------------------------
// git fixtures

const gitEnv = {
  ...process.env,
  GIT_AUTHOR_NAME: "Test",
  GIT_AUTHOR_EMAIL: "test@example.com",
  GIT_COMMITTER_NAME: "Test",
  GIT_COMMITTER_EMAIL: "test@example.com",
  GIT_CONFIG_NOSYSTEM: "1",
  HOME: tmpdir(),
}

/** Runs git in `dir` and returns its trimmed output. */
export const git = (dir: string, ...args: Array<string>): string =>
  execFileSync("git", ["-C", dir, ...args], { env: gitEnv, encoding: "utf8" }).trim()

/** A new repository on branch `branch` with one commit per message. */
export const makeRepo = (messages: ReadonlyArray<string>, branch = "main"): string => {
  const dir = tempDir("mnemos-repo-")
  git(dir, "init", "--quiet", "--initial-branch", branch)
  messages.forEach((message, index) => {
    writeFileSync(join(dir, `file-${index}.txt`), message)
    git(dir, "add", ".")
    git(dir, "commit", "--quiet", "-m", message)
  })
  return dir
}
