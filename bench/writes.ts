/**
 * CPU per write call (issue 28, item 2): what one `create_entities` costs the server, on each way
 * of reaching it, measured from outside on the built CLI.
 *
 *   1. Sequential `create_entities` of 10 entities (3 observations each) over stdio
 *      (`serve --stdio`): call p50/p99 and the server's CPU per call, every thread and the main
 *      one (targets: p50 <= 1.5 ms, p99 <= 5 ms). 2,000 calls after 200 warm-up (300 after 50
 *      with --quick).
 *   2. Sequential `create_entities` of one entity on one connection per network transport of the
 *      daemon: the daemon's CPU per call (target: Streamable HTTP within 1.5x WebSocket). 1,000
 *      calls after 100 warm-up each (200 after 50 with --quick), the transports taking turns in
 *      rounds (`inRotation`). The daemon is warmed up first, its search index moved to its worker
 *      thread and caught up (`settledIndex`): a move in one transport's calls would charge that
 *      transport alone for the worker's start, as one measured after the other would be charged for
 *      what the calls before it left to collect.
 *   3. 32 agents on MCP-over-WebSocket, one entity per call, while 8 dashboard subscribers follow
 *      `/events` (bench/transports.ts's scenario) for 5 s (1.5 s with --quick), after 3 s of the
 *      same: acked calls/s, p50/p99, the daemon's CPU per call, and whether every subscriber saw
 *      every write (target: >= 4,000/s with p99 <= 30 ms).
 *
 * `MNEMOS_BENCH_BASELINE_CLI=/path/to/other/dist/cli.js` measures another build beside this one
 * in the same run (baseline first, then this build, for each measurement), e.g. the code before a
 * change; its `node_modules` must resolve from its own folder, and it must sit in a package's
 * `dist/` (built in a checkout of its own): the CLI finds its default model in the `dist/models` of
 * the nearest folder above it holding a package.json and, without it, runs without embeddings,
 * which measures a lighter write than users run.
 */
import { existsSync } from "node:fs"
import { dirname, join } from "node:path"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { packagedModelDirAbove } from "../src/search/embedding/Embedder.ts"
import { mainThreadDocumentsMax } from "../src/search/Indexer.ts"
import {
  cleanup,
  type NetworkTransport,
  networkTransports,
  repoRoot,
  startDaemon,
  tempDir,
} from "../test/transports/harness.ts"
import { type BenchSuite, quantile, round, type Table } from "./Table.ts"
import { agentsWriting, connectNetwork, daemonCpu } from "./transports.ts"

const entitiesPerCall = 10
const observationsPerEntity = 3

interface Build {
  readonly label: string
  readonly cli: string
}

interface Measured {
  readonly p50Ms: number
  readonly p99Ms: number
  readonly serverCpuUsPerCall: number
  readonly mainThreadCpuUsPerCall: number
}

/** Call latencies and the daemon's CPU over those calls, summed over one or more runs of them. */
interface Tally {
  readonly latencies: Array<number>
  processMs: number
  mainThreadMs: number
}

const newTally = (): Tally => ({ latencies: [], processMs: 0, mainThreadMs: 0 })

/** `count` sequential calls, each one's latency and the daemon's CPU over them added to `into`. */
const timedCalls = async (
  pid: number,
  count: number,
  callOnce: (call: number) => Promise<void>,
  into: Tally,
): Promise<void> => {
  const before = daemonCpu(pid)
  for (let call = 0; call < count; call++) {
    const started = performance.now()
    await callOnce(call)
    into.latencies.push(performance.now() - started)
  }
  const after = daemonCpu(pid)
  into.processMs += after.processMs - before.processMs
  into.mainThreadMs += after.mainThreadMs - before.mainThreadMs
}

/** A tally as a row reports it: p50 and p99, and the daemon's CPU per call (µs). */
const measuredOf = ({ latencies, processMs, mainThreadMs }: Tally): Measured => {
  latencies.sort((a, b) => a - b)
  return {
    p50Ms: round(quantile(latencies, 0.5)),
    p99Ms: round(quantile(latencies, 0.99)),
    serverCpuUsPerCall: round((processMs * 1000) / latencies.length, 0),
    mainThreadCpuUsPerCall: round((mainThreadMs * 1000) / latencies.length, 0),
  }
}

/** `calls` sequential calls after `warmup`, with the server's CPU per measured call. */
const sequential = async (
  pid: number,
  warmup: number,
  calls: number,
  callOnce: (call: number) => Promise<void>,
): Promise<Measured> => {
  for (let call = 0; call < warmup; call++) await callOnce(call)
  const tally = newTally()
  await timedCalls(pid, calls, (call) => callOnce(warmup + call), tally)
  return measuredOf(tally)
}

const createEntities = async (client: Client, names: ReadonlyArray<string>): Promise<void> => {
  const result = await client.callTool({
    name: "create_entities",
    arguments: {
      entities: names.map((name, index) => ({
        name,
        entityType: "bench",
        observations: Array.from(
          { length: observationsPerEntity },
          (_, observation) => `observation ${observation} of ${name}, number ${index}`,
        ),
      })),
    },
  })
  if (result.isError === true) throw new Error(`create_entities failed: ${JSON.stringify(result.content)}`)
}

/** Measurement 1: sequential batches of 10 over stdio, `serve --stdio` of `build`. */
const stdioBatches = async (build: Build, warmup: number, calls: number): Promise<Measured> => {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [build.cli, "serve", "--stdio", "--data-dir", tempDir("mnemos-bench-writes-")],
    cwd: repoRoot,
    stderr: "ignore",
  })
  const client = new Client({ name: "bench", version: "1.0.0" })
  await client.connect(transport)
  try {
    return await sequential(transport.pid!, warmup, calls, (call) =>
      createEntities(
        client,
        Array.from({ length: entitiesPerCall }, (_, index) => `batch-${call}-entity-${index}`),
      ),
    )
  } finally {
    await client.close()
  }
}

/**
 * Writes more documents than a main-thread search index holds (`mainThreadDocumentsMax`), waits
 * until `mem-stats` says the index runs on its worker thread, where it stays for every transport,
 * then until the daemon is quiet (the worker done with the backlog): at most `quietCpuShare` of a
 * core over `quietWindowMs`.
 */
const settledIndex = async (client: Client, pid: number): Promise<void> => {
  const batch = 100
  const entities = Math.ceil(mainThreadDocumentsMax / (1 + observationsPerEntity)) + batch
  for (let start = 0; start < entities; start += batch)
    await createEntities(
      client,
      Array.from({ length: batch }, (_, index) => `settle-${start + index}`),
    )
  const started = performance.now()
  const waited = (what: string) => {
    if (performance.now() - started > settleTimeoutMs)
      throw new Error(`the daemon's ${what} within ${settleTimeoutMs / 1000} s`)
    return new Promise((resolve) => setTimeout(resolve, quietWindowMs))
  }
  for (;;) {
    const stats = await client.callTool({ name: "mem-stats", arguments: {} })
    if ((stats.structuredContent as { thread?: string } | undefined)?.thread === "worker") break
    await waited("search index did not move to its worker thread")
  }
  for (;;) {
    const before = daemonCpu(pid).processMs
    await waited("search thread did not go quiet")
    if (daemonCpu(pid).processMs - before <= quietCpuShare * quietWindowMs) return
  }
}
const settleTimeoutMs = 60_000
const quietWindowMs = 250
const quietCpuShare = 0.1

/** Rounds of `inRotation`. */
const rotationRounds = 5

/**
 * Sequential calls on each transport's connection: `warmup` each, then `calls` each in
 * `rotationRounds` rounds, the transports taking turns (each round starting with the next one), so
 * that what the daemon does in the background — a collection, the search thread catching up — falls
 * on each alike. The daemon's CPU is summed over each transport's turns.
 */
const inRotation = async (
  pid: number,
  clients: ReadonlyArray<{ readonly transport: NetworkTransport; readonly client: Client }>,
  warmup: number,
  calls: number,
): Promise<Array<{ transport: NetworkTransport } & Measured>> => {
  for (const { transport, client } of clients)
    for (let call = 0; call < warmup; call++) await createEntities(client, [`${transport}-warm-up-${call}`])
  const tallies = clients.map(newTally)
  const perRound = Math.ceil(calls / rotationRounds)
  for (let lap = 0; lap < rotationRounds; lap++)
    for (let turn = 0; turn < clients.length; turn++) {
      const index = (lap + turn) % clients.length
      const { transport, client } = clients[index]!
      await timedCalls(
        pid,
        perRound,
        (call) => createEntities(client, [`${transport}-${lap}-${call}`]),
        tallies[index]!,
      )
    }
  return clients.map(({ transport }, index) => ({ transport, ...measuredOf(tallies[index]!) }))
}

/** Measurements 2 and 3 on one daemon of `build`. */
const daemonWrites = async (build: Build, warmup: number, calls: number, durationMs: number) => {
  const daemon = await startDaemon({ cli: { node: process.execPath, file: build.cli } })
  try {
    // Start-up work (the embedding model's load, V8 optimising the path) would fall on whichever
    // transport came first: warm the daemon up before any is measured.
    const warming = await connectNetwork("ws", daemon.url)
    for (let call = 0; call < 2 * warmup; call++) await createEntities(warming, [`warm-up-${call}`])
    await settledIndex(warming, daemon.pid)
    await warming.close()
    const clients = await Promise.all(
      networkTransports.map(async (transport) => ({ transport, client: await connectNetwork(transport, daemon.url) })),
    )
    const perTransport = await inRotation(daemon.pid, clients, warmup, calls)
    for (const { client } of clients) await client.close()
    const writing = await agentsWriting(daemon.url, daemon.dataDir, durationMs, daemon.pid)
    return { perTransport, writing }
  } finally {
    await daemon.stop()
  }
}

export const suite: BenchSuite = {
  title: "CPU per write call: sequential create_entities and 32 writing agents, the server's CPU per call",
  run: async ({ quick }) => {
    const builds: Array<Build> = [
      ...(process.env.MNEMOS_BENCH_BASELINE_CLI !== undefined
        ? [{ label: "baseline", cli: process.env.MNEMOS_BENCH_BASELINE_CLI }]
        : []),
      { label: "this build", cli: join(repoRoot, "dist", "cli.js") },
    ]
    for (const build of builds) {
      if (!existsSync(build.cli)) throw new Error(`${build.cli} is missing: run npm run build first`)
      const models = packagedModelDirAbove(dirname(build.cli))
      if (!existsSync(models))
        throw new Error(`${build.cli} has no ${models}: build it in a checkout of its own (see this file's header)`)
    }
    const stdio: Array<{ build: string } & Measured> = []
    const daemon: Array<{ build: string } & Awaited<ReturnType<typeof daemonWrites>>> = []
    try {
      for (const build of builds)
        stdio.push({ build: build.label, ...(await stdioBatches(build, quick ? 50 : 200, quick ? 300 : 2_000)) })
      for (const build of builds)
        daemon.push({
          build: build.label,
          ...(await daemonWrites(build, quick ? 50 : 100, quick ? 200 : 1_000, quick ? 1_500 : 5_000)),
        })
    } finally {
      await cleanup()
    }
    const cpuColumns = ["server CPU µs/call", "main thread µs/call"]
    const tables: Array<Table> = [
      {
        title: `Sequential create_entities of ${entitiesPerCall} entities (${observationsPerEntity} observations each) over stdio, serve --stdio`,
        header: ["build", "p50 ms", "p99 ms", ...cpuColumns],
        rows: stdio.map((row) => [row.build, row.p50Ms, row.p99Ms, row.serverCpuUsPerCall, row.mainThreadCpuUsPerCall]),
      },
      {
        title: "Sequential create_entities of one entity on one connection, per transport of the daemon",
        header: ["build", "transport", "p50 ms", "p99 ms", ...cpuColumns, "server CPU / WebSocket's"],
        rows: daemon.flatMap((row) => {
          const ws = row.perTransport.find((entry) => entry.transport === "ws")!
          return row.perTransport.map((entry) => [
            row.build,
            entry.transport,
            entry.p50Ms,
            entry.p99Ms,
            entry.serverCpuUsPerCall,
            entry.mainThreadCpuUsPerCall,
            round(entry.serverCpuUsPerCall / ws.serverCpuUsPerCall, 2),
          ])
        }),
      },
      {
        title: "32 agents on MCP-over-WebSocket writing one entity per call, 8 dashboard subscribers following /events",
        header: ["build", "acked calls/s", "p50 ms", "p99 ms", ...cpuColumns, "failed", "missed by a subscriber"],
        rows: daemon.map(({ build, writing }) => [
          build,
          writing.ackedPerSecond,
          writing.p50Ms,
          writing.p99Ms,
          writing.serverCpuUsPerCall ?? Number.NaN,
          writing.mainThreadCpuUsPerCall ?? Number.NaN,
          writing.failed,
          Math.max(...writing.missedBySubscribers),
        ]),
      },
    ]
    const current = (label = "this build") => ({
      stdio: stdio.find((row) => row.build === label)!,
      daemon: daemon.find((row) => row.build === label)!,
    })
    const { stdio: batches, daemon: ours } = current()
    const cpuOf = (transport: NetworkTransport) =>
      ours.perTransport.find((entry) => entry.transport === transport)!.serverCpuUsPerCall
    const met = (ok: boolean) => (ok ? "met" : "not met")
    const quickNote = quick ? " (quick run: the targets apply to the full run)" : ""
    return {
      tables,
      notes: [
        `target p50 <= 1.5 ms and p99 <= 5 ms for sequential create_entities of 10: ${met(batches.p50Ms <= 1.5 && batches.p99Ms <= 5)}${quickNote}`,
        `target Streamable HTTP's server CPU per call within 1.5x WebSocket's: ${round(cpuOf("streamable-http") / cpuOf("ws"), 2)}x, ${met(cpuOf("streamable-http") <= 1.5 * cpuOf("ws"))}${quickNote}`,
        `target 32 WebSocket agents >= 4,000 acked calls/s with p99 <= 30 ms, every write seen by every subscriber: ${met(ours.writing.ackedPerSecond >= 4000 && ours.writing.p99Ms <= 30 && ours.writing.missedBySubscribers.every((missed) => missed === 0))}${quickNote}`,
      ],
      json: { builds, stdio, daemon },
    }
  },
}
