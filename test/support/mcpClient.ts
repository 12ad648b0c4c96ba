/**
 * MCP clients for protocol-level tests and benchmarks: the SDK `Client` over stdio against a
 * real server process, either mnemos (`node --import tsx src/cli.ts serve --stdio --data-dir
 * DIR`, or the built `dist/cli.js`) or the official `@modelcontextprotocol/server-memory` (`MEMORY_FILE_PATH=FILE`).
 *
 * Every process and temporary directory started here is tracked; `cleanup()` closes the former
 * and removes the latter (call it in `afterAll`/`afterEach`). `restartMnemos` stops a mnemos
 * process with a signal (SIGTERM by default), waits until it has exited and starts a new one on
 * the same data directory.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import { parseResult } from "./engineClient.ts"

/** The repository's root (the cwd mnemos runs in). */
export const repoRoot = join(import.meta.dirname, "..", "..")

/** The official memory server's entry point. */
export const officialServerPath = join(
  repoRoot,
  "node_modules",
  "@modelcontextprotocol",
  "server-memory",
  "dist",
  "index.js",
)

/** Which server a process runs. */
export type ServerKind = "mnemos" | "official"

/** A running server process with a connected client. */
export interface McpServerProcess {
  readonly kind: ServerKind
  readonly client: Client
  readonly pid: number
  /** mnemos: the data directory; official: the memory file. */
  readonly location: string
  /** Everything the process wrote to stderr so far (its last 1 MiB). */
  readonly stderr: () => string
  /** Resolves once the process has exited (its stdio closed). */
  readonly exited: Promise<void>
  /** Whether the process has exited. */
  readonly hasExited: () => boolean
}

/** A tool call's result, parsed. */
export interface ToolResult {
  readonly isError: boolean
  /** The text of the first content item ("" when there is none). */
  readonly text: string
  /** `text` parsed as JSON, or undefined when it is not JSON. */
  readonly json: unknown
  readonly structured: Record<string, unknown> | undefined
  /** The whole result as the SDK client returned it. */
  readonly raw: CallToolResult
}

const running = new Set<McpServerProcess>()
const tempPaths = new Set<string>()
const stderrKeptMax = 1024 * 1024

/** A fresh temporary directory, removed by `cleanup()`. */
export const tempDir = (prefix: string): string => {
  const dir = mkdtempSync(join(process.env.MNEMOS_TEST_DIR ?? tmpdir(), prefix))
  tempPaths.add(dir)
  return dir
}

const connect = async (
  kind: ServerKind,
  location: string,
  params: { command: string; args: Array<string>; env?: Record<string, string> },
): Promise<McpServerProcess> => {
  const transport = new StdioClientTransport({
    command: params.command,
    args: params.args,
    cwd: repoRoot,
    env: { ...(process.env as Record<string, string>), ...params.env },
    stderr: "pipe",
  })
  let stderr = ""
  transport.stderr?.on("data", (chunk: Buffer | string) => {
    stderr += chunk.toString()
    if (stderr.length > stderrKeptMax) stderr = stderr.slice(-stderrKeptMax)
  })
  let exited = false
  let markExited!: () => void
  const exitedPromise = new Promise<void>((resolve) => {
    markExited = () => {
      exited = true
      resolve()
    }
  })
  const client = new Client({ name: "mnemos-test", version: "0" })
  // The client's transport fires onclose when the child's stdio closes, i.e. when it exited.
  client.onclose = markExited
  try {
    await client.connect(transport)
  } catch (error) {
    await transport.close().catch(() => undefined)
    throw new Error(`cannot start ${kind} server: ${String(error)}\nstderr:\n${stderr}`)
  }
  const pid = transport.pid
  if (pid === null) throw new Error(`${kind} server has no pid after connecting`)
  const server: McpServerProcess = {
    kind,
    client,
    pid,
    location,
    stderr: () => stderr,
    exited: exitedPromise,
    hasExited: () => exited,
  }
  running.add(server)
  return server
}

/** The built CLI (`npm run build`), which benchmarks measure: what users run. */
export const builtCli = join(repoRoot, "dist", "cli.js")

/**
 * Starts mnemos on `dataDir` (a fresh temporary directory when omitted): from source (tests: the
 * code under test, no build needed), or the built CLI with `built`.
 */
export const startMnemos = (
  dataDir: string = tempDir("mnemos-mcp-"),
  extraArgs: ReadonlyArray<string> = [],
  options: { readonly built?: boolean } = {},
): Promise<McpServerProcess> =>
  connect("mnemos", dataDir, {
    command: process.execPath,
    args: [
      ...(options.built === true ? [builtCli] : ["--import", "tsx", join(repoRoot, "src", "cli.ts")]),
      "serve",
      "--stdio",
      "--data-dir",
      dataDir,
      ...extraArgs,
    ],
  })

/** Starts the official memory server on `memoryFile` (a fresh temporary file when omitted). */
export const startOfficial = (
  memoryFile: string = join(tempDir("mnemos-official-"), "memory.jsonl"),
): Promise<McpServerProcess> =>
  connect("official", memoryFile, {
    command: process.execPath,
    args: [officialServerPath],
    env: { MEMORY_FILE_PATH: memoryFile },
  })

/** Starts a server of either kind on a fresh location. */
export const startServer = (kind: ServerKind): Promise<McpServerProcess> =>
  kind === "mnemos" ? startMnemos() : startOfficial()

/**
 * Sends `signal` to the process and waits until it has exited (at most `timeoutMs`, then it is
 * SIGKILLed and this rejects). The client is closed afterwards.
 */
export const kill = async (
  server: McpServerProcess,
  signal: NodeJS.Signals = "SIGTERM",
  timeoutMs = 20_000,
): Promise<void> => {
  if (!server.hasExited()) {
    process.kill(server.pid, signal)
    let timer: NodeJS.Timeout | undefined
    const timedOut = await Promise.race([
      server.exited.then(() => false),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(true), timeoutMs)
      }),
    ])
    clearTimeout(timer)
    if (timedOut) {
      process.kill(server.pid, "SIGKILL")
      await server.exited
      throw new Error(`${server.kind} (pid ${server.pid}) did not exit within ${timeoutMs} ms of ${signal}`)
    }
  }
  await server.client.close().catch(() => undefined)
  running.delete(server)
}

/** Closes the client (stdin EOF, then SIGTERM/SIGKILL by the SDK if needed) and forgets the process. */
export const stop = async (server: McpServerProcess): Promise<void> => {
  await server.client.close().catch(() => undefined)
  await server.exited
  running.delete(server)
}

/** Stops a mnemos process with `signal` and starts a new one on the same data directory. */
export const restartMnemos = async (
  server: McpServerProcess,
  signal: NodeJS.Signals = "SIGTERM",
): Promise<McpServerProcess> => {
  if (server.kind !== "mnemos") throw new Error("restartMnemos: not a mnemos process")
  await kill(server, signal)
  return startMnemos(server.location)
}

/** Calls a tool and parses its result. Protocol errors (JSON-RPC errors) reject. */
export const call = async (client: Client, name: string, args: unknown): Promise<ToolResult> => {
  const raw = (await client.callTool({ name, arguments: args as Record<string, unknown> })) as CallToolResult
  return { ...parseResult(raw), raw }
}

export const callOk = async (client: Client, name: string, args: unknown): Promise<ToolResult> => {
  const result = await call(client, name, args)
  if (result.isError) throw new Error(`${name} failed: ${result.text}`)
  return result
}

/** The whole graph, as `read_graph`'s structured content. */
export const readGraph = async (
  client: Client,
): Promise<{
  entities: Array<{ name: string; entityType: string; observations: Array<string> }>
  relations: Array<{ from: string; to: string; relationType: string }>
}> => (await callOk(client, "read_graph", {})).structured as never

/** The process's peak resident set size in bytes (VmHWM of /proc/<pid>/status), if readable. */
export const peakRssBytes = (pid: number): number | undefined => {
  try {
    const match = /^VmHWM:\s+(\d+)\s+kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))
    return match ? Number(match[1]) * 1024 : undefined
  } catch {
    return undefined
  }
}

/** Closes every server started here and removes every temporary directory. */
export const cleanup = async (): Promise<void> => {
  await Promise.all([...running].map((server) => stop(server)))
  for (const path of tempPaths) rmSync(path, { recursive: true, force: true })
  tempPaths.clear()
}
