/**
 * The default embedding model at run time: the ONNX SIF graph built by StaticModelBuild.ts, run by
 * onnxruntime-node, fed by a JavaScript tokenizer.
 *
 * Tokenizer: `embeddingWords` (lower-case alphanumeric runs, camelCase split), each looked up in
 * the vocabulary; unknown words are skipped. Each known word gets its SIF weight a/(a + p(w)),
 * p(w) from its GloVe frequency rank by Zipf's law (see StaticModelBuild.ts). A text with no known
 * word has no embedding (`undefined`): it is found by full text only.
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import * as ort from "onnxruntime-node"
import { chunksOf, encodeBatchTextsMax, type SentenceEncoder } from "./SentenceEncoder.ts"
import { type StaticModelManifest, staticModelFiles } from "./StaticModelManifest.ts"
import { embeddingWords } from "./Tokenizer.ts"

/** Words of one text that reach the model; the rest is ignored. */
export const staticTokensPerTextMax = 1024

/** Token ids and SIF weights of one text. */
export interface WeightedTokens {
  readonly ids: ReadonlyArray<number>
  readonly weights: ReadonlyArray<number>
}

/** The vocabulary and the weight of each entry. */
export interface StaticVocabulary {
  readonly ids: ReadonlyMap<string, number>
  readonly weights: Float32Array
}

/** Reads a model directory's vocabulary and computes each word's SIF weight. */
export const readStaticVocabulary = (dir: string, manifest: StaticModelManifest): StaticVocabulary => {
  const { words, ranks } = JSON.parse(readFileSync(join(dir, staticModelFiles.vocabulary), "utf8")) as {
    words: Array<string>
    ranks: Array<number>
  }
  const ids = new Map<string, number>()
  const weights = new Float32Array(words.length)
  words.forEach((word, id) => {
    ids.set(word, id)
    const probability = 1 / ((ranks[id]! + 1) * manifest.zipfHarmonic)
    weights[id] = manifest.sifA / (manifest.sifA + probability)
  })
  return { ids, weights }
}

/** The known words of `text` with their weights. */
export const weightedTokens = (vocabulary: StaticVocabulary, text: string): WeightedTokens => {
  const ids: Array<number> = []
  const weights: Array<number> = []
  for (const word of embeddingWords(text)) {
    const id = vocabulary.ids.get(word)
    if (id === undefined) continue
    ids.push(id)
    weights.push(vocabulary.weights[id]!)
    if (ids.length >= staticTokensPerTextMax) break
  }
  return { ids, weights }
}

/** A static model's manifest and vocabulary, read once for the encoder and the term aligner. */
export interface StaticModelFiles {
  readonly manifest: StaticModelManifest
  readonly vocabulary: StaticVocabulary
}

/** Reads the manifest and vocabulary of the model in `dir`. */
export const readStaticModelFiles = (dir: string): StaticModelFiles => {
  const manifest = JSON.parse(readFileSync(join(dir, staticModelFiles.manifest), "utf8")) as StaticModelManifest
  return { manifest, vocabulary: readStaticVocabulary(dir, manifest) }
}

/** Opens the model in `dir` (built by StaticModelBuild.ts). */
export const loadStaticModel = async (
  dir: string,
  { manifest, vocabulary }: StaticModelFiles = readStaticModelFiles(dir),
): Promise<SentenceEncoder> => {
  const session = await ort.InferenceSession.create(join(dir, staticModelFiles.model), {
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    graphOptimizationLevel: "all",
  })

  const run = async (batch: ReadonlyArray<WeightedTokens>): Promise<Array<Float32Array>> => {
    const sequence = Math.max(1, ...batch.map((tokens) => tokens.ids.length))
    const ids = new BigInt64Array(batch.length * sequence)
    const weights = new Float32Array(batch.length * sequence)
    batch.forEach((tokens, row) => {
      for (let i = 0; i < tokens.ids.length; i++) {
        ids[row * sequence + i] = BigInt(tokens.ids[i]!)
        weights[row * sequence + i] = tokens.weights[i]!
      }
    })
    const output = await session.run({
      token_ids: new ort.Tensor("int64", ids, [batch.length, sequence]),
      token_weights: new ort.Tensor("float32", weights, [batch.length, sequence]),
    })
    const data = output.embedding!.data as Float32Array
    return batch.map((_, row) => data.slice(row * manifest.dimensions, (row + 1) * manifest.dimensions))
  }

  const encode = async (texts: ReadonlyArray<string>): Promise<Array<Float32Array | undefined>> => {
    const tokens = texts.map((text) => weightedTokens(vocabulary, text))
    const known = tokens.flatMap((entry, index) => (entry.ids.length > 0 ? [index] : []))
    const out: Array<Float32Array | undefined> = texts.map(() => undefined)
    // Similar lengths share a batch, so little is padded.
    known.sort((a, b) => tokens[a]!.ids.length - tokens[b]!.ids.length)
    for (const chunk of chunksOf(known, encodeBatchTextsMax)) {
      const vectors = await run(chunk.map((index) => tokens[index]!))
      chunk.forEach((index, row) => {
        out[index] = vectors[row]
      })
    }
    return out
  }

  return {
    id: manifest.id,
    dimensions: manifest.dimensions,
    encode,
    close: () => session.release(),
  }
}
