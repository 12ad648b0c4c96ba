/**
 * The ordered key set behind the uncommitted layers' range reads: after any sequence of adds and
 * deletes (enough of them to split and empty chunks), a range read returns exactly the keys in the
 * range, in LMDB's key order, and the size counts the keys held.
 */
import fc from "fast-check"
import { assert, describe, it } from "vitest"
import { compareKeys } from "../../src/stores/checkpoint/KeyCodec.ts"
import { SortedKeys } from "../../src/stores/checkpoint/SortedKeys.ts"

// Short keys over a few characters, an astral one and the separator among them, so ranges,
// prefixes and surrogate ordering all occur; thousands of operations split chunks many times.
const key = fc
  .array(fc.constantFrom("a", "b", "c", "\u0000", "\u0001", "\u{1F600}", "\uFFFF"), { minLength: 0, maxLength: 5 })
  .map((parts) => parts.join(""))
const operation = fc.tuple(fc.boolean(), key)

describe("SortedKeys", () => {
  it("holds exactly the keys added and not deleted, and ranges them in key order", () => {
    fc.assert(
      fc.property(
        fc.array(operation, { maxLength: 4000 }),
        fc.array(fc.tuple(key, key), { maxLength: 20 }),
        (operations, ranges) => {
          const keys = new SortedKeys()
          const model = new Set<string>()
          for (const [adding, item] of operations) {
            if (adding) {
              keys.add(item)
              model.add(item)
            } else {
              keys.delete(item)
              model.delete(item)
            }
          }
          const sorted = [...model].sort(compareKeys)
          assert.strictEqual(keys.size, model.size)
          assert.deepStrictEqual(
            keys.inRange({ start: "", end: "\u{10FFFF}\u{10FFFF}\u{10FFFF}\u{10FFFF}\u{10FFFF}\u{10FFFF}" }),
            sorted,
          )
          for (const [start, end] of ranges) {
            const expected = sorted.filter((item) => compareKeys(item, start) >= 0 && compareKeys(item, end) < 0)
            assert.deepStrictEqual(keys.inRange({ start, end }), expected)
          }
        },
      ),
      { numRuns: 60 },
    )
  })

  it("keeps order through thousands of keys added in reverse and deleted in between", () => {
    const keys = new SortedKeys()
    const names = Array.from({ length: 5000 }, (_, index) => `k${String(index).padStart(5, "0")}`)
    for (const name of [...names].reverse()) keys.add(name)
    for (const name of names.filter((_, index) => index % 3 === 0)) keys.delete(name)
    const left = names.filter((_, index) => index % 3 !== 0)
    assert.deepStrictEqual(keys.inRange({ start: "k", end: "l" }), left)
    assert.deepStrictEqual(
      keys.inRange({ start: "k01000", end: "k01010" }),
      left.filter((name) => name >= "k01000" && name < "k01010"),
    )
  })
})
