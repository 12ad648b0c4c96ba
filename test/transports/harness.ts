/**
 * Processes and clients for the transport tests and the transport benchmark: a real daemon
 * (`mnemos serve`) on a random free port and a temporary data directory, SDK clients over
 * Streamable HTTP, SSE and WebSocket, the `mnemos mcp` shim driven either by the SDK client or by
 * a raw JSON-RPC line reader (which counts every answer), and /proc readings.
 *
 * Every endpoint but /ping wants the data directory's bearer token: clients made here for a
 * daemon this harness started carry it unless the test passes `headers` of its own (`{}` for
 * none).
 *
 * Everything started here is tracked by pid — including a daemon a shim started on its own (found
 * through the data directory's `daemon.json`) — and `cleanup()` ends it and removes the
 * temporary directories. Nothing is ever killed by name.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { createSocket } from "node:dgram"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { request as httpRequest } from "node:http"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import type { CallToolResult, JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"
import { afterAll, beforeAll } from "vitest"
import WebSocket from "ws"
import { WebSocketTransport } from "../../src/transports/WebSocketTransport.ts"

/** The repository's root (the cwd every child runs in). */
export const repoRoot = join(import.meta.dirname, "..", "..")
const cliPath = join(repoRoot, "src", "cli.ts")
/** How a child runs the CLI from source. */
export const cliArgs = (...args: Array<string>): Array<string> => ["--import", "tsx", cliPath, ...args]
/** How a child runs the built CLI (`npm run build`), as users do: what benchmarks measure. */
export const builtCliArgs = (...args: Array<string>): Array<string> => [join(repoRoot, "dist", "cli.js"), ...args]

const tempPaths = new Set<string>()
const children = new Set<ChildProcess>()
const dataDirs = new Set<string>()
/** The data directory of each daemon started here, by its URL. */
const dataDirByUrl = new Map<string, string>()
const clients = new Set<Client>()

// If this process ends without `cleanup()` (a crash, a script that threw), take its children along.
process.once("exit", () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
})

/** A fresh temporary directory, removed by `cleanup()`. */
export const tempDir = (prefix = "mnemos-transports-"): string => {
  const dir = mkdtempSync(join(process.env.MNEMOS_TEST_DIR ?? tmpdir(), prefix))
  tempPaths.add(dir)
  return dir
}

const tcpFree = (port: number, host: string) =>
  new Promise<boolean>((resolve) => {
    const server = createServer()
    server.once("error", () => resolve(false))
    server.listen(port, host, () => server.close(() => resolve(true)))
  })
const udpFree = (port: number, host: string) =>
  new Promise<boolean>((resolve) => {
    const socket = createSocket("udp4")
    socket.once("error", () => resolve(false))
    socket.bind(port, host, () => socket.close(() => resolve(true)))
  })

/** A random port in 20000–60000 whose TCP port and the UDP port after it are both free. */
export const freePort = async (host = "127.0.0.1"): Promise<number> => {
  for (let attempt = 0; attempt < 200; attempt++) {
    // Below Linux's ephemeral range (32768+), so the client side of some other connection cannot
    // take the port between this check and the daemon's bind.
    const port = 20_000 + Math.floor(Math.random() * 12_000)
    if ((await tcpFree(port, host)) && (await udpFree(port + 1, host))) return port
  }
  throw new Error("no free port found")
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/** Polls `probe` every `everyMs` until it returns a value other than undefined. */
export const waitFor = async <A>(
  what: string,
  probe: () => A | undefined | Promise<A | undefined>,
  timeoutMs = 20_000,
  everyMs = 50,
): Promise<A> => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await sleep(everyMs)
  }
}

/** How a child process ended. */
export interface Exited {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

/** A `mnemos serve` process. */
export interface DaemonProcess {
  readonly pid: number
  readonly host: string
  readonly port: number
  readonly udpPort: number
  readonly dataDir: string
  /** `http://host:port` */
  readonly url: string
  /** stdout and stderr so far. */
  readonly output: () => string
  readonly exited: Promise<Exited>
  /** Sends `signal` and waits for the exit (SIGKILL after `timeoutMs`, then rejects). */
  readonly stop: (signal?: NodeJS.Signals, timeoutMs?: number) => Promise<Exited>
}

/** Runs a CLI command to completion (for commands that exit on their own). */
export const runCli = (args: Array<string>, timeoutMs = 30_000): Promise<Exited & { output: string }> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, cliArgs(...args), { cwd: repoRoot, stdio: ["ignore", "pipe", "pipe"] })
    children.add(child)
    let output = ""
    child.stdout.on("data", (chunk) => (output += chunk))
    child.stderr.on("data", (chunk) => (output += chunk))
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      reject(new Error(`mnemos ${args.join(" ")} did not exit within ${timeoutMs} ms:\n${output}`))
    }, timeoutMs)
    child.once("exit", (code, signal) => {
      clearTimeout(timer)
      children.delete(child)
      resolve({ code, signal, output })
    })
  })

const hostInUrl = (host: string) => (host.includes(":") ? `[${host}]` : host)

/** GET `path` on the daemon; the status and parsed JSON body. */
export const getJson = async (
  url: string,
  init: RequestInit = {},
): Promise<{ status: number; body: unknown; headers: Headers }> => {
  const response = await fetch(url, init)
  const text = await response.text()
  let body: unknown = text
  try {
    body = JSON.parse(text)
  } catch {
    // not JSON: keep the text
  }
  return { status: response.status, body, headers: response.headers }
}

/** The bearer token header for the daemon of `dataDir`, when its data directory has a token. */
export const authHeaders = (dataDir: string): Record<string, string> => {
  try {
    return { authorization: `Bearer ${readFileSync(join(dataDir, "token"), "utf8").trim()}` }
  } catch {
    return {}
  }
}

/** GET a REST route of the daemon (`/api/...`), with the data directory's token when there is one. */
export const apiGet = async <A>(daemon: Pick<DaemonProcess, "url" | "dataDir">, path: string): Promise<A> => {
  const response = await getJson(`${daemon.url}${path}`, { headers: authHeaders(daemon.dataDir) })
  if (response.status !== 200) throw new Error(`GET ${path}: ${response.status} ${JSON.stringify(response.body)}`)
  return response.body as A
}

/**
 * One HTTP request with full control of the headers (fetch cannot set `Host`); the status,
 * headers and body text.
 */
export const rawHttp = (options: {
  readonly host: string
  readonly port: number
  readonly method?: string
  readonly path: string
  readonly headers?: Record<string, string>
  readonly body?: string | Buffer
}): Promise<{ status: number; headers: Record<string, unknown>; text: string }> =>
  new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: options.host,
        port: options.port,
        method: options.method ?? "GET",
        path: options.path,
        headers: { host: `${hostInUrl(options.host)}:${options.port}`, ...options.headers },
      },
      (res) => {
        let text = ""
        res.on("data", (chunk) => {
          text += chunk
          // An SSE stream never ends: its status and first bytes are all a test needs.
          if (String(res.headers["content-type"]).startsWith("text/event-stream")) {
            res.destroy()
            resolve({ status: res.statusCode ?? 0, headers: res.headers, text })
          }
        })
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }))
        res.on("error", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }))
      },
    )
    req.on("error", reject)
    if (options.body !== undefined) req.write(options.body)
    req.end()
  })

/** Starts `mnemos serve` and waits until `/ping` answers. */
type DaemonOptions = {
  readonly dataDir?: string
  readonly host?: string
  readonly port?: number
  readonly udpPort?: number
  readonly args?: ReadonlyArray<string>
  readonly env?: Record<string, string>
  /** Runs the daemon through this command (it must end by executing its arguments), e.g. `unshare`. */
  readonly through?: ReadonlyArray<string>
  /** Runs the built CLI rather than the sources. */
  readonly built?: boolean
  /** Runs this Node.js binary on this CLI file (an installed product) rather than the repository's. */
  readonly cli?: { readonly node: string; readonly file: string }
}

/** Starts a daemon; a port this harness chose that was taken meanwhile is chosen again (twice at most). */
export const startDaemon = async (options: DaemonOptions = {}): Promise<DaemonProcess> => {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startDaemonOnce(options)
    } catch (error) {
      const taken = error instanceof Error && error.message.includes("is in use by another program")
      if (!taken || options.port !== undefined || attempt >= 3) throw error
    }
  }
}

const startDaemonOnce = async (options: DaemonOptions): Promise<DaemonProcess> => {
  const host = options.host ?? "127.0.0.1"
  const port = options.port ?? (await freePort(host === "127.0.0.1" ? host : "0.0.0.0"))
  const udpPort = options.udpPort ?? port + 1
  const dataDir = options.dataDir ?? tempDir()
  dataDirs.add(dataDir)
  const argv = [
    options.cli?.node ?? process.execPath,
    ...(options.cli !== undefined
      ? (...args: Array<string>) => [options.cli!.file, ...args]
      : options.built === true
        ? builtCliArgs
        : cliArgs)(
      "serve",
      "--data-dir",
      dataDir,
      "--host",
      host,
      "--port",
      String(port),
      "--udp-port",
      String(udpPort),
      ...(options.args ?? []),
    ),
  ]
  const [command, ...args] = [...(options.through ?? []), ...argv] as [string, ...Array<string>]
  const child = spawn(command, args, {
    cwd: repoRoot,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...options.env },
  })
  children.add(child)
  let output = ""
  child.stdout!.on("data", (chunk) => (output += chunk))
  child.stderr!.on("data", (chunk) => (output += chunk))
  const exited = new Promise<Exited>((resolve) =>
    child.once("exit", (code, signal) => {
      children.delete(child)
      resolve({ code, signal })
    }),
  )
  let hasExited = false
  void exited.then(() => (hasExited = true))
  const url = `http://${hostInUrl(host)}:${port}`
  dataDirByUrl.set(url, dataDir)
  await waitFor(
    `the daemon on ${url}`,
    async () => {
      if (hasExited) throw new Error(`the daemon exited before it answered /ping:\n${output}`)
      try {
        const response = await fetch(`${url}/ping`)
        return response.ok && output.includes("listening on") ? true : undefined
      } catch {
        return undefined
      }
    },
    30_000,
  )
  const stop = async (signal: NodeJS.Signals = "SIGTERM", timeoutMs = 20_000): Promise<Exited> => {
    if (!hasExited) child.kill(signal)
    let timer: NodeJS.Timeout | undefined
    const result = await Promise.race([
      exited,
      new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), timeoutMs)
      }),
    ])
    clearTimeout(timer)
    if (result === undefined) {
      child.kill("SIGKILL")
      await exited
      throw new Error(`the daemon (pid ${child.pid}) did not exit within ${timeoutMs} ms of ${signal}:\n${output}`)
    }
    return result
  }
  return { pid: child.pid!, host, port, udpPort, dataDir, url, output: () => output, exited, stop }
}

/**
 * One daemon for a whole test file: started before its tests, ended (with everything else the
 * harness started) after them. The getter gives it to the tests.
 */
export const sharedDaemon = (options: DaemonOptions = {}): (() => DaemonProcess) => {
  let daemon: DaemonProcess | undefined
  beforeAll(async () => {
    daemon = await startDaemon(options)
  })
  afterAll(cleanup)
  return () => {
    if (daemon === undefined) throw new Error("the shared daemon is not started yet (use it inside a test)")
    return daemon
  }
}

/** The pid `daemon.json` of `dataDir` names, if any. */
export const daemonPidOf = (dataDir: string): number | undefined => {
  try {
    return (JSON.parse(readFileSync(join(dataDir, "daemon.json"), "utf8")) as { pid: number }).pid
  } catch {
    return undefined
  }
}

/** Whether a process with this pid is alive (and not a zombie). */
export const isAlive = (pid: number): boolean => {
  try {
    return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, "utf8"))
  } catch {
    return false
  }
}

/** The resident memory of a process from /proc/PID/status, in bytes: all of it, anonymous (heap) and file-backed (mapped LMDB pages). */
export const residentMemory = (pid: number): { rss: number; anon: number; file: number } | undefined => {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8")
    const field = (name: string) =>
      Number(new RegExp(`^${name}:\\s+(\\d+)\\s+kB$`, "m").exec(status)?.[1] ?? Number.NaN) * 1024
    const rss = field("VmRSS")
    return Number.isNaN(rss) ? undefined : { rss, anon: field("RssAnon"), file: field("RssFile") }
  } catch {
    return undefined
  }
}

/** The resident set size of a process (VmRSS), in bytes. */
export const rssBytes = (pid: number): number | undefined => residentMemory(pid)?.rss

/** Which network transport an SDK client uses. */
export type NetworkTransport = "streamable-http" | "sse" | "ws"
export const networkTransports: ReadonlyArray<NetworkTransport> = ["streamable-http", "sse", "ws"]

/** An SDK client transport for `kind` against the server at `url` (`http://host:port`). */
export const clientTransport = async (
  kind: NetworkTransport,
  url: string,
  options: { readonly headers?: Record<string, string>; readonly clientId?: string } = {},
): Promise<Transport> => {
  const dataDir = dataDirByUrl.get(url)
  const headers = options.headers ?? (dataDir !== undefined ? authHeaders(dataDir) : {})
  if (kind === "streamable-http")
    return new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers } })
  if (kind === "sse")
    return new SSEClientTransport(new URL(`${url}/sse`), {
      requestInit: { headers },
      eventSourceInit: {
        fetch: (input, init) =>
          fetch(input, { ...init, headers: { ...(init?.headers as Record<string, string>), ...headers } }),
      },
    })
  const query = options.clientId !== undefined ? `?client=${options.clientId}` : ""
  const socket = new WebSocket(`${url.replace(/^http/, "ws")}/ws${query}`, { headers })
  await new Promise<void>((resolve, reject) => {
    socket.once("open", () => resolve())
    socket.once("error", reject)
    socket.once("unexpected-response", (_request, response) =>
      reject(new Error(`WebSocket upgrade refused: ${response.statusCode}`)),
    )
  })
  return new WebSocketTransport(socket)
}

/** An SDK client connected over `kind`; closed by `cleanup()` unless closed before. */
export const connectClient = async (
  kind: NetworkTransport,
  url: string,
  options: { readonly name?: string; readonly headers?: Record<string, string>; readonly clientId?: string } = {},
): Promise<Client> => {
  const client = new Client({ name: options.name ?? `test-${kind}`, version: "1.0.0" })
  await client.connect(await clientTransport(kind, url, options))
  clients.add(client)
  return client
}

/** An SDK client talking to a `mnemos mcp` shim process over its stdio. */
export const connectShim = async (
  dataDir: string,
  port: number,
  name = "test-shim",
): Promise<{ client: Client; pid: number; stderr: () => string }> => {
  dataDirs.add(dataDir)
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: cliArgs("mcp", "--data-dir", dataDir, "--port", String(port)),
    cwd: repoRoot,
    stderr: "pipe",
  })
  let stderr = ""
  transport.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
  const client = new Client({ name, version: "1.0.0" })
  await client.connect(transport)
  clients.add(client)
  return { client, pid: transport.pid!, stderr: () => stderr }
}

/** An SDK client on `mnemos serve --stdio` (embedded mode). */
export const connectEmbedded = async (dataDir: string): Promise<Client> => {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: cliArgs("serve", "--stdio", "--data-dir", dataDir),
    cwd: repoRoot,
    stderr: "pipe",
  })
  const client = new Client({ name: "test-stdio", version: "1.0.0" })
  await client.connect(transport)
  clients.add(client)
  return client
}

/** A tool call's result: whether it failed, and its structured content. */
export const callTool = async (
  client: Client,
  name: string,
  args: Record<string, unknown>,
  timeoutMs = 60_000,
): Promise<{ isError: boolean; text: string; structured: Record<string, unknown> | undefined }> => {
  const raw = (await client.callTool({ name, arguments: args }, undefined, { timeout: timeoutMs })) as CallToolResult
  const first = raw.content?.[0]
  return {
    isError: raw.isError === true,
    text: first?.type === "text" ? first.text : "",
    structured: raw.structuredContent as Record<string, unknown> | undefined,
  }
}

/**
 * `mnemos mcp` driven by raw JSON-RPC lines: every line the shim writes is kept, so a test can
 * count the answers to each request id (the SDK client would hide a duplicate).
 */
export interface RawShim {
  readonly pid: number
  /** Whether the process is still running. */
  readonly running: () => boolean
  readonly send: (message: JSONRPCMessage) => void
  /** Writes `text` to the shim's stdin as is, in one write. */
  readonly writeRaw: (text: string) => void
  /** Sends a request and resolves with its first answer. */
  readonly request: (method: string, params: Record<string, unknown>, id?: string | number) => Promise<JSONRPCMessage>
  /** Every answer received per request id. */
  readonly answers: Map<string | number, Array<JSONRPCMessage>>
  readonly stderr: () => string
  readonly close: () => Promise<void>
}

/** Starts `mnemos mcp` and performs the MCP handshake over raw lines. */
export const startRawShim = (dataDir: string, port: number, args: ReadonlyArray<string> = []): Promise<RawShim> =>
  startRawLines(dataDir, ["mcp", "--data-dir", dataDir, "--port", String(port), ...args])

/** `mnemos serve --stdio` (embedded mode) driven by raw JSON-RPC lines, like `startRawShim`. */
export const startRawEmbedded = (dataDir: string): Promise<RawShim> =>
  startRawLines(dataDir, ["serve", "--stdio", "--data-dir", dataDir])

const startRawLines = async (dataDir: string, args: Array<string>): Promise<RawShim> => {
  dataDirs.add(dataDir)
  const child = spawn(process.execPath, cliArgs(...args), {
    cwd: repoRoot,
    stdio: ["pipe", "pipe", "pipe"],
  })
  children.add(child)
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  void exited.then(() => children.delete(child))
  let stderr = ""
  child.stderr!.on("data", (chunk) => (stderr += chunk))
  const answers = new Map<string | number, Array<JSONRPCMessage>>()
  const waiters = new Map<string | number, (message: JSONRPCMessage) => void>()
  let partial = ""
  child.stdout!.on("data", (chunk: Buffer) => {
    partial += chunk.toString("utf8")
    let newline = partial.indexOf("\n")
    while (newline !== -1) {
      const line = partial.slice(0, newline).trim()
      partial = partial.slice(newline + 1)
      newline = partial.indexOf("\n")
      if (line === "") continue
      const message = JSON.parse(line) as JSONRPCMessage
      if (!("id" in message) || "method" in message || message.id === undefined) continue
      const id = message.id
      const list = answers.get(id) ?? []
      list.push(message)
      answers.set(id, list)
      waiters.get(id)?.(message)
      waiters.delete(id)
    }
  })
  const send = (message: JSONRPCMessage) => void child.stdin!.write(`${JSON.stringify(message)}\n`)
  let nextId = 1
  const request = (method: string, params: Record<string, unknown>, id: string | number = `r${nextId++}`) =>
    new Promise<JSONRPCMessage>((resolve) => {
      waiters.set(id, resolve)
      send({ jsonrpc: "2.0", id, method, params })
    })
  await request("initialize", {
    protocolVersion: "2025-06-18",
    capabilities: {},
    clientInfo: { name: "raw-shim-test", version: "1.0.0" },
  })
  send({ jsonrpc: "2.0", method: "notifications/initialized" })
  const close = async () => {
    child.stdin!.end()
    const timer = setTimeout(() => child.kill("SIGKILL"), 5_000)
    await exited
    clearTimeout(timer)
  }
  return {
    pid: child.pid!,
    running: () => child.exitCode === null && child.signalCode === null,
    send,
    writeRaw: (text) => void child.stdin!.write(text),
    request,
    answers,
    stderr: () => stderr,
    close,
  }
}

/** A raw JSON-RPC connection to `/ws`: requests with ids the test chooses, every answer kept. */
export interface RawWs {
  readonly socket: WebSocket
  /** Sends a request under `id` and resolves with its first answer. */
  readonly request: (id: string | number, method: string, params?: Record<string, unknown>) => Promise<RawAnswer>
  /** Sends text as one frame, whatever it holds. */
  readonly sendText: (text: string) => void
  /** Every answer received, in order (id null included). */
  readonly answers: Array<RawAnswer>
  readonly close: () => Promise<void>
}

/** A JSON-RPC answer as received. */
export interface RawAnswer {
  readonly id: string | number | null
  readonly result?: {
    isError?: boolean
    structuredContent?: Record<string, unknown>
    content?: Array<{ text?: string }>
  }
  readonly error?: { code: number; message: string }
}

/**
 * Opens `/ws` (with `?client=` when given, and the token of the daemon's data directory when
 * given) and performs the MCP handshake under `initializeId`.
 */
export const openRawWs = async (
  url: string,
  options: {
    readonly clientId?: string
    readonly dataDir?: string
    readonly initializeId?: string | number
    /** Offered as the client's MCP roots (`roots/list` is answered with them). */
    readonly roots?: ReadonlyArray<string>
  } = {},
): Promise<RawWs> => {
  const query = options.clientId !== undefined ? `?client=${options.clientId}` : ""
  const socket = new WebSocket(`${url.replace(/^http/, "ws")}/ws${query}`, {
    headers: options.dataDir !== undefined ? authHeaders(options.dataDir) : {},
  })
  await new Promise<void>((resolve, reject) => {
    socket.once("open", () => resolve())
    socket.once("error", reject)
  })
  const answers: Array<RawAnswer> = []
  const waiters = new Map<string | number, (answer: RawAnswer) => void>()
  socket.on("message", (data) => {
    const message = JSON.parse(data.toString()) as RawAnswer & { method?: string }
    if (message.method === "roots/list" && message.id !== null)
      socket.send(
        JSON.stringify({
          jsonrpc: "2.0",
          id: message.id,
          result: { roots: (options.roots ?? []).map((uri) => ({ uri })) },
        }),
      )
    if (message.method !== undefined || !("id" in message)) return
    answers.push(message)
    if (message.id === null) return
    waiters.get(message.id)?.(message)
    waiters.delete(message.id)
  })
  const request = (id: string | number, method: string, params: Record<string, unknown> = {}) =>
    new Promise<RawAnswer>((resolve) => {
      waiters.set(id, resolve)
      socket.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }))
    })
  await request(options.initializeId ?? 0, "initialize", {
    protocolVersion: "2025-06-18",
    capabilities: options.roots !== undefined ? { roots: {} } : {},
    clientInfo: { name: "raw-ws-test", version: "1.0.0" },
  })
  socket.send(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }))
  const close = () =>
    new Promise<void>((resolve) => {
      if (socket.readyState === WebSocket.CLOSED) return resolve()
      socket.once("close", () => resolve())
      socket.close()
    })
  return { socket, request, sendText: (text) => socket.send(text), answers, close }
}

/** Closes every client, ends every process started here (and daemons shims started), removes temp dirs. */
export const cleanup = async (): Promise<void> => {
  await Promise.all([...clients].map((client) => client.close().catch(() => undefined)))
  clients.clear()
  const waits = [...children].map(
    (child) =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve()
        child.once("exit", () => resolve())
        child.kill("SIGTERM")
        setTimeout(() => child.kill("SIGKILL"), 10_000).unref()
      }),
  )
  await Promise.all(waits)
  children.clear()
  // Daemons a shim started are not our children: find them through their data directories.
  for (const dataDir of dataDirs) {
    const pid = daemonPidOf(dataDir)
    if (pid === undefined || !isAlive(pid)) continue
    process.kill(pid, "SIGTERM")
    await waitFor(`daemon ${pid} to exit`, () => (isAlive(pid) ? undefined : true), 15_000).catch(() =>
      process.kill(pid, "SIGKILL"),
    )
  }
  dataDirs.clear()
  dataDirByUrl.clear()
  for (const path of tempPaths) rmSync(path, { recursive: true, force: true })
  tempPaths.clear()
}
