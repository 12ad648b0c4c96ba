/**
 * No argument crashes an engineering tool: random JSON for every argument of every tool (its
 * real argument names, values of any JSON shape, sometimes a plausible one) answers either a
 * result or an envelope error with a caller's code (VALIDATION_ERROR, NOT_FOUND, CONFLICT) —
 * never INTERNAL_ERROR — and the engine keeps serving. The seed is printed and replays.
 */
import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { engineeringTools } from "../../src/tools/EngineeringTools.ts"
import { codeOf, openEngine, removeTempDirs, type TestEngine } from "./harness.ts"

const seed = Number(process.env.FC_SEED ?? Date.now() % 1_000_000)
const numRuns = Number(process.env.FC_RUNS ?? 25)

let engine: TestEngine
beforeAll(async () => {
  console.log(`RandomArguments: fast-check seed ${seed}, ${numRuns} runs per tool (rerun with FC_SEED=${seed})`)
  engine = await openEngine()
})
afterAll(async () => {
  await engine.close()
  removeTempDirs()
})

/** Values that are sometimes what a tool expects. */
const plausible = fc.oneof(
  fc.constantFrom("push", "todo", "done", "high", "low", "authorized", "blocked", "open", "snippet", "note", "*"),
  fc.constantFrom("2030-01-01", "01J0000000000000000000000Z", "src/a.ts", "node=20", ""),
  fc.integer({ min: -2, max: 700 }),
  fc.boolean(),
  fc.array(fc.constantFrom("a", "b=c", "01J0000000000000000000000Z", "assignee"), { maxLength: 3 }),
)

const argumentsFor = (names: ReadonlyArray<string>) =>
  fc.dictionary(
    fc.constantFrom(...names, "unknown_argument"),
    fc.oneof({ weight: 3, arbitrary: plausible }, { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }) }),
    { maxKeys: names.length + 1 },
  )

describe("random arguments", () => {
  it("every engineering tool answers a result or a caller's error code, never an internal error", async () => {
    const codes = new Set<string>()
    for (const [index, tool] of engineeringTools.entries()) {
      const names = Object.keys((tool.definition.inputSchema as { properties: object }).properties)
      await fc.assert(
        fc.asyncProperty(argumentsFor(names), async (args) => {
          const reply = await engine.call(tool.definition.name, args)
          if (!reply.isError) return
          const code = codeOf(reply)
          codes.add(code ?? "none")
          expect(reply.json?.status, `${tool.definition.name}(${JSON.stringify(args)}): ${reply.text}`).toBe("ERROR")
          expect(["VALIDATION_ERROR", "NOT_FOUND", "CONFLICT"], `${tool.definition.name}: ${reply.text}`).toContain(
            code,
          )
        }),
        { numRuns, seed: seed + index, endOnFailure: true },
      )
    }
    expect(codes.has("VALIDATION_ERROR")).toBe(true)
    expect((await engine.ok("list_tasks", {})).isError).toBe(false)
  })
})
