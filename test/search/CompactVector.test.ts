/**
 * Vectors held compactly (CompactVector.ts): a quarter of float32's bytes in memory, each
 * component within half a code of the original, and on a fixed corpus of unit 100-d vectors the
 * same nearest neighbours as float32 scoring, the similarities within the bound the codes allow.
 */
import { assert, describe, it } from "vitest"
import { compactDot, compactVector, expandVector, vectorCodeMax } from "../../src/search/index/CompactVector.ts"
import { SearchIndex } from "../../src/search/index/SearchIndex.ts"
import { VectorIndex } from "../../src/search/index/VectorIndex.ts"

const dimensions = 100
const corpusVectors = 2000
const seed = 20261203
const random = (() => {
  let state = seed
  return () => {
    state = (state * 1103515245 + 12345) % 2 ** 31
    return state / 2 ** 31
  }
})()
/** A unit vector with a heavier component or two, as word-vector averages have. */
const unit = () => {
  const values = Array.from({ length: dimensions }, (_, i) => (random() - 0.5) * (i % 37 === 0 ? 4 : 1))
  const norm = Math.hypot(...values)
  return Float32Array.from(values, (value) => value / norm)
}
const floatDot = (a: Float32Array, b: Float32Array) => a.reduce((sum, value, i) => sum + value * b[i]!, 0)
const byNum = (a: number, b: number) => a - b

describe("CompactVector", () => {
  it("keeps each component within half a code, the largest exactly, and expands back to what it holds", () => {
    for (let n = 0; n < 50; n++) {
      const vector = unit()
      const { codes, peak } = compactVector(vector)
      const expanded = expandVector(codes, peak)
      const halfCode = peak / vectorCodeMax / 2
      vector.forEach((value, i) => {
        assert.isAtMost(Math.abs(expanded[i]! - value), halfCode * (1 + 1e-6), `seed ${seed} vector ${n} dim ${i}`)
      })
      assert.strictEqual(Math.max(...expanded.map(Math.abs)), Math.max(...vector.map(Math.abs)))
      assert.deepStrictEqual(compactVector(expanded), { codes, peak }, "compacting what it expands to changes nothing")
    }
    assert.deepStrictEqual(compactVector(new Float32Array(3)), { codes: new Int8Array(3), peak: 0 })
    const oneHot = Float32Array.from([0, 1, 0])
    const { codes, peak } = compactVector(oneHot)
    assert.strictEqual(compactDot(codes, 0, peak, oneHot), 1)
  })

  it("holds a vector in about a quarter of float32's bytes, and the index's stats say how many", () => {
    const vectors = new VectorIndex()
    for (let num = 0; num < 1024; num++) vectors.set(num, unit())
    // 1,024 slots: 100 codes, a 4-byte peak and a presence byte each (float32 took 401).
    assert.strictEqual(vectors.bytes, 1024 * (dimensions + 4 + 1))
    assert.isBelow(vectors.bytes / 1024, (dimensions * Float32Array.BYTES_PER_ELEMENT) / 3.5)
    const index = new SearchIndex()
    const at = 1_700_000_000_000
    const document = { id: "a", store: "s", project: "p", kind: "note", title: "", text: "alpha", at }
    for (const pending of index.replaceGroup("s", "g", [document])) index.setVector(pending.id, pending.hash, unit())
    // The slab starts with room for 1,024 vectors.
    assert.strictEqual(index.stats().vectorBytes, 1024 * (dimensions + 4 + 1))
  })

  it("ranks a fixed corpus as float32 scoring does, its similarities within the codes' bound", () => {
    const vectors = Array.from({ length: corpusVectors }, unit)
    const index = new VectorIndex()
    vectors.forEach((vector, num) => {
      index.set(num, vector)
    })
    const limit = 10
    let overlap = 0
    let firstAgrees = 0
    const queries = Array.from({ length: 50 }, unit)
    for (const [q, query] of queries.entries()) {
      const exact = vectors
        .map((vector, num) => ({ num, similarity: floatDot(vector, query) }))
        .sort((a, b) => b.similarity - a.similarity || a.num - b.num)
      const hits = index.search(query, () => true, limit, -1, byNum)
      // Each similarity is off by at most Σ |queryᵢ| half-codes of its vector.
      const l1 = query.reduce((sum, value) => sum + Math.abs(value), 0)
      for (const hit of hits) {
        const bound = (compactVector(vectors[hit.num]!).peak / vectorCodeMax / 2) * l1
        assert.closeTo(hit.similarity, floatDot(vectors[hit.num]!, query), bound, `seed ${seed} query ${q}`)
      }
      const expected = new Set(exact.slice(0, limit).map((hit) => hit.num))
      overlap += hits.filter((hit) => expected.has(hit.num)).length / limit
      if (hits[0]!.num === exact[0]!.num) firstAgrees++
    }
    assert.isAtLeast(overlap / queries.length, 0.95, `seed ${seed}: top-${limit} overlap with float32`)
    assert.isAtLeast(firstAgrees / queries.length, 0.95, `seed ${seed}: same nearest neighbour`)
  })
})
