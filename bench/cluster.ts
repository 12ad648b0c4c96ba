/**
 * A shared memory on NATS JetStream (docs/scaling.md), on a 3-node R3 cluster of Debian's
 * nats-server started here on loopback:
 *
 *   1. Acknowledged writes per second and their latency: the file log (one daemon), one daemon on
 *      JetStream, three daemons with the writer lease (src/cluster/WriterLeases.ts: one daemon
 *      decides the store's writes, the others forward theirs to it), three daemons appending
 *      optimistically (every daemon appends, fenced by expected-last-sequence: mnemos before the
 *      lease, for comparison), and six daemons with the lease. Each "daemon" is a process of its own
 *      (bench/clusterDaemon.ts): a store actor on its log with 16 writers, each sending one small
 *      write at a time — what the daemons' stores do for their tool calls, without the MCP
 *      transports. Per daemon: acked, failed, appends, refused (stale), forwarded and served.
 *   2. Replication lag (commit on one daemon to applied on another), and the catch-up of a fresh
 *      replica.
 *   3. The stream's own append ceiling: one publisher (this process) appending 100-byte messages
 *      to one R3 stream with @nats-io/jetstream directly, without mnemos's store — sequential with
 *      the expected last sequence, pipelined (1, 16, 64 outstanding) with no expectation, and
 *      pipelined chained by the expected last message id (what JetStreamWal.ts does with batches
 *      queued behind one in flight). Where one stream per store stops scaling.
 *   4. Not with --quick: end to end through MCP over Streamable HTTP: real daemons (`dist/cli.js
 *      serve --nats ...`: `npm run build` first), one with 8 clients, then three with 8 clients
 *      each, every client calling `create_entities` with one new entity per call.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { cpus } from "node:os"
import { join } from "node:path"
import { jetstream, jetstreamManager, StorageType } from "@nats-io/jetstream"
import { Kvm } from "@nats-io/kv"
import { connect } from "@nats-io/transport-node"
import { preferredDaemon } from "../src/cluster/WriterLeases.ts"
import { duplicateWindowMs } from "../src/stores/wal/JetStreamWal.ts"
import { startNatsCluster } from "../test/support/NatsCluster.ts"
import {
  apiGet,
  authHeaders,
  builtCliArgs,
  callTool,
  cleanup,
  connectClient,
  type DaemonProcess,
  startDaemon,
} from "../test/transports/harness.ts"
import type { Job } from "./clusterDaemon.ts"
import { cpuMsOf } from "./ProcessStats.ts"
import { type BenchSuite, quantile, round } from "./Table.ts"
import { quietAbortSignalWarnings } from "./transports.ts"

// ---------------------------------------------------------------------------------------------
// Store actors in processes of their own (bench/clusterDaemon.ts)

interface DaemonResult {
  readonly daemonId?: string
  readonly mode?: "lease" | "optimistic" | "file"
  readonly openMs: number
  readonly holderWaitMs?: number
  /** How late after the common start time this daemon's writers started. */
  readonly lateMs?: number
  /** The event loop's delay while writing: p99 and longest. */
  readonly loopDelayP99Ms?: number
  readonly loopDelayMaxMs?: number
  readonly acked: number
  readonly failures: number
  readonly failureMessages?: Record<string, number>
  readonly latencies: ReadonlyArray<number>
  readonly lags: ReadonlyArray<number>
  readonly seconds: number
  readonly records?: number
  /** Batches appended, and appends refused because another daemon appended first. */
  readonly appends?: number
  readonly refused?: number
  /** With the lease: its holder at the end, whether it was this daemon, writes forwarded and served. */
  readonly holder?: string
  readonly self?: boolean
  readonly forwarded?: number
  readonly served?: number
}

const daemonScript = join(import.meta.dirname, "clusterDaemon.ts")

/** A bench daemon: ready once open (with the lease: once a holder is known); writes from `go`'s time. */
interface BenchDaemon {
  readonly pid: number
  readonly ready: Promise<void>
  readonly go: (startAt: number) => void
  readonly result: Promise<DaemonResult>
}

const startBenchDaemon = (job: Job): BenchDaemon => {
  const child: ChildProcess = spawn(process.execPath, ["--import", "tsx", daemonScript, JSON.stringify(job)], {
    stdio: ["pipe", "pipe", "pipe"],
  })
  let out = ""
  let err = ""
  let markReady: () => void = () => undefined
  const ready = new Promise<void>((resolve) => {
    markReady = resolve
  })
  child.stdout!.on("data", (chunk) => {
    out += chunk
    if (out.includes('{"ready":')) markReady()
  })
  child.stderr!.on("data", (chunk) => (err += chunk))
  const result = new Promise<DaemonResult>((resolve, reject) => {
    child.once("exit", (code) => {
      markReady() // whoever waits for it learns of the failure from the result
      const line = out.trim().split("\n").pop()
      if (code !== 0 || line === undefined || line === "" || line.startsWith('{"ready":'))
        return reject(new Error(`bench daemon ${job.daemonId} failed (${code}): ${err}`))
      resolve(JSON.parse(line) as DaemonResult)
    })
  })
  return {
    pid: child.pid!,
    ready,
    go: (startAt) => {
      child.stdin!.write(`${JSON.stringify({ startAt })}\n`)
      child.stdin!.end()
    },
    result,
  }
}

// CPU, read from /proc: where a run's time went on a machine of few cores.

/** The nats-server processes this process started (test/support/NatsCluster.ts). */
const natsServerPids = (): Array<number> =>
  readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry))
    .flatMap((entry) => {
      try {
        const stat = readFileSync(`/proc/${entry}/stat`, "utf8")
        const name = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"))
        const parent = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
        return name === "nats-server" && parent === process.pid ? [Number(entry)] : []
      } catch {
        return []
      }
    })

/** The machine's busy and total CPU time so far, in clock ticks (every core; /proc/stat). */
const machineTicks = () => {
  const fields = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number)
  const total = fields.slice(0, 8).reduce((sum, value) => sum + value, 0)
  const idle = fields[3]! + fields[4]! // idle, iowait
  return { busy: total - idle, total }
}

/** CPU time of some processes, of the NATS servers and of the machine, read now. */
const cpuSample = (pids: ReadonlyArray<number>) => ({
  processes: pids.map((pid) => ({
    all: cpuMsOf(pid) ?? Number.NaN,
    main: cpuMsOf(pid, { mainThread: true }) ?? Number.NaN,
  })),
  nats: natsServerPids().reduce((sum, pid) => sum + (cpuMsOf(pid) ?? 0), 0),
  self: (process.cpuUsage().user + process.cpuUsage().system) / 1000,
  machine: machineTicks(),
})

/** What the processes, the NATS servers, this process and the whole machine used between two samples, in cores. */
const cpuBetween = (before: ReturnType<typeof cpuSample>, after: ReturnType<typeof cpuSample>, seconds: number) => {
  const cores = (ms: number) => ms / 1000 / seconds
  const ticks = after.machine.total - before.machine.total
  const processes = after.processes.map((sample, index) => ({
    all: cores(sample.all - before.processes[index]!.all),
    main: cores(sample.main - before.processes[index]!.main),
  }))
  const daemons = processes.reduce((sum, sample) => sum + sample.all, 0)
  const nats = cores(after.nats - before.nats)
  const self = cores(after.self - before.self)
  const machine = ticks === 0 ? Number.NaN : ((after.machine.busy - before.machine.busy) / ticks) * cpus().length
  return { processes, daemons, nats, self, machine, others: machine - daemons - nats - self }
}
type CpuUse = ReturnType<typeof cpuBetween>

/** One change of a store's writer lease, as the KV bucket stored it (the server's clock). */
interface LeaseChange {
  readonly store: string
  readonly revision: number
  readonly holder: string
  readonly at: number
}

/** Follows every change of the writer leases of the shared memory `prefix` (its `<prefix>_leases` bucket). */
const watchLeases = async (servers: ReadonlyArray<string>, prefix: string) => {
  const connection = await connect({ servers: [...servers] })
  const kv = await new Kvm(connection).open(`${prefix}_leases`)
  const changes: Array<LeaseChange> = []
  const watch = await kv.watch()
  const done = (async () => {
    for await (const entry of watch) {
      let holder = ""
      try {
        holder = entry.operation === "PUT" ? ((entry.json<{ holder?: string }>().holder ?? "") as string) : ""
      } catch {
        // not a lease
      }
      changes.push({ store: entry.key, revision: entry.revision, holder, at: entry.created.getTime() })
    }
  })()
  return {
    stop: async () => {
      watch.stop()
      await done.catch(() => undefined)
      await connection.close()
      return changes
    },
  }
}

/** The lease's renewals and moves between `from` and `to` (epoch ms): what a stall of its holder looks like. */
const leaseHistory = (changes: ReadonlyArray<LeaseChange>, from: number, to: number) => {
  const inRun = changes.filter((change) => change.at >= from && change.at <= to)
  const before = changes.filter((change) => change.at < from).at(-1)
  let moves = 0
  let longestGapMs = 0
  let previous = before
  const holders = new Set<string>()
  for (const change of inRun) {
    holders.add(change.holder)
    if (previous !== undefined && previous.holder !== change.holder) moves++
    longestGapMs = Math.max(longestGapMs, change.at - (previous?.at ?? from))
    previous = change
  }
  longestGapMs = Math.max(longestGapMs, to - (previous?.at ?? from))
  return {
    changes: inRun.length,
    moves,
    holders: [...holders],
    longestGapMs,
    timeline: inRun.map((change) => ({ atMs: change.at - from, holder: change.holder, revision: change.revision })),
  }
}

const sleepUntil = (at: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, at - Date.now())))

/**
 * Starts the daemons, and once every one is ready, starts their writers together; their results,
 * and with `seconds`, the CPU they, the NATS servers and the machine used in those seconds.
 */
const runTogether = async (
  jobs: ReadonlyArray<Job>,
  seconds?: number,
): Promise<{ results: Array<DaemonResult>; cpu?: CpuUse; leases?: ReturnType<typeof leaseHistory> }> => {
  const daemons = jobs.map(startBenchDaemon)
  await Promise.all(daemons.map((daemon) => daemon.ready))
  const first = jobs[0]!
  const leaseWatch =
    seconds !== undefined && first.servers !== undefined && (first.mode ?? "lease") === "lease"
      ? await watchLeases(first.servers, first.prefix!)
      : undefined
  const startAt = Date.now() + 300
  for (const daemon of daemons) daemon.go(startAt)
  const pids = daemons.map((daemon) => daemon.pid)
  const cpu =
    seconds === undefined
      ? undefined
      : (async () => {
          await sleepUntil(startAt)
          const before = cpuSample(pids)
          await sleepUntil(startAt + seconds * 1000)
          return cpuBetween(before, cpuSample(pids), seconds)
        })()
  const results = await Promise.all(daemons.map((daemon) => daemon.result))
  const leases =
    leaseWatch === undefined ? undefined : leaseHistory(await leaseWatch.stop(), startAt, startAt + seconds! * 1000)
  return { results, ...(cpu !== undefined ? { cpu: await cpu } : {}), ...(leases !== undefined ? { leases } : {}) }
}

type Mode = "file" | "lease" | "optimistic"

/** Runs `daemons` daemons at once (each `writers` writers) and sums them up. */
const scenario = async (
  name: string,
  mode: Mode,
  daemons: number,
  writers: number,
  seconds: number,
  shared: { readonly servers: ReadonlyArray<string>; readonly prefix: string } | undefined,
) => {
  const { results, cpu, leases } = await runTogether(
    Array.from({ length: daemons }, (_, index) => ({
      ...(shared !== undefined
        ? {
            servers: [...shared.servers.slice(index % 3), ...shared.servers.slice(0, index % 3)],
            prefix: shared.prefix,
          }
        : {}),
      daemonId: `bench${index}`,
      writers,
      seconds,
      valueBytes: 100,
      ...(mode === "file" ? {} : { mode }),
    })),
    seconds,
  )
  const latencies = results.flatMap((result) => result.latencies).sort((a, b) => a - b)
  const lags = results.flatMap((result) => result.lags).sort((a, b) => a - b)
  const sum = (field: (result: DaemonResult) => number | undefined) =>
    results.reduce((total, result) => total + (field(result) ?? 0), 0)
  const acked = sum((result) => result.acked)
  return {
    name,
    mode,
    daemons,
    writers,
    seconds,
    ackedPerSecond: acked / seconds,
    p50Ms: quantile(latencies, 0.5),
    p99Ms: quantile(latencies, 0.99),
    failures: sum((result) => result.failures),
    lagP50Ms: quantile(lags, 0.5),
    lagP99Ms: quantile(lags, 0.99),
    lagSamples: lags.length,
    appends: sum((result) => result.appends),
    refused: sum((result) => result.refused),
    forwarded: sum((result) => result.forwarded),
    served: sum((result) => result.served),
    lateMsMax: Math.max(...results.map((result) => result.lateMs ?? 0)),
    cpu: cpu!,
    leases,
    loopDelayMaxMs: Math.max(...results.map((result) => result.loopDelayMaxMs ?? 0)),
    perDaemon: results.map((result, index) => {
      const sorted = [...result.latencies].sort((a, b) => a - b)
      return {
        daemonId: result.daemonId,
        holder: result.holder,
        self: result.self,
        acked: result.acked,
        ackedPerSecond: result.acked / seconds,
        p50Ms: quantile(sorted, 0.5),
        p99Ms: quantile(sorted, 0.99),
        failures: result.failures,
        failureMessages: result.failureMessages,
        appends: result.appends ?? 0,
        refused: result.refused ?? 0,
        forwarded: result.forwarded ?? 0,
        served: result.served ?? 0,
        openMs: result.openMs,
        holderWaitMs: result.holderWaitMs,
        lateMs: result.lateMs,
        loopDelayP99Ms: result.loopDelayP99Ms,
        loopDelayMaxMs: result.loopDelayMaxMs,
        cpuCores: cpu!.processes[index]!.all,
        mainThreadCores: cpu!.processes[index]!.main,
      }
    }),
  }
}

type ScenarioRow = Awaited<ReturnType<typeof scenario>>

// ---------------------------------------------------------------------------------------------
// The stream's own ceiling

interface CeilingMode {
  readonly outstanding: number
  readonly expect: "none" | "last sequence" | "last message id (chained)"
  readonly msgId: boolean
}

const ceilingModes: ReadonlyArray<CeilingMode> = [
  { outstanding: 1, expect: "last sequence", msgId: true },
  { outstanding: 1, expect: "none", msgId: false },
  { outstanding: 16, expect: "none", msgId: false },
  { outstanding: 64, expect: "none", msgId: false },
  { outstanding: 16, expect: "last message id (chained)", msgId: true },
  { outstanding: 64, expect: "last message id (chained)", msgId: true },
]

/** One publisher appending 100-byte messages to a fresh R3 stream (as JetStreamWal.ts makes them) per mode. */
const streamCeiling = async (servers: ReadonlyArray<string>, seconds: number) => {
  const connection = await connect({ servers: [...servers] })
  const rows: Array<CeilingMode & { perSecond: number; p50Ms: number; p99Ms: number; failed: number }> = []
  try {
    const manager = await jetstreamManager(connection)
    const js = jetstream(connection)
    const payload = new Uint8Array(100).fill(118)
    for (const [index, mode] of ceilingModes.entries()) {
      const name = `benchceiling${index}_${Date.now() % 100_000}`
      const subject = `${name}.log`
      await manager.streams.add({
        name,
        subjects: [subject],
        storage: StorageType.File,
        num_replicas: 3,
        duplicate_window: duplicateWindowMs * 1_000_000,
      })
      let sent = 0
      let lastSequence = 0
      let lastMsgId: string | undefined
      let failed = 0
      const latencies: Array<number> = []
      const publisher = async (until: number, record: boolean) => {
        while (performance.now() < until) {
          const msgID = `m${++sent}`
          const expect =
            mode.expect === "last sequence"
              ? { lastSequence }
              : mode.expect === "last message id (chained)" && lastMsgId !== undefined
                ? { lastMsgID: lastMsgId }
                : undefined
          if (mode.expect === "last message id (chained)") lastMsgId = msgID
          const started = performance.now()
          try {
            const ack = await js.publish(subject, payload, {
              ...(mode.msgId ? { msgID } : {}),
              ...(expect !== undefined ? { expect } : {}),
              timeout: 10_000,
            })
            if (ack.seq > lastSequence) lastSequence = ack.seq
            if (record) latencies.push(performance.now() - started)
          } catch {
            if (record) failed++
          }
        }
      }
      // A short warm-up on the same stream, then the measured run.
      await Promise.all(Array.from({ length: mode.outstanding }, () => publisher(performance.now() + 300, false)))
      const started = performance.now()
      await Promise.all(
        Array.from({ length: mode.outstanding }, () => publisher(performance.now() + seconds * 1000, true)),
      )
      const elapsed = (performance.now() - started) / 1000
      latencies.sort((a, b) => a - b)
      rows.push({
        ...mode,
        perSecond: latencies.length / elapsed,
        p50Ms: quantile(latencies, 0.5),
        p99Ms: quantile(latencies, 0.99),
        failed,
      })
      await manager.streams.delete(name)
    }
  } finally {
    await connection.close()
  }
  return rows
}

// ---------------------------------------------------------------------------------------------
// End to end through MCP over Streamable HTTP, on real daemons

interface StoreStats {
  readonly name: string
  readonly wal?: { readonly appends?: number; readonly refused?: number }
  readonly writer?: { readonly holder?: string; readonly forwarded: number; readonly served: number }
}
interface ClusterStats {
  readonly self: string
  readonly daemons: ReadonlyArray<{ readonly daemonId: string; readonly live: boolean }>
  readonly writers: ReadonlyArray<{ readonly store: string; readonly holder?: string }>
}

/**
 * Waits until every daemon sees every other live, and every store's writer lease is held by its
 * preferred daemon as all of them see it — where the leases stay (a holder hands a lease to the
 * preferred daemon once it has held it two leases) — and still is a second later.
 */
const leasesSettled = async (daemons: ReadonlyArray<DaemonProcess>, timeoutMs: number): Promise<boolean> => {
  const deadline = Date.now() + timeoutMs
  let settledOnce = false
  while (Date.now() < deadline) {
    const views = await Promise.all(daemons.map((daemon) => apiGet<ClusterStats>(daemon, "/api/cluster")))
    const settled = views.every((view) => {
      const live = view.daemons.filter((daemon) => daemon.live).map((daemon) => daemon.daemonId)
      if (live.length !== daemons.length) return false
      return view.writers.every(
        (writer) =>
          writer.holder !== undefined &&
          writer.holder === preferredDaemon(writer.store, live) &&
          views.every((other) => other.writers.find((entry) => entry.store === writer.store)?.holder === writer.holder),
      )
    })
    if (settled && settledOnce) return true
    settledOnce = settled
    await new Promise((resolve) => setTimeout(resolve, 1000))
  }
  return false
}

/** Sums every store's counters of every daemon. */
const storeCounters = async (daemons: ReadonlyArray<DaemonProcess>) => {
  const stats = await Promise.all(daemons.map((daemon) => apiGet<{ stores: Array<StoreStats> }>(daemon, "/api/stats")))
  const totals = { appends: 0, refused: 0, forwarded: 0, served: 0 }
  for (const { stores } of stats)
    for (const store of stores) {
      totals.appends += store.wal?.appends ?? 0
      totals.refused += store.wal?.refused ?? 0
      totals.forwarded += store.writer?.forwarded ?? 0
      totals.served += store.writer?.served ?? 0
    }
  return totals
}

const mcpScenario = async (
  name: string,
  daemonCount: number,
  clientsPerDaemon: number,
  durationMs: number,
  servers: ReadonlyArray<string>,
  prefix: string,
) => {
  const daemons = await Promise.all(
    Array.from({ length: daemonCount }, () =>
      startDaemon({ built: true, args: ["--nats", servers.join(","), "--nats-prefix", prefix] }),
    ),
  )
  try {
    const settled = await leasesSettled(daemons, 60_000)
    const clients = await Promise.all(
      daemons.flatMap((daemon) =>
        Array.from({ length: clientsPerDaemon }, () => connectClient("streamable-http", daemon.url)),
      ),
    )
    const run = async (ms: number, label: string) => {
      const latencies: Array<number> = []
      let failed = 0
      const deadline = performance.now() + ms
      const started = performance.now()
      await Promise.all(
        clients.map(async (client, index) => {
          for (let call = 0; performance.now() < deadline; call++) {
            const before = performance.now()
            const result = await callTool(client, "create_entities", {
              entities: [
                { name: `${label}-${index}-${call}`, entityType: "bench", observations: ["written by a client"] },
              ],
            })
            if (result.isError) failed++
            else latencies.push(performance.now() - before)
          }
        }),
      )
      latencies.sort((a, b) => a - b)
      return { latencies, failed, seconds: (performance.now() - started) / 1000 }
    }
    await run(Math.min(2_000, durationMs / 3), `${prefix}-warmup`)
    const before = await storeCounters(daemons)
    const cpuBefore = cpuSample(daemons.map((daemon) => daemon.pid))
    const measured = await run(durationMs, `${prefix}-run`)
    const cpu = cpuBetween(cpuBefore, cpuSample(daemons.map((daemon) => daemon.pid)), measured.seconds)
    const after = await storeCounters(daemons)
    await Promise.all(clients.map((client) => client.close()))
    return {
      name,
      daemons: daemonCount,
      clients: clients.length,
      leasesSettled: settled,
      calls: measured.latencies.length,
      failed: measured.failed,
      callsPerSecond: measured.latencies.length / measured.seconds,
      p50Ms: quantile(measured.latencies, 0.5),
      p99Ms: quantile(measured.latencies, 0.99),
      appends: after.appends - before.appends,
      refused: after.refused - before.refused,
      forwarded: after.forwarded - before.forwarded,
      served: after.served - before.served,
      cpu,
    }
  } finally {
    await Promise.all(daemons.map((daemon) => daemon.stop().catch(() => undefined)))
  }
}

// ---------------------------------------------------------------------------------------------

/**
 * A compaction of a shared memory (docs/scaling.md, "Deleting for good"): three real daemons hold
 * `entities` graph entities (half of them then deleted); `POST /api/compact` on one of them
 * compacts every store at its writer. Measured: the call's time, until every daemon serves the new
 * streams, and what a writer on another daemon saw meanwhile (its slowest call: writes wait while
 * their store is compacted).
 */
export const compactionScenario = async (servers: ReadonlyArray<string>, prefix: string, entities: number) => {
  const daemons = await Promise.all(
    Array.from({ length: 3 }, () =>
      startDaemon({ built: true, args: ["--nats", servers.join(","), "--nats-prefix", prefix] }),
    ),
  )
  try {
    await leasesSettled(daemons, 60_000)
    const client = await connectClient("streamable-http", daemons[1]!.url)
    const perCall = 200
    for (let first = 0; first < entities; first += perCall) {
      const created = await callTool(client, "create_entities", {
        entities: Array.from({ length: Math.min(perCall, entities - first) }, (_, index) => ({
          name: `c-${first + index}`,
          entityType: "bench",
          observations: [`observation of entity ${first + index}, to be compacted`],
        })),
      })
      if (created.isError) throw new Error(created.text)
    }
    for (let first = 0; first < entities / 2; first += perCall) {
      const deleted = await callTool(client, "delete_entities", {
        entityNames: Array.from({ length: perCall }, (_, index) => `c-${first + index}`),
      })
      if (deleted.isError) throw new Error(deleted.text)
    }
    let writing = true
    const writeLatencies: Array<number> = []
    let writeFailures = 0
    const writer = (async () => {
      for (let n = 0; writing; n++) {
        const before = performance.now()
        const result = await callTool(client, "create_entities", {
          entities: [{ name: `during-${n}`, entityType: "bench", observations: ["written during the compaction"] }],
        }).catch((error: unknown) => ({ isError: true, text: String(error) }))
        if (result.isError) writeFailures++
        else writeLatencies.push(performance.now() - before)
      }
    })()
    const started = performance.now()
    const response = await fetch(`${daemons[0]!.url}/api/compact`, {
      method: "POST",
      headers: authHeaders(daemons[0]!.dataDir),
    })
    const compactMs = performance.now() - started
    const report = (await response.json()) as { stores?: ReadonlyArray<{ store: string; keys: number }> }
    if (!response.ok) throw new Error(`compact: ${JSON.stringify(report)}`)
    let switchedMs = Number.NaN
    while (performance.now() - started < 120_000) {
      const views = await Promise.all(daemons.map((daemon) => apiGet<StatsView>(daemon, "/api/stats")))
      if (views.every((view) => view.stores.every((store) => (store.wal?.generation ?? 0) >= 1))) {
        switchedMs = performance.now() - started
        break
      }
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    writing = false
    await writer
    await client.close()
    writeLatencies.sort((a, b) => a - b)
    return {
      entities,
      graphKeys: report.stores?.find((store) => store.store === "graph")?.keys ?? 0,
      compactMs,
      switchedMs,
      writesDuring: writeLatencies.length,
      writeFailures,
      writeMaxMs: writeLatencies.at(-1) ?? 0,
      writeP50Ms: quantile(writeLatencies, 0.5),
    }
  } catch (error) {
    // What each daemon said: a failed call is most often a daemon that went away.
    const outputs = daemons.map(
      (daemon, index) => `--- daemon ${index} (pid ${daemon.pid}):\n${daemon.output().slice(-4000)}`,
    )
    throw new Error(`the compaction scenario failed: ${String(error)}\n${outputs.join("\n")}`)
  } finally {
    await Promise.all(daemons.map((daemon) => daemon.stop().catch(() => undefined)))
  }
}

interface StatsView {
  readonly stores: ReadonlyArray<{ readonly wal?: { readonly generation?: number } }>
}

const met = (ok: boolean) => (ok ? "met" : "NOT MET")
const percent = (part: number, whole: number) => (whole === 0 ? 0 : (100 * part) / whole)

export const suite: BenchSuite = {
  title:
    "shared memory on NATS JetStream: 1, 3 and 6 daemons on a 3-node R3 cluster (writer lease and optimistic), beside the file log",
  run: async ({ quick }) => {
    const seconds = quick ? 3 : 10
    const writers = 16
    const catchUpEvents = quick ? 10_000 : 100_000
    const ceilingSeconds = quick ? 1 : 5
    const mcpMs = 10_000
    const mcpClients = 8
    const built = builtCliArgs()[0]!
    if (!quick && !existsSync(built)) throw new Error(`${built} is missing: run npm run build first`)
    const cluster = await startNatsCluster(3)
    try {
      const prefix = (label: string) => `bench${label}${Date.now() % 100_000}`
      const on = (label: string) => ({ servers: cluster.urls, prefix: prefix(label) })
      const rows: Array<ScenarioRow> = []
      rows.push(await scenario("file log (one daemon, local)", "file", 1, writers, seconds, undefined))
      rows.push(await scenario("JetStream R3, writer lease", "lease", 1, writers, seconds, on("one")))
      rows.push(await scenario("JetStream R3, writer lease", "lease", 3, writers, seconds, on("three")))
      rows.push(
        await scenario("JetStream R3, optimistic (before the lease)", "optimistic", 3, writers, seconds, on("opt")),
      )
      rows.push(await scenario("JetStream R3, writer lease", "lease", 6, writers, seconds, on("six")))
      const [, one, three, optimistic, six] = rows as [ScenarioRow, ScenarioRow, ScenarioRow, ScenarioRow, ScenarioRow]

      // Catch-up: a stream of `catchUpEvents` events, then a fresh replica opens on it.
      const catchUp = on("catchup")
      await runTogether([
        { ...catchUp, daemonId: "filler", writers: 64, seconds: 600, count: catchUpEvents, valueBytes: 100 },
      ])
      const fresh = await startBenchDaemon({
        ...catchUp,
        daemonId: "fresh",
        writers: 0,
        seconds: 0,
        catchUp: true,
        valueBytes: 0,
      }).result
      const catchUpPerSecond = (fresh.records ?? 0) / (fresh.openMs / 1000)

      const ceiling = await streamCeiling(cluster.urls, ceilingSeconds)

      let mcp: Array<Awaited<ReturnType<typeof mcpScenario>>> = []
      let compaction: Awaited<ReturnType<typeof compactionScenario>> | undefined
      if (!quick) {
        quietAbortSignalWarnings()
        try {
          mcp = [
            await mcpScenario("1 daemon", 1, mcpClients, mcpMs, cluster.urls, prefix("mcpone")),
            await mcpScenario("3 daemons", 3, mcpClients, mcpMs, cluster.urls, prefix("mcpthree")),
          ]
          compaction = await compactionScenario(cluster.urls, prefix("compact"), 10_000)
        } finally {
          await cleanup()
        }
      }

      const ratio = three.ackedPerSecond / one.ackedPerSecond
      const refusedShare = percent(three.refused, three.appends)
      const notes = [
        `target (issue 30): 3 daemons with the writer lease >= 1.0× one daemon on JetStream R3 in acked writes/s: ${round(three.ackedPerSecond, 0)}/s vs ${round(one.ackedPerSecond, 0)}/s = ${round(ratio, 2)}× (${met(ratio >= 1)})`,
        `target (issue 30): call p99 <= 50 ms, 3 daemons with the lease: ${round(three.p99Ms, 1)} ms (${met(three.p99Ms <= 50)}); one daemon ${round(one.p99Ms, 1)} ms, 6 daemons ${round(six.p99Ms, 1)} ms`,
        `target (issue 30): refused appends <= 1 % of appends, 3 daemons with the lease: ${three.refused} of ${three.appends} (${round(refusedShare, 2)} %) (${met(refusedShare <= 1)}); 6 daemons ${six.refused} of ${six.appends}; optimistic ${optimistic.refused} of ${optimistic.appends} (${round(percent(optimistic.refused, optimistic.appends), 1)} %)`,
        ...(mcp.length === 2
          ? [
              `target (issue 30): end to end through MCP over Streamable HTTP, 3 daemons' p99 <= 1.5× one daemon's: ${round(mcp[1]!.p99Ms, 1)} ms vs ${round(mcp[0]!.p99Ms, 1)} ms = ${round(mcp[1]!.p99Ms / mcp[0]!.p99Ms, 2)}× (${met(mcp[1]!.p99Ms <= 1.5 * mcp[0]!.p99Ms)})`,
            ]
          : ["end to end through MCP over Streamable HTTP: not measured with --quick"]),
        `target (issue 21): catch-up >= 20,000 events/s: ${round(catchUpPerSecond, 0)}/s (${met(catchUpPerSecond >= 20_000)})`,
        `3 daemons with the lease are ${round(three.ackedPerSecond / optimistic.ackedPerSecond, 2)}× the optimistic 3 daemons' acked writes/s; 6 daemons with the lease ${round(six.ackedPerSecond / one.ackedPerSecond, 2)}× one daemon`,
        `JetStream R3 (1 daemon) is ${round(one.ackedPerSecond / rows[0]!.ackedPerSecond, 2)}× the file log's acked writes/s in this run; the stream alone takes ${round(Math.max(...ceiling.map((row) => row.perSecond)), 0)} messages/s at best (one publisher)`,
        ...rows.flatMap((row) =>
          row.perDaemon.flatMap((daemon) =>
            Object.entries(daemon.failureMessages ?? {}).map(
              ([message, count]) => `${row.daemons} × ${row.mode} ${daemon.daemonId}: ${count} failed: ${message}`,
            ),
          ),
        ),
        `latest writer start after the common start time: ${Math.max(...rows.map((row) => row.lateMsMax))} ms`,
      ]
      return {
        tables: [
          {
            title: `acknowledged writes (${writers} writers per daemon, ${seconds} s, 100-byte values)`,
            header: [
              "log",
              "daemons",
              "acked/s",
              "p50 ms",
              "p99 ms",
              "failed",
              "batches",
              "refused (stale)",
              "forwarded",
            ],
            rows: rows.map((row) => [
              row.name,
              row.daemons,
              round(row.ackedPerSecond, 0),
              round(row.p50Ms, 2),
              round(row.p99Ms, 2),
              row.failures,
              row.appends,
              row.refused,
              row.forwarded,
            ]),
          },
          {
            title: "per daemon (holder: holds the store's writer lease at the end)",
            header: [
              "scenario",
              "daemon",
              "holder",
              "acked/s",
              "p50 ms",
              "p99 ms",
              "failed",
              "batches",
              "refused",
              "forwarded",
              "served",
            ],
            rows: rows
              .slice(1)
              .flatMap((row) =>
                row.perDaemon.map((daemon) => [
                  `${row.daemons} × ${row.mode}`,
                  daemon.daemonId ?? "",
                  daemon.self === true ? "yes" : "",
                  round(daemon.ackedPerSecond, 0),
                  round(daemon.p50Ms, 2),
                  round(daemon.p99Ms, 2),
                  daemon.failures,
                  daemon.appends,
                  daemon.refused,
                  daemon.forwarded,
                  daemon.served,
                ]),
              ),
          },
          {
            title: `CPU during the writes, in cores (this machine: ${cpus().length}); "others": work on the machine that is not this run's`,
            header: [
              "log",
              "daemons",
              "acked/s",
              "daemons",
              "NATS servers",
              "this process",
              "others",
              "machine busy",
              "µs of CPU a write",
            ],
            rows: [
              ...rows.map((row) => [
                row.name,
                row.daemons,
                round(row.ackedPerSecond, 0),
                round(row.cpu.daemons, 2),
                round(row.cpu.nats, 2),
                round(row.cpu.self, 2),
                round(row.cpu.others, 2),
                round(row.cpu.machine, 2),
                round(((row.cpu.daemons + row.cpu.nats) * 1e6) / row.ackedPerSecond, 0),
              ]),
              ...mcp.map((row) => [
                `MCP over HTTP (clients: this process)`,
                row.daemons,
                round(row.callsPerSecond, 0),
                round(row.cpu.daemons, 2),
                round(row.cpu.nats, 2),
                round(row.cpu.self, 2),
                round(row.cpu.others, 2),
                round(row.cpu.machine, 2),
                round(((row.cpu.daemons + row.cpu.nats) * 1e6) / row.callsPerSecond, 0),
              ]),
            ],
          },
          {
            title:
              "the writer lease during the writes (its KV entry as stored: renewed every third of the 3 s lease), and the daemons' event loops",
            header: [
              "daemons",
              "entry changes",
              "holder changes",
              "holders",
              "longest without a renewal ms",
              "event loop delay p99 ms (worst daemon)",
              "longest ms",
            ],
            rows: rows
              .filter((row) => row.leases !== undefined)
              .map((row) => [
                row.daemons,
                row.leases!.changes,
                row.leases!.moves,
                row.leases!.holders.join(" "),
                round(row.leases!.longestGapMs, 0),
                round(Math.max(...row.perDaemon.map((daemon) => daemon.loopDelayP99Ms ?? 0)), 1),
                round(row.loopDelayMaxMs, 0),
              ]),
          },
          {
            title: "replication lag (committed on one daemon, applied on another)",
            header: ["log", "daemons", "samples", "p50 ms", "p99 ms"],
            rows: rows
              .filter((row) => row.daemons > 1)
              .map((row) => [row.name, row.daemons, row.lagSamples, round(row.lagP50Ms, 1), round(row.lagP99Ms, 1)]),
          },
          {
            title: "catch-up of a fresh replica",
            header: ["events", "seconds", "events/s"],
            rows: [[fresh.records ?? 0, round(fresh.openMs / 1000, 2), round(catchUpPerSecond, 0)]],
          },
          {
            title: `the stream alone: one publisher, 100-byte messages to one R3 stream, ${ceilingSeconds} s each`,
            header: ["outstanding", "expectation", "msg id", "messages/s", "p50 ms", "p99 ms", "failed"],
            rows: ceiling.map((row) => [
              row.outstanding,
              row.expect,
              row.msgId ? "yes" : "no",
              round(row.perSecond, 0),
              round(row.p50Ms, 2),
              round(row.p99Ms, 2),
              row.failed,
            ]),
          },
          ...(mcp.length > 0
            ? [
                {
                  title: `end to end: MCP over Streamable HTTP, real daemons, ${mcpClients} clients per daemon, create_entities of one entity per call, ${mcpMs / 1000} s`,
                  header: [
                    "daemons",
                    "clients",
                    "calls/s",
                    "p50 ms",
                    "p99 ms",
                    "failed",
                    "batches",
                    "refused",
                    "forwarded",
                    "leases settled",
                  ],
                  rows: mcp.map((row) => [
                    row.daemons,
                    row.clients,
                    round(row.callsPerSecond, 0),
                    round(row.p50Ms, 2),
                    round(row.p99Ms, 2),
                    row.failed,
                    row.appends,
                    row.refused,
                    row.forwarded,
                    row.leasesSettled ? "yes" : "no",
                  ]),
                },
              ]
            : []),
          ...(compaction !== undefined
            ? [
                {
                  title:
                    "compacting the shared memory (POST /api/compact on one of three real daemons; a writer on another daemon meanwhile)",
                  header: [
                    "entities written",
                    "graph keys kept",
                    "compact s",
                    "all daemons switched s",
                    "writes meanwhile",
                    "failed",
                    "write p50 ms",
                    "slowest write ms",
                  ],
                  rows: [
                    [
                      compaction.entities,
                      compaction.graphKeys,
                      round(compaction.compactMs / 1000, 2),
                      round(compaction.switchedMs / 1000, 2),
                      compaction.writesDuring,
                      compaction.writeFailures,
                      round(compaction.writeP50Ms, 1),
                      round(compaction.writeMaxMs, 0),
                    ],
                  ],
                },
              ]
            : []),
        ],
        notes,
        json: {
          rows,
          catchUp: { events: fresh.records, seconds: fresh.openMs / 1000, perSecond: catchUpPerSecond },
          ceiling,
          mcp,
          compaction,
        },
      }
    } finally {
      await cluster.stop()
    }
  },
}
