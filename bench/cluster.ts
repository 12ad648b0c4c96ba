/**
 * A shared memory on NATS JetStream (docs/scaling.md): acknowledged writes per second and their
 * latency for one and three daemons on a 3-node R3 cluster, beside the file log in the same run;
 * replication lag (commit on one daemon to applied on another); and the catch-up of a fresh replica.
 *
 * Each "daemon" is a process of its own (bench/clusterDaemon.ts): a store actor on its log with 16
 * writers, each sending one small write at a time — what the daemons' stores do for their tool calls,
 * without the MCP transports (bench/transports.ts measures those). The servers are Debian's
 * nats-server, three on loopback, started here.
 */
import { spawn } from "node:child_process"
import { join } from "node:path"
import { startNatsCluster } from "../test/support/NatsCluster.ts"
import { type BenchSuite, quantile, round } from "./Table.ts"

interface DaemonResult {
  readonly openMs: number
  readonly acked: number
  readonly failures: number
  readonly latencies: ReadonlyArray<number>
  readonly lags: ReadonlyArray<number>
  readonly seconds: number
  readonly records?: number
  /** Batches appended, and appends refused because another daemon appended first. */
  readonly appends?: number
  readonly refused?: number
}

const daemonScript = join(import.meta.dirname, "clusterDaemon.ts")

const runDaemon = (job: Record<string, unknown>): Promise<DaemonResult> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", daemonScript, JSON.stringify(job)], {
      stdio: ["ignore", "pipe", "pipe"],
    })
    let out = ""
    let err = ""
    child.stdout.on("data", (chunk) => (out += chunk))
    child.stderr.on("data", (chunk) => (err += chunk))
    child.once("exit", (code) => {
      const line = out.trim().split("\n").pop()
      if (code !== 0 || line === undefined || line === "")
        return reject(new Error(`bench daemon failed (${code}): ${err}`))
      resolve(JSON.parse(line) as DaemonResult)
    })
  })

/** Runs `daemons` daemons at once (each `writers` writers) and sums them up. */
const scenario = async (
  name: string,
  daemons: number,
  writers: number,
  seconds: number,
  shared: { readonly servers: ReadonlyArray<string>; readonly prefix: string } | undefined,
) => {
  const startAt = Date.now() + 4000 // every daemon opened (and caught up) before anyone writes
  const results = await Promise.all(
    Array.from({ length: daemons }, (_, index) =>
      runDaemon({
        ...(shared !== undefined
          ? { servers: [...shared.servers.slice(index), ...shared.servers.slice(0, index)], prefix: shared.prefix }
          : {}),
        daemonId: `bench${index}`,
        writers,
        seconds,
        startAt,
        valueBytes: 100,
      }),
    ),
  )
  const latencies = results.flatMap((result) => result.latencies).sort((a, b) => a - b)
  const lags = results.flatMap((result) => result.lags).sort((a, b) => a - b)
  const acked = results.reduce((sum, result) => sum + result.acked, 0)
  return {
    name,
    daemons,
    writers,
    ackedPerSecond: acked / seconds,
    p50Ms: quantile(latencies, 0.5),
    p99Ms: quantile(latencies, 0.99),
    failures: results.reduce((sum, result) => sum + result.failures, 0),
    lagP50Ms: quantile(lags, 0.5),
    lagP99Ms: quantile(lags, 0.99),
    lagSamples: lags.length,
    appends: results.reduce((sum, result) => sum + (result.appends ?? 0), 0),
    refused: results.reduce((sum, result) => sum + (result.refused ?? 0), 0),
  }
}

export const suite: BenchSuite = {
  title: "shared memory on NATS JetStream: 1 and 3 daemons on a 3-node R3 cluster, beside the file log",
  run: async ({ quick }) => {
    const seconds = quick ? 3 : 10
    const writers = 16
    const catchUpEvents = quick ? 10_000 : 100_000
    const cluster = await startNatsCluster(3)
    try {
      const prefix = (label: string) => `bench${label}${Date.now() % 100_000}`
      const rows = [
        await scenario("file log (one daemon, local)", 1, writers, seconds, undefined),
        await scenario("JetStream R3, 1 daemon", 1, writers, seconds, { servers: cluster.urls, prefix: prefix("one") }),
        await scenario("JetStream R3, 3 daemons", 3, writers, seconds, {
          servers: cluster.urls,
          prefix: prefix("three"),
        }),
      ]
      // Catch-up: a stream of `catchUpEvents` events, then a fresh replica opens on it.
      const catchUpPrefix = prefix("catchup")
      await runDaemon({
        servers: cluster.urls,
        prefix: catchUpPrefix,
        daemonId: "filler",
        writers: 64,
        seconds: 600,
        startAt: 0,
        count: catchUpEvents,
        valueBytes: 100,
      })
      const fresh = await runDaemon({
        servers: cluster.urls,
        prefix: catchUpPrefix,
        daemonId: "fresh",
        writers: 0,
        seconds: 0,
        startAt: 0,
        catchUp: true,
        valueBytes: 0,
      })
      const catchUpPerSecond = (fresh.records ?? 0) / (fresh.openMs / 1000)
      const three = rows[2]!
      const notes = [
        `target: 3 daemons × ${writers} writers >= 2,000 acked writes/s with p99 < 50 ms: ${round(three.ackedPerSecond, 0)}/s, p99 ${round(three.p99Ms, 1)} ms (${three.ackedPerSecond >= 2000 && three.p99Ms < 50 ? "met" : "not met"})`,
        `target: catch-up >= 20,000 events/s: ${round(catchUpPerSecond, 0)}/s (${catchUpPerSecond >= 20_000 ? "met" : "not met"})`,
        `JetStream R3 (1 daemon) is ${round(rows[1]!.ackedPerSecond / rows[0]!.ackedPerSecond, 2)}× the file log's acked writes/s in this run`,
      ]
      return {
        tables: [
          {
            title: `acknowledged writes (${writers} writers per daemon, ${seconds} s, 100-byte values)`,
            header: ["log", "daemons", "acked/s", "p50 ms", "p99 ms", "failed", "batches", "refused (stale)"],
            rows: rows.map((row) => [
              row.name,
              row.daemons,
              round(row.ackedPerSecond, 0),
              round(row.p50Ms, 2),
              round(row.p99Ms, 2),
              row.failures,
              row.appends,
              row.refused,
            ]),
          },
          {
            title: "replication lag (committed on one daemon, applied on another)",
            header: ["log", "samples", "p50 ms", "p99 ms"],
            rows: rows
              .slice(2)
              .map((row) => [row.name, row.lagSamples, round(row.lagP50Ms, 1), round(row.lagP99Ms, 1)]),
          },
          {
            title: "catch-up of a fresh replica",
            header: ["events", "seconds", "events/s"],
            rows: [[fresh.records ?? 0, round(fresh.openMs / 1000, 2), round(catchUpPerSecond, 0)]],
          },
        ],
        notes,
        json: { rows, catchUp: { events: fresh.records, seconds: fresh.openMs / 1000, perSecond: catchUpPerSecond } },
      }
    } finally {
      await cluster.stop()
    }
  },
}
