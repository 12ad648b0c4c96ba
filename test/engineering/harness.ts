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
import { Effect, Layer, Schema } from "effect"
import * as Router from "../../src/actors/Router.ts"
import * as AuditLedger from "../../src/engineering/AuditLedger.ts"
import { engineeringStores, recordStores } from "../../src/engineering/EngineeringStores.ts"
import * as RecordExpiry from "../../src/engineering/RecordExpiry.ts"
import * as EventBus from "../../src/stores/EventBus.ts"
import { layerNode } from "../../src/stores/wal/WalFs.ts"
import { catalogue } from "../../src/tools/Catalogue.ts"
import type { SessionServices } from "../../src/tools/Tool.ts"
import { type ToolCaller, ToolError, type ToolOutput } from "../../src/tools/Tool.ts"
import { openEngineClient, type Reply, type TestEngine } from "../support/engineClient.ts"

export type { Reply, TestEngine } from "../support/engineClient.ts"

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

/** Opens an engine on `dir` and connects a client named `clientName` whose first root is `rootDir`. */
export const openEngine = (
  dir: string = tempDir(),
  options: { readonly clientName?: string; readonly rootDir?: string } = {},
): Promise<TestEngine> =>
  openEngineClient(dir, {
    clientName: options.clientName ?? "eng-test",
    clientVersion: "1",
    ...(options.rootDir !== undefined ? { rootDir: options.rootDir } : {}),
  })

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
