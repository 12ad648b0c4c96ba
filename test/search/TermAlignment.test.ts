/**
 * Term alignment, the re-ranking signal that tells same-topic records apart:
 *
 * - On a hand-made vocabulary (vectors, lexicon, weights chosen here): an exact word, a WordNet
 *   lemma, a synonym and a cosine each count as TermAlignment.ts says; a query word every
 *   candidate matches weighs less than one only the target matches; a negation or number
 *   mismatch is penalised and reported.
 * - On a model built from the GloVe and WordNet packages, through SearchIndex: the example
 *   (a record and its same-topic near miss) ranks the record first once hybrid search aligns,
 *   where fusion alone ranks the near miss first; the score breakdown adds up and names alignment.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, assert, describe, it } from "vitest"
import { loadStaticModel, readStaticModelFiles } from "../../src/search/embedding/StaticModel.ts"
import { buildStaticModel } from "../../src/search/embedding/StaticModelBuild.ts"
import type { WordEdge } from "../../src/search/embedding/WordNet.ts"
import { decodeWordVectors, encodeWordVectors } from "../../src/search/embedding/WordVectors.ts"
import { decodeLexicon, encodeLexicon } from "../../src/search/index/Lexicon.ts"
import { SearchIndex } from "../../src/search/index/SearchIndex.ts"
import { alignmentWeights } from "../../src/search/ranking/Ranking.ts"
import { alignment, loadTermAligner, makeTermAligner } from "../../src/search/ranking/TermAlignment.ts"
import { assertPartsAddUp } from "./harness.ts"

const dirs: Array<string> = []
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

describe("alignment on a hand-made vocabulary", () => {
  // Each word on its own axis, except "lapse" = 0.6 · "expires" + 0.8 · a spare axis: cosine 0.6.
  const words = ["export", "expires", "lapse", "renews", "schedule", "car", "automobile", "fail", "failing", "release"]
  const dimensions = words.length + 1
  const vectors = new Float32Array(words.length * dimensions)
  words.forEach((_, id) => {
    vectors[id * dimensions + id] = 1
  })
  const lapse = words.indexOf("lapse")
  vectors.fill(0, lapse * dimensions, (lapse + 1) * dimensions)
  vectors[lapse * dimensions + words.indexOf("expires")] = 0.6
  vectors[lapse * dimensions + words.length] = 0.8
  const ids = new Map(words.map((word, id) => [word, id]))
  const relations = new Map<string, Array<WordEdge>>([
    ["car", [{ word: "automobile", relation: "synonym" }]],
    ["automobile", [{ word: "car", relation: "synonym" }]],
  ])
  const lexicon = decodeLexicon(encodeLexicon({ baseForms: new Map([["failing", ["fail"]]]), relations }, ids))
  const aligner = makeTermAligner(
    { ids, weights: new Float32Array(words.length).fill(1) },
    decodeWordVectors(encodeWordVectors(vectors, dimensions)),
    lexicon,
  )
  const coverageOf = (query: string, text: string) => aligner.align(query, [text], 1)[0]!.coverage

  it("counts an exact word 1, a lemma 0.95, a synonym 0.8, a cosine rescaled above the floor", () => {
    assert.closeTo(coverageOf("export", "export"), 1, 1e-9)
    assert.closeTo(coverageOf("exports", "export"), 1, 1e-9) // the same S-stem
    assert.closeTo(coverageOf("failing", "fail"), alignment.sameLemma, 1e-9)
    assert.closeTo(coverageOf("car", "automobile"), alignment.relations.synonym, 1e-9)
    const rescaled = (0.6 - alignment.cosineFloor) / (1 - alignment.cosineFloor)
    assert.closeTo(coverageOf("lapse", "expires"), rescaled, 0.02) // int8 vectors
    assert.strictEqual(coverageOf("renews", "schedule"), 0)
    assert.strictEqual(coverageOf("zzyzx", "export"), 0) // unknown words match only themselves
  })

  it("weighs a word that every candidate matches less than one only the target matches", () => {
    const texts = ["export expires", "export renews", "export schedule"]
    const [target, renews, schedule] = aligner.align("export lapse", texts, texts.length)
    // "export" is in all three (weight 1/3), "lapse" only matches the target: coverage is mostly lapse.
    const lapseMatch = (0.6 - alignment.cosineFloor) / (1 - alignment.cosineFloor)
    assert.closeTo(target!.coverage, (1 / 3 + lapseMatch) / (1 / 3 + 1), 0.02)
    assert.closeTo(renews!.coverage, 1 / 3 / (1 / 3 + 1), 1e-9)
    assert.isAbove(target!.score, renews!.score)
    assert.strictEqual(renews!.score, schedule!.score)
    // Learned from the first candidate only, "export" keeps its full weight.
    assert.closeTo(aligner.align("export lapse", texts, 1)[1]!.coverage, 0.5, 1e-9)
  })

  it("penalises a record without the query's negation, and numbers that differ", () => {
    // "not" is a stop word: both records have the same content words, only the negation differs.
    const [plain, negated] = aligner.align("export not renews", ["export renews", "export not renews"], 2)
    assert.isTrue(plain!.negationMismatch)
    assert.isFalse(negated!.negationMismatch)
    assert.closeTo(plain!.score, negated!.score * (1 - alignment.negationPenalty), 1e-9)
    const [other, same, none] = aligner.align("release 412", ["release 413", "release 412", "release"], 3)
    assert.isTrue(other!.numberMismatch)
    assert.isFalse(same!.numberMismatch)
    assert.isFalse(none!.numberMismatch) // a record without numbers is not contradicted
    assert.isBelow(other!.score, none!.score)
  })
})

describe("alignment in hybrid search, on a model built from the GloVe and WordNet packages", () => {
  it("ranks the record above its same-topic near miss where fusion alone does not", async () => {
    const dir = mkdtempSync(join(tmpdir(), "mnemos-align-"))
    dirs.push(dir)
    buildStaticModel({ outDir: dir, vocabularySize: 50_000, includeEngineeringWords: false })
    const files = readStaticModelFiles(dir)
    const encoder = await loadStaticModel(dir, files)
    const aligner = loadTermAligner(dir, files.vocabulary, files.vectors)
    const index = new SearchIndex()
    const records = [
      ["target", "the nightly export fails when the token expires"],
      ["near-miss", "the nightly export now renews the token"],
      ["other", "the deploy pipeline caches docker layers"],
    ] as const
    for (const [id, text] of records)
      for (const pending of index.replaceGroup("notes", id, [
        { id, store: "notes", project: "p", kind: "note", title: "", text, at: 0 },
      ])) {
        const [vector] = await encoder.encode([pending.text])
        index.setVector(pending.id, pending.hash, vector!)
      }
    const search = async (text: string, withAligner: boolean) => {
      const [vector] = await encoder.encode([text])
      return index.search({
        text,
        mode: "hybrid",
        filter: {},
        limit: 3,
        vector,
        now: 0,
        aligner: withAligner ? aligner : undefined,
      })
    }
    const query = "why does the nightly export break"
    assert.strictEqual((await search(query, false))[0]!.document.id, "near-miss")
    const aligned = await search(query, true)
    assert.strictEqual(aligned[0]!.document.id, "target")
    for (const hit of aligned) {
      const parts = hit.score_breakdown
      assertPartsAddUp(parts, hit.score, 1e-9)
      assert.closeTo(parts.alignment, alignmentWeights.hybrid * hit.alignment!.score, 1e-9)
    }
    // The issue's own example shares no word with either record.
    assert.strictEqual((await search("overnight dump breaks after credentials lapse", true))[0]!.document.id, "target")
    await encoder.close()
  })
})
