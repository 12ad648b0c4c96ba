/**
 * Arbitrary JSON arguments never crash the conversations store and always get a schema'd answer:
 * either a success whose text is JSON equal to its structured content, or an `isError` result
 * whose text is exactly the seed's envelope `{"status":"ERROR","error":{"code","message"}}` with
 * one of the seed's codes. Afterwards the store is still running, has never restarted, and health
 * reports no error. fast-check prints the seed and path of a failure; pass them to `fc.assert` to
 * replay it.
 */

import { Effect } from "effect"
import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Router } from "../../src/actors/Router.ts"
import { openEngine, type Reply, removeTempDirs, type TestEngine } from "./engine.ts"

let engine: TestEngine
const knownIds: Array<string> = []
beforeAll(async () => {
  engine = await openEngine()
  for (let index = 0; index < 5; index++) {
    const reply = await engine.ok("write_message", {
      session_id: `fuzz-${index % 2}`,
      role: "user",
      content: `seed message ${index}`,
    })
    knownIds.push(reply.json.message.message_id)
  }
})
afterAll(async () => {
  await engine.close()
  removeTempDirs()
})

const tools = [
  "write_message",
  "read_messages",
  "search_messages",
  "update_message",
  "delete_message",
  "rebuild_index",
  "get_system_health",
] as const
const argumentNames = [
  "session_id",
  "role",
  "content",
  "metadata_json",
  "view",
  "limit",
  "cursor",
  "message_id",
  "before",
  "after",
  "relation_depth",
  "relation_types_json",
  "query",
  "filters_json",
  "min_importance",
  "context_size",
  "expected_revision",
  "unexpected",
]
const codes = ["VALIDATION_ERROR", "NOT_FOUND", "CONFLICT", "BUSY", "IO_ERROR", "CORRUPT_STORE", "INTERNAL_ERROR"]

const ulid = fc.constantFrom("01ARZ3NDEKTSV4RRFFQ69G5FAV", "7ZZZZZZZZZZZZZZZZZZZZZZZZZ", "00000000000000000000000000")
const metadataLike = fc.record(
  {
    tags: fc.array(fc.string({ maxLength: 5 }), { maxLength: 3 }),
    importance: fc.integer({ min: -2, max: 102 }),
    memory_tier: fc.constantFrom("short", "mid", "long", "discard", "x"),
    memory_kind: fc.constantFrom("conversation", "semantic", "summary", "y"),
    summary: fc.string({ maxLength: 10 }),
    relations: fc.array(fc.record({ type: fc.constantFrom("depends_on", "related_to", "nope"), message_id: ulid }), {
      maxLength: 2,
    }),
    tool_call_id: fc.string({ maxLength: 5 }),
    source_message_ids: fc.array(ulid, { maxLength: 2 }),
  },
  { requiredKeys: [] },
)
const value = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  fc.string({ unit: "binary", maxLength: 20 }),
  fc.integer({ min: -3, max: 1200 }),
  ulid,
  fc.constantFrom("history", "context", "sessions", "user", "assistant", "system", "", "seed"),
  fc.jsonValue({ maxDepth: 2 }).map((json) => JSON.stringify(json)),
  metadataLike.map((metadata) => JSON.stringify(metadata)),
  fc.array(fc.constantFrom("semantic", "long", "project"), { maxLength: 3 }).map((kinds) => JSON.stringify({ kinds })),
)
const args = fc.oneof(
  fc.dictionary(fc.constantFrom(...argumentNames), value, { maxKeys: 6 }),
  fc.object({ maxDepth: 2 }),
)

const checkAnswer = (tool: string, reply: Reply) => {
  expect(reply.json, `${tool}: text is JSON: ${reply.text.slice(0, 200)}`).toBeDefined()
  if (reply.isError) {
    expect(Object.keys(reply.json)).toEqual(["status", "error"])
    expect(reply.json.status).toBe("ERROR")
    expect(Object.keys(reply.json.error)).toEqual(["code", "message"])
    expect(codes).toContain(reply.json.error.code)
    expect(typeof reply.json.error.message).toBe("string")
    // Only the caller's mistakes: nothing a client sends may reach the store as a failure.
    expect(["VALIDATION_ERROR", "NOT_FOUND", "CONFLICT"], reply.text).toContain(reply.json.error.code)
  } else {
    expect(reply.structured).toEqual(reply.json)
    if ("status" in reply.json) expect(["OK", "NOT_FOUND"]).toContain(reply.json.status)
  }
}

describe("arbitrary arguments", () => {
  it("every tool answers every argument object with a success or a schema'd error", async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...tools), args, fc.boolean(), async (tool, generated, useKnownId) => {
        const withId = useKnownId && "message_id" in generated ? { ...generated, message_id: knownIds[0] } : generated
        checkAnswer(tool, await engine.call(tool, withId))
      }),
      { numRuns: 400 },
    )
  })

  it("left the store running, never restarted, with no error on record", async () => {
    const health = await engine.run(
      Effect.gen(function* () {
        return (yield* Router).health().find((store) => store.name === "conversations")!
      }),
    )
    expect(health.state).toBe("running")
    expect(health.restarts).toBe(0)
    expect((await engine.ok("get_system_health", {})).json).toMatchObject({ status: "OK", last_error: "" })
  })
})
