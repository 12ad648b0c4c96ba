/**
 * Helpers for the editor tests: a real headless Neovim (`nvim --headless --clean --listen`),
 * a raw RPC connection to drive it as a person would, temporary directories, and calling an
 * editor tool the way the MCP session does (decode the arguments with the tool's Schema, run
 * the handler).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { accessSync, constants, existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { delimiter, join } from "node:path"
import { Effect, Schema } from "effect"
import { connect, type NeovimConnection } from "../../src/editor/Neovim.ts"
import { editorTools } from "../../src/tools/EditorTools.ts"
import type { ToolCaller, ToolError, ToolOutput } from "../../src/tools/Tool.ts"

/** Whether `name` is an executable on this machine's PATH. */
export const onPath = (name: string): boolean =>
  (process.env.PATH ?? "").split(delimiter).some((directory) => {
    try {
      accessSync(join(directory, name), constants.X_OK)
      return true
    } catch {
      return false
    }
  })

/**
 * Tests that need a system package run wherever it is installed, and always in CI (where
 * `.ci/run` installs it): there a missing package fails the tests instead of skipping them.
 */
export const lacks = (command: string): boolean => !onPath(command) && process.env.CI === undefined

const tempPaths: Array<string> = []
/** A fresh temporary directory, removed by `removeTempDirs`. */
export const tempDir = (prefix: string): string => {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  tempPaths.push(dir)
  return dir
}
export const removeTempDirs = () => {
  for (const dir of tempPaths.splice(0)) rmSync(dir, { recursive: true, force: true })
}

const waitFor = async (check: () => boolean, what: string, timeoutMs = 15_000) => {
  const deadline = Date.now() + timeoutMs
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

/** A headless Neovim listening on a socket in a temporary directory. */
export interface HeadlessNeovim {
  readonly address: string
  readonly process: ChildProcess
  readonly stop: () => Promise<void>
}

export const startNeovim = async (args: ReadonlyArray<string> = []): Promise<HeadlessNeovim> => {
  const address = join(tempDir("mnemos-nvim-"), "nvim.sock")
  const child = spawn("nvim", ["--headless", "--clean", "-n", "--listen", address, ...args], {
    stdio: ["ignore", "ignore", "pipe"],
  })
  let stderr = ""
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString()
  })
  let exited = false
  child.once("exit", () => {
    exited = true
  })
  await waitFor(() => existsSync(address) || exited, "Neovim's socket")
  if (exited) throw new Error(`nvim exited at startup: ${stderr}`)
  return {
    address,
    process: child,
    stop: async () => {
      if (exited) return
      const gone = new Promise((resolve) => child.once("exit", resolve))
      child.kill("SIGTERM")
      await gone
    },
  }
}

/** Runs `use` with a raw RPC connection to `address` (the test's own hands on the editor). */
export const withConnection = <A>(address: string, use: (connection: NeovimConnection) => Effect.Effect<A, unknown>) =>
  Effect.scoped(
    Effect.gen(function* () {
      const connection = yield* connect({ address, source: "flag" })
      return yield* use(connection)
    }),
  )

/** Sends raw requests to Neovim, in order; answers the last one's result. */
export const nvimRequests = (address: string, requests: ReadonlyArray<readonly [string, ReadonlyArray<unknown>]>) =>
  withConnection(address, (connection) =>
    Effect.gen(function* () {
      let last: unknown
      for (const [method, args] of requests) last = yield* connection.request(method, args)
      return last
    }),
  )

export const caller = (rootDir?: string): ToolCaller => ({
  project: "default",
  client: "editor-test/0 via test",
  ...(rootDir !== undefined ? { rootDir } : {}),
})

/** Calls an editor tool by name as the session would: arguments decoded by its Schema first. */
export const callTool = (
  name: string,
  args: unknown,
  as: ToolCaller = caller(),
): Effect.Effect<ToolOutput, ToolError | Schema.SchemaError> => {
  const tool = editorTools.find((candidate) => candidate.definition.name === name)
  if (tool === undefined) return Effect.die(new Error(`no editor tool ${name}`))
  return Schema.decodeUnknownEffect(tool.args)(args).pipe(Effect.flatMap((decoded) => tool.run(decoded, as)))
}

/** The failure of a tool call, as the session would report it. */
export const toolFailure = (effect: Effect.Effect<ToolOutput, ToolError | Schema.SchemaError>) =>
  effect.pipe(
    Effect.flip,
    Effect.map((error) =>
      error._tag === "ToolError"
        ? { code: error.code, message: error.message }
        : { code: "SCHEMA", message: error.message },
    ),
  )

/** A virtual X server on a free display (it prints the number it chose on fd 1), and its process. */
export const startXvfb = () =>
  new Promise<{ readonly display: string; readonly process: ChildProcess }>((resolve, reject) => {
    const child = spawn("Xvfb", ["-displayfd", "1", "-nolisten", "tcp", "-screen", "0", "320x240x24"], {
      stdio: ["ignore", "pipe", "ignore"],
    })
    let output = ""
    child.stdout?.on("data", (chunk: Buffer) => {
      output += chunk.toString()
      if (output.includes("\n")) resolve({ display: `:${output.trim()}`, process: child })
    })
    child.once("exit", (code) => reject(new Error(`Xvfb exited (${code}) before it was ready`)))
    child.once("error", reject)
  })
