/**
 * The reference model against the official behaviour: hand-written cases for each rule read
 * from the official source, then a differential property test that runs random operation
 * sequences on the real official server (over MCP, via the SDK client) and on the model, and
 * requires the same answers — text content included — after every step.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { Result, Schema } from "effect"
import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  BoundedEntity,
  BoundedRelation,
  type Entity,
  entityNameBytesMax,
  type KnowledgeGraph,
  type ObservationAddition,
  type ObservationDeletion,
  observationsPerEntityMax,
  type Relation,
  SearchQuery,
  searchQueryBytesMax,
  toOfficialEntity,
  toStoredEntity,
  utf8ByteLength,
} from "../../src/graph/Model.ts"
import * as Official from "../../src/graph/OfficialSemantics.ts"
import { officialDeletionMessages } from "../../src/tools/officialToolDefinitions.ts"

const officialServerPath = join(
  import.meta.dirname,
  "..",
  "..",
  "node_modules",
  "@modelcontextprotocol",
  "server-memory",
  "dist",
  "index.js",
)

const entity = (name: string, entityType = "thing", observations: ReadonlyArray<string> = []): Entity => ({
  name,
  entityType,
  observations,
})
const relation = (from: string, to: string, relationType = "knows"): Relation => ({ from, to, relationType })
const graphOf = (entities: ReadonlyArray<Entity>, relations: ReadonlyArray<Relation> = []): KnowledgeGraph => ({
  entities,
  relations,
})

const succeeded = <A, E>(result: Result.Result<A, E>): A => {
  if (Result.isFailure(result)) throw new Error(`expected success, got ${String(result.failure)}`)
  return result.success
}

describe("createEntities", () => {
  it("skips names already in the graph and returns only the created entities", () => {
    const start = graphOf([entity("Ada", "person", ["old"])])
    const { graph, result } = Official.createEntities(start, [entity("Ada", "robot", ["new"]), entity("Bob")])
    expect(result).toEqual([entity("Bob")])
    expect(graph.entities).toEqual([entity("Ada", "person", ["old"]), entity("Bob")])
  })

  it("creates BOTH of two new entities with the same name in one call (the official filter looks only at the graph)", () => {
    const { graph, result } = Official.createEntities(graphOf([]), [entity("Dup", "a", ["x", "x"]), entity("Dup", "b")])
    expect(result).toEqual([entity("Dup", "a", ["x", "x"]), entity("Dup", "b")])
    expect(graph.entities).toHaveLength(2)
  })
})

describe("createRelations", () => {
  it("skips exact duplicates of existing relations, allows dangling endpoints, keeps in-call duplicates", () => {
    const start = graphOf([], [relation("A", "B")])
    const { graph, result } = Official.createRelations(start, [
      relation("A", "B"),
      relation("A", "B", "likes"),
      relation("X", "Y"),
      relation("X", "Y"),
    ])
    expect(result).toEqual([relation("A", "B", "likes"), relation("X", "Y"), relation("X", "Y")])
    expect(graph.relations).toHaveLength(4)
  })
})

describe("addObservations", () => {
  it("adds only new observations and reports them per item, in input order", () => {
    const start = graphOf([entity("Ada", "person", ["a"]), entity("Bob")])
    const { graph, result } = succeeded(
      Official.addObservations(start, [
        { entityName: "Ada", contents: ["a", "b", "b"] },
        { entityName: "Bob", contents: [] },
        { entityName: "Ada", contents: ["b", "c"] },
      ]),
    )
    expect(result).toEqual([
      { entityName: "Ada", addedObservations: ["b", "b"] },
      { entityName: "Bob", addedObservations: [] },
      { entityName: "Ada", addedObservations: ["c"] },
    ])
    expect(graph.entities[0]).toEqual(entity("Ada", "person", ["a", "b", "b", "c"]))
  })

  it("fails with the official message and changes nothing when any entity is missing", () => {
    const start = graphOf([entity("Ada")])
    const result = Official.addObservations(start, [
      { entityName: "Ada", contents: ["kept?"] },
      { entityName: "Ghost", contents: ["x"] },
    ])
    expect(Result.isFailure(result)).toBe(true)
    if (Result.isFailure(result)) {
      expect(result.failure).toBeInstanceOf(Official.EntityNotFound)
      expect(result.failure.message).toBe("Entity with name Ghost not found")
      expect(result.failure.entityName).toBe("Ghost")
    }
    expect(start.entities[0]!.observations).toEqual([])
  })

  it("changes only the first of two entities sharing a name", () => {
    const start = graphOf([entity("Dup", "a"), entity("Dup", "b")])
    const { graph } = succeeded(Official.addObservations(start, [{ entityName: "Dup", contents: ["x"] }]))
    expect(graph.entities).toEqual([entity("Dup", "a", ["x"]), entity("Dup", "b")])
  })
})

describe("deleteEntities", () => {
  it("removes the entities and cascades to every relation that mentions a listed name", () => {
    const start = graphOf(
      [entity("A"), entity("B"), entity("C")],
      [relation("A", "B"), relation("B", "C"), relation("C", "A"), relation("Ghost", "C"), relation("C", "C")],
    )
    const graph = Official.deleteEntities(start, ["A", "Ghost", "Nobody"])
    expect(graph.entities.map((e) => e.name)).toEqual(["B", "C"])
    expect(graph.relations).toEqual([relation("B", "C"), relation("C", "C")])
  })

  it("removes every entity sharing a listed name", () => {
    expect(Official.deleteEntities(graphOf([entity("D"), entity("D"), entity("E")]), ["D"]).entities).toEqual([
      entity("E"),
    ])
  })
})

describe("deleteObservations", () => {
  it("removes every copy of each listed observation, ignoring unknown entities", () => {
    const start = graphOf([entity("A", "t", ["x", "y", "x", "z"])])
    const graph = Official.deleteObservations(start, [
      { entityName: "A", observations: ["x", "nope"] },
      { entityName: "Ghost", observations: ["y"] },
      { entityName: "A", observations: ["z"] },
    ])
    expect(graph.entities).toEqual([entity("A", "t", ["y"])])
  })
})

describe("deleteRelations", () => {
  it("removes relations equal in all three fields, every copy", () => {
    const start = graphOf([], [relation("A", "B"), relation("A", "B"), relation("A", "B", "likes"), relation("B", "A")])
    expect(Official.deleteRelations(start, [relation("A", "B")]).relations).toEqual([
      relation("A", "B", "likes"),
      relation("B", "A"),
    ])
  })
})

describe("searchNodes", () => {
  const graph = graphOf(
    [
      entity("Ada Lovelace", "Person", ["Wrote the first PROGRAM"]),
      entity("Engine", "machine", ["steam powered"]),
      entity("Babbage", "person"),
      entity("İzmir", "city"),
    ],
    [
      relation("Ada Lovelace", "Engine", "programs"),
      relation("Babbage", "Engine", "built"),
      relation("Ada Lovelace", "Nobody", "dangles"),
      relation("Engine", "Babbage", "credits"),
    ],
  )

  it("matches name, type and observations case-insensitively, in graph order", () => {
    expect(Official.searchNodes(graph, "lovelace").entities.map((e) => e.name)).toEqual(["Ada Lovelace"])
    expect(Official.searchNodes(graph, "PERSON").entities.map((e) => e.name)).toEqual(["Ada Lovelace", "Babbage"])
    expect(Official.searchNodes(graph, "program").entities.map((e) => e.name)).toEqual(["Ada Lovelace"])
    expect(Official.searchNodes(graph, "STEAM").entities.map((e) => e.name)).toEqual(["Engine"])
    expect(Official.searchNodes(graph, "izmir").entities).toEqual([]) // "İ" lower-cases to "i̇"
    expect(Official.searchNodes(graph, "").entities).toHaveLength(4)
  })

  it("returns relations with at least one endpoint among the matches (not both)", () => {
    expect(Official.searchNodes(graph, "lovelace").relations).toEqual([
      relation("Ada Lovelace", "Engine", "programs"),
      relation("Ada Lovelace", "Nobody", "dangles"),
    ])
    expect(Official.searchNodes(graph, "steam").relations).toEqual([
      relation("Ada Lovelace", "Engine", "programs"),
      relation("Babbage", "Engine", "built"),
      relation("Engine", "Babbage", "credits"),
    ])
    expect(Official.searchNodes(graph, "no such thing")).toEqual({ entities: [], relations: [] })
  })
})

describe("openNodes", () => {
  const graph = graphOf(
    [entity("A"), entity("B"), entity("C")],
    [relation("A", "B"), relation("B", "C"), relation("C", "Ghost")],
  )

  it("returns the named entities in graph order and relations touching any of them", () => {
    const opened = Official.openNodes(graph, ["C", "A", "Missing"])
    expect(opened.entities.map((e) => e.name)).toEqual(["A", "C"])
    expect(opened.relations).toEqual([relation("A", "B"), relation("B", "C"), relation("C", "Ghost")])
  })

  it("pulls no relations for a requested name that has no entity, even dangling ones naming it", () => {
    expect(Official.openNodes(graph, ["Ghost"])).toEqual({ entities: [], relations: [] })
  })
})

describe("readGraph", () => {
  it("returns a copy the caller cannot use to change the graph", () => {
    const graph = graphOf([entity("A", "t", ["x"])], [relation("A", "A")])
    const copy = Official.readGraph(graph)
    expect(copy).toEqual(graph)
    ;(copy.entities[0]!.observations as Array<string>).push("y")
    expect(graph.entities[0]!.observations).toEqual(["x"])
  })
})

describe("Model", () => {
  const accepts = (schema: Schema.ConstraintDecoder<unknown>, value: unknown) =>
    Result.isSuccess(Schema.decodeUnknownResult(schema)(value))

  it("bounds names, observation counts and queries in UTF-8 bytes, inclusive", () => {
    const name = (bytes: number) => "é".repeat(bytes / 2) // two bytes each
    expect(accepts(BoundedEntity, entity(name(entityNameBytesMax)))).toBe(true)
    expect(accepts(BoundedEntity, entity(`${name(entityNameBytesMax)}x`))).toBe(false)
    expect(accepts(BoundedRelation, relation("a", name(entityNameBytesMax + 2)))).toBe(false)
    const observations = Array.from({ length: observationsPerEntityMax + 1 }, (_, i) => `${i}`)
    expect(accepts(BoundedEntity, entity("a", "t", observations.slice(1)))).toBe(true)
    expect(accepts(BoundedEntity, entity("a", "t", observations))).toBe(false)
    expect(accepts(SearchQuery, "q".repeat(searchQueryBytesMax))).toBe(true)
    expect(accepts(SearchQuery, "😀".repeat(searchQueryBytesMax / 4 + 1))).toBe(false)
  })

  it("counts UTF-8 bytes as an encoder does, lone surrogates included", () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom("a", "é", "€", "😀", "\uD83D", "\uDE00") }), (text) => {
        expect(utf8ByteLength(text)).toBe(new TextEncoder().encode(text).length)
      }),
    )
  })

  it("projects stored entities back to the official shape and field order", () => {
    const stored = toStoredEntity(entity("Ada", "person", ["x", "y"]), "default", 1_700_000_000_000)
    expect(stored.observations).toEqual([
      { text: "x", createdAt: 1_700_000_000_000 },
      { text: "y", createdAt: 1_700_000_000_000 },
    ])
    const official = toOfficialEntity(stored)
    expect(JSON.stringify(official)).toBe('{"name":"Ada","entityType":"person","observations":["x","y"]}')
  })
})

// ---------------------------------------------------------------------------------------------
// Differential test against the running official server
// ---------------------------------------------------------------------------------------------

type Operation =
  | { readonly tool: "create_entities"; readonly entities: ReadonlyArray<Entity> }
  | { readonly tool: "create_relations"; readonly relations: ReadonlyArray<Relation> }
  | { readonly tool: "add_observations"; readonly observations: ReadonlyArray<ObservationAddition> }
  | { readonly tool: "delete_entities"; readonly entityNames: ReadonlyArray<string> }
  | { readonly tool: "delete_observations"; readonly deletions: ReadonlyArray<ObservationDeletion> }
  | { readonly tool: "delete_relations"; readonly relations: ReadonlyArray<Relation> }
  | { readonly tool: "read_graph" }
  | { readonly tool: "search_nodes"; readonly query: string }
  | { readonly tool: "open_nodes"; readonly names: ReadonlyArray<string> }

/** Small alphabets so names, observations and relations collide often. */
const name = fc.constantFrom("Ada", "ada", "Bob", "Ça", "İz", "x")
const word = fc.constantFrom("red", "Red", "blue", "ß", "i̇", "")
const few = <A>(arbitrary: fc.Arbitrary<A>) => fc.array(arbitrary, { maxLength: 3 })
const anEntity = fc.record({ name, entityType: word, observations: few(word) })
const aRelation = fc.record({ from: name, to: name, relationType: fc.constantFrom("knows", "Knows") })

/** Weighted towards building up state, so searches and opens meet relations of every kind. */
const operation: fc.Arbitrary<Operation> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ tool: fc.constant("create_entities" as const), entities: few(anEntity) }) },
  { weight: 3, arbitrary: fc.record({ tool: fc.constant("create_relations" as const), relations: few(aRelation) }) },
  {
    weight: 3,
    arbitrary: fc.record({
      tool: fc.constant("add_observations" as const),
      observations: few(fc.record({ entityName: name, contents: few(word) })),
    }),
  },
  { weight: 1, arbitrary: fc.record({ tool: fc.constant("delete_entities" as const), entityNames: few(name) }) },
  {
    weight: 1,
    arbitrary: fc.record({
      tool: fc.constant("delete_observations" as const),
      deletions: few(fc.record({ entityName: name, observations: few(word) })),
    }),
  },
  { weight: 1, arbitrary: fc.record({ tool: fc.constant("delete_relations" as const), relations: few(aRelation) }) },
  { weight: 1, arbitrary: fc.record({ tool: fc.constant("read_graph" as const) }) },
  {
    weight: 4,
    arbitrary: fc.record({
      tool: fc.constant("search_nodes" as const),
      query: fc.oneof(word, name, fc.constantFrom("E", "a", "I")),
    }),
  },
  { weight: 3, arbitrary: fc.record({ tool: fc.constant("open_nodes" as const), names: few(name) }) },
)

/** A sequence that starts from a populated graph. */
const operations: fc.Arbitrary<ReadonlyArray<Operation>> = fc
  .tuple(
    fc.array(anEntity, { minLength: 1, maxLength: 6 }),
    fc.array(aRelation, { minLength: 1, maxLength: 6 }),
    fc.array(operation, { minLength: 1, maxLength: 30 }),
  )
  .map(([entities, relations, rest]) => [
    { tool: "create_entities" as const, entities },
    { tool: "create_relations" as const, relations },
    ...rest,
  ])

/** What a tool call answers, in the official wire shape. */
interface ToolAnswer {
  readonly content: ReadonlyArray<{ readonly type: "text"; readonly text: string }>
  readonly structuredContent?: unknown
  readonly isError?: true
}

const answerWith = (structuredContent: object, shown: unknown): ToolAnswer => ({
  content: [{ type: "text", text: JSON.stringify(shown, null, 2) }],
  structuredContent,
})
const deleted = (message: string): ToolAnswer => ({
  content: [{ type: "text", text: message }],
  structuredContent: { success: true, message },
})

/** Applies one operation to the model and answers as the official tool would. */
const applyToModel = (graph: KnowledgeGraph, step: Operation): { graph: KnowledgeGraph; answer: ToolAnswer } => {
  switch (step.tool) {
    case "create_entities": {
      const changed = Official.createEntities(graph, step.entities)
      return { graph: changed.graph, answer: answerWith({ entities: changed.result }, changed.result) }
    }
    case "create_relations": {
      const changed = Official.createRelations(graph, step.relations)
      return { graph: changed.graph, answer: answerWith({ relations: changed.result }, changed.result) }
    }
    case "add_observations": {
      const changed = Official.addObservations(graph, step.observations)
      if (Result.isFailure(changed)) {
        return { graph, answer: { content: [{ type: "text", text: changed.failure.message }], isError: true } }
      }
      const { result } = changed.success
      return { graph: changed.success.graph, answer: answerWith({ results: result }, result) }
    }
    case "delete_entities":
      return {
        graph: Official.deleteEntities(graph, step.entityNames),
        answer: deleted(officialDeletionMessages.delete_entities),
      }
    case "delete_observations":
      return {
        graph: Official.deleteObservations(graph, step.deletions),
        answer: deleted(officialDeletionMessages.delete_observations),
      }
    case "delete_relations":
      return {
        graph: Official.deleteRelations(graph, step.relations),
        answer: deleted(officialDeletionMessages.delete_relations),
      }
    case "read_graph": {
      const read = Official.readGraph(graph)
      return { graph, answer: answerWith(read, read) }
    }
    case "search_nodes": {
      const found = Official.searchNodes(graph, step.query)
      return { graph, answer: answerWith(found, found) }
    }
    case "open_nodes": {
      const opened = Official.openNodes(graph, step.names)
      return { graph, answer: answerWith(opened, opened) }
    }
  }
}

describe("the model against the running official server", () => {
  let directory: string
  let memoryFile: string
  let client: Client

  beforeAll(async () => {
    directory = mkdtempSync(join(tmpdir(), "mnemos-official-"))
    memoryFile = join(directory, "memory.jsonl")
    client = new Client({ name: "mnemos-test", version: "0" })
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [officialServerPath],
        env: { ...(process.env as Record<string, string>), MEMORY_FILE_PATH: memoryFile },
        stderr: "ignore",
      }),
    )
  })

  afterAll(async () => {
    await client.close()
    rmSync(directory, { recursive: true, force: true })
  })

  it("gives the same answers, text included, on random operation sequences", async () => {
    await fc.assert(
      fc.asyncProperty(operations, async (steps) => {
        // The official server re-reads its file on every call, so emptying it resets the graph.
        writeFileSync(memoryFile, "")
        let graph: KnowledgeGraph = { entities: [], relations: [] }
        for (const step of steps) {
          const { tool, ...args } = step
          const official = await client.callTool({ name: tool, arguments: args })
          const modelled = applyToModel(graph, step)
          graph = modelled.graph
          expect(official).toEqual(modelled.answer)
        }
        const final = await client.callTool({ name: "read_graph", arguments: {} })
        expect(final.structuredContent).toEqual(graph)
      }),
      { numRuns: 100 },
    )
  })
})
