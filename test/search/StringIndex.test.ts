/**
 * The string index finds what a `Map` finds after any sequence of sets and deletes, through its
 * growth and the backward shifts of its deletes (up to 1,501 keys: the table grows past 1,024 slots).
 */
import fc from "fast-check"
import { assert, describe, it } from "vitest"
import { StringIndex } from "../../src/search/index/StringIndex.ts"

describe("StringIndex", () => {
  it("answers as a Map after random sets and deletes", () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ key: fc.nat(1500).map((n) => `k${n}`), remove: fc.boolean() }), {
          minLength: 2000,
          maxLength: 4000,
        }),
        (operations) => {
          const keys: Array<string | undefined> = []
          const free: Array<number> = []
          const index = new StringIndex((num) => keys[num])
          const reference = new Map<string, number>()
          for (const { key, remove } of operations) {
            const num = reference.get(key)
            if (remove && num !== undefined) {
              index.delete(key)
              keys[num] = undefined
              free.push(num)
              reference.delete(key)
            } else if (!remove && num === undefined) {
              const next = free.pop() ?? keys.length
              keys[next] = key
              index.set(key, next)
              reference.set(key, next)
            }
          }
          assert.strictEqual(index.size, reference.size)
          for (const { key } of operations) assert.strictEqual(index.get(key), reference.get(key), key)
          for (const [key, num] of reference) assert.strictEqual(index.get(key), num)
        },
      ),
      { numRuns: 50 },
    )
  })
})
