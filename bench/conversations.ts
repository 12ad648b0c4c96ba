/**
 * The conversations benchmark (`npm run bench -- conversations [--quick]`):
 *
 * - write_message throughput, durable (each call answers after its WAL fdatasync; 64 callers in
 *   flight share group commits), to N messages (100k; 5k quick), with per-call latency;
 * - search_messages p50/p99 at N messages (the tool's handler: index catch-up, ranking, reading
 *   and shaping the results), after the first search that builds the index (timed apart);
 * - `mnemos export` and `mnemos import` of the resulting N-record file as real CLI processes:
 *   records/s and peak RSS (VmHWM), beside the same CLI doing nothing (`--version`) as baseline.
 *
 * The corpus is deterministic (seeded PRNG): 1,000 sessions; messages of 8-80 words drawn by
 * Zipf's law from a 20k-word vocabulary with some Japanese; a few tags, kinds and importances.
 * Queries mix rare and common words, two-word queries, Japanese, misses and filtered searches.
 */
import { spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Exit, Layer, Schema, Scope } from "effect"
import * as Engine from "../src/Engine.ts"
import { conversationTools } from "../src/tools/ConversationTools.ts"
import type { ToolCaller } from "../src/tools/Tool.ts"
import { seededRandom, zipfSampler } from "./Random.ts"
import { type BenchSuite, quantile, round } from "./Table.ts"

const writersInFlight = 64
const sessions = 1_000
const vocabularyWords = 20_000
const caller: ToolCaller = { project: "default", client: "bench" }
const japanese = ["データベース", "設計", "決定", "会議", "移行", "性能", "障害", "検索"]

/** The deterministic corpus: messages by index, and queries. */
export const corpus = (seed: number) => {
  const random = seededRandom(seed)
  const pick = <A>(items: ReadonlyArray<A>): A => items[Math.floor(random() * items.length)]!
  const letters =
    "eeeeeeeeeeeetttttttttaaaaaaaaooooooooiiiiiiinnnnnnnsssssshhhhhhrrrrrrddddllllcccuuummmwwffggyyppbbvkjxqz"
  const vocabulary = Array.from({ length: vocabularyWords }, (_, index) =>
    index % 500 === 7
      ? pick(japanese)
      : Array.from({ length: 3 + Math.floor(random() * 8) }, () => letters[Math.floor(random() * letters.length)]).join(
          "",
        ),
  )
  const zipfWord = zipfSampler(vocabulary, random)
  const message = (index: number) => ({
    session_id: `session-${index % sessions}`,
    role: index % 2 === 0 ? "user" : "assistant",
    content: Array.from({ length: 8 + Math.floor(random() * 73) }, zipfWord).join(" "),
    metadata_json: JSON.stringify({
      tags: random() < 0.3 ? [pick(["project", "decision", "bug", "idea"])] : [],
      memory_kind: pick(["conversation", "conversation", "episode", "semantic", "procedure", "summary"]),
      importance: Math.floor(random() * 101),
      ...(random() < 0.1 ? { summary: Array.from({ length: 6 }, zipfWord).join(" ") } : {}),
    }),
  })
  const query = () => {
    const kind = random()
    if (kind < 0.3) return { query: pick(vocabulary) }
    if (kind < 0.5) return { query: zipfWord() }
    if (kind < 0.7) return { query: `${zipfWord()} ${pick(vocabulary)}` }
    if (kind < 0.8) return { query: pick(japanese) }
    if (kind < 0.9) return { query: zipfWord(), filters_json: '{"kinds":["semantic","procedure"]}', min_importance: 50 }
    return { query: `zq${Math.floor(random() * 1e6)}x` }
  }
  return { message, query }
}

const callTool = (name: string, args: unknown) => {
  const tool = conversationTools.find((candidate) => candidate.definition.name === name)!
  return tool.run(Schema.decodeUnknownSync(tool.args)(args) as never, caller)
}

/** Runs a CLI command as its own process; wall time and peak resident set size (VmHWM). */
const timeCli = (args: ReadonlyArray<string>) =>
  new Promise<{ ms: number; peakRssBytes: number; stdout: string }>((resolve, reject) => {
    const started = performance.now()
    const child = spawn(process.execPath, ["--import", "tsx", "src/cli.ts", ...args], {
      stdio: ["ignore", "pipe", "pipe"],
    })
    let stdout = ""
    let stderr = ""
    let peakRssBytes = 0
    child.stdout.on("data", (chunk) => {
      stdout += chunk
    })
    child.stderr.on("data", (chunk) => {
      stderr += chunk
    })
    const poll = setInterval(() => {
      try {
        const match = /^VmHWM:\s+(\d+)\s+kB$/m.exec(readFileSync(`/proc/${child.pid}/status`, "utf8"))
        if (match) peakRssBytes = Math.max(peakRssBytes, Number(match[1]) * 1024)
      } catch {
        // the process is gone
      }
    }, 10)
    child.on("exit", (code) => {
      clearInterval(poll)
      if (code !== 0) reject(new Error(`mnemos ${args.join(" ")} exited ${code}: ${stderr}`))
      else resolve({ ms: performance.now() - started, peakRssBytes, stdout })
    })
  })

const mib = (bytes: number) => round(bytes / 1024 / 1024, 1)

export const suite: BenchSuite = {
  title: "conversation memory: durable writes, search, import/export",
  run: async ({ quick }) => {
    const messages = quick ? 5_000 : 100_000
    const queries = quick ? 200 : 1_000
    const base = mkdtempSync(join(process.env.MNEMOS_BENCH_DIR ?? tmpdir(), "mnemos-bench-conv-"))
    const dataDir = join(base, "data")
    const { message, query } = corpus(42)

    const scope = Effect.runSync(Scope.make())
    const context = await Effect.runPromise(Layer.buildWithScope(Engine.layer({ dataDir, command: "bench" }), scope))
    const run = <A, E>(effect: Effect.Effect<A, E, never>) => Effect.runPromise(effect)
    const inEngine = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      run(Effect.provideContext(effect as Effect.Effect<A, E, never>, context as never))

    const inputs = Array.from({ length: messages }, (_, index) => message(index))
    const latencies: Array<number> = []
    let next = 0
    const writeStarted = performance.now()
    await inEngine(
      Effect.forEach(
        Array.from({ length: writersInFlight }),
        () =>
          Effect.gen(function* () {
            while (next < inputs.length) {
              const input = inputs[next++]!
              const before = performance.now()
              yield* callTool("write_message", input)
              latencies.push(performance.now() - before)
            }
          }),
        { concurrency: "unbounded", discard: true },
      ),
    )
    const writeMs = performance.now() - writeStarted
    latencies.sort((a, b) => a - b)

    const firstStarted = performance.now()
    await inEngine(callTool("search_messages", { query: "warmup" }))
    const indexBuildMs = performance.now() - firstStarted
    const searchLatencies: Array<number> = []
    let results = 0
    for (let index = 0; index < queries; index++) {
      const args = query()
      const before = performance.now()
      const output = await inEngine(callTool("search_messages", args))
      searchLatencies.push(performance.now() - before)
      results += (output.structured.results as Array<unknown>).length
    }
    searchLatencies.sort((a, b) => a - b)
    const health = (await inEngine(callTool("get_system_health", {}))).structured as {
      memory_estimate: { search_index_bytes: number }
      snapshot_size: number
    }
    await Effect.runPromise(Scope.close(scope, Exit.void))

    const file = join(base, "backup.jsonl")
    const baseline = await timeCli(["--version"])
    const exported = await timeCli(["export", "--out", file, "--data-dir", dataDir])
    const imported = await timeCli(["import", file, "--data-dir", join(base, "restored")])
    const fileBytes = statSync(file).size
    rmSync(base, { recursive: true, force: true })

    const perSecond = (count: number, ms: number) => Math.round((count / ms) * 1000)
    const writes = {
      messages,
      writersInFlight,
      perSecond: perSecond(messages, writeMs),
      p50Ms: round(quantile(latencies, 0.5)),
      p99Ms: round(quantile(latencies, 0.99)),
    }
    const search = {
      messages,
      queries,
      indexBuildMs: round(indexBuildMs, 1),
      p50Ms: round(quantile(searchLatencies, 0.5)),
      p99Ms: round(quantile(searchLatencies, 0.99)),
      meanResults: round(results / queries, 1),
      searchIndexBytes: health.memory_estimate.search_index_bytes,
    }
    const transfer = {
      records: messages,
      fileBytes,
      export: {
        ms: round(exported.ms, 0),
        recordsPerSecond: perSecond(messages, exported.ms),
        peakRssBytes: exported.peakRssBytes,
      },
      import: {
        ms: round(imported.ms, 0),
        recordsPerSecond: perSecond(messages, imported.ms),
        peakRssBytes: imported.peakRssBytes,
      },
      cliBaseline: { ms: round(baseline.ms, 0), peakRssBytes: baseline.peakRssBytes },
    }
    return {
      tables: [
        {
          title: `write_message, durable (${writersInFlight} callers in flight)`,
          header: ["messages", "writes/s", "p50 ms", "p99 ms"],
          rows: [[messages, writes.perSecond, writes.p50Ms, writes.p99Ms]],
        },
        {
          title: `search_messages at ${messages} messages (${queries} queries)`,
          header: ["index build ms", "p50 ms", "p99 ms", "mean results", "index MiB (est.)"],
          rows: [[search.indexBuildMs, search.p50Ms, search.p99Ms, search.meanResults, mib(search.searchIndexBytes)]],
        },
        {
          title: `mnemos export / import of a ${messages}-record file (${mib(fileBytes)} MiB), as CLI processes`,
          header: ["command", "seconds", "records/s", "peak RSS MiB"],
          rows: [
            ["export", round(exported.ms / 1000, 2), transfer.export.recordsPerSecond, mib(exported.peakRssBytes)],
            ["import", round(imported.ms / 1000, 2), transfer.import.recordsPerSecond, mib(imported.peakRssBytes)],
            ["--version (baseline)", round(baseline.ms / 1000, 2), "-", mib(baseline.peakRssBytes)],
          ],
        },
      ],
      notes: ["records/s include the CLI's start-up (see the baseline row); search latencies exclude MCP framing."],
      json: { writes, search, transfer },
    }
  },
}
