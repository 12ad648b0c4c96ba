/**
 * The cost of one graph call at the limits (issue 27): `delete_entities` and `merge_entities` of
 * N linked entities (4 relations each) in one call, through the graph store actor on an engine over
 * a temporary data directory, at N = 10,000 (the documented limit of items per call) and N/2, so
 * the ratio shows how the cost grows (2 is linear). Also the longest the event loop went without a
 * turn while the call ran and for 1.5 s after, while its commit, the search_nodes read model and
 * the search indexer catch up (a 5 ms probe timer): what /ping and every other store waited at worst.
 * And the CPU time the event loop's thread spent during the call (/proc, Linux): what the call costs,
 * apart from what the machine's other work took from it (the development machine is shared; the
 * call's time there has varied threefold on the same code).
 *
 * Target: the delete of 10,000 entities with 40,000 relations within 2 s on the development
 * machine (2 cores), and no event-loop stall of a second or more.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import { Router } from "../src/actors/Router.ts"
import * as Engine from "../src/Engine.ts"
import { countersOf } from "../src/graph/GraphQueries.ts"
import { GraphSearch } from "../src/graph/GraphSearch.ts"
import { graphStore } from "../src/graph/GraphStore.ts"
import { cpuMsOf } from "./ProcessStats.ts"
import { type BenchSuite, round } from "./Table.ts"

const relationsPerEntity = 4
const loadChunk = 1000
const probeIntervalMs = 5

type Operation = "delete_entities" | "merge_entities"

interface Measured {
  readonly operation: Operation
  readonly entities: number
  readonly relations: number
  readonly callMs: number
  /** CPU time of the event loop's thread during the call (10 ms ticks); undefined off Linux. */
  readonly mainThreadCpuMs: number | undefined
  /** The longest gap between two turns of the probe timer while the call ran (and its commit). */
  readonly stallMsMax: number
}

/** Measures one call of `operation` over `entityCount` linked entities on a fresh engine. */
const measure = (operation: Operation, entityCount: number) => {
  const dataDir = mkdtempSync(join(process.env.MNEMOS_BENCH_DIR ?? tmpdir(), "mnemos-bench-cascade-"))
  return Effect.gen(function* () {
    const store = (yield* Router).store(graphStore)
    const project = "default"
    const names = Array.from({ length: entityCount }, (_, index) => `entity-${index}`)
    for (let start = 0; start < entityCount; start += loadChunk) {
      const entities = names
        .slice(start, start + loadChunk)
        .map((name) => ({ name, entityType: "thing", observations: [`about ${name}`] }))
      yield* store.send({ _tag: "CreateEntities", project, entities })
    }
    const relations = Array.from({ length: entityCount * relationsPerEntity }, (_, index) => {
      // Round `round` of the entities' relations: a different target each round, so the
      // (from, to, type) triples are distinct (the same target every round made a quarter of them).
      const from = index % entityCount
      const round = Math.floor(index / entityCount)
      return {
        from: names[from]!,
        to: names[(from * 7919 + 13 + round * 2503) % entityCount]!,
        relationType: `kind-${index % relationsPerEntity}`,
      }
    })
    for (let start = 0; start < relations.length; start += loadChunk)
      yield* store.send({ _tag: "CreateRelations", project, relations: relations.slice(start, start + loadChunk) })
    const loaded = yield* store.read((view) => countersOf(view, project))
    if (loaded.entities !== entityCount || loaded.relations !== relations.length)
      return yield* Effect.die(
        new Error(
          `loaded ${loaded.entities} entities and ${loaded.relations} relations, not ${entityCount} and ${relations.length}`,
        ),
      )
    // search_nodes builds the project's read model, which the call then keeps current (as in use).
    yield* (yield* GraphSearch).searchNodes(project, "entity-1")
    // Let the loading's LMDB commits and indexing settle, so the call is measured alone.
    yield* Effect.sleep("2 seconds")
    let stallMsMax = 0
    let lastTurn = performance.now()
    const probe = setInterval(() => {
      const now = performance.now()
      stallMsMax = Math.max(stallMsMax, now - lastTurn)
      lastTurn = now
    }, probeIntervalMs)
    const mainThreadCpuBefore = cpuMsOf(process.pid, { mainThread: true })
    const started = performance.now()
    yield* operation === "delete_entities"
      ? store.send({ _tag: "DeleteEntities", project, entityNames: names })
      : store.send({ _tag: "MergeEntities", project, target: names[0]!, sources: names.slice(1) })
    const callMs = performance.now() - started
    const mainThreadCpuAfter = cpuMsOf(process.pid, { mainThread: true })
    const mainThreadCpuMs =
      mainThreadCpuBefore === undefined || mainThreadCpuAfter === undefined
        ? undefined
        : mainThreadCpuAfter - mainThreadCpuBefore
    const left = yield* store.read((view) => countersOf(view, project))
    const expected = operation === "delete_entities" ? 0 : 1
    if (left.entities !== expected)
      return yield* Effect.die(new Error(`${operation} left ${left.entities} entities, not ${expected}`))
    // The commit after the answer (LMDB, read model, search indexer) stalls too: watch it a while.
    yield* Effect.sleep("1500 millis")
    clearInterval(probe)
    return {
      operation,
      entities: entityCount,
      relations: relations.length,
      callMs,
      mainThreadCpuMs,
      stallMsMax,
    } satisfies Measured
  }).pipe(
    Effect.provide(Engine.layer({ dataDir, command: "mnemos bench graphCascade" })),
    Effect.ensuring(Effect.sync(() => rmSync(dataDir, { recursive: true, force: true }))),
  )
}

export const suite: BenchSuite = {
  title: "one graph call at the limits: delete_entities / merge_entities of N linked entities",
  run: async ({ quick }) => {
    const full = quick ? 2_000 : 10_000
    const runs: Array<Measured> = []
    for (const operation of ["delete_entities", "merge_entities"] as const)
      for (const entityCount of [full / 2, full]) runs.push(await Effect.runPromise(measure(operation, entityCount)))
    const ratio = (operation: Operation) => {
      const [half, whole] = runs.filter((run) => run.operation === operation)
      return whole!.callMs / half!.callMs
    }
    const deleteFull = runs.find((run) => run.operation === "delete_entities" && run.entities === full)!
    return {
      tables: [
        {
          title: `one call, ${relationsPerEntity} relations per entity; stall = longest event-loop gap (${probeIntervalMs} ms probe) during the call and 1.5 s after`,
          header: ["operation", "entities", "relations", "call ms", "main-thread CPU ms", "stall ms max"],
          rows: runs.map((run) => [
            run.operation,
            run.entities,
            run.relations,
            round(run.callMs, 0),
            run.mainThreadCpuMs === undefined ? "n/a" : round(run.mainThreadCpuMs, 0),
            round(run.stallMsMax, 0),
          ]),
        },
      ],
      notes: [
        `growth from ${full / 2} to ${full} entities (2 is linear): delete ${round(ratio("delete_entities"), 2)}, merge ${round(ratio("merge_entities"), 2)}`,
        `target delete of 10,000 entities / 40,000 relations <= 2000 ms: ${round(deleteFull.callMs, 0)} ms${quick ? " (quick run: the target applies to the full run)" : deleteFull.callMs <= 2000 ? " (met)" : " (NOT met)"}`,
        `longest stall: ${round(Math.max(...runs.map((run) => run.stallMsMax)), 0)} ms`,
      ],
      json: { relationsPerEntity, runs, growth: { delete: ratio("delete_entities"), merge: ratio("merge_entities") } },
    }
  },
}
