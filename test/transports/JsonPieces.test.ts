/**
 * A large answer written in pieces is the answer's JSON text exactly: clients parse the line as
 * one message, and a drop-in server's bytes are compared with the official one's.
 */
import fc from "fast-check"
import { assert, describe, it } from "vitest"
import { jsonPieces, walkDepthMax } from "../../src/transports/JsonPieces.ts"

/** Strings rich in what escaping and cutting can get wrong: pairs, lone surrogates, controls, quotes. */
const trickyString = fc.string({
  unit: fc.oneof(
    fc.constantFrom("😀", "\ud83d", "\ude00", '"', "\\", "\n", "\u0000", "\u2028", "é", "a"),
    fc.string({ unit: "binary", maxLength: 1 }),
  ),
  maxLength: 40,
})

/** JSON-like values with what `JSON.stringify` leaves out or rewrites (undefined, NaN, -0, Dates). */
const value = fc.letrec((tie) => ({
  any: fc.oneof(
    { depthSize: "small" },
    trickyString,
    fc.double(),
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.constant(undefined),
    fc.date({ noInvalidDate: true }),
    tie("array"),
    tie("object"),
  ),
  array: fc.array(tie("any"), { maxLength: 6 }),
  object: fc.dictionary(trickyString, tie("any"), { maxKeys: 6 }),
}))

const joined = (message: object, pieceChars?: number) => [...jsonPieces(message, pieceChars)].join("")

describe("JSON in pieces", () => {
  it("joins to JSON.stringify's text, whatever the value and the piece size", () => {
    fc.assert(
      fc.property(
        fc.dictionary(trickyString, value.any, { maxKeys: 5 }),
        fc.integer({ min: 1, max: 50 }),
        (message, pieceChars) => {
          assert.strictEqual(joined(message, pieceChars), JSON.stringify(message))
        },
      ),
      { numRuns: 2_000 },
    )
  })

  it("cuts a long text into pieces of about the size asked, never inside a surrogate pair", () => {
    const text = "😀".repeat(40_000) + 'ab"\n'.repeat(30_000)
    const message = { jsonrpc: "2.0", id: 7, result: { content: [{ type: "text", text }] } }
    const pieces = [...jsonPieces(message, 1_000)]
    assert.strictEqual(pieces.join(""), JSON.stringify(message))
    assert.isAbove(pieces.length, 200)
    // A piece is at most a slice of the text (escaped: up to 6 characters for one) and a few parts.
    for (const piece of pieces) assert.isAtMost(piece.length, 6 * 1_000 + 64)
    // No piece ends inside a pair: each is valid on its own as UTF-16 text.
    for (const piece of pieces) assert.isTrue(piece.isWellFormed(), piece.slice(-8))
  })

  it("walks the answer's lists: a read_graph answer of many entities is many pieces", () => {
    const entities = Array.from({ length: 5_000 }, (_, i) => ({
      type: "entity",
      name: `entity-${i}`,
      entityType: "bench",
      observations: [`observation of ${i}`, "another"],
    }))
    const message = { result: { content: [{ type: "text", text: "x" }], structuredContent: { entities } }, id: 1 }
    const pieces = [...jsonPieces(message, 4_096)]
    assert.strictEqual(pieces.join(""), JSON.stringify(message))
    for (const piece of pieces) assert.isAtMost(piece.length, 4_096 + 200)
    assert.isAtLeast(walkDepthMax, 4) // message, result, structuredContent, entities: items are one part each
  })
})
