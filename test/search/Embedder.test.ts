/**
 * The embedding path for real: the static model in plain arithmetic, and transformer ONNX files
 * written by OnnxProto.ts (onnx-proto), run by onnxruntime-node.
 *
 * - The static SIF embedding is the weighted mean of unit vectors + L2 norm that its documentation
 *   states, checked against plain arithmetic (within the int8 vectors' precision).
 * - A small model built from the real GloVe package embeds related sentences closer than
 *   unrelated ones; texts with no known word have no embedding.
 * - A tiny BERT-shaped graph (input_ids, attention_mask, token_type_ids → last_hidden_state)
 *   with a WordPiece tokenizer.json loads through the transformer path; pooling is masked.
 * - The embedder service gives the same vectors inline and from its worker thread, and loads
 *   nothing until a vector is needed (it names its model from the manifest meanwhile).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Layer } from "effect"
import { afterAll, assert, describe, it } from "vitest"
import * as Embedder from "../../src/search/embedding/Embedder.ts"
import {
  embedWeightedTokens,
  loadStaticModel,
  readStaticModelFiles,
  staticTokensPerTextMax,
} from "../../src/search/embedding/StaticModel.ts"
import { buildStaticModel, staticModelDimensions } from "../../src/search/embedding/StaticModelBuild.ts"
import { loadTransformerModel, makeWordPiece } from "../../src/search/embedding/TransformerModel.ts"
import {
  decodeWordVectors,
  encodeWordVectors,
  openWordVectors,
  wordRowsCachedMax,
} from "../../src/search/embedding/WordVectors.ts"
import { embeddingWords } from "../../src/search/index/Tokenizer.ts"
import { matrix, tinyBertModel, tinyBertParts } from "./tinyModels.ts"

const dirs: Array<string> = []
const temp = () => {
  const dir = mkdtempSync(join(tmpdir(), "mnemos-embed-"))
  dirs.push(dir)
  return dir
}
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

const cosine = (a: Float32Array, b: Float32Array) => a.reduce((sum, value, i) => sum + value * b[i]!, 0)
const normalize = (values: Array<number>) => {
  const norm = Math.hypot(...values)
  return values.map((value) => value / norm)
}

describe("static SIF embedding", () => {
  const rows = 6
  const d = staticModelDimensions
  const embeddings = matrix(rows, d, 7)
  const reference = (ids: ReadonlyArray<number>, weights: ReadonlyArray<number>) => {
    const mean = Array.from({ length: d }, (_, j) =>
      ids.reduce((sum, id, t) => {
        const row = embeddings.subarray(id * d, (id + 1) * d)
        return sum + (weights[t]! * row[j]!) / Math.hypot(...row)
      }, 0),
    )
    const total = weights.reduce((sum, weight) => sum + weight, 0) + 1e-9
    return normalize(mean.map((value) => value / total))
  }

  it("is the SIF-weighted mean of the words' unit vectors, at unit length, within int8's precision", () => {
    const vectors = decodeWordVectors(encodeWordVectors(embeddings, d))
    const cases: ReadonlyArray<readonly [Array<number>, Array<number>]> = [
      [
        [1, 4, 4, 0],
        [0.5, 1, 0.25, 0.75],
      ],
      [
        [5, 2],
        [0.9, 0.1],
      ],
      [[3], [0.2]],
    ]
    for (const [ids, weights] of cases) {
      const embedded = embedWeightedTokens(vectors, { ids, weights, count: ids.length })!
      const expected = reference(ids, weights)
      assert.closeTo(cosine(embedded, Float32Array.from(expected)), 1, 1e-3)
      assert.closeTo(cosine(embedded, embedded), 1, 1e-6)
      for (let j = 0; j < d; j++) assert.closeTo(embedded[j]!, expected[j]!, 0.02)
    }
    assert.strictEqual(embedWeightedTokens(vectors, { ids: [], weights: [], count: 0 }), undefined)
  })

  it("reads word vectors from their file on demand exactly as decoded, past its cache of rows", () => {
    // More words than the cache holds, so rows are read again after it is emptied.
    const words = wordRowsCachedMax + 900
    const dimensions = 8
    const bytes = encodeWordVectors(matrix(words, dimensions, 11), dimensions)
    const file = join(temp(), "word-vectors.bin")
    writeFileSync(file, bytes)
    const decoded = decodeWordVectors(bytes)
    const opened = openWordVectors(file)
    try {
      assert.strictEqual(opened.words, words)
      assert.strictEqual(opened.dimensions, dimensions)
      let state = 17
      const nextId = () => {
        state = (state * 1103515245 + 12345) % 2147483648
        return state % words
      }
      for (let i = 0; i < 3 * words; i++) {
        const [a, b] = [nextId(), i % 7 === 0 ? words - 1 : nextId()]
        assert.strictEqual(opened.cosine(a, b), decoded.cosine(a, b))
        const [fromFile, fromMemory] = [new Float64Array(dimensions), new Float64Array(dimensions)]
        opened.addScaled(a, 0.37, fromFile)
        decoded.addScaled(a, 0.37, fromMemory)
        assert.deepStrictEqual(fromFile, fromMemory)
      }
    } finally {
      opened.close()
    }
  })
})

describe("default model from the GloVe package", () => {
  it("embeds related sentences closer than unrelated ones; unknown words give no vector", async () => {
    const dir = temp()
    // 20,000 words: "kitten" and "rug" are rarer than the 5,000th.
    const manifest = buildStaticModel({ outDir: dir, vocabularySize: 20_000, includeEngineeringWords: false })
    assert.strictEqual(manifest.vocabularySize, 20_000)
    const model = await loadStaticModel(dir)
    const [cat, kitten, stocks, nothing, single] = await model.encode([
      "The cat sat on the mat",
      "A kitten rested on the rug",
      "Stock market prices fell sharply today",
      "qzxv wbrrt",
      "The cat sat on the mat",
    ])
    assert.strictEqual(nothing, undefined)
    assert.closeTo(cosine(cat!, cat!), 1, 1e-5)
    assert.isAbove(cosine(cat!, kitten!), cosine(cat!, stocks!))
    // Batching (padding) does not change a text's vector.
    const [alone] = await model.encode(["The cat sat on the mat"])
    for (let j = 0; j < alone!.length; j++) assert.closeTo(alone![j]!, single![j]!, 1e-6)

    // Each text's vector is the weighted sum of its own known words, the first
    // `staticTokensPerTextMax` of them: one buffer serves every text of a batch, and a long text
    // before a short one leaves nothing behind in it.
    const { vocabulary, vectors } = readStaticModelFiles(dir)
    const expected = (text: string) => {
      const ids = embeddingWords(text)
        .map((word) => vocabulary.ids.get(word))
        .filter((id) => id !== undefined)
        .slice(0, staticTokensPerTextMax)
      return embedWeightedTokens(vectors, { ids, weights: ids.map((id) => vocabulary.weights[id]!), count: ids.length })
    }
    const long = Array.from({ length: 1_500 }, (_, i) => ["cat", "market", "the", "qzxv", "rested"][i % 5]).join(" ")
    const texts = [long, "A kitten rested", "market market stocks", "qzxv"]
    const encoded = await model.encode(texts)
    for (const [i, text] of texts.entries()) assert.deepStrictEqual(encoded[i], expected(text), text.slice(0, 20))
    vectors.close?.()
    await model.close()
  })
})

describe("transformer path", () => {
  const { vocab, tokenizerJson, hidden, wordEmbeddings, typeEmbeddings } = tinyBertParts
  const tinyBert = () => tinyBertModel()

  it("tokenizes with WordPiece: lower-case, accents stripped, punctuation split, ## pieces, CLS/SEP", () => {
    const tokenizer = makeWordPiece(tokenizerJson)
    const ids = tokenizer.encode("Unaffable, HELLO wörld! Café zzz", 64)
    assert.deepStrictEqual(
      ids.map((id) => vocab[id]),
      ["[CLS]", "un", "##aff", "##able", ",", "hello", "world", "!", "cafe", "[UNK]", "[SEP]"],
    )
    assert.strictEqual(tokenizer.encode("hello world hello world", 4).length, 4)
  })

  it("loads model.onnx + tokenizer.json and mean-pools over the attention mask", async () => {
    const dir = temp()
    writeFileSync(join(dir, "model.onnx"), tinyBert())
    writeFileSync(join(dir, "tokenizer.json"), JSON.stringify(tokenizerJson))
    const model = await loadTransformerModel(dir)
    assert.strictEqual(model.dimensions, hidden)
    const [short, long] = await model.encode(["hello", "unaffable hello world!"])
    const expected = (tokens: ReadonlyArray<string>) =>
      normalize(
        Array.from(
          { length: hidden },
          (_, h) =>
            tokens.reduce(
              (sum, token) => sum + wordEmbeddings[vocab.indexOf(token) * hidden + h]! + typeEmbeddings[h]!,
              0,
            ) / tokens.length,
        ),
      )
    const shortExpected = expected(["[CLS]", "hello", "[SEP]"])
    const longExpected = expected(["[CLS]", "un", "##aff", "##able", "hello", "world", "!", "[SEP]"])
    for (let h = 0; h < hidden; h++) {
      assert.closeTo(short![h]!, shortExpected[h]!, 1e-5)
      assert.closeTo(long![h]!, longExpected[h]!, 1e-5)
    }
    await model.close()
  })
})

describe("Embedder service", () => {
  it("loads nothing until a vector is needed, naming its model from the manifest meanwhile", async () => {
    const dir = temp()
    const manifest = buildStaticModel({ outDir: dir, vocabularySize: 3000, includeEngineeringWords: false })
    const seen = await Effect.runPromise(
      Effect.gen(function* () {
        const embedder = yield* Embedder.Embedder
        const atStart = embedder.status().state
        const modelId = yield* embedder.modelId
        const afterModelId = embedder.status().state
        const aligner = embedder.aligner()
        const vector = yield* embedder.embedQuery("deploy the new release")
        return { atStart, modelId, afterModelId, aligner, vector, afterQuery: embedder.status() }
      }).pipe(Effect.provide(Layer.fresh(Embedder.layer({ model: { kind: "static", dir }, worker: false })))),
    )
    assert.deepStrictEqual([seen.atStart, seen.afterModelId], ["unloaded", "unloaded"])
    assert.strictEqual(seen.modelId, manifest.id)
    assert.strictEqual(seen.aligner, undefined)
    // The first query loads the model (and its aligner) and is answered with a vector.
    assert.strictEqual(seen.vector?.length, manifest.dimensions)
    assert.deepStrictEqual(seen.afterQuery, {
      state: "ready",
      modelId: manifest.id,
      dimensions: manifest.dimensions,
      worker: false,
      workerRunning: false,
    })
  })

  it("answers the same vectors inline (queries) and from the worker thread (batches)", async () => {
    const dir = temp()
    buildStaticModel({ outDir: dir, vocabularySize: 3000, includeEngineeringWords: false })
    const texts = ["deploy the new release", "the database was slow", "zzzz qqqq", ""]
    const program = Effect.gen(function* () {
      const embedder = yield* Embedder.Embedder
      const status = yield* embedder.ready
      assert.strictEqual(status.state, "ready")
      const batch = yield* embedder.embedBatch(texts)
      const inline = yield* Effect.forEach(texts, (text) => embedder.embedQuery(text))
      return { batch, inline }
    })
    const { batch, inline } = await Effect.runPromise(
      program.pipe(
        Effect.provide(
          Layer.fresh(Embedder.layer({ model: { kind: "static", dir }, worker: true, inlineBatchMax: 0 })),
        ),
      ),
    )
    assert.strictEqual(batch[2], undefined)
    assert.strictEqual(batch[3], undefined)
    batch.forEach((vector, i) => {
      if (vector === undefined) assert.strictEqual(inline[i], undefined)
      else for (let j = 0; j < vector.length; j++) assert.closeTo(vector[j]!, inline[i]![j]!, 1e-6)
    })
  })

  it("runs small batches inline, starts the worker for a large one, and closes it once idle", async () => {
    const dir = temp()
    buildStaticModel({ outDir: dir, vocabularySize: 3000, includeEngineeringWords: false })
    const running = (status: Embedder.EmbedderStatus) => (status.state === "ready" ? status.workerRunning : undefined)
    const seen = await Effect.runPromise(
      Effect.gen(function* () {
        const embedder = yield* Embedder.Embedder
        yield* embedder.ready
        const atStart = running(embedder.status())
        const small = yield* embedder.embedBatch(["deploy the new release", "the database was slow"])
        const afterSmall = running(embedder.status())
        const large = yield* embedder.embedBatch(Array.from({ length: 5 }, () => "deploy the new release"))
        const afterLarge = running(embedder.status())
        yield* Effect.sleep("400 millis")
        const afterIdle = running(embedder.status())
        // The same vectors either way, and a new worker for the next large batch.
        const again = yield* embedder.embedBatch(Array.from({ length: 5 }, () => "deploy the new release"))
        return { atStart, afterSmall, afterLarge, afterIdle, small, large, again }
      }).pipe(
        Effect.provide(
          Layer.fresh(
            Embedder.layer({ model: { kind: "static", dir }, worker: true, inlineBatchMax: 2, workerIdleMs: 100 }),
          ),
        ),
      ),
    )
    assert.deepStrictEqual(
      [seen.atStart, seen.afterSmall, seen.afterLarge, seen.afterIdle],
      [false, false, true, false],
    )
    for (const vectors of [seen.large, seen.again])
      for (const vector of vectors)
        for (let j = 0; j < vector!.length; j++) assert.closeTo(vector![j]!, seen.small[0]![j]!, 1e-6)
  })
})
