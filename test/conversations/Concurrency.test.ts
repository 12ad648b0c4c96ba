/**
 * Concurrent update_message calls guarded by expected_revision: however many race (in one store
 * batch or across batches), exactly one wins, every other gets CONFLICT, and the stored message
 * is the winner's. Concurrent writes each get their own message with distinct, increasing ids.
 */
import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { openEngine, removeTempDirs, type TestEngine } from "./engine.ts"

let engine: TestEngine
beforeAll(async () => {
  engine = await openEngine()
})
afterAll(async () => {
  await engine.close()
  removeTempDirs()
})

const range = (count: number) => Array.from({ length: count }, (_, index) => index)

describe("concurrent update_message with expected_revision", () => {
  it("20 racing updates of revision 1: exactly one wins, 19 get CONFLICT", async () => {
    const message = (await engine.ok("write_message", { session_id: "race", role: "user", content: "v1" })).json.message
    const replies = await Promise.all(
      range(20).map((index) =>
        engine.call("update_message", {
          message_id: message.message_id,
          content: `writer ${index}`,
          expected_revision: 1,
        }),
      ),
    )
    const winners = replies.filter((reply) => !reply.isError)
    expect(winners).toHaveLength(1)
    expect(replies.filter((reply) => reply.isError).map((reply) => reply.json.error.code)).toEqual(
      Array(19).fill("CONFLICT"),
    )
    const stored = (await engine.ok("read_messages", { session_id: "race" })).json.history[0]
    expect(stored).toEqual(winners[0]!.json.message)
    expect(stored.revision).toBe(2)
  })

  it("property: for any number of racers and any starting revision, exactly one wins", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 2, max: 40 }),
        fc.integer({ min: 0, max: 3 }),
        async (racers, priorUpdates) => {
          const session = `race-${racers}-${priorUpdates}-${Math.random()}`
          const message = (await engine.ok("write_message", { session_id: session, role: "user", content: "start" }))
            .json.message
          for (let update = 0; update < priorUpdates; update++)
            await engine.ok("update_message", { message_id: message.message_id, content: `prior ${update}` })
          const revision = 1 + priorUpdates
          const replies = await Promise.all(
            range(racers).map((index) =>
              engine.call("update_message", {
                message_id: message.message_id,
                metadata_json: JSON.stringify({ importance: index }),
                content: `racer ${index}`,
                expected_revision: revision,
              }),
            ),
          )
          const winners = replies.filter((reply) => !reply.isError)
          expect(winners).toHaveLength(1)
          for (const loser of replies.filter((reply) => reply.isError)) expect(loser.json.error.code).toBe("CONFLICT")
          const stored = (await engine.ok("read_messages", { session_id: session })).json.history[0]
          expect(stored).toEqual(winners[0]!.json.message)
          expect(stored.revision).toBe(revision + 1)
        },
      ),
      { numRuns: 15 },
    )
  })

  it("50 concurrent writes each store their own message, ids distinct and in history order", async () => {
    const replies = await Promise.all(
      range(50).map((index) =>
        engine.ok("write_message", { session_id: "burst", role: "user", content: `burst ${index}` }),
      ),
    )
    const ids = replies.map((reply) => reply.json.message.message_id as string)
    expect(new Set(ids).size).toBe(50)
    const history = (await engine.ok("read_messages", { session_id: "burst" })).json.history as Array<{
      message_id: string
    }>
    expect(history.map((message) => message.message_id)).toEqual([...ids].sort())
  })
})
