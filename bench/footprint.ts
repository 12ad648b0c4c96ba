/**
 * The footprint benchmark (`npm run bench -- footprint [--quick]`): what mnemos costs a laptop
 * that runs it all day, measured from outside on the built CLI (dist/cli.js), beside the official
 * memory server (@modelcontextprotocol/server-memory) where it has a counterpart and the bare
 * runtime (`node -e 0`) where it has none.
 *
 * - Idle RSS of `mnemos serve` on an empty data directory and on one of N records (100,000; 5,000
 *   quick; bench/footprintData.ts), once search is warm; the official server after one call on an
 *   empty memory file and on the same graph. Target: <= 120 MiB idle.
 * - Spawn to the first answered MCP call (`initialize`, then `open_nodes` of one name), directly
 *   (`serve --stdio`) and through the shim (`mcp`, which starts a daemon), on both directories;
 *   the official server on both files. The median of several starts, with the CPU time the
 *   server's processes had used by then. Target: <= 500 ms at 100,000 records.
 * - Peak RSS of `mnemos import` of the N-record data as a full archive (`export --all`), of its
 *   graph as official-jsonl, and of its messages as a conversations backup. Target: <= 400 MiB.
 *
 * Needs `npm run build` first (the suite says so when dist/ is missing).
 * `MNEMOS_BENCH_CLI=/path/to/dist/cli.js` measures another build (e.g. main's, before a change).
 */
import { spawn } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { readDaemonInfo } from "../src/transports/Daemon.ts"
import { officialServerPath, repoRoot } from "../test/support/mcpClient.ts"
import { footprintCorpus, generateDataDir, writeOfficialJsonl } from "./footprintData.ts"
import { cpuMsOf, freePort, memoryOf, runNode, waitForPing } from "./ProcessStats.ts"
import { type BenchSuite, round } from "./Table.ts"

/** The built CLI measured: this checkout's, or another build's (`MNEMOS_BENCH_CLI`, to compare two builds in one hour). */
const cli = process.env.MNEMOS_BENCH_CLI ?? join(repoRoot, "dist", "cli.js")
/** Idle means: warm, then this long without a request. */
const idleSettleMs = 3_000
/** Longest wait for a daemon's search to warm up. */
const warmTimeoutMs = 15 * 60_000
const startTimeoutMs = 120_000

const mib = (bytes: number | undefined) => (bytes === undefined ? "n/a" : round(bytes / 1024 / 1024, 1))
const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Waits until `pid` has exited (polling), SIGKILLing it after `timeoutMs`. */
const waitGone = async (pid: number, timeoutMs = 30_000) => {
  const deadline = performance.now() + timeoutMs
  while (memoryOf(pid) !== undefined) {
    if (performance.now() > deadline) process.kill(pid, "SIGKILL")
    await sleep(20)
  }
}

/** Stops the daemon of `dataDir` (SIGTERM) and waits until it has exited. */
const stopDaemonOf = async (dataDir: string) => {
  const info = readDaemonInfo(dataDir)
  if (info === undefined) return
  try {
    process.kill(info.pid, "SIGTERM")
  } catch {
    return
  }
  await waitGone(info.pid)
}

/** The omni-search state a daemon reports (`/api/stats`). */
const searchStateOf = async (port: number, dataDir: string): Promise<string | undefined> => {
  const token = readFileSync(join(dataDir, "token"), "utf8").trim()
  const response = await fetch(`http://127.0.0.1:${port}/api/stats`, {
    headers: { authorization: `Bearer ${token}` },
  }).catch(() => undefined)
  if (response === undefined || !response.ok) return undefined
  return ((await response.json()) as { omniSearch?: { state?: string } }).omniSearch?.state
}

interface IdleRun {
  readonly readyMs: number
  readonly warmMs: number
  readonly idleRssBytes: number
  readonly peakRssBytes: number
  /** Of the idle RSS: anonymous memory, and mapped files (node, LMDB pages: reclaimable). */
  readonly anonRssBytes: number
  readonly fileRssBytes: number
  /** CPU time of the process by the end of the idle wait. */
  readonly cpuMs: number
}

/** What process `pid` holds and has used now, after `readyMs` and `warmMs`. */
const idleRunOf = (pid: number, readyMs: number, warmMs: number): IdleRun => {
  const memory = memoryOf(pid)!
  return {
    readyMs,
    warmMs,
    idleRssBytes: memory.rssBytes,
    peakRssBytes: memory.peakRssBytes,
    anonRssBytes: memory.anonRssBytes,
    fileRssBytes: memory.fileRssBytes,
    cpuMs: cpuMsOf(pid) ?? 0,
  }
}

/** `mnemos serve` on `dataDir`: time to /ping and to warm search, then RSS after `idleSettleMs` idle. */
const idleDaemon = async (dataDir: string): Promise<IdleRun> => {
  const port = await freePort()
  const started = performance.now()
  const child = spawn(process.execPath, [cli, "serve", "--data-dir", dataDir, "--port", String(port)], {
    stdio: "ignore",
  })
  try {
    await waitForPing(port, startTimeoutMs)
    const readyMs = performance.now() - started
    while ((await searchStateOf(port, dataDir)) !== "warm") {
      if (performance.now() - started > warmTimeoutMs) throw new Error(`search did not warm up on ${dataDir}`)
      await sleep(100)
    }
    const warmMs = performance.now() - started
    await sleep(idleSettleMs)
    return idleRunOf(child.pid!, readyMs, warmMs)
  } finally {
    child.kill("SIGTERM")
    await waitGone(child.pid!)
  }
}

/** Connects an SDK client to `command args`; the transport's child pid once connected. */
const connectClient = async (args: ReadonlyArray<string>, env: Record<string, string> = {}) => {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [...args],
    cwd: repoRoot,
    env: { ...(process.env as Record<string, string>), ...env },
    stderr: "ignore",
  })
  const client = new Client({ name: "mnemos-bench-footprint", version: "0" })
  await client.connect(transport)
  return { client, pid: transport.pid! }
}

/** The official server on `memoryFile`, after one call that loads the file: RSS after `idleSettleMs`. */
const idleOfficial = async (memoryFile: string): Promise<IdleRun> => {
  const started = performance.now()
  const { client, pid } = await connectClient([officialServerPath], { MEMORY_FILE_PATH: memoryFile })
  try {
    const readyMs = performance.now() - started
    await client.callTool({ name: "search_nodes", arguments: { query: "no such entity" } })
    const warmMs = performance.now() - started
    await sleep(idleSettleMs)
    return idleRunOf(pid, readyMs, warmMs)
  } finally {
    await client.close()
  }
}

type StartMode = "direct" | "shim" | "official"

interface StartRun {
  readonly initializeMs: number
  readonly firstCallMs: number
  /** CPU time of the answering processes (shim and daemon, or the server) at the first answer. */
  readonly cpuMs: number
}

/** Spawn to the first answered `initialize` and `open_nodes` call, for one mode and location. */
const startOnce = async (mode: StartMode, location: string, name: string): Promise<StartRun> => {
  const port = await freePort()
  const args =
    mode === "direct"
      ? [cli, "serve", "--stdio", "--data-dir", location]
      : mode === "shim"
        ? [cli, "mcp", "--data-dir", location, "--port", String(port)]
        : [officialServerPath]
  const started = performance.now()
  const { client, pid } = await connectClient(args, mode === "official" ? { MEMORY_FILE_PATH: location } : {})
  try {
    const initializeMs = performance.now() - started
    const result = await client.callTool({ name: "open_nodes", arguments: { names: [name] } })
    const firstCallMs = performance.now() - started
    if (result.isError === true) throw new Error(`${mode}: open_nodes failed: ${JSON.stringify(result.content)}`)
    const daemon = mode === "shim" ? readDaemonInfo(location)?.pid : undefined
    const cpuMs = (cpuMsOf(pid) ?? 0) + (daemon === undefined ? 0 : (cpuMsOf(daemon) ?? 0))
    return { initializeMs, firstCallMs, cpuMs }
  } finally {
    await client.close()
    await waitGone(pid)
    if (mode === "shim") await stopDaemonOf(location)
  }
}

/** The median of `repeats` starts (each on the same location, stopped cleanly in between). */
const startMedian = async (mode: StartMode, location: string, name: string, repeats: number) => {
  const runs: Array<StartRun> = []
  for (let index = 0; index < repeats; index++) runs.push(await startOnce(mode, location, name))
  return {
    initializeMs: median(runs.map((run) => run.initializeMs)),
    firstCallMs: median(runs.map((run) => run.firstCallMs)),
    cpuMs: median(runs.map((run) => run.cpuMs)),
    runs,
  }
}

export const suite: BenchSuite = {
  title: "footprint: idle memory, start-up, import memory (built CLI, beside the official server)",
  run: async ({ quick }) => {
    if (!existsSync(cli)) throw new Error(`${cli} is missing: run npm run build first`)
    const records = quick ? 5_000 : 100_000
    const repeats = quick ? 1 : 3
    const base = mkdtempSync(join(process.env.MNEMOS_BENCH_DIR ?? tmpdir(), "mnemos-bench-footprint-"))
    try {
      const full = join(base, "full")
      const graphFile = join(base, "graph.jsonl")
      const emptyFile = join(base, "empty.jsonl")
      const corpus = footprintCorpus(records)
      writeOfficialJsonl(graphFile, corpus)
      const generateStarted = performance.now()
      await generateDataDir(full, corpus)
      const generateMs = performance.now() - generateStarted
      const name = corpus.entities[Math.floor(corpus.entities.length / 2)]!.name
      const emptyDir = () => mkdtempSync(join(base, "empty-"))

      const idle = {
        mnemosEmpty: await idleDaemon(emptyDir()),
        mnemosFull: await idleDaemon(full),
        officialEmpty: await idleOfficial(emptyFile),
        officialFull: await idleOfficial(graphFile),
      }

      const start = {
        directEmpty: await startMedian("direct", emptyDir(), "missing", repeats),
        directFull: await startMedian("direct", full, name, repeats),
        shimEmpty: await startMedian("shim", emptyDir(), "missing", repeats),
        shimFull: await startMedian("shim", full, name, repeats),
        officialEmpty: await startMedian("official", emptyFile, "missing", repeats),
        officialFull: await startMedian("official", graphFile, name, repeats),
      }

      const archive = join(base, "archive.jsonl")
      const conversations = join(base, "conversations.jsonl")
      await runNode([cli, "export", "--all", "--out", archive, "--data-dir", full])
      await runNode([cli, "export", "--out", conversations, "--data-dir", full])
      const into = () => {
        const dir = join(base, `import-${Math.random().toString(36).slice(2)}`)
        mkdirSync(dir)
        return dir
      }
      const imports = {
        archive: await runNode([cli, "import", archive, "--data-dir", into()]),
        officialJsonl: await runNode([cli, "import", graphFile, "--format", "official-jsonl", "--data-dir", into()]),
        conversations: await runNode([cli, "import", conversations, "--data-dir", into()]),
        version: await runNode([cli, "--version"]),
        bareNode: await runNode(["-e", "0"]),
      }

      const idleRow = (label: string, run: IdleRun) => [
        label,
        round(run.readyMs, 0),
        round(run.warmMs, 0),
        round(run.cpuMs, 0),
        mib(run.idleRssBytes),
        mib(run.anonRssBytes),
        mib(run.fileRssBytes),
        mib(run.peakRssBytes),
      ]
      const startRow = (label: string, run: Awaited<ReturnType<typeof startMedian>>) => [
        label,
        round(run.initializeMs, 0),
        round(run.firstCallMs, 0),
        round(run.cpuMs, 0),
        run.runs.map((one) => round(one.firstCallMs, 0)).join(" / "),
      ]
      const importRow = (label: string, run: (typeof imports)["archive"], count: number | string) => [
        label,
        count,
        round(run.ms / 1000, 2),
        round(run.cpuMs / 1000, 2),
        mib(run.peakRssBytes),
      ]
      const mix = corpus.mix
      const idleTarget = idle.mnemosEmpty.idleRssBytes <= 120 * 1024 * 1024
      const startTarget = start.directFull.firstCallMs <= 500 && start.shimFull.firstCallMs <= 500
      const importPeak = Math.max(imports.archive.peakRssBytes, imports.officialJsonl.peakRssBytes)
      return {
        tables: [
          {
            title: `idle daemon (\`serve\`, warm, then ${idleSettleMs / 1000} s without a request); the official server after one call`,
            header: [
              "server, data",
              "ready ms",
              "warm ms",
              "CPU ms",
              "idle RSS MiB",
              "anonymous MiB",
              "mapped files MiB",
              "peak RSS MiB",
            ],
            rows: [
              idleRow("mnemos, empty", idle.mnemosEmpty),
              idleRow(`mnemos, ${records} records`, idle.mnemosFull),
              idleRow("official, empty", idle.officialEmpty),
              idleRow(`official, ${mix.entities} entities`, idle.officialFull),
            ],
          },
          {
            title: `spawn to the first answered MCP call (median of ${repeats}): initialize, then open_nodes of one name`,
            header: ["mode, data", "initialize ms", "first call ms", "server CPU ms", "first call ms, each run"],
            rows: [
              startRow("serve --stdio, empty", start.directEmpty),
              startRow(`serve --stdio, ${records} records`, start.directFull),
              startRow("mcp (shim starts the daemon), empty", start.shimEmpty),
              startRow(`mcp (shim starts the daemon), ${records} records`, start.shimFull),
              startRow("official, empty", start.officialEmpty),
              startRow(`official, ${mix.entities} entities`, start.officialFull),
            ],
          },
          {
            title: `mnemos import into an empty data directory (${records} records generated in ${round(generateMs / 1000, 1)} s)`,
            header: ["what", "records", "seconds", "CPU s", "peak RSS MiB"],
            rows: [
              importRow("archive (export --all)", imports.archive, records),
              importRow("official-jsonl (the graph)", imports.officialJsonl, `${mix.entities} + ${mix.relations}`),
              importRow("conversations backup", imports.conversations, mix.messages),
              importRow("mnemos --version", imports.version, "-"),
              importRow("node -e 0 (the floor)", imports.bareNode, "-"),
            ],
          },
        ],
        notes: [
          `machine load average ${loadavg()
            .map((value) => value.toFixed(1))
            .join(" ")} at the end (2 cores shared: wall times wait for a core, CPU times do not)`,
          `target idle daemon <= 120 MiB: ${mib(idle.mnemosEmpty.idleRssBytes)} MiB empty${idleTarget ? " (met)" : " (NOT met)"}`,
          `idle daemon at ${records} records: ${mib(idle.mnemosFull.idleRssBytes)} MiB (${mib(idle.mnemosFull.anonRssBytes)} anonymous, ${mib(idle.mnemosFull.fileRssBytes)} mapped files), ${round(idle.mnemosFull.idleRssBytes / idle.officialFull.idleRssBytes, 1)}x the official server's ${mib(idle.officialFull.idleRssBytes)} MiB`,
          `target spawn to first answered call <= 500 ms at 100k records: direct ${round(start.directFull.firstCallMs, 0)} ms, shim ${round(start.shimFull.firstCallMs, 0)} ms${quick ? " (quick run: the target applies to the full run)" : startTarget ? " (met)" : " (NOT met)"}`,
          `target import peak RSS <= 400 MiB: ${mib(importPeak)} MiB${importPeak <= 400 * 1024 * 1024 ? " (met)" : " (NOT met)"}`,
        ],
        json: { records, mix, generateMs, idle, start, imports },
      }
    } finally {
      rmSync(base, { recursive: true, force: true })
    }
  },
}
