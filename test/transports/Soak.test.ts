/**
 * 50 WebSocket agents for 30 s of mixed reads and writes against one daemon: no call fails; the
 * daemon's resident memory stays bounded (sampled from /proc every 500 ms: under 768 MB, and no
 * longer climbing once warm: the last third of the run within 64 MB of the middle third);
 * SIGTERM in the middle of the traffic ends the daemon with exit 0; and after a restart every
 * agent's entity holds exactly what its acknowledged writes say it should.
 *
 * Each agent owns one entity. Its writes come in cycles that leave the graph's size steady: three
 * add_observations, one delete_observations of those three, then creating one of ten side
 * entities (a no-op after the first round); the other half of its calls are reads (search_nodes,
 * open_nodes, read_graph). Set SOAK_SECONDS to run longer, and SOAK_DAEMON_NODE_OPTIONS to run the
 * daemon with other Node options than the capped heap below ("" for Node's defaults).
 */
import { afterAll, describe, expect, it } from "vitest"
import { callTool, cleanup, connectClient, type DaemonProcess, residentMemory, startDaemon } from "./harness.ts"

afterAll(cleanup)

const agents = 50
const soakMs = Number(process.env.SOAK_SECONDS ?? 30) * 1000
/**
 * The daemon runs with its V8 old space capped, so that garbage V8 has not collected yet cannot
 * hide growth: with the default heap, 50 agents make it hold 200–380 MB of garbage on top of its
 * idle ~230 MB (~320 MB with the semantic-search model) before it bothers to collect; capped,
 * the same run plateaus. A leak (a retained Buffer or object per call) still climbs.
 */
const daemonNodeOptionsDefault = "--max-old-space-size=192"
/** The daemon's resident memory may never exceed this. */
const rssBytesMax = 768 * 1024 * 1024
/** After warm-up (the middle third of the run) it may grow at most this much more (the last third). */
const rssLateGrowthBytesMax = 64 * 1024 * 1024
/** A request sent this long before SIGTERM has certainly reached the daemon and must be answered. */
const receivedMarginMs = 1000

const range = (count: number) => Array.from({ length: count }, (_, index) => index)

interface Outcome {
  readonly sentAt: number
  readonly ok: boolean
  readonly error?: string
}

/** One agent's calls until `stopAt`; returns what it did and what its entity must now hold. */
const runAgent = async (daemon: DaemonProcess, index: number, stopped: () => boolean) => {
  const client = await connectClient("ws", daemon.url, { name: `soak-agent-${index}` })
  const entity = `agent-${index}`
  const outcomes: Array<Outcome> = []
  const expected = new Set<string>()
  const latencyMs = { read: [] as Array<number>, write: [] as Array<number> }
  const step = async (call: number): Promise<boolean> => {
    const cycle = call % 10
    const observation = (offset: number) => `obs ${call - offset}`
    const [name, args, kind, onOk]: [string, Record<string, unknown>, "read" | "write", (structured: unknown) => void] =
      cycle <= 2
        ? [
            "add_observations",
            { observations: [{ entityName: entity, contents: [observation(0)] }] },
            "write",
            (structured) => {
              expect(structured).toEqual({ results: [{ entityName: entity, addedObservations: [observation(0)] }] })
              expected.add(observation(0))
            },
          ]
        : cycle === 3
          ? [
              "delete_observations",
              { deletions: [{ entityName: entity, observations: [observation(3), observation(2), observation(1)] }] },
              "write",
              () => {
                for (const offset of [1, 2, 3]) expected.delete(observation(offset))
              },
            ]
          : cycle === 4
            ? [
                "create_entities",
                { entities: [{ name: `${entity}-side-${call % 100}`, entityType: "side", observations: [] }] },
                "write",
                () => undefined,
              ]
            : cycle === 5
              ? ["search_nodes", { query: `${entity}-side` }, "read", () => undefined]
              : cycle === 9 && index % 10 === 0
                ? ["read_graph", {}, "read", () => undefined]
                : ["open_nodes", { names: [entity, `${entity}-side-4`] }, "read", () => undefined]
    const sentAt = Date.now()
    try {
      const result = await callTool(client, name, args, 30_000)
      latencyMs[kind].push(Date.now() - sentAt)
      if (result.isError) {
        outcomes.push({ sentAt, ok: false, error: `${name}: ${result.text}` })
        return true
      }
      onOk(result.structured)
      outcomes.push({ sentAt, ok: true })
      return true
    } catch (error) {
      outcomes.push({ sentAt, ok: false, error: `${name}: ${String(error)}` })
      return false // the connection is gone
    }
  }
  const created = await callTool(client, "create_entities", {
    entities: [{ name: entity, entityType: "agent", observations: [] }],
  })
  expect(created.isError, created.text).toBe(false)
  for (let call = 0; !stopped(); call++) if (!(await step(call))) break
  return { index, entity, outcomes, expected, latencyMs }
}

describe("50 WebSocket agents", () => {
  it(`${soakMs / 1000} s of mixed reads and writes: no errors, bounded RSS, clean SIGTERM`, {
    timeout: soakMs + 120_000,
  }, async () => {
    const daemon = await startDaemon({
      env: { NODE_OPTIONS: process.env.SOAK_DAEMON_NODE_OPTIONS ?? daemonNodeOptionsDefault },
    })
    const idle = residentMemory(daemon.pid)
    const samples: Array<{ at: number; rss: number; anon: number; file: number }> = []
    const startedAt = Date.now()
    const sampler = setInterval(() => {
      const memory = residentMemory(daemon.pid)
      if (memory !== undefined) samples.push({ at: Date.now() - startedAt, ...memory })
    }, 500)
    let stopping = false
    const running = range(agents).map((index) => runAgent(daemon, index, () => stopping))
    await new Promise((resolve) => setTimeout(resolve, soakMs))
    clearInterval(sampler)

    // SIGTERM while every agent still has a call in flight.
    const sigtermAt = Date.now()
    const exited = daemon.stop("SIGTERM", 30_000)
    stopping = true
    const results = await Promise.all(running)
    const exit = await exited
    const shutdownMs = Date.now() - sigtermAt

    const outcomes = results.flatMap((result) => result.outcomes)
    const failures = outcomes.filter((outcome) => !outcome.ok)
    const failedBeforeSigterm = failures.filter((outcome) => outcome.sentAt < sigtermAt - receivedMarginMs)
    const sorted = (values: Array<number>) => [...values].sort((a, b) => a - b)
    const p = (values: Array<number>, q: number) => sorted(values)[Math.floor(q * (values.length - 1))] ?? Number.NaN
    const reads = results.flatMap((result) => result.latencyMs.read)
    const writes = results.flatMap((result) => result.latencyMs.write)
    const medianRssOf = (from: number, to: number) =>
      p(
        samples.filter((sample) => sample.at > from * soakMs && sample.at <= to * soakMs).map((sample) => sample.rss),
        0.5,
      )
    const warmMedian = medianRssOf(1 / 3, 2 / 3)
    const lateMedian = medianRssOf(2 / 3, 1)
    const peak = Math.max(...samples.map((sample) => sample.rss))
    const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(0)} MB`
    console.log(
      [
        `soak: ${agents} agents, ${soakMs / 1000} s: ${outcomes.length} calls (${Math.round(outcomes.length / (soakMs / 1000))}/s), ${failures.length} failed (all after SIGTERM: ${failedBeforeSigterm.length === 0})`,
        `  read  latency p50 ${p(reads, 0.5)} ms, p99 ${p(reads, 0.99)} ms (${reads.length} calls)`,
        `  write latency p50 ${p(writes, 0.5)} ms, p99 ${p(writes, 0.99)} ms (${writes.length} calls)`,
        `  daemon RSS (NODE_OPTIONS ${process.env.SOAK_DAEMON_NODE_OPTIONS ?? daemonNodeOptionsDefault}): idle ${mb(idle?.rss ?? 0)}, peak ${mb(peak)}, median of the middle third ${mb(warmMedian)}, of the last third ${mb(lateMedian)}, last ${mb(samples.at(-1)?.rss ?? 0)} (anonymous ${mb(samples.at(-1)?.anon ?? 0)}, file-backed ${mb(samples.at(-1)?.file ?? 0)}; ${samples.length} samples)`,
        `  RSS every 2 s (MB): ${samples
          .filter((_, index) => index % 4 === 0)
          .map((sample) => Math.round(sample.rss / 1024 / 1024))
          .join(" ")}`,
        `  SIGTERM → exit ${exit.code} in ${shutdownMs} ms`,
      ].join("\n"),
    )

    expect(failedBeforeSigterm.map((outcome) => outcome.error).slice(0, 5)).toEqual([])
    // A call cut off by the shutdown sees the connection close, nothing else.
    for (const failure of failures) expect(failure.error).toMatch(/Connection closed/)
    expect(samples.length).toBeGreaterThan((soakMs / 500) * 0.8)
    expect(peak).toBeLessThan(rssBytesMax)
    expect(lateMedian - warmMedian).toBeLessThanOrEqual(rssLateGrowthBytesMax)
    expect(exit).toEqual({ code: 0, signal: null })

    // Flushed: after a restart every agent's entity holds exactly what its acknowledged writes left.
    const restarted = await startDaemon({ dataDir: daemon.dataDir, port: daemon.port })
    const checker = await connectClient("ws", restarted.url)
    const opened = (await callTool(checker, "open_nodes", { names: results.map((result) => result.entity) }))
      .structured as { entities: Array<{ name: string; observations: Array<string> }> }
    const held = new Map(opened.entities.map((entity) => [entity.name, [...entity.observations].sort()]))
    for (const result of results) expect(held.get(result.entity), result.entity).toEqual([...result.expected].sort())
  })
})
