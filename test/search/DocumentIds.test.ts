/**
 * The graph's document ids are hashes of a project, a name and an observation's text, persisted
 * in search's LMDB: hashing the parts one after another (no joined string built) gives exactly the
 * hash of the joined string, so every id a daemon persisted before stays the id of its document.
 */
import fc from "fast-check"
import { assert, describe, it } from "vitest"
import { entityDocumentId, observationDocumentId } from "../../src/search/GraphDocuments.ts"
import { DocumentTable } from "../../src/search/index/DocumentTable.ts"
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
    // Both halves above 2^31, a leading zero, both below 2^31: each as `toString(36)` wrote them.
    assert.strictEqual(hashText("text 0"), "10vpyny128jb3g")
    assert.strictEqual(hashText("text 8"), "0ynt546100mhhg")
    assert.strictEqual(hashText("text 60"), "0fzcukc0vd52a4")
  })

  it("are kept by the index's table as numbers and given back as written", () => {
    // The table holds a hash as two 32-bit halves and writes it again for every embedding it checks.
    const table = new DocumentTable()
    const hashes = ["10vpyny128jb3g", "0ynt546100mhhg", "0fzcukc0vd52a4"]
    fc.assert(
      fc.property(fc.string({ unit: "binary" }), (text) => {
        hashes.push(hashText(text))
      }),
      { numRuns: 1_000 },
    )
    const nums = hashes.map((hash, i) =>
      table.add(
        { id: `d${i}`, store: "graph", project: "p", kind: "entity", title: "", text: "", at: 0, fields: {} },
        "g",
        hash,
      ),
    )
    for (const [i, num] of nums.entries()) assert.strictEqual(table.hashOf(num), hashes[i])
  })
})
