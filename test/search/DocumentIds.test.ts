/**
 * The graph's document ids are hashes of a project, a name and an observation's text, persisted
 * in search's LMDB: hashing the parts one after another (no joined string built) gives exactly the
 * hash of the joined string, so every id a daemon persisted before stays the id of its document.
 */
import fc from "fast-check"
import { assert, describe, it } from "vitest"
import { entityDocumentId, observationDocumentId } from "../../src/search/GraphDocuments.ts"
import { hashJoined, hashText } from "../../src/search/index/SearchDocument.ts"

describe("document ids", () => {
  it("hash the parts as the joined text would be hashed", () => {
    fc.assert(
      fc.property(fc.array(fc.string({ unit: "binary" }), { minLength: 1, maxLength: 5 }), (parts) => {
        assert.strictEqual(hashJoined(parts), hashText(parts.join("\u0000")))
      }),
      { numRuns: 1_000 },
    )
  })

  it("are the ids earlier versions persisted", () => {
    // Computed by the code before the parts were hashed without joining them.
    assert.strictEqual(entityDocumentId("mnemos", "Alice"), "g1hu1nge1f5gb2t")
    assert.strictEqual(observationDocumentId("mnemos", "Alice", "likes tea \u2615"), "o0prbjn713ddgmr")
  })
})
