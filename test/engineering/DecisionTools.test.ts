/**
 * The ADR tools: record_adr (numbered per project; superseding marks the older ADR in the same
 * step, or neither changes), update_adr and list_adrs, with their error paths.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { callTool, outcomeOf, removeTempDirs, testCaller, withEngine } from "./harness.ts"

afterAll(removeTempDirs)

// biome-ignore lint/suspicious/noExplicitAny: tests read the tools' JSON answers
type Json = any
const call = (name: string, args: object, caller = testCaller()) =>
  callTool(name, args, caller) as Effect.Effect<Json, never>
const adr = (title: string, extra: object = {}) =>
  call("record_adr", { title, context: `why ${title}`, decision: `do ${title}`, ...extra })

describe("ADR tools", () => {
  it.effect("numbers ADRs per project from 1, status proposed by default", () =>
    withEngine(
      Effect.gen(function* () {
        const first = (yield* adr("Use LMDB")).adr
        const second = (yield* adr("Use a WAL", { status: "accepted", consequences: "fsync cost" })).adr
        const elsewhere = (yield* call("record_adr", { title: "x", context: "c", decision: "d", project: "other" })).adr
        assert.deepStrictEqual([first.number, first.label, first.status], [1, "ADR-0001", "proposed"])
        assert.deepStrictEqual([second.number, second.status, second.consequences], [2, "accepted", "fsync cost"])
        assert.strictEqual(elsewhere.number, 1)
      }),
    ),
  )

  it.effect("recording a superseding ADR marks the old one superseded and links both ways", () =>
    withEngine(
      Effect.gen(function* () {
        const old = (yield* adr("JSON files", { status: "accepted" })).adr
        const result = yield* adr("Redb instead", { status: "accepted", supersedes: old.id })
        assert.strictEqual(result.adr.supersedes, old.id)
        assert.strictEqual(result.superseded.id, old.id)
        assert.strictEqual(result.superseded.status, "superseded")
        assert.strictEqual(result.superseded.supersededBy, result.adr.id)
        assert.strictEqual(result.superseded.revision, 2)
        const listed = (yield* call("list_adrs", { status: "superseded" })).adrs
        assert.deepStrictEqual(
          listed.map((a: Json) => a.id),
          [old.id],
        )
      }),
    ),
  )

  it.effect("superseding an unknown ADR fails with NOT_FOUND and records nothing (not even the new ADR)", () =>
    withEngine(
      Effect.gen(function* () {
        assert.strictEqual(
          yield* outcomeOf(
            callTool("record_adr", {
              title: "t",
              context: "c",
              decision: "d",
              supersedes: "01J0000000000000000000000Z",
            }),
          ),
          "NOT_FOUND",
        )
        assert.strictEqual((yield* call("list_adrs", {})).adrs.length, 0)
        assert.strictEqual((yield* adr("next")).adr.number, 1, "the failed command took no number")
      }),
    ),
  )

  it.effect("update_adr changes status and text with revisions; errors are typed", () =>
    withEngine(
      Effect.gen(function* () {
        const { adr: proposed } = yield* adr("Adopt Effect")
        const accepted = (yield* call("update_adr", { id: proposed.id, status: "accepted", expected_revision: 1 })).adr
        assert.deepStrictEqual([accepted.status, accepted.revision, accepted.label], ["accepted", 2, "ADR-0001"])
        assert.strictEqual(
          yield* outcomeOf(callTool("update_adr", { id: proposed.id, status: "deprecated", expected_revision: 1 })),
          "CONFLICT",
        )
        assert.strictEqual(yield* outcomeOf(callTool("update_adr", { id: proposed.id })), "VALIDATION_ERROR")
        assert.strictEqual(
          yield* outcomeOf(callTool("update_adr", { id: proposed.id, status: "rejected" })),
          "VALIDATION_ERROR",
        )
        assert.strictEqual(
          yield* outcomeOf(callTool("update_adr", { id: "01J0000000000000000000000Z", title: "x" })),
          "NOT_FOUND",
        )
        assert.strictEqual(
          yield* outcomeOf(callTool("record_adr", { title: "t", context: "", decision: "d" })),
          "VALIDATION_ERROR",
        )
      }),
    ),
  )

  it.effect("ADRs recorded back to back, many within one millisecond, list in number order", () =>
    withEngine(
      Effect.gen(function* () {
        for (let index = 0; index < 40; index++) yield* adr(`quick ${index}`)
        const listed = yield* call("list_adrs", { limit: 100 })
        const numbers = listed.adrs.map((a: Json) => a.number)
        assert.deepStrictEqual(
          numbers,
          Array.from({ length: 40 }, (_, index) => index + 1),
        )
      }),
    ),
  )

  it.effect("list_adrs is in number order, filters by text, and pages", () =>
    withEngine(
      Effect.gen(function* () {
        for (const title of ["a", "b", "c", "d"]) yield* adr(`topic ${title}`)
        const page1 = yield* call("list_adrs", { limit: 3 })
        assert.deepStrictEqual(
          page1.adrs.map((a: Json) => a.number),
          [1, 2, 3],
        )
        const page2 = yield* call("list_adrs", { limit: 3, cursor: page1.nextCursor })
        assert.deepStrictEqual(
          page2.adrs.map((a: Json) => a.number),
          [4],
        )
        assert.isUndefined(page2.nextCursor)
        assert.deepStrictEqual(
          (yield* call("list_adrs", { query: "TOPIC C" })).adrs.map((a: Json) => a.number),
          [3],
        )
        assert.strictEqual(yield* outcomeOf(callTool("list_adrs", { cursor: "x".repeat(65) })), "VALIDATION_ERROR")
        assert.deepStrictEqual((yield* call("list_adrs", { cursor: "not-a-cursor" })).adrs, [], "a foreign cursor")
      }),
    ),
  )
})
