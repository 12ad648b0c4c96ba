/**
 * Malformed arguments over the protocol: for every tool mnemos lists, random JSON, random
 * objects, the right keys with wrong types, values generated from the tool's own inputSchema
 * with bad leaves, strings beyond mnemos's limits and NUL characters in names. One server
 * process takes every call. Each call must:
 *
 * - come back as an `isError` tool result with a clear message (a validation error naming the
 *   tool, or a domain error such as "Entity with name X not found"), or as a valid result when
 *   the arguments happen to be valid; arguments that are not a JSON object at all are refused
 *   by the session at the protocol level (a JSON-RPC -32602 error), which is also accepted;
 * - agree with the tool's advertised inputSchema: arguments the schema rejects must fail, and a
 *   success means the schema accepts them;
 * - leave the graph unchanged when it fails (read_graph before/after), and leave the server
 *   serving (a read_graph after each batch answers).
 *
 * The fast-check seed is printed; rerun with FC_SEED=<seed>.
 */
import type { Tool } from "@modelcontextprotocol/sdk/types.js"
import { McpError } from "@modelcontextprotocol/sdk/types.js"
import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  call,
  callOk,
  cleanup,
  type McpServerProcess,
  readGraph,
  startMnemos,
  type ToolResult,
} from "../support/mcpClient.ts"

const seed = Number(process.env.FC_SEED ?? Date.now() % 2 ** 31)
const numRuns = Number(process.env.FC_RUNS ?? 30)

let server: McpServerProcess
let tools: ReadonlyArray<Tool>

/** Names that exist, so generated arguments sometimes point at real entities. */
const seedNames = ["Alice", "Bob", "Carol"]

/** (Re)creates the seed entities and relations (existing ones are skipped). */
const seedGraph = async () => {
  await callOk(server.client, "create_entities", {
    entities: seedNames.map((name) => ({ name, entityType: "person", observations: [`${name} was here`] })),
  })
  await callOk(server.client, "create_relations", {
    relations: [
      { from: "Alice", to: "Bob", relationType: "knows" },
      { from: "Bob", to: "Carol", relationType: "knows" },
    ],
  })
}

beforeAll(async () => {
  console.log(`MalformedArguments: fast-check seed ${seed}, ${numRuns} runs per tool (rerun with FC_SEED=${seed})`)
  // The graph toolset (issue 3's scope); every other toolset has its own argument fuzz tests, and
  // editor tools would reach a developer's real Neovim or clipboard.
  server = await startMnemos(undefined, ["--toolsets", "graph"])
  tools = (await server.client.listTools()).tools
  await seedGraph()
})
afterAll(cleanup)

// ---------------------------------------------------------------------------------------------
// The advertised inputSchema, checked by a validator for the subset of JSON Schema the tools use
// ---------------------------------------------------------------------------------------------

type JsonSchema = {
  readonly type?: string
  readonly properties?: Record<string, JsonSchema>
  readonly required?: ReadonlyArray<string>
  readonly items?: JsonSchema
  readonly enum?: ReadonlyArray<unknown>
  readonly minLength?: number
  readonly maxLength?: number
  readonly minimum?: number
  readonly maximum?: number
  readonly minItems?: number
  readonly maxItems?: number
  readonly additionalProperties?: boolean
}

const knownKeywords = new Set([
  "$schema",
  "type",
  "properties",
  "required",
  "items",
  "enum",
  "minLength",
  "maxLength",
  "minimum",
  "maximum",
  "minItems",
  "maxItems",
  "additionalProperties",
  "description",
  "title",
])

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** Throws on a keyword this validator does not implement, so it can never silently accept. */
const assertSupported = (schema: JsonSchema, path: string): void => {
  for (const key of Object.keys(schema))
    if (!knownKeywords.has(key)) throw new Error(`unsupported JSON Schema keyword ${key} at ${path}`)
  for (const [key, child] of Object.entries(schema.properties ?? {})) assertSupported(child, `${path}.${key}`)
  if (schema.items !== undefined) assertSupported(schema.items, `${path}[]`)
}

const codePoints = (text: string) => [...text].length

/** Whether `value` satisfies `schema` (the subset above; JSON Schema's own length rules). */
const satisfies = (schema: JsonSchema, value: unknown): boolean => {
  switch (schema.type) {
    case "object":
      if (!isPlainObject(value)) return false
      break
    case "array":
      if (!Array.isArray(value)) return false
      break
    case "string":
      if (typeof value !== "string") return false
      break
    case "integer":
      if (typeof value !== "number" || !Number.isInteger(value)) return false
      break
    case "number":
      if (typeof value !== "number") return false
      break
    case "boolean":
      if (typeof value !== "boolean") return false
      break
    case undefined:
      break
    default:
      throw new Error(`unsupported type ${schema.type}`)
  }
  if (schema.enum !== undefined && !schema.enum.includes(value)) return false
  if (typeof value === "string") {
    if (schema.minLength !== undefined && codePoints(value) < schema.minLength) return false
    if (schema.maxLength !== undefined && codePoints(value) > schema.maxLength) return false
  }
  if (typeof value === "number") {
    if (schema.minimum !== undefined && value < schema.minimum) return false
    if (schema.maximum !== undefined && value > schema.maximum) return false
  }
  if (Array.isArray(value)) {
    if (schema.minItems !== undefined && value.length < schema.minItems) return false
    if (schema.maxItems !== undefined && value.length > schema.maxItems) return false
    if (schema.items !== undefined && !value.every((item) => satisfies(schema.items!, item))) return false
  }
  if (isPlainObject(value)) {
    for (const key of schema.required ?? []) if (!Object.hasOwn(value, key)) return false
    for (const [key, child] of Object.entries(schema.properties ?? {}))
      if (Object.hasOwn(value, key) && !satisfies(child, value[key])) return false
    if (schema.additionalProperties === false)
      for (const key of Object.keys(value)) if (!Object.hasOwn(schema.properties ?? {}, key)) return false
  }
  return true
}

// ---------------------------------------------------------------------------------------------
// Argument generators
// ---------------------------------------------------------------------------------------------

/** Strings just beyond mnemos's limits (name/query 4 KiB, type 1 KiB, observation 64 KiB, project 256 B). */
const hugeString = fc.constantFrom(
  "n".repeat(4097),
  "€".repeat(1366), // 1366 code units, 4098 UTF-8 bytes
  "t".repeat(1025),
  "o".repeat(64 * 1024 + 1),
  "p".repeat(257),
  "x".repeat(1024 * 1024),
)
const nulString = fc.constantFrom("\u0000", "Alice\u0000", "a\u0000b", "\u0000Bob")
const wrongValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.jsonValue({ maxDepth: 2 }),
  fc.constantFrom(null, true, 0, -1, 1.5, 1e308, "", [], {}, [[]], [{}]),
)

/** Values shaped by `schema`, with a leaf sometimes wrong, huge or carrying NUL. */
const shaped = (schema: JsonSchema, depth = 0): fc.Arbitrary<unknown> => {
  const wrong = { arbitrary: wrongValue, weight: 1 }
  switch (schema.type) {
    case "object": {
      const properties = Object.entries(schema.properties ?? {})
      const record = fc.record(Object.fromEntries(properties.map(([key, child]) => [key, shaped(child, depth + 1)])), {
        requiredKeys: [],
      })
      return fc.oneof({ arbitrary: record, weight: 6 }, wrong)
    }
    case "array":
      return fc.oneof(
        { arbitrary: fc.array(shaped(schema.items ?? {}, depth + 1), { maxLength: depth === 0 ? 3 : 2 }), weight: 6 },
        wrong,
      )
    case "string":
      return fc.oneof(
        {
          arbitrary: schema.enum ? fc.constantFrom(...(schema.enum as Array<string>)) : fc.constantFrom(...seedNames),
          weight: 3,
        },
        { arbitrary: fc.string({ maxLength: 8 }), weight: 3 },
        { arbitrary: fc.string({ unit: "binary", maxLength: 6 }), weight: 1 },
        { arbitrary: hugeString, weight: 1 },
        { arbitrary: nulString, weight: 1 },
        wrong,
      )
    case "integer":
      return fc.oneof(
        { arbitrary: fc.integer({ min: (schema.minimum ?? -10) - 2, max: (schema.maximum ?? 10) + 2 }), weight: 4 },
        { arbitrary: fc.constantFrom(0.5, -1, 2 ** 53, Number.MAX_SAFE_INTEGER + 2, 1e308), weight: 1 },
        wrong,
      )
    default:
      return wrongValue
  }
}

/** Arguments for one tool: arbitrary JSON, arbitrary objects, right keys with wrong types, shaped values. */
const argumentsFor = (tool: Tool): fc.Arbitrary<unknown> => {
  const schema = tool.inputSchema as JsonSchema
  const keys = Object.keys(schema.properties ?? {})
  const rightKeysWrongTypes =
    keys.length === 0
      ? fc.dictionary(fc.string({ maxLength: 6 }), wrongValue, { maxKeys: 3 })
      : fc.record(Object.fromEntries(keys.map((key) => [key, wrongValue])), { requiredKeys: [] })
  return fc.oneof(
    { arbitrary: fc.jsonValue({ maxDepth: 3 }), weight: 2 },
    { arbitrary: fc.object({ maxDepth: 2 }), weight: 2 },
    { arbitrary: rightKeysWrongTypes, weight: 3 },
    { arbitrary: shaped(schema), weight: 5 },
  )
}

// ---------------------------------------------------------------------------------------------
// Checks
// ---------------------------------------------------------------------------------------------

const validationPrefix = (tool: string) =>
  `MCP error -32602: Input validation error: Invalid arguments for tool ${tool}: `
const domainMessages = [
  /^Entity with name [\s\S]* not found$/,
  /^names, types and projects may not contain the NUL character \(U\+0000\): /,
  /^cursor does not belong to this query/,
]

/** The failure message a tool result carries, unwrapped from the envelope of mnemos's own tools. */
const failureMessage = (tool: Tool, result: ToolResult): { code: string | undefined; message: string } => {
  const envelope = result.json as { status?: unknown; error?: { code?: unknown; message?: unknown } } | undefined
  if (isPlainObject(envelope) && envelope.status === "ERROR") {
    expect(typeof envelope.error?.code, `${tool.name}: envelope code`).toBe("string")
    expect(typeof envelope.error?.message, `${tool.name}: envelope message`).toBe("string")
    return { code: envelope.error!.code as string, message: envelope.error!.message as string }
  }
  return { code: undefined, message: result.text }
}

/** A failure is clear: a validation error naming the tool or a known domain error, never an internal one. */
const expectClearFailure = (tool: Tool, result: ToolResult, schemaValid: boolean) => {
  const { code, message } = failureMessage(tool, result)
  expect(code, `${tool.name}: ${message}`).not.toBe("INTERNAL_ERROR")
  expect(message.length, `${tool.name}: empty message`).toBeGreaterThan(0)
  const validation = message.startsWith(validationPrefix(tool.name))
  if (validation) {
    // It says what is wrong and where, without echoing huge inputs back.
    expect(message.length, `${tool.name}: ${message.slice(0, 200)}`).toBeGreaterThan(validationPrefix(tool.name).length)
    expect(message.length, `${tool.name}: message of ${message.length} chars`).toBeLessThan(2000)
    if (code !== undefined) expect(code).toBe("VALIDATION_ERROR")
  } else {
    expect(schemaValid, `${tool.name}: schema-invalid arguments failed without a validation error: ${message}`).toBe(
      true,
    )
    expect(
      domainMessages.some((pattern) => pattern.test(message)),
      `${tool.name}: unexpected failure message: ${message.slice(0, 500)}`,
    ).toBe(true)
  }
}

type Graph = Awaited<ReturnType<typeof readGraph>>

/**
 * Sends `args` to `tool` and checks the answer; returns the graph after the call (unchanged
 * when the call failed or was read-only, which is checked).
 */
const checkCall = async (
  tool: Tool,
  args: unknown,
  before: Graph,
): Promise<{ readonly graph: Graph; readonly outcome: "error" | "ok" | "protocol" }> => {
  // What actually travels: JSON (undefined members vanish, NaN becomes null, ...).
  const wire: unknown = JSON.parse(JSON.stringify(args) ?? "null")
  if (!isPlainObject(wire)) {
    // The session refuses non-object `arguments` before any tool runs: a JSON-RPC error (McpParams.ts).
    const refused = await call(server.client, tool.name, wire).then(
      (result) => result,
      (error: unknown) => error,
    )
    expect(refused, `${tool.name}(${JSON.stringify(wire)?.slice(0, 100)})`).toBeInstanceOf(McpError)
    expect(String((refused as McpError).message)).toMatch(/arguments/)
    expect(await readGraph(server.client)).toEqual(before)
    return { graph: before, outcome: "protocol" }
  }
  const schemaValid = satisfies(tool.inputSchema as JsonSchema, wire)
  const result = await call(server.client, tool.name, wire)
  const label = `${tool.name}(${JSON.stringify(wire).slice(0, 300)})`
  if (!schemaValid) expect(result.isError, `${label}: accepted arguments its inputSchema rejects`).toBe(true)
  const after = await readGraph(server.client)
  if (result.isError) {
    expectClearFailure(tool, result, schemaValid)
    expect(after, `${label}: a failed call changed the graph`).toEqual(before)
  } else {
    expect(result.structured, label).toBeDefined()
    if (tool.annotations?.readOnlyHint === true)
      expect(after, `${label}: a read-only tool changed the graph`).toEqual(before)
  }
  return { graph: after, outcome: result.isError ? "error" : "ok" }
}

describe("malformed arguments", () => {
  it("mnemos lists the tools this test covers, each with a schema the validator understands", () => {
    expect(tools.length).toBeGreaterThanOrEqual(9)
    for (const tool of tools) assertSupported(tool.inputSchema as JsonSchema, tool.name)
  })

  it("the argument schemas of mnemos's own tools describe every argument", () => {
    // The official nine are copied verbatim (and leave some arguments undescribed); mnemos's
    // additions annotate every argument in src/tools/GraphTools.ts, so tools/list must show it.
    const undescribed = tools.slice(9).flatMap((tool) =>
      Object.entries(
        (tool.inputSchema as JsonSchema & { properties?: Record<string, { description?: string }> }).properties ?? {},
      )
        .filter(([, property]) => typeof property.description !== "string" || property.description === "")
        .map(([key]) => `${tool.name}.${key}`),
    )
    expect(undescribed).toEqual([])
  })

  it("boundary cases: oversized strings and batches, NUL in names, non-object arguments", async () => {
    let graph = await readGraph(server.client)
    const entity = (name: string, entityType = "t", observations: Array<string> = []) => ({
      name,
      entityType,
      observations,
    })
    const cases: Array<readonly [string, unknown, "error" | "ok" | "protocol"]> = [
      ["create_entities", { entities: [entity("n".repeat(4097))] }, "error"],
      ["create_entities", { entities: [entity("€".repeat(1366))] }, "error"],
      ["create_entities", { entities: [entity("ok", "t".repeat(1025))] }, "error"],
      ["create_entities", { entities: [entity("ok", "t", ["o".repeat(64 * 1024 + 1)])] }, "error"],
      [
        "create_entities",
        {
          entities: [
            entity(
              "ok",
              "t",
              Array.from({ length: 10_001 }, (_, i) => `o${i}`),
            ),
          ],
        },
        "error",
      ],
      ["create_entities", { entities: Array.from({ length: 10_001 }, (_, i) => entity(`bulk ${i}`)) }, "error"],
      ["create_entities", { entities: [entity("fine"), entity("a\u0000b")] }, "error"],
      ["create_relations", { relations: [{ from: "Alice", to: "x\u0000", relationType: "r" }] }, "error"],
      ["create_relations", { relations: [{ from: "Alice", to: "Bob", relationType: "\u0000" }] }, "error"],
      ["create_relations", { relations: [{ from: "Alice", to: "Bob", relationType: "r".repeat(1025) }] }, "error"],
      ["add_observations", { observations: [{ entityName: "Alice\u0000", contents: ["x"] }] }, "error"],
      ["add_observations", { observations: [{ entityName: "Alice", contents: ["o".repeat(64 * 1024 + 1)] }] }, "error"],
      ["search_nodes", { query: "q".repeat(4097) }, "error"],
      ["search_nodes", { query: "\u0000" }, "ok"],
      ["open_nodes", { names: ["Alice\u0000Bob"] }, "ok"],
      ["delete_entities", { entityNames: ["Alice\u0000"] }, "ok"],
      ["delete_relations", { relations: [{ from: "Alice\u0000", to: "Bob", relationType: "knows" }] }, "ok"],
      ["read_graph_summary", { project: "p".repeat(257) }, "error"],
      ["read_graph_summary", { project: "" }, "error"],
      ["read_graph_summary", { namesLimit: 5001 }, "error"],
      ["graph_neighbors", { names: ["Alice"], depth: 4 }, "error"],
      ["graph_neighbors", { names: ["Alice"], direction: "sideways" }, "error"],
      ["graph_neighbors", { names: ["Alice"], cursor: "not a cursor" }, "error"],
      ["merge_entities", { target: "Nobody", sources: ["Alice"] }, "error"],
      ["get_entity_details", { names: "Alice" }, "error"],
      ["create_entities", [], "protocol"],
      ["read_graph", null, "protocol"],
      ["search_nodes", "query", "protocol"],
    ]
    for (const [name, args, expected] of cases) {
      const tool = tools.find((candidate) => candidate.name === name)
      expect(tool, name).toBeDefined()
      const checked = await checkCall(tool!, args, graph)
      expect(checked.outcome, `${name}(${JSON.stringify(args).slice(0, 120)})`).toBe(expected)
      graph = checked.graph
    }
    expect(graph.entities.map((e) => e.name)).toEqual(seedNames)
  })

  it("random arguments for every tool: clear errors or valid results, graph unchanged by failures, server serving", async () => {
    const tally: Record<string, Record<"error" | "ok" | "protocol", number>> = {}
    for (const tool of tools) {
      const counts = { error: 0, ok: 0, protocol: 0 }
      tally[tool.name] = counts
      await seedGraph() // valid deletes and merges of earlier batches may have removed them
      let graph = await readGraph(server.client)
      await fc.assert(
        fc.asyncProperty(argumentsFor(tool), async (args) => {
          const checked = await checkCall(tool, args, graph)
          graph = checked.graph
          counts[checked.outcome]++
        }),
        { numRuns, seed: seed + tools.indexOf(tool), endOnFailure: true },
      )
      // The server still answers after the batch.
      expect(await readGraph(server.client)).toEqual(graph)
    }
    console.log(
      `MalformedArguments outcomes (isError / valid / refused as invalid params): ${Object.entries(tally)
        .map(([name, counts]) => `${name} ${counts.error}/${counts.ok}/${counts.protocol}`)
        .join(", ")}`,
    )
    // The generators reach every kind of outcome (so the checks above were exercised).
    const totals = Object.values(tally).reduce((sum, counts) => ({
      error: sum.error + counts.error,
      ok: sum.ok + counts.ok,
      protocol: sum.protocol + counts.protocol,
    }))
    expect(totals.error).toBeGreaterThan(0)
    expect(totals.ok).toBeGreaterThan(0)
    expect(totals.protocol).toBeGreaterThan(0)
  })
})
