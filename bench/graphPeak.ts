/**
 * Where the 10k graph workload's peak RSS comes from (issue 28): `node --import tsx
 * bench/graphPeak.ts [entities]`. Not a suite of `npm run bench`: a probe to run by hand on the
 * built CLI (`MNEMOS_BENCH_CLI` for another build's), on the runtime that runs it.
 *
 * Runs `bench/graph.ts`'s workload (the same corpus and calls) against `serve --stdio` started with
 * `--trace-gc`, and while it runs samples /proc/PID/status every `samplePeriodMs`; each time RSS
 * reaches a new high by `smapsStepBytes`, the mappings are grouped from /proc/PID/smaps. Every V8
 * isolate's heap (used and committed, MB as V8 prints them) is taken from its last `--trace-gc`
 * line, and the search thread's own heap from `mem-stats` every `statsEveryCalls` calls. Printed:
 * the timeline at each phase's end and the breakdown at the highest RSS seen.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { repoRoot } from "../test/support/mcpClient.ts"
import { makeWorkload } from "./graph.ts"
import { memoryOf } from "./ProcessStats.ts"

const cli = process.env.MNEMOS_BENCH_CLI ?? join(repoRoot, "dist", "cli.js")
const samplePeriodMs = 50
const smapsStepBytes = 4 * 1024 * 1024
const smapsEverySamples = 10
/** 0 (the default): only at each phase's end, so the probe's questions do not pace the writes. */
const statsEveryCalls = Number(process.env.MNEMOS_PEAK_STATS_EVERY ?? 0)
const batchSize = 10
const mib = (bytes: number) => (bytes / 1024 / 1024).toFixed(1)

/** The resident kB of /proc/PID/smaps grouped: malloc's main arena, other anonymous, each file. */
const smapsGroups = (pid: number): Record<string, number> => {
  const groups: Record<string, number> = {}
  let name = ""
  for (const line of readFileSync(`/proc/${pid}/smaps`, "utf8").split("\n")) {
    const header = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line)
    if (header !== null) {
      const path = header[1]!.trim()
      name =
        path === ""
          ? "anonymous"
          : path.startsWith("[")
            ? path
            : path.endsWith(".mdb")
              ? `lmdb ${path.split("/").slice(-3).join("/")}`
              : path.includes("/node")
                ? "node binary"
                : "other files"
      continue
    }
    const rss = /^Rss:\s+(\d+) kB$/.exec(line)
    if (rss !== null) groups[name] = (groups[name] ?? 0) + Number(rss[1]) * 1024
  }
  return groups
}

/**
 * Preloaded into the daemon: its main thread's heap on stderr every 100 ms (`--trace-gc` would
 * write to stdout, which is the MCP channel). Its own allocations are a few objects a tick. Node
 * preloads it in worker threads too, which it leaves alone.
 */
const mainHeapProbe = `data:text/javascript,${encodeURIComponent(`
  import { getHeapSpaceStatistics } from "node:v8"
  import { isMainThread } from "node:worker_threads"
  if (isMainThread) setInterval(() => {
    const usage = process.memoryUsage()
    const young = getHeapSpaceStatistics().find((space) => space.space_name === "new_space")
    process.stderr.write("main-heap " + JSON.stringify({ used: usage.heapUsed, total: usage.heapTotal,
      arrayBuffers: usage.arrayBuffers, external: usage.external, young: young ? young.space_size : 0 }) + "\\n")
  }, 100).unref()
`)}`

interface MainHeap {
  readonly used: number
  readonly total: number
  readonly arrayBuffers: number
  readonly external: number
  readonly young: number
}
const describeMain = (heap: MainHeap | undefined) =>
  heap === undefined
    ? "n/a"
    : `heap ${mib(heap.used)} used / ${mib(heap.total)} committed (young generation ${mib(heap.young)}), array buffers ${mib(heap.arrayBuffers)}, external ${mib(heap.external)}`
const describeSearch = (memory: unknown) => {
  const heap = memory as
    | { heapUsedBytes: number; heapTotalBytes: number; arrayBuffersBytes: number; externalBytes: number }
    | undefined
  return heap === undefined
    ? "n/a"
    : `heap ${mib(heap.heapUsedBytes)} used / ${mib(heap.heapTotalBytes)} committed, array buffers ${mib(heap.arrayBuffersBytes)}, external ${mib(heap.externalBytes)}`
}

const main = async () => {
  const entityCount = Number(process.argv[2] ?? 10_000)
  const workload = makeWorkload(entityCount, entityCount / 10)
  const dataDir = mkdtempSync(join(process.env.MNEMOS_BENCH_DIR ?? tmpdir(), "mnemos-graph-peak-"))
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [
      ...(process.env.MNEMOS_PEAK_NODE_FLAGS?.split(" ") ?? []),
      "--import",
      mainHeapProbe,
      cli,
      "serve",
      "--stdio",
      "--data-dir",
      dataDir,
    ],
    cwd: repoRoot,
    env: process.env as Record<string, string>,
    stderr: "pipe",
  })
  let mainHeap: MainHeap | undefined
  let phase = "start"
  let calls = 0
  let lastSearchMemory: unknown
  let thread = "not started"
  let pending = ""
  const started = performance.now()
  transport.stderr?.on("data", (chunk: Buffer | string) => {
    pending += chunk.toString()
    const lines = pending.split("\n")
    pending = lines.pop()!
    for (const line of lines) {
      if (!line.startsWith("main-heap ")) continue
      const next = JSON.parse(line.slice("main-heap ".length)) as MainHeap
      if (next.young !== mainHeap?.young)
        console.log(
          `  main thread's young generation ${mib(next.young)} MiB at ${((performance.now() - started) / 1000).toFixed(1)} s, ${phase} call ${calls}; search ${thread}`,
        )
      mainHeap = next
    }
  })
  const client = new Client({ name: "graph-peak", version: "0" })
  await client.connect(transport)
  const pid = transport.pid!
  let peak = {
    rss: 0,
    at: 0,
    phase,
    calls,
    anon: 0,
    file: 0,
    main: undefined as MainHeap | undefined,
    search: "" as unknown,
    thread,
  }
  let smapsAtPeak: Record<string, number> = {}
  let smapsRss = 0
  /** The largest each mapping group was in any of the smaps reads (every `smapsEverySamples` samples). */
  const groupMax: Record<string, { bytes: number; at: string }> = {}
  let samples = 0
  const sampler = setInterval(() => {
    const memory = memoryOf(pid)
    if (memory === undefined) return
    if (++samples % smapsEverySamples === 0)
      for (const [name, bytes] of Object.entries(smapsGroups(pid)))
        if (bytes > (groupMax[name]?.bytes ?? 0))
          groupMax[name] = {
            bytes,
            at: `${((performance.now() - started) / 1000).toFixed(1)} s, ${phase} call ${calls}`,
          }
    if (memory.rssBytes > peak.rss) {
      peak = {
        rss: memory.rssBytes,
        at: performance.now() - started,
        phase,
        calls,
        anon: memory.anonRssBytes,
        file: memory.fileRssBytes,
        main: mainHeap,
        search: lastSearchMemory,
        thread,
      }
      if (memory.rssBytes > smapsRss + smapsStepBytes) {
        smapsRss = memory.rssBytes
        smapsAtPeak = smapsGroups(pid)
      }
    }
  }, samplePeriodMs)
  const stats = async () => {
    const result = (await client.callTool({ name: "mem-stats", arguments: {} })) as {
      structuredContent?: { memory?: Record<string, unknown>; thread?: string; index?: { documents?: number } }
    }
    lastSearchMemory = result.structuredContent?.memory
    thread = `${result.structuredContent?.thread} (${result.structuredContent?.index?.documents} documents)`
  }
  const call = async (name: string, args: Record<string, unknown>) => {
    const result = await client.callTool({ name, arguments: args })
    if (result.isError === true) throw new Error(`${name} failed: ${JSON.stringify(result.content)}`)
    if (++calls % statsEveryCalls === 0 && statsEveryCalls > 0) await stats()
  }
  const report = () => {
    const memory = memoryOf(pid)!
    console.log(
      `${phase.padEnd(16)} ${((performance.now() - started) / 1000).toFixed(1)} s: rss ${mib(memory.rssBytes)} (anon ${mib(memory.anonRssBytes)}, files ${mib(memory.fileRssBytes)}), hwm ${mib(memory.peakRssBytes)}; search ${thread}: ${describeSearch(lastSearchMemory)}; main thread: ${describeMain(mainHeap)}`,
    )
  }
  const phaseStarted = performance.now()
  phase = "create_entities"
  for (let start = 0; start < workload.entities.length; start += batchSize)
    await call("create_entities", { entities: workload.entities.slice(start, start + batchSize) })
  await stats()
  report()
  phase = "create_relations"
  for (let start = 0; start < workload.relations.length; start += batchSize)
    await call("create_relations", { relations: workload.relations.slice(start, start + batchSize) })
  await stats()
  report()
  phase = "search_nodes"
  for (const query of workload.queries) await call("search_nodes", { query })
  await stats()
  report()
  phase = "open_nodes"
  for (const names of workload.opens) await call("open_nodes", { names })
  const workloadMs = performance.now() - phaseStarted
  await stats()
  report()
  clearInterval(sampler)
  const final = memoryOf(pid)!
  console.log(
    `\nworkload ${workloadMs.toFixed(0)} ms (probe's mem-stats calls included), VmHWM ${mib(final.peakRssBytes)} MiB, load average ${loadavg()
      .map((load) => load.toFixed(2))
      .join(" ")}, node ${process.version}`,
  )
  console.log(
    `highest sampled RSS ${mib(peak.rss)} MiB at ${(peak.at / 1000).toFixed(1)} s, ${peak.phase} call ${peak.calls}: anon ${mib(peak.anon)}, files ${mib(peak.file)}`,
  )
  console.log(`  search: ${peak.thread}, its last reported memory: ${describeSearch(peak.search)}`)
  console.log(`  main thread: ${describeMain(peak.main)}`)
  console.log(`  mappings at ${mib(smapsRss)} MiB RSS:`)
  for (const [name, bytes] of Object.entries(smapsAtPeak).sort((a, b) => b[1] - a[1]))
    if (bytes > 64 * 1024) console.log(`    ${name.padEnd(40)} ${mib(bytes)}`)
  console.log(`  each mapping group's largest, read every ${(samplePeriodMs * smapsEverySamples) / 1000} s:`)
  for (const [name, { bytes, at }] of Object.entries(groupMax).sort((a, b) => b[1].bytes - a[1].bytes))
    if (bytes > 64 * 1024) console.log(`    ${name.padEnd(40)} ${mib(bytes)} at ${at}`)
  if (process.env.MNEMOS_PEAK_SNAPSHOT === "1") {
    // With MNEMOS_PEAK_NODE_FLAGS=--heapsnapshot-signal=SIGUSR2: the main thread's heap, in the daemon's cwd.
    process.kill(pid, "SIGUSR2")
    await new Promise((resolve) => setTimeout(resolve, 20_000))
  }
  await client.close()
  rmSync(dataDir, { recursive: true, force: true })
}

await main()
