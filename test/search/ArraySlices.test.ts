/**
 * Arrays cut from shared chunks (ArraySlices.ts): each one handed out is zeroed and of the length
 * asked for, none overlaps another (what is written to one stays), and long ones get a buffer of
 * their own; vectors the index and search's file take from them come back as they were written.
 */
import fc from "fast-check"
import { assert, describe, it } from "vitest"
import { arraySlices, sharesItsBuffer } from "../../src/search/index/ArraySlices.ts"
import { compactVector, vectorCodeMax } from "../../src/search/index/CompactVector.ts"

const chunkLength = 64

describe("ArraySlices", () => {
  it("hands out zeroed arrays of the length asked for that do not overlap", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 2 * chunkLength }), { maxLength: 60 }), (lengths) => {
        const take = arraySlices((length) => new Float32Array(length), chunkLength)
        const taken = lengths.map((length, n) => {
          const array = take(length)
          assert.strictEqual(array.length, length)
          assert.isTrue(
            array.every((value) => value === 0),
            `array ${n} (of ${length}) is not zeroed`,
          )
          // Long arrays are made alone; short ones come from a chunk.
          if (length > 0) assert.strictEqual(sharesItsBuffer(array), length <= chunkLength / 4)
          array.fill(n + 1)
          return array
        })
        taken.forEach((array, n) => {
          assert.isTrue(
            array.every((value) => value === n + 1),
            `array ${n} was overwritten`,
          )
        })
      }),
    )
  })

  it("starts a chunk when the rest of one is too short, and fills each one", () => {
    const take = arraySlices((length) => new Int8Array(length), chunkLength)
    const first = take(10)
    const rest = [take(16), take(16), take(16)] // 58 of 64 taken
    const next = take(7)
    assert.strictEqual(rest.at(-1)!.buffer, first.buffer)
    assert.notStrictEqual(next.buffer, first.buffer)
    assert.strictEqual(next.byteOffset, 0)
    assert.strictEqual(next.buffer.byteLength, chunkLength)
  })

  it("gives each compact vector codes of its own, which later ones leave as they are", () => {
    const vectors = Array.from({ length: 500 }, (_, n) =>
      Float32Array.from({ length: 100 }, (_, i) => Math.sin(n * 7 + i * 0.37)),
    )
    const compacts = vectors.map((vector) => compactVector(vector))
    compacts.forEach(({ codes, peak }, n) => {
      const expected = Array.from(vectors[n]!, (value) => Math.round((value / peak) * vectorCodeMax) + 0) // + 0: an Int8Array holds no -0
      assert.deepStrictEqual([...codes], expected, `vector ${n}`)
    })
  })
})
