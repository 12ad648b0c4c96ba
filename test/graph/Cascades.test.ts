/**
 * delete_entities and merge_entities over more names than one event carries
 * (`cascadeNamesPerEventMax`) give exactly the graph a single pass would: the delete equals the
 * official semantics on the graph read before it; the merge equals merging the sources one call at
 * a time, in order (observations, rewired relations and their creation order included).
 */
import { afterAll, assert, describe, it } from "vitest"
import { cascadeNamesPerEventMax } from "../../src/graph/GraphStore.ts"
import { deleteEntities } from "../../src/graph/OfficialSemantics.ts"
import { openEngine, removeTempDirs, type TestEngine } from "../engineering/harness.ts"

afterAll(removeTempDirs)

const entityCount = cascadeNamesPerEventMax * 3 + 17
const names = Array.from({ length: entityCount }, (_, index) => `entity-${index}`)

/** A graph with shared observations, self-loops and relations among the names about to go. */
const load = async (engine: TestEngine) => {
  await engine.ok("create_entities", {
    entities: names.map((name, index) => ({
      name,
      entityType: "thing",
      observations: [`about ${name}`, `group ${index % 7}`],
    })),
  })
  const relations = names.flatMap((name, index) => [
    { from: name, to: names[(index * 31 + 5) % entityCount]!, relationType: "links" },
    { from: names[(index * 17 + 3) % entityCount]!, to: name, relationType: "cites" },
    ...(index % 50 === 0 ? [{ from: name, to: name, relationType: "self" }] : []),
  ])
  await engine.ok("create_relations", { relations })
}

const readGraph = async (engine: TestEngine) => (await engine.ok("read_graph", {})).structured

describe("cascades split into events", () => {
  it("delete_entities of many names equals the official semantics", async () => {
    const engine = await openEngine()
    try {
      await load(engine)
      const before = await readGraph(engine)
      const doomed = names.filter((_, index) => index % 5 !== 0)
      await engine.ok("delete_entities", { entityNames: doomed })
      assert.deepStrictEqual(await readGraph(engine), deleteEntities(before, doomed))
    } finally {
      await engine.close()
    }
  }, 120_000)

  it("merge_entities of many sources equals merging them one call at a time", async () => {
    const together = await openEngine()
    const oneByOne = await openEngine()
    try {
      await load(together)
      await load(oneByOne)
      const [target, ...sources] = names
      const report = (await together.ok("merge_entities", { target, sources })).structured
      assert.strictEqual(report.merged.length, sources.length)
      for (const source of sources) await oneByOne.ok("merge_entities", { target, sources: [source] })
      assert.deepStrictEqual(await readGraph(together), await readGraph(oneByOne))
    } finally {
      await together.close()
      await oneByOne.close()
    }
  }, 300_000)
})
