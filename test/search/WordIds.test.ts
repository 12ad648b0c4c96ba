/**
 * The packed vocabulary lookup (WordIds.ts) answers as a `Map` of the same words does: each word's
 * first id, and nothing for a word it does not hold — any strings, repeated, empty or not ASCII.
 */
import fc from "fast-check"
import { assert, describe, it } from "vitest"
import { packWordIds } from "../../src/search/embedding/WordIds.ts"

describe("packed word ids", () => {
  it("answers as a Map of the same words", () => {
    const word = fc.oneof(fc.string({ maxLength: 6 }), fc.constantFrom("the", "café", "naïve", "日本", ""))
    fc.assert(
      fc.property(fc.array(word, { maxLength: 300 }), fc.array(word, { maxLength: 50 }), (words, probes) => {
        const expected = new Map<string, number>()
        words.forEach((entry, id) => {
          if (!expected.has(entry)) expected.set(entry, id)
        })
        const packed = packWordIds(words)
        for (const probe of [...words, ...probes]) assert.strictEqual(packed.get(probe), expected.get(probe), probe)
      }),
    )
  })
})
