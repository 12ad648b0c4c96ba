/**
 * Running `mnemos` commands in this process for tests: `Command.runWith` on one command with the
 * Node services, its console captured, and optional overrides (the install commands' machine, the
 * `--force` setting). An engine with an MCP client in this process (`openTestEngine`), to fill a
 * data directory through the real tools; a data directory whose graph log is corrupt
 * (`corruptGraphLog`). Temporary directories, removed by `removeTempDirs`.
 */
import { chmodSync, cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { NodeServices } from "@effect/platform-node"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js"
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import { Cause, Console, type Context, Effect, Exit, Layer, Scope } from "effect"
import { Command } from "effect/cli"
import { InstallContext, type InstallMachine } from "../../src/cli/McpInstallCommands.ts"
import * as Engine from "../../src/Engine.ts"
import { SearchIndexer } from "../../src/search/Indexer.ts"
import { AllowUnsafeDataDir } from "../../src/stores/datadir/DataDir.ts"
import { readRecordAt, segmentHeaderBytes } from "../../src/stores/wal/WalRecord.ts"
import { catalogue } from "../../src/tools/Catalogue.ts"
import { startSession } from "../../src/tools/McpSession.ts"
import type { SessionServices } from "../../src/tools/Tool.ts"

const tempDirs: Array<string> = []

/** A fresh temporary directory (mode 0700), removed by `removeTempDirs`. */
export const tempDir = (prefix = "mnemos-cli-"): string => {
  const dir = mkdtempSync(join(process.env.MNEMOS_TEST_DIR ?? tmpdir(), prefix))
  chmodSync(dir, 0o700)
  tempDirs.push(dir)
  return dir
}

export const removeTempDirs = (): void => {
  for (const dir of tempDirs.splice(0)) {
    try {
      chmodSync(dir, 0o700)
    } catch {
      // already gone
    }
    rmSync(dir, { recursive: true, force: true })
  }
}

/** What a command run printed and how it ended. */
export interface CliRun {
  readonly ok: boolean
  readonly stdout: string
  readonly stderr: string
  /** The failure's tag and message, when it failed. */
  readonly error: { readonly tag: string; readonly message: string } | undefined
}

/** Runs `command` with `args` (without the command's own name). */
export const runCommand = async (
  // biome-ignore lint/suspicious/noExplicitAny: any command of the CLI
  command: Command.Command<any, any, any, any, any>,
  args: ReadonlyArray<string>,
  options: { readonly machine?: InstallMachine; readonly allowUnsafe?: boolean } = {},
): Promise<CliRun> => {
  const out: Array<string> = []
  const err: Array<string> = []
  const format = (parts: ReadonlyArray<unknown>) =>
    parts.map((part) => (typeof part === "string" ? part : String(part))).join(" ")
  const testConsole: Console.Console = Object.assign(Object.create(console), {
    log: (...parts: ReadonlyArray<unknown>) => out.push(format(parts)),
    info: (...parts: ReadonlyArray<unknown>) => out.push(format(parts)),
    error: (...parts: ReadonlyArray<unknown>) => err.push(format(parts)),
    warn: (...parts: ReadonlyArray<unknown>) => err.push(format(parts)),
  })
  let program = Command.runWith(command, { version: "test" })(args).pipe(
    Effect.provideService(Console.Console, testConsole),
    Effect.provideService(AllowUnsafeDataDir, options.allowUnsafe ?? false),
  ) as Effect.Effect<void, unknown, never>
  if (options.machine !== undefined) program = program.pipe(Effect.provideService(InstallContext, options.machine))
  const exit = await Effect.runPromiseExit(program.pipe(Effect.provide(NodeServices.layer)))
  let error: CliRun["error"]
  if (Exit.isFailure(exit)) {
    const failure = Cause.findErrorOption(exit.cause)
    const value = failure._tag === "Some" ? (failure.value as { _tag?: string; message?: string }) : undefined
    error = {
      tag: value?._tag ?? "Defect",
      message: value?.message ?? Cause.pretty(exit.cause),
    }
  }
  return { ok: Exit.isSuccess(exit), stdout: out.join("\n"), stderr: err.join("\n"), error }
}

/** A tool call's result: whether it failed, and its text. */
export interface ToolReply {
  readonly isError: boolean
  readonly text: string
}

/**
 * An engine on `dir` (search without a worker thread) with an MCP client connected in-process;
 * with `clientId`, the session has that stable identity (its writes carry retry keys).
 */
export const openTestEngine = async (dir: string, options: { readonly clientId?: string } = {}) => {
  const scope = Effect.runSync(Scope.make())
  const context = (await Effect.runPromise(
    Layer.buildWithScope(
      Layer.fresh(Engine.layer({ dataDir: dir, command: "mnemos test", search: { thread: false } })),
      scope,
    ),
  )) as Context.Context<SessionServices>
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair()
  await Effect.runPromise(
    startSession(serverSide, {
      tools: catalogue,
      transport: "test",
      ...(options.clientId !== undefined ? { clientId: options.clientId } : {}),
    }).pipe(Scope.provide(scope), Effect.provideContext(context)),
  )
  const client = new Client({ name: "mnemos-test", version: "0" })
  await client.connect(clientSide)
  return {
    call: async (name: string, args: Record<string, unknown>): Promise<ToolReply> => {
      const result = (await client.callTool({ name, arguments: args })) as CallToolResult
      const first = result.content?.[0]
      return { isError: result.isError === true, text: first?.type === "text" ? first.text : "" }
    },
    /** Calls and throws unless it succeeded. */
    ok: async (name: string, args: Record<string, unknown>): Promise<ToolReply> => {
      const result = (await client.callTool({ name, arguments: args })) as CallToolResult
      const first = result.content?.[0]
      const text = first?.type === "text" ? first.text : ""
      if (result.isError === true) throw new Error(`${name} failed: ${text}`)
      return { isError: false, text }
    },
    /** Waits until search's warm-up (loading and reconciling with the stores) is over. */
    awaitSearchWarm: () =>
      Effect.runPromise(
        Effect.gen(function* () {
          yield* (yield* SearchIndexer).awaitWarm
        }).pipe(Effect.provideContext(context)),
      ),
    close: async () => {
      await client.close().catch(() => undefined)
      await Effect.runPromise(Scope.close(scope, Exit.void))
    },
  }
}

/** The records of a segment file with their offsets. */
export const recordsOf = (file: string) => {
  const bytes = readFileSync(file)
  const records: Array<{ seq: number; offset: number; end: number }> = []
  for (let offset = segmentHeaderBytes; offset < bytes.length; ) {
    const read = readRecordAt(bytes, offset)
    if (read._tag !== "Record") break
    records.push({ seq: read.record.seq, offset, end: read.end })
    offset = read.end
  }
  return records
}

/** Inverts some bits of the byte at `offset`. */
export const flipByte = (file: string, offset: number) => {
  const bytes = readFileSync(file)
  bytes[offset] = bytes[offset]! ^ 0x5a
  writeFileSync(file, bytes)
}

/** The segment files of a WAL directory, oldest first. */
export const segmentsIn = (walDir: string) =>
  readdirSync(walDir)
    .filter((name) => name.startsWith("wal-"))
    .sort()

/**
 * Fills `dir` with 8 entities through the tools, stops, and leaves the graph store's log as a
 * crash (kill -9) would have: with a byte flipped in its fourth record and valid records after it,
 * so the graph store refuses to start (everything is also in its checkpoint).
 */
export const corruptGraphLog = async (dir: string) => {
  const engine = await openTestEngine(dir)
  for (let index = 0; index < 8; index++)
    await engine.ok("create_entities", {
      entities: [{ name: `entity ${index}`, entityType: "t", observations: [`o${index}`] }],
    })
  // A clean shutdown checkpoints and releases the log; keep the log as it was while running, as a
  // crash (kill -9) right now would have left it, and put it back after the shutdown.
  const walDir = join(dir, "stores", "graph", "wal")
  const whileRunning = tempDir("mnemos-wal-")
  cpSync(walDir, whileRunning, { recursive: true })
  await engine.close()
  rmSync(walDir, { recursive: true })
  cpSync(whileRunning, walDir, { recursive: true })
  const segments = segmentsIn(walDir)
  const file = join(walDir, segments[segments.length - 1]!)
  const records = recordsOf(file)
  if (records.length < 8) throw new Error(`expected at least 8 records in ${file}, found ${records.length}`)
  flipByte(file, records[3]!.offset + 30)
  return { walDir, segments }
}
