/**
 * The checkpoint writes keys through lmdb-js's key buffer (`keyEncoder`); the search index and
 * data written before it use `encodeKey`'s byte strings. Both must give the same bytes for every
 * JavaScript string (lone surrogates included), or a key written one way is not found the other.
 */
import fc from "fast-check"
import { assert, describe, it } from "vitest"
import { decodeKey, encodeKey, keyEncoder } from "../../src/stores/checkpoint/KeyCodec.ts"

const anyKey = fc.oneof(
  fc.string({ unit: "binary", maxLength: 80 }),
  fc.string({ unit: "binary", minLength: 60, maxLength: 700 }),
  fc.string({ unit: "grapheme", maxLength: 200 }),
)

describe("KeyCodec", () => {
  it("keyEncoder writes encodeKey's bytes and reads them back as the same string", () => {
    const target = Buffer.alloc(4096)
    fc.assert(
      fc.property(anyKey, fc.integer({ min: 0, max: 16 }), (key, start) => {
        const end = keyEncoder.writeKey(key, target, start)
        const expected = encodeKey(key)
        assert.deepStrictEqual(target.subarray(start, end), expected)
        assert.strictEqual(keyEncoder.readKey(target, start, end), key)
        assert.strictEqual(decodeKey(expected), key)
        // An oracle of its own: a well-formed key is plain UTF-8.
        if (key.isWellFormed()) assert.deepStrictEqual(expected, Buffer.from(key, "utf8"))
      }),
    )
  })

  it("refuses a key that does not fit instead of writing part of it", () => {
    const target = Buffer.alloc(64)
    for (const key of ["x".repeat(70), "é".repeat(40), `${"y".repeat(62)}\ud83d`, `${"z".repeat(70)}\udc00`]) {
      assert.throws(() => keyEncoder.writeKey(key, target, 0), RangeError)
    }
    assert.strictEqual(keyEncoder.writeKey("x".repeat(64), target, 0), 64)
  })
})
