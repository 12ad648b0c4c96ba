/**
 * The transport benchmark: what each way of reaching mnemos costs, beside the protocol floor.
 *
 * The floor is an MCP SDK server with one no-op tool, in its own process, on the same transports
 * (stdio; Streamable HTTP, SSE and WebSocket on one HTTP server laid out like the daemon's). mnemos
 * answers a real read tool (`open_nodes` of one of 1,000 entities) from the daemon, or from
 * `serve --stdio` for stdio; "stdio via shim" is `mnemos mcp` proxying to the daemon.
 *
 *   1. Round trip: sequential calls on one connection, p50/p99 and calls/s
 *      (2,000 calls after 200 warm-up; 300 after 50 with --quick).
 *   2. Throughput: 1, 10 and 50 concurrent clients (one connection each, one call in flight each)
 *      for 5 s (1.5 s with --quick) over each network transport; calls/s and latency p99.
 *
 *   3. Agents writing while the dashboard follows (issue 22): 32 agents on MCP-over-WebSocket, each
 *      writing one entity per call (`create_entities`), for 5 s (1.5 s with --quick) after 3 s of
 *      the same (`agentsWarmUpMs`), while 8
 *      dashboard subscribers follow `/events`; acked writes/s, call p50/p99, and whether every
 *      subscriber saw every acknowledged entity.
 *
 * mnemos runs as built (dist/cli.js: `npm run build` first), as users run it; the floor from source
 * (tsx costs only at load, not per call).
 *
 * Clients run in this process, so at 50 clients the client side shares the machine with the
 * server: numbers are for comparing rows of one run, not absolute capacity. --quick measures 1 and
 * 10 concurrent clients only.
 *
 * Run as `node --import tsx bench/transports.ts floor-http|floor-stdio` it is the floor server.
 */
import { existsSync } from "node:fs"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { pathToFileURL } from "node:url"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { SSEServerTransport } from "@modelcontextprotocol/sdk/server/sse.js"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import { CallToolRequestSchema, isInitializeRequest, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js"
import WebSocket, { WebSocketServer } from "ws"
import { readToken } from "../src/transports/Daemon.ts"
import { WebSocketTransport } from "../src/transports/WebSocketTransport.ts"
import {
  builtCliArgs,
  cleanup,
  clientTransport,
  type NetworkTransport,
  networkTransports,
  repoRoot,
  startDaemon,
  tempDir,
} from "../test/transports/harness.ts"
import { cpuMsOf } from "./ProcessStats.ts"
import { type BenchSuite, quantile, round } from "./Table.ts"

const seededEntities = 1_000

/**
 * Node's fetch leaves one abort listener per request on the SDK Streamable HTTP client's
 * transport-wide AbortSignal until garbage collection, so thousands of calls on one client warn
 * "MaxListenersExceededWarning ... AbortSignal" (client side, harmless). Keep other warnings.
 */
export const quietAbortSignalWarnings = () => {
  const printers = process.listeners("warning")
  process.removeAllListeners("warning")
  process.on("warning", (warning) => {
    if (warning.name === "MaxListenersExceededWarning" && warning.message.includes("AbortSignal")) return
    for (const print of printers) print(warning)
  })
}
const concurrencies = [1, 10, 50] as const

// ---------------------------------------------------------------------------------------------
// The floor server

const floorServer = (): Server => {
  const server = new Server({ name: "floor", version: "1.0.0" }, { capabilities: { tools: {} } })
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [{ name: "noop", description: "does nothing", inputSchema: { type: "object", properties: {} } }],
  }))
  server.setRequestHandler(CallToolRequestSchema, async () => ({ content: [{ type: "text", text: "ok" }] }))
  return server
}

const readBody = (req: IncomingMessage): Promise<unknown> =>
  new Promise((resolve) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => resolve(chunks.length === 0 ? undefined : JSON.parse(Buffer.concat(chunks).toString("utf8"))))
  })

/** The floor on HTTP: `/mcp`, `/sse` + `/messages` and `/ws`, like the daemon. Prints its port. */
const serveFloorHttp = () => {
  const streamable = new Map<string, StreamableHTTPServerTransport>()
  const sse = new Map<string, SSEServerTransport>()
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", "http://localhost")
    if (url.pathname === "/mcp") {
      const id = req.headers["mcp-session-id"]
      const existing = typeof id === "string" ? streamable.get(id) : undefined
      const body = req.method === "POST" ? await readBody(req) : undefined
      if (existing !== undefined) return existing.handleRequest(req, res, body)
      if (!isInitializeRequest(body)) return res.writeHead(400).end()
      const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => crypto.randomUUID(),
        onsessioninitialized: (sessionId) => void streamable.set(sessionId, transport),
      })
      await floorServer().connect(transport)
      return transport.handleRequest(req, res, body)
    }
    if (url.pathname === "/sse") {
      const transport = new SSEServerTransport("/messages", res)
      sse.set(transport.sessionId, transport)
      return floorServer().connect(transport)
    }
    if (url.pathname === "/messages")
      return sse.get(url.searchParams.get("sessionId") ?? "")?.handlePostMessage(req, res, await readBody(req))
    res.writeHead(404).end()
  }
  const server = createServer((req, res) => void handle(req, res))
  const wss = new WebSocketServer({ server, path: "/ws" })
  wss.on("connection", (socket) => void floorServer().connect(new WebSocketTransport(socket)))
  server.listen(0, "127.0.0.1", () => console.log(`listening ${(server.address() as AddressInfo).port}`))
}

// ---------------------------------------------------------------------------------------------
// Measuring

interface Target {
  readonly tool: string
  readonly args: (call: number) => Record<string, unknown>
}
const readTarget: Target = {
  tool: "open_nodes",
  args: (call) => ({ names: [`entity-${(call * 7919) % seededEntities}`] }),
}
const floorTarget: Target = { tool: "noop", args: () => ({}) }

const callOnce = async (client: Client, target: Target, call: number): Promise<number> => {
  const started = performance.now()
  const result = await client.callTool({ name: target.tool, arguments: target.args(call) })
  if (result.isError) throw new Error(`${target.tool} failed: ${JSON.stringify(result.content)}`)
  return performance.now() - started
}

interface Latency {
  readonly p50Ms: number
  readonly p99Ms: number
  readonly callsPerSecond: number
}

const roundTrips = async (client: Client, target: Target, warmup: number, calls: number): Promise<Latency> => {
  for (let call = 0; call < warmup; call++) await callOnce(client, target, call)
  const latencies: Array<number> = []
  const started = performance.now()
  for (let call = 0; call < calls; call++) latencies.push(await callOnce(client, target, call))
  const elapsedMs = performance.now() - started
  latencies.sort((a, b) => a - b)
  return {
    p50Ms: round(quantile(latencies, 0.5)),
    p99Ms: round(quantile(latencies, 0.99)),
    callsPerSecond: round((calls / elapsedMs) * 1000, 0),
  }
}

const throughput = async (clients: ReadonlyArray<Client>, target: Target, durationMs: number): Promise<Latency> => {
  const latencies: Array<number> = []
  const deadline = performance.now() + durationMs
  const started = performance.now()
  await Promise.all(
    clients.map(async (client, index) => {
      for (let call = index * 100_003; performance.now() < deadline; call++)
        latencies.push(await callOnce(client, target, call))
    }),
  )
  const elapsedMs = performance.now() - started
  latencies.sort((a, b) => a - b)
  return {
    p50Ms: round(quantile(latencies, 0.5)),
    p99Ms: round(quantile(latencies, 0.99)),
    callsPerSecond: round((latencies.length / elapsedMs) * 1000, 0),
  }
}

export const connectNetwork = async (kind: NetworkTransport, url: string): Promise<Client> => {
  const client = new Client({ name: "bench", version: "1.0.0" })
  await client.connect(await clientTransport(kind, url))
  return client
}

const connectStdio = async (args: Array<string>): Promise<Client> => {
  const client = new Client({ name: "bench", version: "1.0.0" })
  await client.connect(new StdioClientTransport({ command: process.execPath, args, cwd: repoRoot, stderr: "ignore" }))
  return client
}

const startFloorHttp = async (): Promise<{ url: string; stop: () => void }> => {
  const { spawn } = await import("node:child_process")
  const child = spawn(process.execPath, ["--import", "tsx", "bench/transports.ts", "floor-http"], {
    cwd: repoRoot,
    stdio: ["ignore", "pipe", "inherit"],
  })
  const port = await new Promise<number>((resolve, reject) => {
    let output = ""
    child.stdout.on("data", (chunk) => {
      output += chunk
      const match = /listening (\d+)/.exec(output)
      if (match) resolve(Number(match[1]))
    })
    child.once("exit", () => reject(new Error(`the floor server exited: ${output}`)))
  })
  return { url: `http://127.0.0.1:${port}`, stop: () => child.kill("SIGTERM") }
}

const seed = async (url: string) => {
  const client = await connectNetwork("ws", url)
  for (let start = 0; start < seededEntities; start += 100)
    await client.callTool({
      name: "create_entities",
      arguments: {
        entities: Array.from({ length: 100 }, (_, offset) => ({
          name: `entity-${start + offset}`,
          entityType: "bench",
          observations: [`observation of entity ${start + offset}`, "a second observation"],
        })),
      },
    })
  await client.close()
}

type TransportName = "stdio" | "stdio via shim" | NetworkTransport

/** Agents and dashboard subscribers of the writing scenario (issue 22). */
const writingAgents = 32
const dashboardSubscribers = 8

/** A dashboard subscriber: the entity names it was told of on `/events`. */
const subscribe = (url: string, dataDir: string): Promise<{ seen: Set<string>; close: () => void }> =>
  new Promise((resolve, reject) => {
    const seen = new Set<string>()
    const socket = new WebSocket(`${url.replace(/^http/, "ws")}/events`, {
      headers: { authorization: `Bearer ${readToken(dataDir)}` },
    })
    socket.on("message", (data) => {
      const message = JSON.parse(String(data)) as {
        type: string
        events?: Array<{ graph?: { entities?: Array<{ name: string }> } }>
      }
      for (const event of message.events ?? []) for (const entity of event.graph?.entities ?? []) seen.add(entity.name)
    })
    socket.once("open", () => resolve({ seen, close: () => socket.close() }))
    socket.once("error", reject)
  })

/**
 * How long the 32 agents write before the measured window: V8 compiles the concurrent path's code
 * (32 sessions, the feed) as it first runs it — about 600 optimized functions in a first window of
 * 5 s, against about 200 in the next, when the daemon spent a third less CPU a call
 * (docs/benchmarks.md, `writes`). A daemon serving agents runs for hours: the window measures that.
 */
export const agentsWarmUpMs = 3_000

/**
 * 32 agents writing one entity per call over WebSocket while 8 subscribers follow the dashboard
 * feed, measured for `durationMs` after `agentsWarmUpMs` of the same; with the daemon's pid, its
 * CPU per acknowledged call too (every thread, and the main one).
 */
export const agentsWriting = async (url: string, dataDir: string, durationMs: number, daemonPid?: number) => {
  const subscribers = await Promise.all(Array.from({ length: dashboardSubscribers }, () => subscribe(url, dataDir)))
  const agents = await Promise.all(Array.from({ length: writingAgents }, () => connectNetwork("ws", url)))
  /** Every agent writes new entities (`prefix`, then its own numbers) until `forMs` have passed. */
  const writeFor = async (forMs: number, prefix: string) => {
    const written: Array<string> = []
    const latencies: Array<number> = []
    let failed = 0
    const deadline = performance.now() + forMs
    await Promise.all(
      agents.map(async (agent, index) => {
        for (let call = 0; performance.now() < deadline; call++) {
          const name = `${prefix}agent-${index}-write-${call}`
          const before = performance.now()
          const result = await agent.callTool({
            name: "create_entities",
            arguments: { entities: [{ name, entityType: "bench", observations: ["written by an agent"] }] },
          })
          if (result.isError === true) failed++
          else {
            latencies.push(performance.now() - before)
            written.push(name)
          }
        }
      }),
    )
    return { written, latencies, failed }
  }
  await writeFor(agentsWarmUpMs, "warm-up-")
  const started = performance.now()
  const cpuBefore = daemonPid === undefined ? undefined : daemonCpu(daemonPid)
  const { written, latencies, failed } = await writeFor(durationMs, "")
  const elapsedMs = performance.now() - started
  const cpu = cpuBefore === undefined ? undefined : cpuPerCall(daemonPid!, cpuBefore, written.length + failed)
  // Every subscriber must be told of every acknowledged write (give the feed a moment to flush).
  const allSeen = () => subscribers.every(({ seen }) => written.every((name) => seen.has(name)))
  for (let waited = 0; waited < 5_000 && !allSeen(); waited += 50) await new Promise((r) => setTimeout(r, 50))
  const missed = subscribers.map(({ seen }) => written.filter((name) => !seen.has(name)).length)
  await Promise.all(agents.map((agent) => agent.close()))
  for (const subscriber of subscribers) subscriber.close()
  latencies.sort((a, b) => a - b)
  return {
    agents: writingAgents,
    subscribers: dashboardSubscribers,
    acked: written.length,
    failed,
    ackedPerSecond: round((written.length / elapsedMs) * 1000, 0),
    p50Ms: round(quantile(latencies, 0.5)),
    p99Ms: round(quantile(latencies, 0.99)),
    missedBySubscribers: missed,
    ...(cpu === undefined ? {} : { serverCpuUsPerCall: cpu.processUs, mainThreadCpuUsPerCall: cpu.mainThreadUs }),
  }
}

/** The daemon's CPU so far, ms: every thread, and its main thread. */
export const daemonCpu = (pid: number) => ({
  processMs: cpuMsOf(pid) ?? Number.NaN,
  mainThreadMs: cpuMsOf(pid, { mainThread: true }) ?? Number.NaN,
})

/** The daemon's CPU per call since `before`, µs. */
export const cpuPerCall = (pid: number, before: ReturnType<typeof daemonCpu>, calls: number) => {
  const after = daemonCpu(pid)
  return {
    processUs: round(((after.processMs - before.processMs) * 1000) / calls, 0),
    mainThreadUs: round(((after.mainThreadMs - before.mainThreadMs) * 1000) / calls, 0),
  }
}

export const suite: BenchSuite = {
  title: "MCP transports: round trip and throughput of a read tool, beside an SDK no-op server (the floor)",
  run: async ({ quick }) => {
    const built = builtCliArgs()[0]!
    if (!existsSync(built)) throw new Error(`${built} is missing: run npm run build first`)
    quietAbortSignalWarnings()
    const warmup = quick ? 50 : 200
    const calls = quick ? 300 : 2_000
    const durationMs = quick ? 1_500 : 5_000
    const latency: Array<{ transport: TransportName; mnemos: Latency; floor: Latency }> = []
    let writing: Awaited<ReturnType<typeof agentsWriting>> | undefined
    const scaling: Array<{ transport: NetworkTransport; clients: number; mnemos: Latency; floor: Latency }> = []
    const floor = await startFloorHttp()
    try {
      const daemon = await startDaemon({ built: true })
      await seed(daemon.url)

      const embeddedDir = tempDir("mnemos-bench-stdio-")
      {
        const seeder = await connectStdio(builtCliArgs("serve", "--stdio", "--data-dir", embeddedDir))
        for (let start = 0; start < seededEntities; start += 100)
          await seeder.callTool({
            name: "create_entities",
            arguments: {
              entities: Array.from({ length: 100 }, (_, offset) => ({
                name: `entity-${start + offset}`,
                entityType: "bench",
                observations: [`observation of entity ${start + offset}`, "a second observation"],
              })),
            },
          })
        const mnemos = await roundTrips(seeder, readTarget, warmup, calls)
        await seeder.close()
        const floorClient = await connectStdio(["--import", "tsx", "bench/transports.ts", "floor-stdio"])
        latency.push({ transport: "stdio", mnemos, floor: await roundTrips(floorClient, floorTarget, warmup, calls) })
        await floorClient.close()
      }
      {
        const shim = await connectStdio(
          builtCliArgs("mcp", "--data-dir", daemon.dataDir, "--port", String(daemon.port)),
        )
        const mnemos = await roundTrips(shim, readTarget, warmup, calls)
        await shim.close()
        const floorClient = await connectStdio(["--import", "tsx", "bench/transports.ts", "floor-stdio"])
        latency.push({
          transport: "stdio via shim",
          mnemos,
          floor: await roundTrips(floorClient, floorTarget, warmup, calls),
        })
        await floorClient.close()
      }
      for (const kind of networkTransports) {
        const mnemosClient = await connectNetwork(kind, daemon.url)
        const floorClient = await connectNetwork(kind, floor.url)
        latency.push({
          transport: kind,
          mnemos: await roundTrips(mnemosClient, readTarget, warmup, calls),
          floor: await roundTrips(floorClient, floorTarget, warmup, calls),
        })
        await Promise.all([mnemosClient.close(), floorClient.close()])
      }
      for (const kind of networkTransports) {
        for (const clients of quick ? concurrencies.slice(0, 2) : concurrencies) {
          const measure = async (url: string, target: Target) => {
            const connected = await Promise.all(Array.from({ length: clients }, () => connectNetwork(kind, url)))
            await throughput(connected, target, Math.min(500, durationMs / 3)) // warm-up
            const result = await throughput(connected, target, durationMs)
            await Promise.all(connected.map((client) => client.close()))
            return result
          }
          scaling.push({
            transport: kind,
            clients,
            mnemos: await measure(daemon.url, readTarget),
            floor: await measure(floor.url, floorTarget),
          })
        }
      }
      writing = await agentsWriting(daemon.url, daemon.dataDir, durationMs, daemon.pid)
    } finally {
      floor.stop()
      await cleanup()
    }
    const ratio = (a: number, b: number) => round(a / b, 2)
    return {
      tables: [
        {
          title: `Round trip, sequential calls on one connection (${calls} calls after ${warmup} warm-up): mnemos open_nodes of 1 of ${seededEntities} entities vs the SDK no-op floor`,
          header: [
            "transport",
            "mnemos p50 ms",
            "p99 ms",
            "calls/s",
            "floor p50 ms",
            "p99 ms",
            "calls/s",
            "mnemos/floor calls/s",
          ],
          rows: latency.map((row) => [
            row.transport,
            row.mnemos.p50Ms,
            row.mnemos.p99Ms,
            row.mnemos.callsPerSecond,
            row.floor.p50Ms,
            row.floor.p99Ms,
            row.floor.callsPerSecond,
            ratio(row.mnemos.callsPerSecond, row.floor.callsPerSecond),
          ]),
        },
        {
          title: `Throughput, N concurrent clients (one connection and one call in flight each) for ${durationMs / 1000} s`,
          header: [
            "transport",
            "clients",
            "mnemos calls/s",
            "p50 ms",
            "p99 ms",
            "floor calls/s",
            "p50 ms",
            "p99 ms",
            "mnemos/floor",
          ],
          rows: scaling.map((row) => [
            row.transport,
            row.clients,
            row.mnemos.callsPerSecond,
            row.mnemos.p50Ms,
            row.mnemos.p99Ms,
            row.floor.callsPerSecond,
            row.floor.p50Ms,
            row.floor.p99Ms,
            ratio(row.mnemos.callsPerSecond, row.floor.callsPerSecond),
          ]),
        },
      ],
      notes: [
        `${writing!.agents} agents writing one entity per call over WebSocket while ${writing!.subscribers} dashboard subscribers follow: ${writing!.ackedPerSecond} acked writes/s, call p50 ${writing!.p50Ms} ms, p99 ${writing!.p99Ms} ms, ${writing!.failed} failed; entities a subscriber was not told of: ${writing!.missedBySubscribers.join(", ")}`,
        `target (issue 22): >= 6,000 acked writes/s with call p99 <= 25 ms and every write seen by every subscriber: ${writing!.ackedPerSecond >= 6000 && writing!.p99Ms <= 25 && writing!.missedBySubscribers.every((missed) => missed === 0) ? "met" : "not met"}${quick ? " (quick run: the target applies to the full run)" : ""}`,
        "stdio via shim is compared with the plain stdio floor: the shim's extra hop (stdio → WebSocket → daemon) is part of what it costs.",
        "Clients run in the benchmark process; at 50 clients they compete with the server for the CPU.",
      ],
      json: { seededEntities, calls, warmup, durationMs, latency, scaling, writing },
    }
  },
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  if (process.argv[2] === "floor-http") serveFloorHttp()
  else if (process.argv[2] === "floor-stdio") void floorServer().connect(new StdioServerTransport())
}
