/**
 * The default embedding model at run time: SIF sentence embeddings (Arora et al.) over the word
 * vectors StaticModelBuild.ts made, computed here — a text's vector is the SIF-weighted sum of its
 * known words' unit vectors, scaled to unit length. No ONNX runtime: the graph it once ran was
 * this sum, and dropping it frees its 40 MB float32 matrix and the runtime itself (≈ 60 MiB
 * resident in the search thread); the int8 vectors are the ones term alignment reads anyway.
 *
 * Tokenizer: `embeddingWords` (lower-case alphanumeric runs, camelCase split), each looked up in
 * the vocabulary; unknown words are skipped. Each known word gets its SIF weight a/(a + p(w)),
 * p(w) from its GloVe frequency rank by Zipf's law (see StaticModelBuild.ts). A text with no known
 * word has no embedding (`undefined`): it is found by full text only.
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { arraySlices } from "../index/ArraySlices.ts"
import { forEachEmbeddingWord } from "../index/Tokenizer.ts"
import type { SentenceEncoder } from "./SentenceEncoder.ts"
import { type StaticModelManifest, staticModelFiles } from "./StaticModelManifest.ts"
import { packWordIds, type WordIds } from "./WordIds.ts"
import { openWordVectors, type WordVectors } from "./WordVectors.ts"

/** Words of one text that reach the model; the rest is ignored. */
export const staticTokensPerTextMax = 1024

/** Token ids and SIF weights of one text: the first `count` of each. */
export interface WeightedTokens {
  readonly ids: ArrayLike<number>
  readonly weights: ArrayLike<number>
  readonly count: number
}

/** The vocabulary and the weight of each entry. */
export interface StaticVocabulary {
  /** Packed (WordIds.ts); a `Map` serves as well. */
  readonly ids: WordIds
  readonly weights: Float32Array
}

/** Reads a model directory's vocabulary and computes each word's SIF weight. */
export const readStaticVocabulary = (dir: string, manifest: StaticModelManifest): StaticVocabulary => {
  const { words, ranks } = JSON.parse(readFileSync(join(dir, staticModelFiles.vocabulary), "utf8")) as {
    words: Array<string>
    ranks: Array<number>
  }
  const weights = new Float32Array(words.length)
  words.forEach((_, id) => {
    const probability = 1 / ((ranks[id]! + 1) * manifest.zipfHarmonic)
    weights[id] = manifest.sifA / (manifest.sifA + probability)
  })
  return { ids: packWordIds(words), weights }
}

/**
 * The known words of `text` with their weights, in `into` (emptied first: `encode` reuses one
 * buffer for every text, since each is embedded before the next is read). Its arrays are typed and
 * of the most words a text gives the model, written by index: emptied by `length = 0`, a JavaScript
 * array lets go of its storage and grows it again, a few allocations a text.
 */
export const weightedTokens = (text: string, into: TokensBuffer): WeightedTokens => {
  into.count = 0
  forEachEmbeddingWord(text, addKnownWord, into)
  return into
}

/** The arrays `weightedTokens` fills, and the vocabulary it looks words up in. */
interface TokensBuffer extends WeightedTokens {
  readonly vocabulary: StaticVocabulary
  readonly ids: Int32Array
  readonly weights: Float32Array
  count: number
}

const tokensBuffer = (vocabulary: StaticVocabulary): TokensBuffer => ({
  vocabulary,
  ids: new Int32Array(staticTokensPerTextMax),
  weights: new Float32Array(staticTokensPerTextMax),
  count: 0,
})

const addKnownWord = (word: string, into: TokensBuffer): boolean => {
  const id = into.vocabulary.ids.get(word)
  if (id === undefined) return true
  into.ids[into.count] = id
  into.weights[into.count] = into.vocabulary.weights[id]!
  return ++into.count < staticTokensPerTextMax
}

/** A static model's manifest, vocabulary and word vectors, read once for the encoder and the term aligner. */
export interface StaticModelFiles {
  readonly manifest: StaticModelManifest
  readonly vocabulary: StaticVocabulary
  /** Read from their file on demand (WordVectors.ts); closed by the encoder's `close`. */
  readonly vectors: WordVectors & { readonly close?: () => void }
}

/** Reads the manifest and vocabulary of the model in `dir`, and opens its word vectors. */
export const readStaticModelFiles = (dir: string): StaticModelFiles => {
  const manifest = JSON.parse(readFileSync(join(dir, staticModelFiles.manifest), "utf8")) as StaticModelManifest
  return {
    manifest,
    vocabulary: readStaticVocabulary(dir, manifest),
    vectors: openWordVectors(join(dir, staticModelFiles.vectors)),
  }
}

let sumScratch = new Float64Array(0)
/**
 * Embeddings, cut from shared chunks (ArraySlices.ts): an embedding is compacted into the index and
 * search's file, or scores one query, and is dropped.
 */
const embeddingSlices = arraySlices((length) => new Float32Array(length), 4 * 1024)

/**
 * The unit-length SIF embedding of `tokens`: Σ weight × vector, normalised (the weighted mean's
 * division by Σ weights cancels in the normalisation). Undefined without a token, or when the
 * sum is the zero vector.
 */
export const embedWeightedTokens = (vectors: WordVectors, tokens: WeightedTokens): Float32Array | undefined => {
  if (tokens.count === 0) return undefined
  // One sum for every text (this runs synchronously to the end): each text's own was a fifth of
  // what embedding allocated.
  if (sumScratch.length !== vectors.dimensions) sumScratch = new Float64Array(vectors.dimensions)
  const sum = sumScratch.fill(0)
  for (let i = 0; i < tokens.count; i++) vectors.addScaled(tokens.ids[i]!, tokens.weights[i]!, sum)
  let squares = 0
  for (let i = 0; i < sum.length; i++) squares += sum[i]! * sum[i]!
  if (squares === 0) return undefined
  const norm = Math.sqrt(squares)
  const out = embeddingSlices(vectors.dimensions)
  for (let i = 0; i < out.length; i++) out[i] = sum[i]! / norm
  return out
}

/** Opens the model in `dir` (built by StaticModelBuild.ts). */
export const loadStaticModel = async (
  dir: string,
  { manifest, vocabulary, vectors }: StaticModelFiles = readStaticModelFiles(dir),
): Promise<SentenceEncoder> => ({
  id: manifest.id,
  dimensions: manifest.dimensions,
  encode: async (texts) => {
    const tokens = tokensBuffer(vocabulary)
    const embedded: Array<Float32Array | undefined> = []
    for (const text of texts) embedded.push(embedWeightedTokens(vectors, weightedTokens(text, tokens)))
    return embedded
  },
  close: async () => vectors.close?.(),
})
