/**
 * A client that sends and does not read (issue 28: memory in proportion to what is stored, not
 * to what a client left unread): on each way in — `serve --stdio`, and the daemon's WebSocket,
 * legacy SSE and Streamable HTTP — a client writes `entities` entities, stops reading, sends
 * `reads` `read_graph` (each answer about `entities` × 250 bytes), and the server's resident set is
 * sampled until it settles; then the client reads again and every answer must come. Printed: the
 * server's RSS before, its highest while unread, the growth, and the answers read.
 *
 * Streamable HTTP sends each request on a connection of its own (as an HTTP client does) and reads
 * none of the answers; the others use one connection. `MNEMOS_BENCH_BASELINE_CLI=/other/dist/cli.js`
 * runs another build beside this one (`npm run build` first); `UNREAD_WAYS=stdio,sse` only those.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { type IncomingMessage, request } from "node:http"
import type { Readable } from "node:stream"
import { onSseEvents } from "../test/support/gatedTransports.ts"
import {
  authHeaders,
  builtCliArgs,
  cleanup,
  type DaemonProcess,
  openRawWs,
  sleep,
  startDaemon,
  tempDir,
} from "../test/transports/harness.ts"
import { memoryOf } from "./ProcessStats.ts"
import { type BenchSuite, round } from "./Table.ts"

type Way = "stdio" | "ws" | "sse" | "streamable-http"
/** Every way in, or those `UNREAD_WAYS` names (comma-separated). */
const ways: ReadonlyArray<Way> = (process.env.UNREAD_WAYS?.split(",") as Array<Way> | undefined) ?? [
  "stdio",
  "ws",
  "sse",
  "streamable-http",
]

/** The most a server may grow while a client leaves its answers unread (this suite's own bound). */
const growthBoundMiB = 128

/** One client of one way in: it sends, stops and starts reading, and counts the answers it read. */
interface UnreadClient {
  readonly serverPid: number
  readonly send: (message: Record<string, unknown>) => Promise<void>
  readonly reading: (on: boolean) => void
  /** Ids of the answers read so far. */
  readonly answered: Set<number>
  readonly close: () => Promise<void>
}

const initialize = {
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "bench-unread", version: "1" } },
}
const initialized = { method: "notifications/initialized" }
const text = (message: Record<string, unknown>) => JSON.stringify({ jsonrpc: "2.0", ...message })
const idOf = (line: string): number | undefined => {
  const id = (JSON.parse(line) as { id?: unknown }).id
  return typeof id === "number" ? id : undefined
}

/** Lines of `stream`, each to `onLine`. */
const onLines = (stream: Readable, onLine: (line: string) => void) => {
  let rest = ""
  stream.on("data", (chunk: Buffer) => {
    rest += chunk.toString("utf8")
    for (let end = rest.indexOf("\n"); end !== -1; end = rest.indexOf("\n")) {
      onLine(rest.slice(0, end))
      rest = rest.slice(end + 1)
    }
  })
}

const waitUntil = async (what: string, done: () => boolean, timeoutMs: number) => {
  for (const started = Date.now(); !done(); await sleep(20))
    if (Date.now() - started > timeoutMs) throw new Error(`${what}: not within ${timeoutMs} ms`)
}

const stdioClient = async (cli: string): Promise<UnreadClient> => {
  const child: ChildProcess = spawn(
    process.execPath,
    [cli, "serve", "--stdio", "--data-dir", tempDir("mnemos-bench-unread-")],
    {
      stdio: ["pipe", "pipe", "ignore"],
    },
  )
  const answered = new Set<number>()
  onLines(child.stdout!, (line) => {
    const id = idOf(line)
    if (id !== undefined) answered.add(id)
  })
  const send = async (message: Record<string, unknown>) => void child.stdin!.write(`${text(message)}\n`)
  await send(initialize)
  await waitUntil("initialize answered", () => answered.has(1), 30_000)
  await send(initialized)
  return {
    serverPid: child.pid!,
    send,
    reading: (on) => (on ? child.stdout!.resume() : child.stdout!.pause()),
    answered,
    close: async () => {
      child.stdin!.end()
      await new Promise((resolve) => child.once("exit", resolve))
    },
  }
}

const wsClient = async (daemon: DaemonProcess): Promise<UnreadClient> => {
  const { socket, sendText } = await openRawWs(daemon.url, { dataDir: daemon.dataDir })
  const answered = new Set<number>()
  socket.on("message", (data) => {
    const id = idOf(String(data))
    if (id !== undefined) answered.add(id)
  })
  const raw = (socket as unknown as { _socket: { pause: () => void; resume: () => void } })._socket
  return {
    serverPid: daemon.pid,
    send: async (message) => sendText(text(message)),
    reading: (on) => (on ? raw.resume() : raw.pause()),
    answered,
    close: async () => socket.terminate(),
  }
}

/** A POST of `body` to the daemon; resolves with its response once its head has come. */
const post = (daemon: DaemonProcess, path: string, body: string, headers: Record<string, string>) =>
  new Promise<IncomingMessage>((resolve, reject) =>
    request(
      {
        host: daemon.host,
        port: daemon.port,
        path,
        method: "POST",
        headers: { ...authHeaders(daemon.dataDir), "content-type": "application/json", ...headers },
      },
      resolve,
    )
      .on("error", reject)
      .end(body),
  )

const sseClient = async (daemon: DaemonProcess): Promise<UnreadClient> => {
  const stream = await new Promise<IncomingMessage>((resolve, reject) =>
    request({ host: daemon.host, port: daemon.port, path: "/sse", headers: authHeaders(daemon.dataDir) }, resolve)
      .on("error", reject)
      .end(),
  )
  const answered = new Set<number>()
  let endpoint: string | undefined
  onSseEvents(stream, (event, data) => {
    if (event === "endpoint") endpoint = data
    else {
      const id = idOf(data)
      if (id !== undefined) answered.add(id)
    }
  })
  await waitUntil("the SSE endpoint", () => endpoint !== undefined, 30_000)
  const send = async (message: Record<string, unknown>) => {
    for (;;) {
      const response = await post(daemon, endpoint!, text(message), {})
      response.resume()
      if (response.statusCode === 202) return
      if (response.statusCode !== 503) throw new Error(`POST ${endpoint}: ${response.statusCode}`)
      await sleep(1000) // refused while too many wait: sent again, as Retry-After says
    }
  }
  await send({ ...initialize, params: { ...initialize.params, protocolVersion: "2024-11-05" } })
  await waitUntil("initialize answered", () => answered.has(1), 30_000)
  await send(initialized)
  return {
    serverPid: daemon.pid,
    send,
    reading: (on) => (on ? stream.resume() : stream.pause()),
    answered,
    close: async () => void stream.destroy(),
  }
}

const streamableClient = async (daemon: DaemonProcess): Promise<UnreadClient> => {
  const accept = { accept: "application/json, text/event-stream" }
  const first = await post(daemon, "/mcp", text(initialize), accept)
  first.resume()
  const session = { ...accept, "mcp-session-id": String(first.headers["mcp-session-id"]) }
  await post(daemon, "/mcp", text(initialized), session).then((response) => response.resume())
  const answered = new Set<number>()
  const unread: Array<IncomingMessage> = []
  let reading = true
  return {
    serverPid: daemon.pid,
    send: async (message) => {
      const response = await post(daemon, "/mcp", text(message), session)
      onSseEvents(response, (_event, data) => {
        const id = idOf(data)
        if (id !== undefined) answered.add(id)
      })
      if (!reading) response.pause()
      unread.push(response)
    },
    reading: (on) => {
      reading = on
      for (const response of unread) if (on) response.resume()
    },
    answered,
    close: async () => {
      for (const response of unread) response.destroy()
    },
  }
}

interface Row {
  readonly build: string
  readonly way: Way
  readonly rssBeforeMiB: number
  readonly rssUnreadMaxMiB: number
  readonly growthMiB: number
  readonly answersRead: number
  readonly reads: number
}

/** One way in of one build: write, stop reading, send the reads, sample, read again. */
const measure = async (build: string, cli: string, way: Way, entities: number, reads: number): Promise<Row> => {
  const daemon = way === "stdio" ? undefined : await startDaemon({ cli: { node: process.execPath, file: cli } })
  const client =
    way === "stdio"
      ? await stdioClient(cli)
      : way === "ws"
        ? await wsClient(daemon!)
        : way === "sse"
          ? await sseClient(daemon!)
          : await streamableClient(daemon!)
  try {
    const graph = Array.from({ length: entities }, (_, i) => ({
      name: `unread-${i}`,
      entityType: "bench",
      observations: [`${"an observation of two hundred characters or so, ".repeat(4)}${i}`],
    }))
    await client.send({
      id: 2,
      method: "tools/call",
      params: { name: "create_entities", arguments: { entities: graph } },
    })
    await waitUntil("the write answered", () => client.answered.has(2), 60_000)
    await sleep(500)
    const rss = () => (memoryOf(client.serverPid)?.rssBytes ?? 0) / 1024 / 1024
    const before = rss()
    client.reading(false)
    let most = before
    for (let i = 0; i < reads; i++) {
      await client.send({ id: 100 + i, method: "tools/call", params: { name: "read_graph", arguments: {} } })
      most = Math.max(most, rss())
    }
    // Until the resident set has not grown for a second (at most 10 s).
    for (let still = 0, waited = 0; still < 10 && waited < 100; waited++) {
      await sleep(100)
      const now = rss()
      still = now > most ? 0 : still + 1
      most = Math.max(most, now)
    }
    client.reading(true)
    const all = () => [...Array(reads).keys()].every((i) => client.answered.has(100 + i))
    await waitUntil(`${way}: every read_graph answered once read`, all, 120_000).catch(() => undefined)
    const read = [...Array(reads).keys()].filter((i) => client.answered.has(100 + i)).length
    return {
      build,
      way,
      rssBeforeMiB: round(before, 1),
      rssUnreadMaxMiB: round(most, 1),
      growthMiB: round(most - before, 1),
      answersRead: read,
      reads,
    }
  } finally {
    await client.close()
    await daemon?.stop()
  }
}

export const suite: BenchSuite = {
  title: "a client that does not read: the server's memory while its answers wait, on each way in",
  run: async ({ quick }) => {
    const entities = quick ? 500 : 2_000
    const reads = quick ? 100 : 300
    const builds: Array<[string, string]> = [
      ...(process.env.MNEMOS_BENCH_BASELINE_CLI !== undefined
        ? [["baseline", process.env.MNEMOS_BENCH_BASELINE_CLI] as [string, string]]
        : []),
      ["this build", builtCliArgs()[0]!],
    ]
    const rows: Array<Row> = []
    try {
      for (const way of ways)
        for (const [build, cli] of builds) rows.push(await measure(build, cli, way, entities, reads))
    } finally {
      await cleanup()
    }
    const ours = rows.filter((row) => row.build === "this build")
    const bounded = ours.every((row) => row.growthMiB <= growthBoundMiB)
    const complete = ours.every((row) => row.answersRead === row.reads)
    return {
      tables: [
        {
          title: `${entities} entities, then ${reads} read_graph sent without reading (each answer ~${Math.round((entities * 250) / 1024)} KiB)`,
          header: ["build", "way in", "RSS before MiB", "highest unread MiB", "growth MiB", "answers read after"],
          rows: rows.map((row) => [
            row.build,
            row.way,
            row.rssBeforeMiB,
            row.rssUnreadMaxMiB,
            row.growthMiB,
            `${row.answersRead}/${row.reads}`,
          ]),
        },
      ],
      notes: [
        `check every way in grows at most ${growthBoundMiB} MiB while the answers wait: ${bounded ? "met" : "not met"}`,
        `check every answer comes once the client reads: ${complete ? "met" : "not met"}`,
      ],
      json: { entities, reads, growthBoundMiB, rows },
    }
  },
}
