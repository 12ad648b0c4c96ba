/**
 * The gate tools under a test clock: gate_set (upsert per action and namespace, expiry),
 * gate_verify (every verdict, consume exactly once under a race, a retried consume answered with
 * its first verdict) and gate_list.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { gateExitCode, gateHttpStatus, gateVerdicts } from "../../src/engineering/Gates.ts"
import { callTool, outcomeOf, removeTempDirs, testCaller, withEngine } from "./harness.ts"

afterAll(removeTempDirs)

// biome-ignore lint/suspicious/noExplicitAny: tests read the tools' JSON answers
type Json = any
const call = (name: string, args: object, caller = testCaller()) =>
  callTool(name, args, caller) as Effect.Effect<Json, never>
const verify = (args: object = {}, caller = testCaller()) => call("gate_verify", { action: "push", ...args }, caller)

describe("gate tools", () => {
  it.effect("not_found, then each status as set; setting again replaces the gate (same id, next revision)", () =>
    withEngine(
      Effect.gen(function* () {
        assert.deepStrictEqual(yield* verify(), {
          namespace: "demo",
          action: "push",
          status: "not_found",
          authorized: false,
          consumed: false,
          gate: null,
        })
        const first = (yield* call("gate_set", { action: "push", status: "blocked", reason: "tests red" })).gate
        assert.strictEqual((yield* verify()).status, "blocked")
        yield* call("gate_set", { action: "push", status: "pending" })
        assert.strictEqual((yield* verify()).status, "pending")
        const last = (yield* call("gate_set", { action: "push", status: "authorized" })).gate
        const verdict = yield* verify()
        assert.deepStrictEqual([verdict.status, verdict.authorized], ["authorized", true])
        assert.deepStrictEqual([last.id, last.revision], [first.id, 3])
        assert.isUndefined(last.reason, "a new gate_set replaces the reason too")
      }),
    ),
  )

  it.effect("an authorization with expires_in_seconds turns into expired when its time is up", () =>
    withEngine(
      Effect.gen(function* () {
        yield* call("gate_set", { action: "push", status: "authorized", expires_in_seconds: 600 })
        yield* TestClock.adjust(599_999)
        assert.strictEqual((yield* verify()).status, "authorized")
        yield* TestClock.adjust(1)
        const expired = yield* verify({ consume: true })
        assert.deepStrictEqual([expired.status, expired.authorized, expired.consumed], ["expired", false, false])
        const listed = (yield* call("gate_list", {})).gates
        assert.deepStrictEqual(
          listed.map((g: Json) => [g.action, g.verdict]),
          [["push", "expired"]],
        )
      }),
    ),
  )

  it.effect("consume lets exactly one of many concurrent verifiers through", () =>
    withEngine(
      Effect.gen(function* () {
        yield* call("gate_set", { action: "push", status: "authorized" })
        const verdicts = yield* Effect.all(
          Array.from({ length: 8 }, (_, i) => verify({ consume: true }, testCaller({ client: `agent-${i}` }))),
          { concurrency: "unbounded" },
        )
        assert.strictEqual(verdicts.filter((v: Json) => v.authorized).length, 1)
        assert.isTrue(verdicts.every((v: Json) => v.authorized === v.consumed))
        const after = yield* verify()
        assert.strictEqual(after.status, "pending")
        assert.isString(after.gate.consumedBy)
      }),
    ),
  )

  it.effect("a retried consume (same idempotency key) gets its first answer and consumes once", () =>
    withEngine(
      Effect.gen(function* () {
        yield* call("gate_set", { action: "push", status: "authorized" })
        const caller = testCaller({ idempotencyKey: "client-1:42" })
        const first = yield* verify({ consume: true }, caller)
        const retry = yield* verify({ consume: true }, caller)
        assert.deepStrictEqual([first.authorized, first.consumed], [true, true])
        assert.deepStrictEqual(
          [retry.authorized, retry.consumed, retry.gate.revision],
          [true, true, first.gate.revision],
        )
        assert.strictEqual((yield* verify()).gate.revision, 2)
        assert.strictEqual(
          (yield* verify({ consume: true }, testCaller({ idempotencyKey: "client-1:43" }))).status,
          "pending",
        )
      }),
    ),
  )

  it.effect("namespaces are separate and default to the caller's project; list is per namespace", () =>
    withEngine(
      Effect.gen(function* () {
        yield* call("gate_set", { action: "push", status: "authorized", namespace: "repo-a" })
        yield* call("gate_set", { action: "deploy", status: "blocked", namespace: "repo-a" })
        assert.strictEqual((yield* verify({ namespace: "repo-b" })).status, "not_found")
        assert.strictEqual((yield* verify({}, testCaller({ project: "repo-a" }))).status, "authorized")
        const listed = (yield* call("gate_list", { namespace: "repo-a" })).gates
        assert.deepStrictEqual(
          listed.map((g: Json) => [g.action, g.verdict]),
          [
            ["push", "authorized"],
            ["deploy", "blocked"],
          ],
        )
        assert.deepStrictEqual((yield* call("gate_list", {})).gates, [])
      }),
    ),
  )

  it.effect("bad arguments are VALIDATION_ERROR", () =>
    withEngine(
      Effect.gen(function* () {
        const outcomes = yield* Effect.forEach(
          [
            ["gate_set", { action: "push", status: "open" }],
            ["gate_set", { action: "", status: "authorized" }],
            ["gate_set", { action: "push", status: "authorized", expires_in_seconds: 0 }],
            ["gate_set", { action: "push", status: "authorized", expires_in_seconds: 31 * 24 * 3600 }],
            ["gate_verify", {}],
            ["gate_verify", { action: "push", consume: "yes" }],
            ["gate_list", { namespace: "" }],
          ] as const,
          ([name, args]) => outcomeOf(callTool(name, args)),
        )
        assert.deepStrictEqual(outcomes, Array(7).fill("VALIDATION_ERROR"))
      }),
    ),
  )

  it("maps every verdict to the documented exit code and HTTP status", () => {
    assert.deepStrictEqual(
      gateVerdicts.map((verdict) => [verdict, gateExitCode(verdict), gateHttpStatus(verdict)]),
      [
        ["authorized", 0, 200],
        ["blocked", 1, 403],
        ["pending", 1, 403],
        ["expired", 1, 403],
        ["not_found", 2, 404],
      ],
    )
  })
})
