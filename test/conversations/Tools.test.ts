/**
 * The seven conversation tools through the real stack (engine on a temporary data directory, MCP
 * session, SDK client): each documented success shape, each argument limit, and the error codes
 * a caller can cause (VALIDATION_ERROR, NOT_FOUND, CONFLICT). Store-level codes (BUSY, IO_ERROR,
 * CORRUPT_STORE, INTERNAL_ERROR) are in Failures.test.ts.
 */
import { ResultSchema } from "@modelcontextprotocol/sdk/types.js"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { openEngine, type Reply, removeTempDirs, type TestEngine } from "./engine.ts"

let engine: TestEngine
beforeAll(async () => {
  engine = await openEngine()
})
afterAll(async () => {
  await engine.close()
  removeTempDirs()
})

const ulidPattern = /^[0-7][0-9A-HJKMNP-TV-Z]{25}$/
const messageKeys = ["message_id", "session_id", "timestamp", "role", "content", "revision", "updated_at", "metadata"]

const write = async (session: string, content: string, metadata?: object, role = "user") =>
  (
    await engine.ok("write_message", {
      session_id: session,
      role,
      content,
      ...(metadata !== undefined ? { metadata_json: JSON.stringify(metadata) } : {}),
    })
  ).json.message

const expectError = (reply: Reply, code: string) => {
  expect(reply.isError).toBe(true)
  expect(reply.json).toMatchObject({ status: "ERROR", error: { code } })
  expect(Object.keys(reply.json)).toEqual(["status", "error"])
  expect(typeof reply.json.error.message).toBe("string")
}

describe("write_message", () => {
  it("stores a message with server-made id, timestamps, revision 1 and every metadata default, in the seed's key order", async () => {
    const reply = await engine.ok("write_message", { session_id: "w-1", role: "user", content: "Remember this" })
    expect(Object.keys(reply.json)).toEqual(["status", "message"])
    expect(reply.json.status).toBe("OK")
    const message = reply.json.message
    expect(Object.keys(message)).toEqual(messageKeys)
    expect(message.message_id).toMatch(ulidPattern)
    expect(message).toMatchObject({ session_id: "w-1", role: "user", content: "Remember this", revision: 1 })
    expect(message.updated_at).toBe(message.timestamp)
    expect(message.metadata).toEqual({
      tags: [],
      memory_tier: "short",
      memory_kind: "conversation",
      importance: 50,
      relations: [],
      source_message_ids: [],
    })
    expect(Object.keys(message.metadata)).toEqual([
      "tags",
      "memory_tier",
      "memory_kind",
      "importance",
      "relations",
      "source_message_ids",
    ])
    // The same object as structured content, and compact JSON text.
    expect(reply.structured).toEqual(reply.json)
    expect(reply.text).toBe(JSON.stringify(reply.json))
  })

  it("keeps every metadata field given, in the seed's order; an empty summary is unset", async () => {
    const first = await write("w-2", "first")
    const message = await write("w-2", "second", {
      summary: "the summary",
      relations: [{ type: "derived_from", message_id: first.message_id }],
      importance: 80,
      tool_call_id: "call-7",
      tags: ["project", "decision"],
      memory_tier: "long",
      memory_kind: "semantic",
      source_message_ids: [first.message_id],
    })
    expect(Object.keys(message.metadata)).toEqual([
      "tool_call_id",
      "tags",
      "memory_tier",
      "memory_kind",
      "importance",
      "summary",
      "relations",
      "source_message_ids",
    ])
    expect(message.metadata.relations).toEqual([{ type: "derived_from", message_id: first.message_id }])
    const unset = await write("w-2", "third", { summary: "", tool_call_id: "" })
    expect(unset.metadata).not.toHaveProperty("summary")
    expect(unset.metadata).not.toHaveProperty("tool_call_id")
  })

  it("issues strictly increasing ids", async () => {
    const ids: Array<string> = []
    for (let index = 0; index < 20; index++) ids.push((await write("w-3", `m${index}`)).message_id)
    expect([...ids].sort()).toEqual(ids)
    expect(new Set(ids).size).toBe(ids.length)
  })

  it("accepts the limits exactly and refuses one past them with VALIDATION_ERROR", async () => {
    const mib = 1024 * 1024
    const ok = await engine.call("write_message", {
      session_id: "s".repeat(256),
      role: "system",
      content: "x".repeat(mib),
      metadata_json: JSON.stringify({
        tags: Array.from({ length: 32 }, (_, index) => `${index}`.padEnd(128, "t")),
        summary: "s".repeat(4096),
        tool_call_id: "c".repeat(256),
        importance: 100,
      }),
    })
    expect(ok.isError).toBe(false)
    const refused: Array<[string, object]> = [
      ["content over 1 MiB", { content: "x".repeat(mib + 1) }],
      ["content of a 4-byte character over 1 MiB", { content: "😀".repeat(mib / 4) + "x" }],
      ["empty content", { content: "" }],
      ["session_id over 256 bytes", { session_id: "é".repeat(129) }],
      ["empty session_id", { session_id: "" }],
      ["unknown role", { role: "tool" }],
      ["33 tags", { metadata_json: JSON.stringify({ tags: Array.from({ length: 33 }, (_, i) => `t${i}`) }) }],
      ["a tag over 128 bytes", { metadata_json: JSON.stringify({ tags: ["t".repeat(129)] }) }],
      ["an empty tag", { metadata_json: JSON.stringify({ tags: [""] }) }],
      ["importance 101", { metadata_json: JSON.stringify({ importance: 101 }) }],
      ["importance -1", { metadata_json: JSON.stringify({ importance: -1 }) }],
      ["importance 1.5", { metadata_json: JSON.stringify({ importance: 1.5 }) }],
      ["summary over 4096 bytes", { metadata_json: JSON.stringify({ summary: "s".repeat(4097) }) }],
      ["tool_call_id over 256 bytes", { metadata_json: JSON.stringify({ tool_call_id: "c".repeat(257) }) }],
      ["unknown tier", { metadata_json: JSON.stringify({ memory_tier: "forever" }) }],
      ["unknown kind", { metadata_json: JSON.stringify({ memory_kind: "gossip" }) }],
      [
        "33 relations",
        {
          metadata_json: JSON.stringify({
            relations: Array.from({ length: 33 }, () => ({
              type: "related_to",
              message_id: ok.json.message.message_id,
            })),
          }),
        },
      ],
      [
        "unknown relation type",
        { metadata_json: JSON.stringify({ relations: [{ type: "likes", message_id: ok.json.message.message_id }] }) },
      ],
      [
        "65 source ids",
        { metadata_json: JSON.stringify({ source_message_ids: Array(65).fill(ok.json.message.message_id) }) },
      ],
      [
        "a lower-case ULID",
        { metadata_json: JSON.stringify({ source_message_ids: [ok.json.message.message_id.toLowerCase()] }) },
      ],
      ["an unknown metadata key", { metadata_json: JSON.stringify({ tag: ["typo"] }) }],
      ["metadata_json that is not JSON", { metadata_json: "{tags:" }],
      ["metadata_json that is an array", { metadata_json: "[]" }],
      ["metadata_json as an object", { metadata_json: { tags: [] } }],
    ]
    for (const [what, change] of refused) {
      const reply = await engine.call("write_message", { session_id: "w-4", role: "user", content: "c", ...change })
      expect(reply.isError, what).toBe(true)
      expectError(reply, "VALIDATION_ERROR")
    }
  })
})

describe("read_messages: history", () => {
  it("returns a session's live messages in creation order, paged by limit and opaque cursors", async () => {
    const written = []
    for (let index = 0; index < 7; index++) written.push(await write("h-1", `message ${index}`))
    await write("h-other", "not in h-1")
    const all = await engine.ok("read_messages", { session_id: "h-1" })
    expect(Object.keys(all.json)).toEqual(["history"])
    expect(all.json.history).toEqual(written)
    const pages: Array<Array<{ message_id: string }>> = []
    let cursor: string | undefined
    do {
      const page = await engine.ok("read_messages", {
        view: "history",
        session_id: "h-1",
        limit: 3,
        ...(cursor ? { cursor } : {}),
      })
      pages.push(page.json.history)
      cursor = page.json.nextCursor
    } while (cursor !== undefined)
    expect(pages.map((page) => page.length)).toEqual([3, 3, 1])
    expect(pages.flat()).toEqual(written)
  })

  it("skips deleted messages and keeps paging across deletes", async () => {
    const written = []
    for (let index = 0; index < 4; index++) written.push(await write("h-2", `message ${index}`))
    const first = await engine.ok("read_messages", { session_id: "h-2", limit: 2 })
    await engine.ok("delete_message", { message_id: written[2].message_id })
    const rest = await engine.ok("read_messages", { session_id: "h-2", limit: 2, cursor: first.json.nextCursor })
    expect(rest.json.history.map((message: { content: string }) => message.content)).toEqual(["message 3"])
    expect(rest.json).not.toHaveProperty("nextCursor")
  })

  it("an unknown session is an empty history", async () => {
    expect((await engine.ok("read_messages", { session_id: "nobody" })).json).toEqual({ history: [] })
  })

  it("refuses a missing session_id, a foreign cursor and a forged cursor", async () => {
    await write("h-3", "a")
    await write("h-3", "b")
    const page = await engine.ok("read_messages", { session_id: "h-3", limit: 1 })
    expectError(await engine.call("read_messages", {}), "VALIDATION_ERROR")
    expectError(
      await engine.call("read_messages", { session_id: "h-1", cursor: page.json.nextCursor }),
      "VALIDATION_ERROR",
    )
    expectError(await engine.call("read_messages", { session_id: "h-3", cursor: "not a cursor!" }), "VALIDATION_ERROR")
    expectError(await engine.call("read_messages", { session_id: "h-3", cursor: "eyJ2IjoyfQ" }), "VALIDATION_ERROR")
    expectError(
      await engine.call("read_messages", { view: "sessions", cursor: page.json.nextCursor }),
      "VALIDATION_ERROR",
    )
    expectError(await engine.call("read_messages", { session_id: "h-3", limit: 0 }), "VALIDATION_ERROR")
    expectError(await engine.call("read_messages", { session_id: "h-3", limit: 1001 }), "VALIDATION_ERROR")
    expectError(await engine.call("read_messages", { view: "everything" }), "VALIDATION_ERROR")
  })

  it("stops within the 8 MiB response budget and hands out a cursor to the rest", async () => {
    const big = "b".repeat(1024 * 1024 - 1)
    for (let index = 0; index < 10; index++) await write("h-big", `${index}${big}`)
    const seen: Array<string> = []
    let cursor: string | undefined
    let pages = 0
    do {
      const page = await engine.ok("read_messages", { session_id: "h-big", ...(cursor ? { cursor } : {}) })
      expect(Buffer.byteLength(page.text)).toBeLessThanOrEqual(8 * 1024 * 1024)
      seen.push(...page.json.history.map((message: { content: string }) => message.content[0]))
      cursor = page.json.nextCursor
      pages++
    } while (cursor !== undefined)
    expect(pages).toBeGreaterThan(1)
    expect(seen).toEqual(["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"])
  })
})

describe("read_messages: context", () => {
  it("returns the message, its neighbours and its relations in both directions, in the seed's shape", async () => {
    const before = await write("c-1", "before")
    const target = await write("c-1", "target")
    const after = await write("c-1", "after")
    const elsewhere = await write("c-2", "elsewhere", {
      relations: [{ type: "depends_on", message_id: target.message_id }],
    })
    const updated = (
      await engine.ok("update_message", {
        message_id: target.message_id,
        metadata_json: JSON.stringify({ relations: [{ type: "supersedes", message_id: before.message_id }] }),
      })
    ).json.message
    const reply = await engine.ok("read_messages", { view: "context", message_id: target.message_id })
    expect(Object.keys(reply.json)).toEqual(["message", "chronological_context", "relations", "session", "truncated"])
    expect(reply.json).toEqual({
      message: updated,
      chronological_context: { before: [before], after: [after] },
      relations: [
        { type: "supersedes", direction: "outgoing", depth: 1, message: before },
        { type: "depends_on", direction: "incoming", depth: 1, message: elsewhere },
      ],
      session: { session_id: "c-1", message_count: 3 },
      truncated: false,
    })
  })

  it("follows relations two hops deep, filters them by type, and reports deleted targets", async () => {
    const root = await write("c-3", "root")
    const middle = await write("c-3", "middle", { relations: [{ type: "derived_from", message_id: root.message_id }] })
    const leaf = await write("c-3", "leaf", { relations: [{ type: "derived_from", message_id: middle.message_id }] })
    const gone = await write("c-3", "gone")
    await engine.ok("update_message", {
      message_id: root.message_id,
      metadata_json: JSON.stringify({ relations: [{ type: "related_to", message_id: gone.message_id }] }),
    })
    await engine.ok("delete_message", { message_id: gone.message_id })
    const deep = await engine.ok("read_messages", {
      view: "context",
      message_id: leaf.message_id,
      before: 0,
      after: 0,
      relation_depth: 2,
    })
    expect(deep.json.chronological_context).toEqual({ before: [], after: [] })
    expect(
      deep.json.relations.map(
        (relation: {
          type: string
          direction: string
          depth: number
          message?: { content: string }
          message_id?: string
          status?: string
        }) => [relation.type, relation.direction, relation.depth, relation.message?.content ?? relation.status],
      ),
    ).toEqual([
      ["derived_from", "outgoing", 1, "middle"],
      ["derived_from", "outgoing", 2, "root"],
    ])
    const fromRoot = await engine.ok("read_messages", {
      view: "context",
      message_id: root.message_id,
      relation_depth: 1,
    })
    expect(fromRoot.json.relations).toContainEqual({
      type: "related_to",
      direction: "outgoing",
      depth: 1,
      message_id: gone.message_id,
      status: "deleted",
    })
    const filtered = await engine.ok("read_messages", {
      view: "context",
      message_id: root.message_id,
      relation_types_json: JSON.stringify(["related_to"]),
    })
    expect(filtered.json.relations.map((relation: { type: string }) => relation.type)).toEqual(["related_to"])
    const none = await engine.ok("read_messages", { view: "context", message_id: root.message_id, relation_depth: 0 })
    expect(none.json.relations).toEqual([])
  })

  it("marks the answer truncated at 50 messages", async () => {
    const hub = await write("c-4", "hub")
    for (let index = 0; index < 60; index++)
      await write("c-4-spokes", `spoke ${index}`, { relations: [{ type: "related_to", message_id: hub.message_id }] })
    const reply = await engine.ok("read_messages", { view: "context", message_id: hub.message_id })
    expect(reply.json.truncated).toBe(true)
    expect(reply.json.relations.length).toBe(49)
  })

  it("NOT_FOUND for an unknown or deleted message; VALIDATION_ERROR for bad arguments", async () => {
    const message = await write("c-5", "soon gone")
    await engine.ok("delete_message", { message_id: message.message_id })
    expectError(await engine.call("read_messages", { view: "context", message_id: message.message_id }), "NOT_FOUND")
    expectError(
      await engine.call("read_messages", { view: "context", message_id: "01ARZ3NDEKTSV4RRFFQ69G5FAV" }),
      "NOT_FOUND",
    )
    expectError(await engine.call("read_messages", { view: "context" }), "VALIDATION_ERROR")
    expectError(await engine.call("read_messages", { view: "context", message_id: "nope" }), "VALIDATION_ERROR")
    expectError(
      await engine.call("read_messages", { view: "context", message_id: message.message_id, before: 11 }),
      "VALIDATION_ERROR",
    )
    expectError(
      await engine.call("read_messages", { view: "context", message_id: message.message_id, relation_depth: 3 }),
      "VALIDATION_ERROR",
    )
    expectError(
      await engine.call("read_messages", {
        view: "context",
        message_id: message.message_id,
        relation_types_json: '["likes"]',
      }),
      "VALIDATION_ERROR",
    )
  })
})

describe("read_messages: sessions", () => {
  it("lists sessions with counts per kind, a representative summary and their times, paged in a stable order", async () => {
    const other = await openEngine()
    try {
      const first = (await other.ok("write_message", { session_id: "alpha", role: "user", content: "hello alpha" }))
        .json.message
      await other.ok("write_message", {
        session_id: "beta",
        role: "user",
        content: "hello beta",
        metadata_json: '{"memory_kind":"semantic"}',
      })
      const last = (
        await other.ok("write_message", {
          session_id: "alpha",
          role: "assistant",
          content: "answer",
          metadata_json: '{"summary":"alpha in short","memory_kind":"summary"}',
        })
      ).json.message
      await other.ok("write_message", { session_id: "gamma", role: "user", content: "only message" })
      const gammaId = (await other.ok("read_messages", { session_id: "gamma" })).json.history[0].message_id
      await other.ok("delete_message", { message_id: gammaId })
      const all = await other.ok("read_messages", { view: "sessions" })
      expect(all.json).toEqual({
        sessions: [
          {
            session_id: "alpha",
            message_count: 2,
            kind_counts: { conversation: 1, episode: 0, semantic: 0, procedure: 0, preference: 0, summary: 1 },
            representative_summary: "alpha in short",
            started_at: first.timestamp,
            last_message_at: last.timestamp,
          },
          expect.objectContaining({ session_id: "beta", message_count: 1, representative_summary: "hello beta" }),
        ],
      })
      const page1 = await other.ok("read_messages", { view: "sessions", limit: 1 })
      const page2 = await other.ok("read_messages", { view: "sessions", limit: 1, cursor: page1.json.nextCursor })
      expect([page1.json.sessions[0].session_id, page2.json.sessions[0].session_id]).toEqual(["alpha", "beta"])
      expect(page2.json).not.toHaveProperty("nextCursor")
    } finally {
      await other.close()
    }
  })
})

describe("search_messages", () => {
  let searchEngine: TestEngine
  const ids: Record<string, string> = {}
  beforeAll(async () => {
    searchEngine = await openEngine()
    const put = async (name: string, session: string, content: string, metadata: object = {}) => {
      ids[name] = (
        await searchEngine.ok("write_message", {
          session_id: session,
          role: "user",
          content,
          metadata_json: JSON.stringify(metadata),
        })
      ).json.message.message_id
    }
    await put("db", "s1", "We chose Postgres as the database", {
      memory_kind: "semantic",
      memory_tier: "long",
      tags: ["project", "confirmed"],
      importance: 90,
    })
    await put("dbSummary", "s1", "Meeting notes", {
      summary: "database decision",
      memory_kind: "summary",
      tags: ["project"],
      importance: 60,
    })
    await put("dbTag", "s2", "Unrelated words here", {
      tags: ["database"],
      memory_kind: "preference",
      memory_tier: "mid",
      importance: 30,
    })
    await put("both", "s2", "database schema draft", {
      summary: "database schema",
      tags: ["project", "confirmed"],
      memory_kind: "procedure",
      importance: 50,
    })
    await put("ja", "s3", "データベースの設計を決めた", { memory_kind: "episode" })
    await put("noise", "s3", "nothing to see")
  })
  afterAll(() => searchEngine.close())

  const search = async (args: object) => (await searchEngine.ok("search_messages", args)).json.results
  const names = (results: Array<{ message_id: string }>) =>
    results.map((result) => Object.entries(ids).find(([, id]) => id === result.message_id)![0])

  it("answers each result as the message plus score, score_breakdown, matched_fields and relation_count", async () => {
    const results = await search({ query: "database" })
    const both = results.find((result: { message_id: string }) => result.message_id === ids.both)
    expect(Object.keys(both)).toEqual([...messageKeys, "score", "score_breakdown", "matched_fields", "relation_count"])
    expect(both.score_breakdown).toEqual({ content: 1, summary: 1, tags: 0 })
    expect(both.score).toBe(2)
    expect(both.matched_fields).toEqual(["content", "summary"])
    expect(both.relation_count).toBe(0)
  })

  it("ranks by score, then importance; a partial match scores below a full one", async () => {
    expect(names(await search({ query: "database" }))).toEqual(["both", "db", "dbSummary", "dbTag"])
    const partial = await search({ query: "postgres schema" })
    expect(names(partial)).toEqual(expect.arrayContaining(["db", "both"]))
    for (const result of partial) {
      expect(result.score_breakdown.content).toBeGreaterThan(0)
      expect(result.score_breakdown.content).toBeLessThan(1)
    }
  })

  it("finds Japanese text by character bigrams", async () => {
    expect(names(await search({ query: "データベース" }))).toEqual(["ja"])
    expect(names(await search({ query: "設計" }))).toEqual(["ja"])
  })

  it("filters: kinds and tiers are OR inside, AND between; tags must all be present; min_importance; session_id", async () => {
    expect(names(await search({ query: "database", filters_json: '{"kinds":["semantic","summary"]}' }))).toEqual([
      "db",
      "dbSummary",
    ])
    expect(
      names(await search({ query: "database", filters_json: '{"kinds":["semantic","preference"],"tiers":["mid"]}' })),
    ).toEqual(["dbTag"])
    expect(names(await search({ query: "database", filters_json: '{"tags":["project","confirmed"]}' }))).toEqual([
      "both",
      "db",
    ])
    expect(names(await search({ query: "database", filters_json: '{"tags":["project","unknown"]}' }))).toEqual([])
    expect(names(await search({ query: "database", min_importance: 60 }))).toEqual(["db", "dbSummary"])
    expect(names(await search({ query: "database", session_id: "s2" }))).toEqual(["both", "dbTag"])
    expect(names(await search({ query: "database", limit: 1 }))).toEqual(["both"])
  })

  it("adds context_preview only when context_size > 0, and counts relations", async () => {
    await searchEngine.ok("update_message", {
      message_id: ids.noise,
      metadata_json: JSON.stringify({ relations: [{ type: "related_to", message_id: ids.ja }] }),
    })
    const [ja] = await search({ query: "データベース", context_size: 1 })
    expect(ja.relation_count).toBe(1)
    expect(ja.context_preview.before).toEqual([])
    expect(ja.context_preview.after.map((message: { message_id: string }) => message.message_id)).toEqual([ids.noise])
    const [plain] = await search({ query: "データベース" })
    expect(plain).not.toHaveProperty("context_preview")
  })

  it("sees writes, updates and deletes at once, and changes nothing itself", async () => {
    const health = (await searchEngine.ok("get_system_health", {})).json
    await search({ query: "database" })
    expect((await searchEngine.ok("get_system_health", {})).json.last_sequence).toBe(health.last_sequence)
    const id = (await searchEngine.ok("write_message", { session_id: "s4", role: "user", content: "zebra crossing" }))
      .json.message.message_id
    expect((await search({ query: "zebra" })).map((result: { message_id: string }) => result.message_id)).toEqual([id])
    await searchEngine.ok("update_message", { message_id: id, content: "giraffe crossing" })
    expect(await search({ query: "zebra" })).toEqual([])
    expect((await search({ query: "giraffe" })).length).toBe(1)
    await searchEngine.ok("delete_message", { message_id: id })
    expect(await search({ query: "giraffe" })).toEqual([])
  })

  it("refuses bad arguments with VALIDATION_ERROR", async () => {
    for (const args of [
      {},
      { query: "" },
      { query: "q".repeat(4097) },
      { query: "q", limit: 0 },
      { query: "q", limit: 101 },
      { query: "q", context_size: 4 },
      { query: "q", min_importance: 101 },
      { query: "q", filters_json: '{"kinds":["gossip"]}' },
      { query: "q", filters_json: '{"kind":["semantic"]}' },
      { query: "q", filters_json: "not json" },
    ])
      expectError(await searchEngine.call("search_messages", args), "VALIDATION_ERROR")
  })
})

describe("update_message", () => {
  it("changes only what it is given, bumps the revision and updated_at, keeps identity", async () => {
    const original = await write("u-1", "original", { tags: ["a"], importance: 10, summary: "keep me" })
    const reply = await engine.ok("update_message", {
      message_id: original.message_id,
      metadata_json: JSON.stringify({ importance: 70 }),
      expected_revision: 1,
    })
    expect(Object.keys(reply.json)).toEqual(["status", "changed", "message"])
    expect(reply.json).toMatchObject({ status: "OK", changed: true })
    const updated = reply.json.message
    expect(updated).toEqual({
      ...original,
      revision: 2,
      updated_at: updated.updated_at,
      metadata: { ...original.metadata, importance: 70 },
    })
    expect(updated.updated_at).toBeGreaterThanOrEqual(original.updated_at)
    const content = (await engine.ok("update_message", { message_id: original.message_id, content: "new text" })).json
      .message
    expect(content).toMatchObject({ content: "new text", revision: 3, metadata: updated.metadata })
  })

  it("an update to the same values answers changed:false and writes nothing", async () => {
    const original = await write("u-2", "same", { tags: ["x"] })
    const before = (await engine.ok("get_system_health", {})).json
    const reply = await engine.ok("update_message", {
      message_id: original.message_id,
      content: "same",
      metadata_json: JSON.stringify({ tags: ["x"], importance: 50 }),
    })
    expect(reply.json).toEqual({ status: "OK", changed: false, message: original })
    const after = (await engine.ok("get_system_health", {})).json
    expect(after.last_sequence).toBe(before.last_sequence)
    expect(after.update_records).toBe(before.update_records)
  })

  it("CONFLICT on a stale expected_revision, NOT_FOUND on a missing or deleted message, VALIDATION_ERROR without changes", async () => {
    const message = await write("u-3", "v1")
    await engine.ok("update_message", { message_id: message.message_id, content: "v2", expected_revision: 1 })
    expectError(
      await engine.call("update_message", { message_id: message.message_id, content: "v3", expected_revision: 1 }),
      "CONFLICT",
    )
    expectError(
      await engine.call("update_message", { message_id: "01ARZ3NDEKTSV4RRFFQ69G5FAV", content: "x" }),
      "NOT_FOUND",
    )
    expectError(await engine.call("update_message", { message_id: message.message_id }), "VALIDATION_ERROR")
    expectError(
      await engine.call("update_message", { message_id: message.message_id, content: "x", expected_revision: 0 }),
      "VALIDATION_ERROR",
    )
    expectError(
      await engine.call("update_message", {
        message_id: message.message_id,
        metadata_json: JSON.stringify({ relations: [{ type: "related_to", message_id: message.message_id }] }),
      }),
      "VALIDATION_ERROR",
    )
    await engine.ok("delete_message", { message_id: message.message_id })
    expectError(await engine.call("update_message", { message_id: message.message_id, content: "x" }), "NOT_FOUND")
  })
})

describe("delete_message", () => {
  it('answers {"status":"OK"} once, then {"status":"NOT_FOUND"} (not an error); the session guard protects', async () => {
    const message = await write("d-1", "delete me")
    const guarded = await engine.call("delete_message", { message_id: message.message_id, session_id: "d-other" })
    expect(guarded).toMatchObject({ isError: false, json: { status: "NOT_FOUND" } })
    expect((await engine.ok("read_messages", { session_id: "d-1" })).json.history).toHaveLength(1)
    expect((await engine.ok("delete_message", { message_id: message.message_id, session_id: "d-1" })).json).toEqual({
      status: "OK",
    })
    expect((await engine.ok("read_messages", { session_id: "d-1" })).json.history).toEqual([])
    const again = await engine.call("delete_message", { message_id: message.message_id })
    expect(again).toMatchObject({ isError: false, json: { status: "NOT_FOUND" } })
    expect(again.structured).toEqual({ status: "NOT_FOUND" })
    expect((await engine.call("delete_message", { message_id: "01ARZ3NDEKTSV4RRFFQ69G5FAV" })).json).toEqual({
      status: "NOT_FOUND",
    })
    expectError(await engine.call("delete_message", { message_id: "01arz3ndektsv4rrffq69g5fav" }), "VALIDATION_ERROR")
  })
})

describe("rebuild_index and get_system_health", () => {
  it("health reports counts and the seed's fields; rebuild_index removes deleted messages and reports it", async () => {
    const fresh = await openEngine()
    try {
      const ids = []
      for (let index = 0; index < 5; index++)
        ids.push(
          (await fresh.ok("write_message", { session_id: "r", role: "user", content: `message ${index} `.repeat(50) }))
            .json.message.message_id,
        )
      await fresh.ok("update_message", { message_id: ids[0], content: "short" })
      await fresh.ok("delete_message", { message_id: ids[1] })
      await fresh.ok("delete_message", { message_id: ids[2] })
      const health = (await fresh.ok("get_system_health", {})).json
      expect(Object.keys(health)).toEqual([
        "status",
        "format_version",
        "log_size",
        "snapshot_size",
        "active_messages",
        "deleted_messages",
        "last_sequence",
        "update_records",
        "dead_bytes",
        "memory_estimate",
        "io",
        "recovered_tail",
        "snapshot_valid",
        "last_error",
      ])
      expect(Object.keys(health.memory_estimate)).toEqual([
        "total_bytes",
        "store_entries_bytes",
        "body_bytes",
        "metadata_bytes",
        "search_index_bytes",
        "history_index_bytes",
        "relation_index_bytes",
      ])
      expect(Object.keys(health.io)).toEqual([
        "write_bytes",
        "write_calls",
        "flush_calls",
        "truncate_calls",
        "replace_calls",
      ])
      expect(health).toMatchObject({
        status: "OK",
        active_messages: 3,
        deleted_messages: 2,
        update_records: 1,
        recovered_tail: false,
        snapshot_valid: true,
        last_error: "",
      })
      expect(health.last_sequence).toBe(8)
      expect(health.dead_bytes).toBeGreaterThan(2 * 500)
      const rebuilt = (await fresh.ok("rebuild_index", {})).json
      expect(Object.keys(rebuilt)).toEqual([
        "status",
        "messages_indexed",
        "records_removed",
        "bytes_before",
        "bytes_after",
      ])
      expect(rebuilt).toMatchObject({ status: "OK", messages_indexed: 3, records_removed: 2 })
      expect(rebuilt.bytes_before).toBeGreaterThan(0)
      expect(rebuilt.bytes_after).toBeGreaterThan(0)
      expect((await fresh.ok("get_system_health", {})).json).toMatchObject({
        active_messages: 3,
        deleted_messages: 0,
        dead_bytes: 0,
      })
      // Deleted ids are gone for good: delete says NOT_FOUND, search cannot find them.
      expect((await fresh.ok("delete_message", { message_id: ids[1] })).json).toEqual({ status: "NOT_FOUND" })
      expect((await fresh.ok("rebuild_index", {})).json).toMatchObject({ messages_indexed: 3, records_removed: 0 })
    } finally {
      await fresh.close()
    }
  })
})

describe("tools/list", () => {
  it("offers the seven tools with input schemas naming the seed's arguments", async () => {
    // A loose result schema: the SDK's listTools() validates every tool of the catalogue, other stores' too.
    const { tools } = (await engine.client.request({ method: "tools/list" }, ResultSchema)) as unknown as {
      tools: Array<{ name: string; inputSchema: unknown }>
    }
    const byName = new Map(tools.map((tool) => [tool.name, tool]))
    const expected: Record<string, { required: Array<string>; properties: Array<string> }> = {
      write_message: {
        required: ["session_id", "role", "content"],
        properties: ["session_id", "role", "content", "metadata_json"],
      },
      read_messages: {
        required: [],
        properties: [
          "view",
          "limit",
          "cursor",
          "session_id",
          "message_id",
          "before",
          "after",
          "relation_depth",
          "relation_types_json",
        ],
      },
      search_messages: {
        required: ["query"],
        properties: ["query", "session_id", "filters_json", "min_importance", "context_size", "limit"],
      },
      update_message: {
        required: ["message_id"],
        properties: ["message_id", "content", "metadata_json", "expected_revision"],
      },
      delete_message: { required: ["message_id"], properties: ["message_id", "session_id"] },
      rebuild_index: { required: [], properties: [] },
      get_system_health: { required: [], properties: [] },
    }
    for (const [name, { required, properties }] of Object.entries(expected)) {
      const schema = byName.get(name)?.inputSchema as { type: string; properties?: object; required?: Array<string> }
      expect(schema?.type, name).toBe("object")
      expect(Object.keys(schema.properties ?? {}), name).toEqual(properties)
      expect(schema.required ?? [], name).toEqual(required)
    }
  })
})
