/**
 * The search tools over MCP: seed 000's formats (compact markdown with [mem:id]) and their
 * structuredContent, score breakdowns that add up, filters, and argument validation.
 */
import { afterAll, assert, beforeAll, describe, it } from "vitest"
import { conversationStore } from "../../src/conversations/ConversationStore.ts"
import { graphStore } from "../../src/graph/GraphStore.ts"
import { assertPartsAddUp, openSearchEngine, removeTempDirs, type SearchEngine } from "./harness.ts"

let engine: SearchEngine
beforeAll(async () => {
  engine = await openSearchEngine()
  await engine.ok("create_entities", {
    entities: [
      {
        name: "Ledger service",
        entityType: "service",
        observations: ["Stores money as integer cents, never floats", "Uses PostgreSQL with serializable transactions"],
      },
      { name: "Login flakiness", entityType: "bug", observations: ["The sign-in browser test fails one run in ten"] },
    ],
  })
})
afterAll(async () => {
  await engine.close()
  removeTempDirs()
})

interface IndexEntry {
  id: string
  score: number
  store: string
  type: string
  summary: string
  score_breakdown: {
    fulltext: number
    semantic: number
    recency: number
    importance: number
    alignment: number
    aligned?: { coverage: number; precision: number; negation_mismatch: boolean; number_mismatch: boolean }
  }
}

describe("search tools", () => {
  it("mem-search answers a compact index with ids, and breakdowns that add up to the score", async () => {
    const reply = await engine.ok("mem-search", { query: "postgresql transactions", topK: 3 })
    assert.match(reply.text, /^## Memory Search Results\n\nFound \d+ relevant memories for "postgresql transactions":/)
    assert.include(reply.text, "Use `mem-details` with IDs for full content.")
    const results = reply.structured.results as Array<IndexEntry>
    assert.isAtMost(results.length, 3)
    assert.strictEqual(results[0]!.summary, "Ledger service: Uses PostgreSQL with serializable transactions")
    assert.include(reply.text, `### 1. [mem:${results[0]!.id}]`)
    for (const result of results) {
      const parts = result.score_breakdown
      assertPartsAddUp(parts, result.score, 1e-3)
      // Hybrid search re-ranks by alignment and says why.
      assert.isDefined(parts.aligned)
      assert.isAtLeast(parts.aligned!.coverage, 0)
    }
    assert.isAbove(results[0]!.score_breakdown.fulltext, 0)
  })

  it("finds by meaning in semantic mode, with no shared word", async () => {
    const reply = await engine.ok("mem-search", { query: "authentication check unreliable", mode: "semantic" })
    const results = reply.structured.results as Array<IndexEntry>
    assert.isTrue(results.some((result) => result.summary.startsWith("Login flakiness: The sign-in")))
    assert.isTrue(results.every((result) => result.score_breakdown.fulltext === 0))
  })

  it("mem-timeline shows what came before and after; mem-details the full records", async () => {
    const search = await engine.ok("mem-search", { query: "integer cents", mode: "lexical", topK: 1 })
    const id = (search.structured.results as Array<IndexEntry>)[0]!.id
    const timeline = await engine.ok("mem-timeline", { ids: [id, "missing"], windowSize: 2 })
    assert.include(timeline.text, `### Around [mem:${id}]`)
    assert.include(timeline.text, "| Time | Type | Preview |")
    assert.include(timeline.text, "_Not found._")
    const [found, missing] = timeline.structured.timelines
    assert.isTrue(found.found)
    assert.isAtMost(found.before.length + found.after.length, 4)
    assert.isFalse(missing.found)
    const details = await engine.ok("mem-details", { ids: [id, "missing"] })
    assert.include(details.text, `### [mem:${id}]`)
    assert.include(details.text, "Stores money as integer cents, never floats")
    assert.strictEqual(details.structured.memories[0].content, "Stores money as integer cents, never floats")
    assert.deepStrictEqual(details.structured.notFound, ["missing"])
  })

  it("mem-stats reports counts and a warm index", async () => {
    const stats = await engine.ok("mem-stats", {})
    assert.include(stats.text, "## Memory Statistics")
    assert.strictEqual(stats.structured.state, "warm")
    assert.strictEqual(stats.structured.index.documents, 5)
    assert.strictEqual(stats.structured.index.byStore.graph, 5)
    assert.isAbove(stats.structured.memory.heapUsedBytes, 0, "the heap of the thread search runs in")
    assert.match(stats.text, /Search Memory\*\*: [\d.]+ MiB heap, [\d.]+ MiB array buffers/)
  })

  it("omni_search filters by store, type and time; search_graph ranks entities", async () => {
    const none = await engine.ok("omni_search", { query: "cents", stores: ["conversations"] })
    assert.deepStrictEqual(none.structured.results, [])
    const entities = await engine.ok("omni_search", { query: "ledger", kinds: ["entity"], mode: "lexical" })
    assert.deepStrictEqual(
      (entities.structured.results as Array<IndexEntry>).map((result) => result.type),
      ["entity"],
    )
    const future = await engine.ok("omni_search", { query: "ledger", since: "2999-01-01" })
    assert.deepStrictEqual(future.structured.results, [])
    const graph = await engine.ok("search_graph", { query: "money stored as whole numbers" })
    assert.strictEqual(graph.structured.entities[0].name, "Ledger service")
  })

  it("refuses bad arguments with the error envelope", async () => {
    const notANumber = await engine.call("mem-search", { query: "x", topK: "many" })
    assert.isTrue(notANumber.isError)
    assert.strictEqual(JSON.parse(notANumber.text).error.code, "VALIDATION_ERROR")
    const badDate = await engine.call("omni_search", { query: "x", since: "yesterday-ish" })
    assert.isTrue(badDate.isError)
    const empty = await engine.call("mem-details", { ids: [] })
    assert.isTrue(empty.isError)
  })
})

describe("seed 000's mem-search arguments", () => {
  let engine: SearchEngine
  beforeAll(async () => {
    engine = await openSearchEngine(undefined, undefined, [graphStore, conversationStore])
  })
  afterAll(async () => {
    await engine.close()
  })
  const message = (role: string, content: string, metadata: Record<string, unknown> = {}) =>
    engine.ok("write_message", { session_id: "seed-000", role, content, metadata_json: JSON.stringify(metadata) })

  it("eventType prompt, response, tool and insight find user turns, assistant turns, tool records and insights", async () => {
    await message("user", "how do we rotate the kafka credentials")
    await message("assistant", "rotate the kafka credentials with the vault job")
    await message("assistant", "kafka credentials rotated by the vault job: exit 0", { tool_call_id: "call-7" })
    await message("assistant", "kafka credentials must be rotated monthly", { memory_kind: "semantic" })
    const found = async (eventType: string) => {
      const reply = await engine.ok("mem-search", { query: "kafka credentials", eventType, mode: "lexical", topK: 10 })
      return (reply.structured.results as Array<IndexEntry>).map((result) => result.summary).sort()
    }
    assert.deepStrictEqual(await found("prompt"), ["how do we rotate the kafka credentials"])
    assert.deepStrictEqual(await found("response"), [
      "kafka credentials must be rotated monthly",
      "kafka credentials rotated by the vault job: exit 0",
      "rotate the kafka credentials with the vault job",
    ])
    assert.deepStrictEqual(await found("tool"), ["kafka credentials rotated by the vault job: exit 0"])
    assert.deepStrictEqual(await found("insight"), ["kafka credentials must be rotated monthly"])
    // Any other value still names a record type.
    assert.strictEqual((await found("message")).length, 4)
  })

  it("shows each conversation turn typed by role, as seed 000 does, and each type shown finds its turn as an eventType", async () => {
    const session = "seed-000-types"
    const turn = (role: string, content: string, metadata: Record<string, unknown> = {}) =>
      engine.ok("write_message", { session_id: session, role, content, metadata_json: JSON.stringify(metadata) })
    await turn("system", "quokka rules: answer briefly")
    await turn("user", "how should the quokka schema look")
    await turn("assistant", "the quokka schema keeps events append-only")
    await turn("assistant", "quokka migration ran: exit 0", { tool_call_id: "call-9" })
    const search = await engine.ok("mem-search", {
      query: "quokka",
      sessionId: session,
      mode: "lexical",
      topK: 10,
    })
    const results = search.structured.results as Array<IndexEntry & { kind: string }>
    const typeOf = new Map(results.map((result) => [result.summary, result.type]))
    assert.deepStrictEqual(Object.fromEntries(typeOf), {
      "quokka rules: answer briefly": "system",
      "how should the quokka schema look": "prompt",
      "the quokka schema keeps events append-only": "response",
      "quokka migration ran: exit 0": "tool",
    })
    for (const result of results) {
      assert.strictEqual(result.kind, "message")
      assert.include(search.text, `**Store**: conversations/${result.type}`)
    }
    const answer = results.find((result) => result.type === "response")!
    const timeline = await engine.ok("mem-timeline", { ids: [answer.id], windowSize: 5 })
    assert.include(timeline.text, "| prompt | [mem:")
    assert.include(timeline.text, "| system | [mem:")
    assert.include(timeline.text, "| tool | [mem:")
    assert.include(timeline.text, `| **response** | **[mem:${answer.id}]`)
    assert.notInclude(timeline.text, "| message |")
    const details = await engine.ok("mem-details", { ids: results.map((result) => result.id) })
    assert.include(details.text, "**Type**: assistant_response")
    assert.include(details.text, "**Type**: prompt")
    assert.notInclude(details.text, "**Type**: message")
    const shown = (details.structured.memories as Array<{ id: string; type: string }>).map((memory) => memory.type)
    // Every type shown, in the index or in the details, is an eventType that finds the record.
    for (const [id, type] of [
      ...results.map((result) => [result.id, result.type] as const),
      ...(details.structured.memories as Array<{ id: string; type: string }>).map(
        (memory) => [memory.id, memory.type] as const,
      ),
    ]) {
      const filtered = await engine.ok("mem-search", {
        query: "quokka",
        sessionId: session,
        eventType: type,
        mode: "lexical",
        topK: 10,
      })
      assert.include(
        (filtered.structured.results as Array<IndexEntry>).map((result) => result.id),
        id,
        `eventType ${type}`,
      )
    }
    assert.includeMembers(shown, ["assistant_response", "prompt", "system", "tool"])
    const omni = await engine.ok("omni_search", { query: "quokka", mode: "lexical", limit: 10 })
    assert.includeMembers(
      (omni.structured.results as Array<{ type: string }>).map((result) => result.type),
      ["prompt", "response", "system", "tool"],
    )
  })

  it("topK above 20 is read as 20, as seed 000 clamps it; below 1 as the default", async () => {
    for (let index = 0; index < 24; index++) await message("user", `zeppelin hangar note number ${index}`)
    const many = await engine.ok("mem-search", { query: "zeppelin hangar", mode: "lexical", topK: 100 })
    assert.strictEqual((many.structured.results as Array<IndexEntry>).length, 20)
    const none = await engine.ok("mem-search", { query: "zeppelin hangar", mode: "lexical", topK: 0 })
    assert.strictEqual((none.structured.results as Array<IndexEntry>).length, 5)
  })

  it("mem-details shows a message's content verbatim, its summary and tags as fields of their own", async () => {
    const content = "The retry budget is 3 attempts.\n\nSee ```retry.ts``` for the loop."
    await message("assistant", content, { summary: "retry budget decided", tags: ["retries", "budget"] })
    const search = await engine.ok("mem-search", { query: "retry budget attempts", mode: "lexical", topK: 1 })
    const id = (search.structured.results as Array<IndexEntry>)[0]!.id
    const details = await engine.ok("mem-details", { ids: [id] })
    const [memory] = details.structured.memories as Array<{ content: string; summary: string; tags: Array<string> }>
    assert.strictEqual(memory!.content, content)
    assert.strictEqual(memory!.summary, "retry budget decided")
    assert.deepStrictEqual(memory!.tags, ["retries", "budget"])
    assert.include(details.text, "**Summary**: retry budget decided")
    assert.include(details.text, "**Tags**: retries, budget")
    assert.notInclude(details.text, "retries budget") // the index's joined text is not shown as the content
  })
})
