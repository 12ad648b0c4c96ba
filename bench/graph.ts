/**
 * The knowledge-graph benchmark: the same MCP workload, over stdio through the SDK client, for
 * the official memory server and for mnemos, side by side in one run.
 *
 *   N entities x 3 observations, created in batches of 10   (N = 10,000; 1,000 with --quick)
 *   N/2 relations, in batches of 10
 *   1,000 search_nodes (100 quick), 1,000 open_nodes of 5 names (100 quick)
 *
 * Calls are sequential on one connection (the official server loses writes under concurrent
 * calls: each one loads and rewrites its whole file). Prints the time of each phase for both,
 * the ratio mnemos/official per phase and in total (target: total <= 0.05 at 10k), the latency
 * percentiles of the sequential create_entities calls (target: p50 <= 1 ms, p99 <= 5 ms), and the peak
 * RSS (VmHWM) of each server process. Both servers' answers are checked to agree (entity and
 * relation counts, total matches of the searches and opens). mnemos runs as users run it, the
 * built CLI (dist/cli.js: `npm run build` first; from source, tsx and the unbundled modules add
 * about 100 MiB to each of its threads).
 *
 * Then, in-process, search_nodes latency at 100k entities / 300k observations (20k quick): the
 * substring index alone (bench/searchNodes.ts), and end to end through `GraphSearch.searchNodes`
 * on an engine on a temporary data directory (LMDB reads and result assembly included).
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import { Router } from "../src/actors/Router.ts"
import * as Engine from "../src/Engine.ts"
import { GraphSearch } from "../src/graph/GraphSearch.ts"
import { graphStore } from "../src/graph/GraphStore.ts"
import {
  builtCli,
  callOk,
  cleanup,
  type McpServerProcess,
  peakRssBytes,
  type ServerKind,
  startMnemos,
  startOfficial,
  stop,
} from "../test/support/mcpClient.ts"
import { seededRandom } from "./Random.ts"
import { benchmarkSearchNodes } from "./searchNodes.ts"
import { type BenchSuite, quantile, round } from "./Table.ts"

const batchSize = 10
const observationsPerEntity = 3
const namesPerOpen = 5

interface Entity {
  readonly name: string
  readonly entityType: string
  readonly observations: ReadonlyArray<string>
}
interface Relation {
  readonly from: string
  readonly to: string
  readonly relationType: string
}

/** A deterministic corpus and query set. */
export const makeWorkload = (entityCount: number, queryCount: number, seed = 7) => {
  const random = seededRandom(seed)
  const pick = <A>(items: ReadonlyArray<A>): A => items[Math.floor(random() * items.length)]!
  const letters = "etaoinshrdlucmfwypvbgkjqxz"
  const vocabulary = Array.from({ length: 5000 }, () => {
    let word = ""
    const length = 4 + Math.floor(random() * 6)
    for (let index = 0; index < length; index++) word += letters[Math.floor(random() * random() * letters.length)]
    return word
  })
  const types = ["person", "project", "service", "library", "decision", "bug", "meeting", "concept"]
  const relationTypes = ["depends_on", "owns", "mentions", "works_with"]
  const sentence = () => Array.from({ length: 5 + Math.floor(random() * 6) }, () => pick(vocabulary)).join(" ")
  const entities: Array<Entity> = Array.from({ length: entityCount }, (_, index) => ({
    name: `${pick(vocabulary)}-${index}`,
    entityType: pick(types),
    observations: Array.from({ length: observationsPerEntity }, sentence),
  }))
  const relations: Array<Relation> = Array.from({ length: Math.floor(entityCount / 2) }, (_, index) => ({
    from: entities[index]!.name,
    to: entities[(index * 7919 + 13) % entityCount]!.name,
    relationType: pick(relationTypes),
  }))
  // An agent's mix: topical words, names, name fragments in another case, and misses.
  const query = (): string => {
    const kind = random()
    if (kind < 0.4) return pick(vocabulary)
    if (kind < 0.7) return pick(entities).name
    if (kind < 0.85) {
      const name = pick(entities).name
      const start = Math.floor(random() * Math.max(1, name.length - 5))
      return name.slice(start, start + 4 + Math.floor(random() * 3)).toUpperCase()
    }
    return `zq${Math.floor(random() * 1e6)}x`
  }
  const queries = Array.from({ length: queryCount }, query)
  const opens = Array.from({ length: queryCount }, () =>
    Array.from({ length: namesPerOpen }, () =>
      random() < 0.9 ? pick(entities).name : `missing-${Math.floor(random() * 1e6)}`,
    ),
  )
  return { entities, relations, queries, opens }
}

type Workload = ReturnType<typeof makeWorkload>

const phases = ["create_entities", "create_relations", "search_nodes", "open_nodes"] as const
type Phase = (typeof phases)[number]

interface ServerRun {
  readonly kind: ServerKind
  readonly ms: Record<Phase, number>
  readonly calls: Record<Phase, number>
  readonly peakRssBytes: number | undefined
  /** Latency of each sequential create_entities call (10 entities), sorted, ms. */
  readonly createLatenciesMs: ReadonlyArray<number>
  readonly entities: number
  readonly relations: number
  readonly searchMatches: number
  readonly openMatches: number
}

const countOf = (structured: unknown, key: "entities" | "relations") =>
  ((structured as Record<string, ReadonlyArray<unknown>> | undefined)?.[key] ?? []).length

const runWorkload = async (kind: ServerKind, workload: Workload): Promise<ServerRun> => {
  const server: McpServerProcess =
    kind === "mnemos" ? await startMnemos(undefined, [], { built: true }) : await startOfficial()
  const { client } = server
  const ms = {} as Record<Phase, number>
  const calls = {} as Record<Phase, number>
  const timed = async (phase: Phase, count: number, body: () => Promise<void>) => {
    const started = performance.now()
    await body()
    ms[phase] = performance.now() - started
    calls[phase] = count
  }
  const createLatenciesMs: Array<number> = []
  try {
    await timed("create_entities", Math.ceil(workload.entities.length / batchSize), async () => {
      for (let start = 0; start < workload.entities.length; start += batchSize) {
        const started = performance.now()
        await callOk(client, "create_entities", { entities: workload.entities.slice(start, start + batchSize) })
        createLatenciesMs.push(performance.now() - started)
      }
    })
    await timed("create_relations", Math.ceil(workload.relations.length / batchSize), async () => {
      for (let start = 0; start < workload.relations.length; start += batchSize)
        await callOk(client, "create_relations", { relations: workload.relations.slice(start, start + batchSize) })
    })
    let searchMatches = 0
    await timed("search_nodes", workload.queries.length, async () => {
      for (const query of workload.queries)
        searchMatches += countOf((await callOk(client, "search_nodes", { query })).structured, "entities")
    })
    let openMatches = 0
    await timed("open_nodes", workload.opens.length, async () => {
      for (const names of workload.opens)
        openMatches += countOf((await callOk(client, "open_nodes", { names })).structured, "entities")
    })
    const graph = (await callOk(client, "read_graph", {})).structured
    return {
      kind,
      ms,
      calls,
      peakRssBytes: peakRssBytes(server.pid),
      createLatenciesMs: createLatenciesMs.sort((a, b) => a - b),
      entities: countOf(graph, "entities"),
      relations: countOf(graph, "relations"),
      searchMatches,
      openMatches,
    }
  } finally {
    await stop(server)
  }
}

/** search_nodes end to end through GraphSearch on an engine over a temporary data directory. */
const engineSearch = (entityCount: number, queryCount: number) => {
  const dataDir = mkdtempSync(join(process.env.MNEMOS_BENCH_DIR ?? tmpdir(), "mnemos-bench-graph-"))
  const workload = makeWorkload(entityCount, queryCount, 11)
  return Effect.gen(function* () {
    const store = (yield* Router).store(graphStore)
    const search = yield* GraphSearch
    const loadStarted = performance.now()
    for (let start = 0; start < workload.entities.length; start += 1000)
      yield* store.send({
        _tag: "CreateEntities",
        project: "default",
        entities: workload.entities.slice(start, start + 1000),
      })
    for (let start = 0; start < workload.relations.length; start += 1000)
      yield* store.send({
        _tag: "CreateRelations",
        project: "default",
        relations: workload.relations.slice(start, start + 1000),
      })
    const loadMs = performance.now() - loadStarted
    const indexStarted = performance.now()
    yield* search.searchNodes("default", "warm-up builds the index")
    const indexMs = performance.now() - indexStarted
    for (const query of workload.queries.slice(0, 50)) yield* search.searchNodes("default", query)
    const durations: Array<number> = []
    let matches = 0
    for (const query of workload.queries) {
      const started = performance.now()
      const result = yield* search.searchNodes("default", query)
      durations.push(performance.now() - started)
      matches += result.entities.length
    }
    durations.sort((a, b) => a - b)
    return {
      entities: entityCount,
      observations: entityCount * observationsPerEntity,
      queries: queryCount,
      loadMs,
      indexMs,
      p50Ms: quantile(durations, 0.5),
      p99Ms: quantile(durations, 0.99),
      maxMs: durations[durations.length - 1]!,
      meanMatches: matches / queryCount,
    }
  }).pipe(
    Effect.provide(Engine.layer({ dataDir, command: "mnemos bench graph" })),
    Effect.ensuring(Effect.sync(() => rmSync(dataDir, { recursive: true, force: true }))),
  )
}

/** A run as the results file keeps it: the create_entities latencies as percentiles, not every call. */
const forJson = ({ createLatenciesMs, ...run }: ServerRun) => ({
  ...run,
  createLatencyMs: {
    p50: quantile(createLatenciesMs, 0.5),
    p90: quantile(createLatenciesMs, 0.9),
    p99: quantile(createLatenciesMs, 0.99),
    max: createLatenciesMs[createLatenciesMs.length - 1] ?? 0,
  },
})

const mib = (bytes: number | undefined) => (bytes === undefined ? "n/a" : round(bytes / 1024 / 1024, 1))

export const suite: BenchSuite = {
  title: "knowledge graph over MCP stdio: official server vs mnemos; in-process search_nodes at scale",
  run: async ({ quick }) => {
    if (!existsSync(builtCli)) throw new Error(`${builtCli} is missing: run npm run build first`)
    const entityCount = quick ? 1_000 : 10_000
    const queryCount = quick ? 100 : 1_000
    const workload = makeWorkload(entityCount, queryCount)
    let official: ServerRun
    let mnemos: ServerRun
    try {
      official = await runWorkload("official", workload)
      mnemos = await runWorkload("mnemos", workload)
    } finally {
      await cleanup()
    }
    const agreement = (["entities", "relations", "searchMatches", "openMatches"] as const).map(
      (key) => [key, official[key], mnemos[key]] as const,
    )
    const disagreements = agreement.filter(([, a, b]) => a !== b)
    const totalOfficial = phases.reduce((sum, phase) => sum + official.ms[phase], 0)
    const totalMnemos = phases.reduce((sum, phase) => sum + mnemos.ms[phase], 0)
    const totalRatio = totalMnemos / totalOfficial

    const searchScale = quick ? 20_000 : 100_000
    const indexOnly = benchmarkSearchNodes({ entities: searchScale, observationsPerEntity: 3, queries: 1000 })
    const endToEnd = await Effect.runPromise(engineSearch(searchScale, 1000))

    const perSecond = (calls: number, ms: number) => round((calls / ms) * 1000, 0)
    return {
      tables: [
        {
          title: `MCP over stdio, sequential calls: ${entityCount} entities x ${observationsPerEntity} observations, ${workload.relations.length} relations (batches of ${batchSize}), ${queryCount} search_nodes, ${queryCount} open_nodes`,
          header: [
            "phase",
            "calls",
            "official ms",
            "mnemos ms",
            "mnemos/official",
            "official calls/s",
            "mnemos calls/s",
          ],
          rows: [
            ...phases.map((phase) => [
              phase,
              official.calls[phase],
              round(official.ms[phase], 0),
              round(mnemos.ms[phase], 0),
              round(mnemos.ms[phase] / official.ms[phase], 3),
              perSecond(official.calls[phase], official.ms[phase]),
              perSecond(mnemos.calls[phase], mnemos.ms[phase]),
            ]),
            [
              "total",
              phases.reduce((sum, phase) => sum + official.calls[phase], 0),
              round(totalOfficial, 0),
              round(totalMnemos, 0),
              round(totalRatio, 3),
              "",
              "",
            ],
          ],
        },
        {
          title: `sequential create_entities of ${batchSize} entities, per call (every call of the phase above)`,
          header: ["server", "p50 ms", "p90 ms", "p99 ms", "max ms", "mean ms"],
          rows: [official, mnemos].map((run) => [
            run.kind,
            round(quantile(run.createLatenciesMs, 0.5), 2),
            round(quantile(run.createLatenciesMs, 0.9), 2),
            round(quantile(run.createLatenciesMs, 0.99), 2),
            round(run.createLatenciesMs[run.createLatenciesMs.length - 1] ?? 0, 2),
            round(run.createLatenciesMs.reduce((sum, ms) => sum + ms, 0) / run.createLatenciesMs.length, 2),
          ]),
        },
        {
          title: "server processes: peak RSS (VmHWM at the end of the workload) and final graph",
          header: ["server", "peak RSS MiB", "entities", "relations", "search matches", "open matches"],
          rows: [official, mnemos].map((run) => [
            run.kind,
            mib(run.peakRssBytes),
            run.entities,
            run.relations,
            run.searchMatches,
            run.openMatches,
          ]),
        },
        {
          title: `in-process search_nodes, ${searchScale} entities / ${searchScale * 3} observations, 1000 queries`,
          header: ["path", "load s", "index build s", "p50 ms", "p99 ms", "max ms", "mean matches"],
          rows: [
            [
              "SubstringIndex.search (bench/searchNodes.ts)",
              "",
              round(indexOnly.buildMs / 1000, 2),
              round(indexOnly.p50Ms, 3),
              round(indexOnly.p99Ms, 3),
              round(indexOnly.maxMs, 3),
              round(indexOnly.meanMatches, 1),
            ],
            [
              "GraphSearch.searchNodes (engine, LMDB)",
              round(endToEnd.loadMs / 1000, 2),
              round(endToEnd.indexMs / 1000, 2),
              round(endToEnd.p50Ms, 3),
              round(endToEnd.p99Ms, 3),
              round(endToEnd.maxMs, 3),
              round(endToEnd.meanMatches, 1),
            ],
          ],
        },
      ],
      notes: [
        `target total mnemos/official <= 0.05 at 10k entities: ${round(totalRatio, 3)}${quick ? " (quick run: the target applies to the full run)" : totalRatio <= 0.05 ? " (met)" : " (NOT met)"}`,
        `target sequential create_entities p50 <= 1 ms and p99 <= 5 ms: p50 ${round(quantile(mnemos.createLatenciesMs, 0.5), 2)} ms, p99 ${round(quantile(mnemos.createLatenciesMs, 0.99), 2)} ms`,
        disagreements.length === 0
          ? "both servers ended with the same graph size and the same search/open match counts"
          : `WARNING: the servers disagree: ${disagreements.map(([key, a, b]) => `${key} official ${a} vs mnemos ${b}`).join(", ")}`,
      ],
      json: {
        entities: entityCount,
        relations: workload.relations.length,
        queries: queryCount,
        official: forJson(official),
        mnemos: forJson(mnemos),
        totalRatio,
        searchAtScale: { indexOnly, endToEnd },
      },
    }
  },
}
