/**
 * Nearest neighbours above the exact-scan bound: usearch's exact search while the HNSW index is
 * being built, then the HNSW index itself, both checked against a brute-force scan; a selective
 * filter falls back to an exact scan and is exact again. Small dimensions keep it quick. Below
 * `annVectorsMin` no HNSW index is built at all: the exact search answers. The reference scores the
 * vectors as the index holds them (CompactVector.ts).
 */
import { assert, describe, it } from "vitest"
import { compactDot, compactVector } from "../../src/search/index/CompactVector.ts"
import { annVectorsMin, exactVectorsMax, VectorIndex } from "../../src/search/index/VectorIndex.ts"

const dimensions = 16
const random = (() => {
  let state = 12345
  return () => {
    state = (state * 1103515245 + 12345) % 2 ** 31
    return state / 2 ** 31
  }
})()
const unit = () => {
  const values = Array.from({ length: dimensions }, () => random() - 0.5)
  const norm = Math.hypot(...values)
  return Float32Array.from(values, (value) => value / norm)
}
/** The similarity the index computes: the stored (compact) vector against the float32 query. */
const held = (vector: Float32Array, query: Float32Array) => {
  const { codes, peak } = compactVector(vector)
  return compactDot(codes, 0, peak, query)
}

describe("VectorIndex above the exact-scan bound", () => {
  const count = exactVectorsMax + 500
  const vectors = Array.from({ length: count }, unit)
  const index = new VectorIndex(exactVectorsMax)
  vectors.forEach((vector, num) => {
    index.set(num, vector)
  })
  index.remove(7) // a hole
  const byNum = (a: number, b: number) => a - b
  const exact = (query: Float32Array, accept: (num: number) => boolean, limit: number) =>
    vectors
      .map((vector, num) => ({ num, similarity: held(vector, query) }))
      .filter((hit) => hit.num !== 7 && accept(hit.num))
      .sort((a, b) => b.similarity - a.similarity || a.num - b.num)
      .slice(0, limit)
      .map((hit) => hit.num)
  const recall = (found: ReadonlyArray<number>, expected: ReadonlyArray<number>) =>
    found.filter((num) => expected.includes(num)).length / expected.length

  it("answers by exact SIMD search before the HNSW index exists, then by HNSW with high recall", () => {
    const queries = Array.from({ length: 40 }, unit)
    let before = 0
    for (const query of queries)
      before += recall(
        index.search(query, () => true, 10, -1, byNum).map((hit) => hit.num),
        exact(query, () => true, 10),
      )
    assert.isAtLeast(before / queries.length, 0.99)
    while (index.buildAnnStep() > 0) {}
    assert.isTrue(index.annReady)
    let after = 0
    for (const query of queries)
      after += recall(
        index.search(query, () => true, 10, -1, byNum).map((hit) => hit.num),
        exact(query, () => true, 10),
      )
    assert.isAtLeast(after / queries.length, 0.9)
    // The HNSW index holds half-precision copies; the similarities answered are the slab's.
    for (const query of queries.slice(0, 5))
      for (const hit of index.search(query, () => true, 10, -1, byNum))
        assert.strictEqual(hit.similarity, held(vectors[hit.num]!, query))
    // A removed vector is never returned.
    assert.isFalse(index.search(vectors[7]!, () => true, 5, -1, byNum).some((hit) => hit.num === 7))
  })

  it("a selective filter falls back to an exact scan", () => {
    while (index.buildAnnStep() > 0) {}
    const accept = (num: number) => num % 97 === 0
    for (let q = 0; q < 10; q++) {
      const query = unit()
      assert.deepStrictEqual(
        index.search(query, accept, 5, -1, byNum).map((hit) => hit.num),
        exact(query, accept, 5),
      )
    }
  })

  it("a vector replaced after the HNSW index was built is found by its new value, in the same batch as new ones", () => {
    while (index.buildAnnStep() > 0) {}
    // Not from `random` (its short cycle repeats vectors): two directions no stored vector has.
    const distinct = (phase: number) => {
      const values = Array.from({ length: dimensions }, (_, i) => Math.sin(i * 1.7 + phase))
      const norm = Math.hypot(...values)
      return Float32Array.from(values, (value) => value / norm)
    }
    const replaced = distinct(0.3)
    const added = distinct(2.1)
    index.set(42, replaced)
    index.set(count, added)
    assert.isFalse(index.annReady)
    while (index.buildAnnStep() > 0) {}
    assert.isTrue(index.annReady)
    assert.strictEqual(index.search(replaced, () => true, 1, -1, byNum)[0]!.num, 42)
    assert.strictEqual(index.search(added, () => true, 1, -1, byNum)[0]!.num, count)
    assert.notStrictEqual(index.search(vectors[42]!, () => true, 1, -1, byNum)[0]!.num, 42)
  })
})

describe("VectorIndex below the HNSW bound", () => {
  it("builds no HNSW index and answers exactly by usearch's exact search", () => {
    const count = exactVectorsMax + 200
    assert.isBelow(count, annVectorsMin)
    const vectors = Array.from({ length: count }, unit)
    const index = new VectorIndex()
    vectors.forEach((vector, num) => {
      index.set(num, vector)
    })
    assert.strictEqual(index.buildAnnStep(), 0)
    assert.isFalse(index.annReady)
    assert.strictEqual(index.annBacklogSize, 0)
    const byNum = (a: number, b: number) => a - b
    for (let q = 0; q < 10; q++) {
      const query = unit()
      const expected = vectors
        .map((vector, num) => ({ num, similarity: held(vector, query) }))
        .sort((a, b) => b.similarity - a.similarity || a.num - b.num)
        .slice(0, 5)
        .map((hit) => hit.num)
      assert.deepStrictEqual(
        index.search(query, () => true, 5, -1, byNum).map((hit) => hit.num),
        expected,
      )
    }
  })
})
