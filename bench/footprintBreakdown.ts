/**
 * Where an idle daemon's memory goes (issue 28): `node --import tsx bench/footprintBreakdown.ts
 * <entities> [<work dir>]`. Not a suite of `npm run bench`: a probe to run by hand, before and after
 * a change, on the built CLI (`MNEMOS_BENCH_CLI` for another build's).
 *
 * The graph is the issue's: N entities with 2 observations each and N relations, written as the
 * official server's `memory.jsonl` and imported (`import --format official-jsonl`); a first daemon
 * warms search and is stopped (search's index persisted), then the measured one starts, warms, is
 * asked 20 omni searches (`/api/search`) and idles `idleSettleMs`. Printed: RSS (anonymous, mapped
 * files) from /proc, the CPU it spends idle over the next `idleCpuMs` (every thread, per minute), the mappings grouped (V8 heaps and other anonymous memory, LMDB files, node),
 * and the search thread's own heap as health reports it; the official server on the same file
 * (RSS and idle CPU the same way, after its 20 searches).
 * Then the start: spawn of `serve --stdio` to the first answered `open_nodes`, and of the official
 * server to its first answered `open_nodes`, alternating (median of 3 each). Also printed: the
 * daemon's main-thread heap (`/api/stats` `mainThread`) and where search runs (`omniSearch.thread`).
 * The work dir is kept (reused by the next run with the same N).
 */
import { spawn } from "node:child_process"
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { allocatorEnv, withAllocatorEnv, withHelperThreads } from "../src/runtime/AllocatorEnv.ts"
import { officialServerPath, repoRoot } from "../test/support/mcpClient.ts"
import { cpuMsOf, freePort, memoryOf, runNode, waitForPing } from "./ProcessStats.ts"
import { seededRandom } from "./Random.ts"
import { sentenceMaker, vocabulary } from "./search.ts"

const cli = process.env.MNEMOS_BENCH_CLI ?? join(repoRoot, "dist", "cli.js")
/**
 * The measured daemon's environment: with glibc's allocator settings, as the shim starts a daemon
 * (src/runtime/AllocatorEnv.ts), unless MNEMOS_BENCH_PLAIN_ALLOCATOR=1 (as `serve` run by hand).
 * The official server never gets them.
 */
const plainAllocator = process.env.MNEMOS_BENCH_PLAIN_ALLOCATOR === "1"
const plainEnv = Object.fromEntries(Object.entries(process.env).filter(([name]) => !(name in allocatorEnv))) as Record<
  string,
  string
>
const daemonEnv = plainAllocator ? plainEnv : (withAllocatorEnv(plainEnv) as Record<string, string>)
/** And its V8 helper threads, as the shim gives them (`withHelperThreads`). */
const daemonFlags = plainAllocator ? [] : withHelperThreads([], process.env.NODE_OPTIONS)
const idleSettleMs = 5_000
/** The window over which idle CPU is measured, after the memory sample. */
const idleCpuMs = 15_000
const searches = 20

/** CPU ms per minute that `pid` spends over the next `idleCpuMs` (every thread). */
const idleCpuPerMinute = async (pid: number) => {
  const before = cpuMsOf(pid)!
  await sleep(idleCpuMs)
  return ((cpuMsOf(pid)! - before) * 60_000) / idleCpuMs
}
const mib = (bytes: number) => (bytes / 1024 / 1024).toFixed(1)
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** The issue's graph: `entities` entities of 2 observations and as many relations, as memory.jsonl. */
const writeGraph = (file: string, entities: number) => {
  const random = seededRandom(28)
  const words = vocabulary()
  const sentence = sentenceMaker(words, random)
  const types = ["person", "project", "service", "library", "decision", "bug", "meeting", "concept"]
  const names = Array.from({ length: entities }, (_, index) => `${words[index % words.length]}-${index}`)
  const lines: Array<string> = []
  for (const name of names)
    lines.push(
      JSON.stringify({
        type: "entity",
        name,
        entityType: types[Math.floor(random() * types.length)],
        observations: [sentence(6 + Math.floor(random() * 20)), sentence(6 + Math.floor(random() * 20))],
      }),
    )
  for (const [index, from] of names.entries())
    lines.push(
      JSON.stringify({ type: "relation", from, to: names[(index * 7919 + 13) % entities], relationType: "uses" }),
    )
  writeFileSync(file, `${lines.join("\n")}\n`)
}

const api = async (port: number, dataDir: string, path: string) => {
  const token = readFileSync(join(dataDir, "token"), "utf8").trim()
  const response = await fetch(`http://127.0.0.1:${port}${path}`, { headers: { authorization: `Bearer ${token}` } })
  return response.json() as Promise<Record<string, unknown>>
}

/** Resident bytes of `pid`'s mappings, grouped by what they are. */
const mappingsOf = (pid: number) => {
  const groups = new Map<string, number>()
  let name = ""
  for (const line of readFileSync(`/proc/${pid}/smaps`, "utf8").split("\n")) {
    const header = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line)
    if (header !== null) {
      const path = header[1]!
      name =
        path === ""
          ? "anonymous"
          : path.includes("/search/lmdb")
            ? "search LMDB"
            : path.includes("/stores/") || path.endsWith("data.mdb")
              ? "stores' LMDB"
              : path.endsWith("/node") || path.includes("bin/node")
                ? "node binary"
                : path.startsWith("[")
                  ? path
                  : path.endsWith(".node")
                    ? "native addons"
                    : "other files"
      continue
    }
    const rss = /^Rss:\s+(\d+) kB$/.exec(line)
    if (rss !== null) groups.set(name, (groups.get(name) ?? 0) + Number(rss[1]) * 1024)
  }
  return [...groups].sort((a, b) => b[1] - a[1])
}

const serve = async (dataDir: string, measure: boolean) => {
  const port = await freePort()
  const child = spawn(process.execPath, [...daemonFlags, cli, "serve", "--data-dir", dataDir, "--port", String(port)], {
    stdio: ["ignore", "ignore", "inherit"],
    env: daemonEnv,
  })
  try {
    const started = performance.now()
    await waitForPing(port, 120_000)
    for (;;) {
      const stats = await api(port, dataDir, "/api/stats").catch(() => undefined)
      if ((stats?.omniSearch as { state?: string } | undefined)?.state === "warm") break
      await sleep(200)
    }
    const warmMs = performance.now() - started
    if (!measure) return
    const random = seededRandom(7)
    const words = vocabulary().slice(0, 2000)
    for (let i = 0; i < searches; i++) {
      const q = `${words[Math.floor(random() * words.length)]} ${words[Math.floor(random() * words.length)]}`
      await api(port, dataDir, `/api/search?q=${encodeURIComponent(q)}&limit=10`)
    }
    await sleep(idleSettleMs)
    const memory = memoryOf(child.pid!)!
    const idleCpu = await idleCpuPerMinute(child.pid!)
    const memoryLater = memoryOf(child.pid!)!
    const stats = await api(port, dataDir, "/api/stats")
    const search = stats.omniSearch as Record<string, unknown>
    return {
      warmMs,
      memory,
      idleCpu,
      memoryLater,
      mappings: mappingsOf(child.pid!),
      placement: search.thread,
      thread: search.memory,
      mainThread: stats.mainThread,
      index: search.index,
    }
  } finally {
    child.kill("SIGTERM")
    await new Promise((resolve) => child.once("exit", resolve))
  }
}

const official = async (file: string) => {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [officialServerPath],
    env: { ...plainEnv, MEMORY_FILE_PATH: file },
    stderr: "ignore",
  })
  const client = new Client({ name: "footprint-breakdown", version: "0" })
  await client.connect(transport)
  try {
    for (let i = 0; i < searches; i++) await client.callTool({ name: "search_nodes", arguments: { query: `word${i}` } })
    await sleep(idleSettleMs)
    const memory = memoryOf(transport.pid!)!
    const idleCpu = await idleCpuPerMinute(transport.pid!)
    return { memory, idleCpu, memoryLater: memoryOf(transport.pid!)! }
  } finally {
    await client.close()
  }
}

/** Spawn of `serve --stdio` (or of the official server on `file`) to the first answered `open_nodes` of `name`, ms. */
const startOnce = async (dataDir: string, name: string, officialFile?: string) => {
  const started = performance.now()
  const transport = new StdioClientTransport(
    officialFile === undefined
      ? { command: process.execPath, args: [cli, "serve", "--stdio", "--data-dir", dataDir], stderr: "ignore" }
      : {
          command: process.execPath,
          args: [officialServerPath],
          env: { ...plainEnv, MEMORY_FILE_PATH: officialFile },
          stderr: "ignore",
        },
  )
  const client = new Client({ name: "footprint-breakdown", version: "0" })
  await client.connect(transport)
  try {
    const result = await client.callTool({ name: "open_nodes", arguments: { names: [name] } })
    if (result.isError === true) throw new Error(`open_nodes failed: ${JSON.stringify(result.content)}`)
    return performance.now() - started
  } finally {
    await client.close()
  }
}

const entities = Number(process.argv[2] ?? 20_000)
const work = process.argv[3] ?? join(process.env.MNEMOS_BENCH_DIR ?? tmpdir(), `mnemos-footprint-${entities}`)
const file = join(work, "memory.jsonl")
const dataDir = join(work, "data")
if (!existsSync(dataDir)) {
  mkdirSync(work, { recursive: true })
  writeGraph(file, entities)
  const imported = await runNode([cli, "import", file, "--format", "official-jsonl", "--data-dir", dataDir])
  console.log(`imported ${entities} entities in ${(imported.ms / 1000).toFixed(1)} s`)
  await serve(dataDir, false)
  console.log("search warmed once and persisted")
}
const run = (await serve(dataDir, true))!
const officialRun = await official(file)
const graphText = readFileSync(file, "utf8")
const firstName = (JSON.parse(graphText.slice(0, graphText.indexOf("\n"))) as { name: string }).name
const starts: Array<number> = []
const officialStarts: Array<number> = []
for (let i = 0; i < 3; i++) {
  starts.push(await startOnce(dataDir, firstName))
  officialStarts.push(await startOnce(dataDir, firstName, file))
}
const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[1]!.toFixed(0)
console.log(
  `cli ${cli}; ${entities} entities; load average ${loadavg()
    .map((v) => v.toFixed(2))
    .join(
      " ",
    )}; the daemon's allocator: ${plainAllocator ? "glibc's defaults (MNEMOS_BENCH_PLAIN_ALLOCATOR=1)" : `as the shim starts it (src/runtime/AllocatorEnv.ts)${daemonFlags.length > 0 ? `, ${daemonFlags.join(" ")}` : ""}`}`,
)
console.log(
  `mnemos idle RSS ${mib(run.memory.rssBytes)} MiB (anonymous ${mib(run.memory.anonRssBytes)}, files ${mib(run.memory.fileRssBytes)}), peak ${mib(run.memory.peakRssBytes)}, warm in ${run.warmMs.toFixed(0)} ms`,
)
console.log(`official idle RSS ${mib(officialRun.memory.rssBytes)} MiB`)
console.log(
  `idle RSS ${(idleSettleMs + idleCpuMs) / 1000} s after the searches: mnemos ${mib(run.memoryLater.rssBytes)} MiB, official ${mib(officialRun.memoryLater.rssBytes)} MiB`,
)
console.log(
  `idle CPU, ms a minute (every thread, ${idleCpuMs / 1000} s after the memory sample): mnemos ${run.idleCpu.toFixed(0)}, official ${officialRun.idleCpu.toFixed(0)}`,
)
console.log(
  `start (serve --stdio to the first open_nodes): median ${median(starts)} ms (${starts.map((ms) => ms.toFixed(0)).join(" / ")}); official ${median(officialStarts)} ms (${officialStarts.map((ms) => ms.toFixed(0)).join(" / ")})`,
)
for (const [name, bytes] of run.mappings) console.log(`  ${name.padEnd(24)} ${mib(bytes).padStart(8)} MiB`)
console.log(`search runs on: ${String(run.placement)}`)
console.log(`search's thread heap: ${JSON.stringify(run.thread)}`)
console.log(`main thread heap: ${JSON.stringify(run.mainThread)}`)
console.log(`index: ${JSON.stringify(run.index)}`)
