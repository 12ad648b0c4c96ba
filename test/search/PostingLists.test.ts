/**
 * Posting lists in one pool hold what a list per term would: any sequence of pushes and clears,
 * across the pool's growth, lists moving to its end and its rewrites without abandoned ranges.
 */
import fc from "fast-check"
import { assert, describe, it } from "vitest"
import { PostingLists } from "../../src/search/index/PostingLists.ts"

const contents = (lists: PostingLists, list: number) =>
  Array.from(lists.items.subarray(lists.start(list), lists.start(list) + lists.length(list)))

describe("PostingLists", () => {
  it("holds what one array per list holds, through growth, moves, rewrites and clears", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            { weight: 30, arbitrary: fc.tuple(fc.nat(3000), fc.nat(1_000_000)) },
            // Many pushes to a few lists: long lists move often and leave large ranges behind.
            { weight: 5, arbitrary: fc.tuple(fc.nat(8), fc.nat(1_000_000)) },
            { weight: 1, arbitrary: fc.constant("clear" as const) },
          ),
          { minLength: 1, maxLength: 6000 },
        ),
        (operations) => {
          const lists = new PostingLists()
          const reference = new Map<number, Array<number>>()
          for (const operation of operations) {
            if (operation === "clear") {
              lists.clear()
              reference.clear()
              continue
            }
            const [list, value] = operation
            lists.push(list, value)
            reference.set(list, [...(reference.get(list) ?? []), value])
          }
          for (const [list, values] of reference) assert.deepStrictEqual(contents(lists, list), values, `list ${list}`)
          assert.strictEqual(lists.length(5000), 0)
          assert.strictEqual(lists.length(1_000_000), 0, "a list never pushed to is empty")
        },
      ),
      { numRuns: 60 },
    )
  })

  it("keeps a few long lists and many short ones through thousands of moves", () => {
    const lists = new PostingLists()
    const reference: Array<Array<number>> = Array.from({ length: 2000 }, () => [])
    for (let i = 0; i < 200_000; i++) {
      const list = i % 3 === 0 ? i % 7 : (i * 7919) % 2000
      lists.push(list, i)
      reference[list]!.push(i)
    }
    for (const [list, values] of reference.entries())
      assert.deepStrictEqual(contents(lists, list), values, `list ${list}`)
  })
})
