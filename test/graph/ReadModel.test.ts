/**
 * search_nodes through the in-memory read model (GraphSearch) equals a scan of the store after
 * any sequence of graph commands — creates, observations, relations, deletes and merges — because
 * the model re-reads exactly what each committed event touched. And read_graph_summary counts and
 * names what read_graph holds (each kind read in one scan, the names from the creation order).
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Fiber } from "effect"
import fc from "fast-check"
import { afterAll, describe, expect, it } from "vitest"
import { Router } from "../../src/actors/Router.ts"
import * as Engine from "../../src/Engine.ts"
import { readGraph, searchNodesByScan } from "../../src/graph/GraphQueries.ts"
import { graphSummary } from "../../src/graph/GraphReads.ts"
import { GraphSearch, type GraphSearchOptions } from "../../src/graph/GraphSearch.ts"
import { type GraphCommand, graphStore } from "../../src/graph/GraphStore.ts"

const dirs: Array<string> = []
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

const project = "p"
const name = fc.constantFrom("alpha", "Beta", "gamma ray", "delta", "Épsilon", "zeta-7")
const word = fc.constantFrom("red", "RED", "blue", "green ale", "ß", "İstanbul", "x")
const command: fc.Arbitrary<GraphCommand> = fc.oneof(
  fc.record({
    _tag: fc.constant("CreateEntities" as const),
    project: fc.constant(project),
    entities: fc.array(fc.record({ name, entityType: word, observations: fc.array(word, { maxLength: 3 }) }), {
      minLength: 1,
      maxLength: 3,
    }),
  }),
  fc.record({
    _tag: fc.constant("CreateRelations" as const),
    project: fc.constant(project),
    relations: fc.array(fc.record({ from: name, to: name, relationType: word }), { minLength: 1, maxLength: 3 }),
  }),
  fc.record({
    _tag: fc.constant("AddObservations" as const),
    project: fc.constant(project),
    observations: fc.array(fc.record({ entityName: name, contents: fc.array(word, { maxLength: 2 }) }), {
      minLength: 1,
      maxLength: 2,
    }),
  }),
  fc.record({
    _tag: fc.constant("DeleteEntities" as const),
    project: fc.constant(project),
    entityNames: fc.array(name, { maxLength: 2 }),
  }),
  fc.record({
    _tag: fc.constant("DeleteObservations" as const),
    project: fc.constant(project),
    deletions: fc.array(fc.record({ entityName: name, observations: fc.array(word, { maxLength: 2 }) }), {
      maxLength: 2,
    }),
  }),
  fc.record({
    _tag: fc.constant("DeleteRelations" as const),
    project: fc.constant(project),
    relations: fc.array(fc.record({ from: name, to: name, relationType: word }), { maxLength: 2 }),
  }),
  fc.record({
    _tag: fc.constant("MergeEntities" as const),
    project: fc.constant(project),
    target: name,
    sources: fc.array(name, { maxLength: 2 }),
  }),
)
const query = fc.oneof(word, name, fc.constantFrom("", "e", "A", "ray", "zz"))

/** Runs `body` on an engine over a fresh data directory, with search on the calling thread. */
const onEngine = (
  body: Effect.Effect<void, unknown, Router | GraphSearch>,
  graphSearch?: GraphSearchOptions,
): Promise<void> => {
  const dataDir = mkdtempSync(join(tmpdir(), "mnemos-readmodel-"))
  dirs.push(dataDir)
  return Effect.runPromise(
    body.pipe(
      Effect.provide(
        Engine.layer({
          dataDir,
          command: "test",
          search: { thread: false },
          ...(graphSearch !== undefined ? { graphSearch } : {}),
        }),
      ),
    ) as Effect.Effect<void, unknown>,
  )
}

/** Every query's search_nodes answer equals a scan of the store. */
const answersAsScan = (queries: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const store = (yield* Router).store(graphStore)
    const search = yield* GraphSearch
    for (const text of queries) {
      const fromModel = yield* search.searchNodes(project, text)
      const fromScan = yield* store.read((view) => searchNodesByScan(view, project, text))
      expect(fromModel).toEqual(fromScan)
    }
  })

describe("the graph read model", () => {
  it("built a slice at a time while commands commit, answers as a scan once built", async () => {
    // One entity or relation a slice (`buildSliceMs: 0`): the commands sent meanwhile commit
    // between slices, before and after the part of the store they touch has been read.
    await fc.assert(
      fc.asyncProperty(
        fc.array(command, { minLength: 1, maxLength: 25 }),
        fc.array(command, { minLength: 1, maxLength: 25 }),
        fc.array(query, { minLength: 1, maxLength: 6 }),
        (before, during, queries) =>
          onEngine(
            Effect.gen(function* () {
              const store = (yield* Router).store(graphStore)
              const search = yield* GraphSearch
              for (const next of before) yield* Effect.exit(store.send(next))
              const building = yield* Effect.forkChild(search.searchNodes(project, ""))
              for (const next of during) yield* Effect.exit(store.send(next))
              yield* Fiber.join(building)
              yield* answersAsScan(queries)
            }),
            { buildSliceMs: 0 },
          ),
      ),
      { numRuns: 25 },
    )
  })

  it("answers search_nodes exactly as a scan of the store, after any command sequence", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(command, { minLength: 1, maxLength: 25 }),
        fc.array(query, { minLength: 1, maxLength: 6 }),
        (commands, queries) =>
          onEngine(
            Effect.gen(function* () {
              const store = (yield* Router).store(graphStore)
              const search = yield* GraphSearch
              yield* search.searchNodes(project, "") // build the model first, then keep it current from events
              for (const next of commands) yield* Effect.exit(store.send(next))
              yield* answersAsScan(queries)
            }),
          ),
      ),
      {
        numRuns: 25,
        examples: [
          // Entities created, a relation from one to a name that is no entity, then a merge that
          // rewires it onto the other — all in one drain: the model once kept the relation away.
          [
            [
              {
                _tag: "CreateEntities",
                project,
                entities: [
                  { name: "Épsilon", entityType: "red", observations: [] },
                  { name: "alpha", entityType: "red", observations: [] },
                ],
              },
              {
                _tag: "CreateRelations",
                project,
                relations: [{ from: "Épsilon", to: "zeta-7", relationType: "red" }],
              },
              { _tag: "MergeEntities", project, target: "alpha", sources: ["Épsilon"] },
            ],
            ["alpha"],
          ],
        ],
      },
    )
  })
})

describe("read_graph_summary", () => {
  it("counts and names what read_graph holds, in its order, after any command sequence", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(command, { minLength: 1, maxLength: 25 }),
        fc.integer({ min: 0, max: 7 }),
        (commands, namesLimit) =>
          onEngine(
            Effect.gen(function* () {
              const store = (yield* Router).store(graphStore)
              for (const next of commands) yield* Effect.exit(store.send(next))
              const [summary, graph] = yield* store.read(
                (view) => [graphSummary(view, project, namesLimit), readGraph(view, project)] as const,
              )
              const tally = (kinds: ReadonlyArray<string>) => {
                const counts: Record<string, number> = {}
                for (const kind of kinds) counts[kind] = (counts[kind] ?? 0) + 1
                return counts
              }
              expect(summary).toEqual({
                project,
                entityCount: graph.entities.length,
                relationCount: graph.relations.length,
                entityTypes: tally(graph.entities.map((entity) => entity.entityType)),
                relationTypes: tally(graph.relations.map((relation) => relation.relationType)),
                names: graph.entities.slice(0, namesLimit).map((entity) => entity.name),
                namesTruncated: graph.entities.length > namesLimit,
              })
            }),
          ),
      ),
      { numRuns: 40 },
    )
  })
})
