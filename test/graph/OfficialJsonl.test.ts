/**
 * memory.jsonl: our serializer writes what the official server writes (and reads back), our
 * parser reads what the official server writes, round trips are lossless, and a malformed line
 * fails the whole parse with its 1-based line number.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { Effect, Exit, Result } from "effect"
import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { KnowledgeGraph } from "../../src/graph/Model.ts"
import {
  decodeOfficialJsonl,
  fileLines,
  MalformedJsonlLine,
  officialJsonlFileItems,
  parseOfficialJsonl,
  serializeOfficialJsonl,
} from "../../src/graph/OfficialJsonl.ts"

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

/** Text that stresses JSON escaping: quotes, backslashes, newlines, U+2028, lone surrogates, emoji. */
const awkwardText = fc.oneof(
  fc.string({ unit: "grapheme", maxLength: 12 }),
  fc.string({ unit: "binary", maxLength: 12 }),
  fc
    .array(fc.constantFrom("a", '"', "\\", "\n", "\r\n", "\u2028", "\uD83D", "\uDE00", "😀", "{", "}", " ", "\u0000"), {
      maxLength: 8,
    })
    .map((parts) => parts.join("")),
)

const graphOf = (text: fc.Arbitrary<string>): fc.Arbitrary<KnowledgeGraph> =>
  fc.record({
    entities: fc.array(fc.record({ name: text, entityType: text, observations: fc.array(text, { maxLength: 4 }) }), {
      maxLength: 8,
    }),
    relations: fc.array(fc.record({ from: text, to: text, relationType: text }), { maxLength: 8 }),
  })

const failureOf = (text: string): MalformedJsonlLine => {
  const result = decodeOfficialJsonl(text)
  if (Result.isSuccess(result)) throw new Error(`expected a failure, got ${JSON.stringify(result.success)}`)
  return result.failure
}

describe("serializeOfficialJsonl", () => {
  it("writes entities then relations, one JSON object per line, without a trailing newline", () => {
    const graph: KnowledgeGraph = {
      entities: [
        { name: "Ada", entityType: "person", observations: ['wrote "notes"', "line\nbreak"] },
        { name: "Analytical Engine", entityType: "machine", observations: [] },
      ],
      relations: [{ from: "Ada", to: "Analytical Engine", relationType: "programs" }],
    }
    expect(serializeOfficialJsonl(graph)).toBe(
      [
        '{"type":"entity","name":"Ada","entityType":"person","observations":["wrote \\"notes\\"","line\\nbreak"]}',
        '{"type":"entity","name":"Analytical Engine","entityType":"machine","observations":[]}',
        '{"type":"relation","from":"Ada","to":"Analytical Engine","relationType":"programs"}',
      ].join("\n"),
    )
    expect(serializeOfficialJsonl({ entities: [], relations: [] })).toBe("")
  })
})

describe("decodeOfficialJsonl", () => {
  it("round-trips any graph, awkward strings included", () => {
    fc.assert(
      fc.property(graphOf(awkwardText), (graph) => {
        const decoded = decodeOfficialJsonl(serializeOfficialJsonl(graph))
        expect(Result.isSuccess(decoded)).toBe(true)
        if (Result.isSuccess(decoded)) expect(decoded.success).toEqual({ graph, ignoredLines: [] })
      }),
      { numRuns: 500 },
    )
  })

  it("skips blank lines, tolerates CRLF and a BOM, keeps only the official fields, ignores other types", () => {
    const text = [
      '\uFEFF{"type":"entity","name":"A","entityType":"t","observations":["x"],"extra":1}\r',
      "",
      "   ",
      '{"type":"note","text":"not part of the graph"}',
      '{"name":"untyped"}',
      '{"type":"relation","from":"A","to":"B","relationType":"r","weight":2}',
      "",
    ].join("\n")
    const decoded = decodeOfficialJsonl(text)
    expect(Result.isSuccess(decoded) && decoded.success).toEqual({
      graph: {
        entities: [{ name: "A", entityType: "t", observations: ["x"] }],
        relations: [{ from: "A", to: "B", relationType: "r" }],
      },
      ignoredLines: [4, 5],
    })
  })

  it("keeps duplicate entities and relations as the official list does", () => {
    const entity = { name: "A", entityType: "t", observations: [] }
    const relation = { from: "A", to: "A", relationType: "r" }
    const graph = { entities: [entity, entity], relations: [relation, relation] }
    const decoded = decodeOfficialJsonl(serializeOfficialJsonl(graph))
    expect(Result.isSuccess(decoded) && decoded.success.graph).toEqual(graph)
  })

  it("reports the first malformed line by its 1-based number, counting blank lines", () => {
    const good = '{"type":"entity","name":"A","entityType":"t","observations":[]}'
    expect(failureOf([good, "", "{not json"].join("\n"))).toMatchObject({ _tag: "MalformedJsonlLine", line: 3 })
    expect(failureOf([good, "null"].join("\n")).line).toBe(2)
    expect(failureOf([good, "42"].join("\n")).line).toBe(2)
    expect(failureOf('["type","entity"]').line).toBe(1)
    expect(failureOf([good, good, '{"type":"entity","name":"B","entityType":"t"}'].join("\n")).line).toBe(3)
    expect(failureOf('{"type":"entity","name":"B","entityType":"t","observations":[1]}').line).toBe(1)
    expect(failureOf('{"type":"relation","from":"A","to":null,"relationType":"r"}').line).toBe(1)
    expect(failureOf([good, '{"type":"relation","from":"A"}', "{bad"].join("\n")).line).toBe(2)
    const failure = failureOf(`${good}\n{"oops": }`)
    expect(failure).toBeInstanceOf(MalformedJsonlLine)
    expect(failure.excerpt).toBe('{"oops": }')
    expect(failure.message).toMatch(/not JSON/)
  })

  it("yields nothing at all when any line is malformed, wherever it is", () => {
    fc.assert(
      fc.property(
        graphOf(fc.string({ maxLength: 6 })).filter((graph) => graph.entities.length + graph.relations.length > 0),
        fc.nat(),
        fc.constantFrom("{", "null", '{"type":"entity"}', '{"type":"relation","from":1,"to":"b","relationType":"c"}'),
        (graph, position, badLine) => {
          const lines = serializeOfficialJsonl(graph).split("\n")
          const at = position % (lines.length + 1)
          lines.splice(at, 0, badLine)
          const decoded = decodeOfficialJsonl(lines.join("\n"))
          expect(Result.isFailure(decoded)).toBe(true)
          if (Result.isFailure(decoded)) expect(decoded.failure.line).toBe(at + 1)
        },
      ),
      { numRuns: 300 },
    )
  })
})

describe("reading a file line by line", () => {
  const directory = mkdtempSync(join(tmpdir(), "mnemos-jsonl-lines-"))
  afterAll(() => rmSync(directory, { recursive: true, force: true }))
  const file = join(directory, "memory.jsonl")

  it("yields the lines of splitting the whole text, whatever the chunk boundaries cut (multi-byte characters, BOM)", () => {
    fc.assert(
      fc.property(
        fc.boolean(),
        fc.array(fc.oneof(fc.string({ unit: "grapheme", maxLength: 8 }), fc.constant("\n"), fc.constant("é€😀")), {
          maxLength: 30,
        }),
        fc.integer({ min: 1, max: 9 }),
        (bom, pieces, chunkBytes) => {
          const text = pieces.join("")
          writeFileSync(file, (bom ? "\uFEFF" : "") + text)
          expect([...fileLines(file, chunkBytes)]).toEqual(text.split("\n"))
        },
      ),
      { numRuns: 300 },
    )
  })

  it("decodes a file as decodeOfficialJsonl decodes its text, stopping at the first malformed line", () => {
    const good = '{"type":"entity","name":"A","entityType":"t","observations":["ü"]}'
    writeFileSync(
      file,
      [good, "", '{"type":"other"}', '{"type":"relation","from":"A","to":"B","relationType":"r"}'].join("\n"),
    )
    const items = [...officialJsonlFileItems(file)].map((item) => (Result.isSuccess(item) ? item.success : "failure"))
    expect(items).toEqual([
      { _tag: "Entity", entity: { name: "A", entityType: "t", observations: ["ü"] } },
      undefined,
      { _tag: "Ignored", line: 3 },
      { _tag: "Relation", relation: { from: "A", to: "B", relationType: "r" } },
    ])
    writeFileSync(file, [good, "{bad", good].join("\n"))
    const failed = [...officialJsonlFileItems(file)]
    expect(failed.length).toBe(2)
    const last = failed[1]!
    expect(Result.isFailure(last) && last.failure.line).toBe(2)
  })
})

describe("parseOfficialJsonl", () => {
  it("fails in the error channel with the tagged error, and succeeds with the graph", () => {
    const failed = Effect.runSyncExit(parseOfficialJsonl('{"type":"entity"}\n'))
    expect(Exit.isFailure(failed)).toBe(true)
    const error = Effect.runSync(Effect.flip(parseOfficialJsonl("\n\n{")))
    expect(error).toBeInstanceOf(MalformedJsonlLine)
    expect(error.line).toBe(3)
    const parsed = Effect.runSync(parseOfficialJsonl('{"type":"relation","from":"a","to":"b","relationType":"c"}'))
    expect(parsed.graph.relations).toEqual([{ from: "a", to: "b", relationType: "c" }])
  })
})

describe("interoperability with the official server", () => {
  let directory: string
  let memoryFile: string
  let client: Client

  beforeAll(async () => {
    directory = mkdtempSync(join(tmpdir(), "mnemos-jsonl-"))
    memoryFile = join(directory, "memory.jsonl")
    writeFileSync(memoryFile, "")
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

  const officialReadGraph = async (): Promise<unknown> =>
    (await client.callTool({ name: "read_graph", arguments: {} })).structuredContent

  it("the official server reads back exactly what we serialize", async () => {
    await fc.assert(
      fc.asyncProperty(graphOf(fc.string({ unit: "grapheme", maxLength: 10 })), async (graph) => {
        writeFileSync(memoryFile, serializeOfficialJsonl(graph))
        expect(await officialReadGraph()).toEqual(graph)
      }),
      { numRuns: 40 },
    )
  })

  it("we parse exactly what the official server writes", async () => {
    await fc.assert(
      fc.asyncProperty(graphOf(fc.string({ unit: "grapheme", maxLength: 10 })), async (graph) => {
        writeFileSync(memoryFile, "")
        await client.callTool({ name: "create_entities", arguments: { entities: graph.entities } })
        await client.callTool({ name: "create_relations", arguments: { relations: graph.relations } })
        const written = readFileSync(memoryFile, "utf8")
        const decoded = decodeOfficialJsonl(written)
        expect(Result.isSuccess(decoded) && decoded.success.graph).toEqual(await officialReadGraph())
        // Byte-identical: re-serializing what we parsed reproduces the official file.
        if (Result.isSuccess(decoded)) expect(serializeOfficialJsonl(decoded.success.graph)).toBe(written)
      }),
      { numRuns: 40 },
    )
  })
})
