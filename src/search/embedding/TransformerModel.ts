/**
 * An optional transformer sentence model (e.g. all-MiniLM-L6-v2) from a local directory holding
 * `model.onnx` and the Hugging Face `tokenizer.json`. Nothing is fetched: the directory is the
 * operator's.
 *
 * Tokenizer: the BERT WordPiece pipeline as tokenizer.json describes it — BertNormalizer (clean,
 * optional lower-casing and accent stripping, CJK characters spaced), BertPreTokenizer
 * (whitespace and punctuation), greedy longest-match WordPiece with the "##" prefix, then
 * `[CLS] … [SEP]`, cut at `maxTokens`. The session gets `input_ids`, `attention_mask` and
 * `token_type_ids` (those it declares). Output: `sentence_embedding` when the graph has it,
 * else the first output — [batch, seq, hidden] is mean-pooled over the attention mask — then
 * L2-normalised.
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import * as ort from "onnxruntime-node"
import { chunksOf, encodeBatchTextsMax, type SentenceEncoder, transformerModelId } from "./SentenceEncoder.ts"

/** Default sequence cut (MiniLM was trained on 256-token inputs). */
export const transformerTokensMaxDefault = 256

interface TokenizerJson {
  readonly normalizer?: {
    readonly type?: string
    readonly lowercase?: boolean
    readonly strip_accents?: boolean | null
  }
  readonly model: {
    readonly type: string
    readonly vocab: Record<string, number>
    readonly unk_token?: string
    readonly continuing_subword_prefix?: string
    readonly max_input_chars_per_word?: number
  }
}

/** A WordPiece tokenizer read from tokenizer.json. */
export interface WordPieceTokenizer {
  readonly encode: (text: string, maxTokens: number) => Array<number>
}

const isPunctuation = (char: string) => /[\p{P}\p{S}]/u.test(char)
const isCjk = (char: string) => /[\u4E00-\u9FFF\u3400-\u4DBF\uF900-\uFAFF\u{20000}-\u{2FA1F}]/u.test(char)

/** Builds the tokenizer from the parsed tokenizer.json. */
export const makeWordPiece = (json: TokenizerJson): WordPieceTokenizer => {
  if (json.model.type !== "WordPiece") throw new Error(`tokenizer.json: unsupported model type ${json.model.type}`)
  const vocab = new Map(Object.entries(json.model.vocab))
  const id = (token: string) => {
    const found = vocab.get(token)
    if (found === undefined) throw new Error(`tokenizer.json: the vocabulary has no ${token}`)
    return found
  }
  const unk = id(json.model.unk_token ?? "[UNK]")
  const cls = id("[CLS]")
  const sep = id("[SEP]")
  const prefix = json.model.continuing_subword_prefix ?? "##"
  const maxChars = json.model.max_input_chars_per_word ?? 100
  const lowercase = json.normalizer?.lowercase ?? true
  const stripAccents = json.normalizer?.strip_accents ?? lowercase

  const normalize = (text: string) => {
    let out = ""
    for (const char of text) {
      if (char === "\u0000" || char === "\uFFFD" || /\p{Cc}/u.test(char)) {
        if (/\s/.test(char)) out += " "
        continue
      }
      out += isCjk(char) ? ` ${char} ` : char
    }
    if (lowercase) out = out.toLowerCase()
    if (stripAccents) out = out.normalize("NFD").replace(/\p{Mn}/gu, "")
    return out
  }

  const preTokenize = (text: string): Array<string> => {
    const words: Array<string> = []
    for (const chunk of text.split(/\s+/)) {
      let current = ""
      for (const char of chunk) {
        if (isPunctuation(char)) {
          if (current !== "") words.push(current)
          words.push(char)
          current = ""
        } else current += char
      }
      if (current !== "") words.push(current)
    }
    return words
  }

  const wordPiece = (word: string, out: Array<number>) => {
    const chars = [...word]
    if (chars.length > maxChars) return void out.push(unk)
    const pieces: Array<number> = []
    let start = 0
    while (start < chars.length) {
      let end = chars.length
      let found: number | undefined
      while (start < end) {
        const piece = (start > 0 ? prefix : "") + chars.slice(start, end).join("")
        found = vocab.get(piece)
        if (found !== undefined) break
        end--
      }
      if (found === undefined) return void out.push(unk)
      pieces.push(found)
      start = end
    }
    out.push(...pieces)
  }

  return {
    encode: (text, maxTokens) => {
      const ids: Array<number> = [cls]
      for (const word of preTokenize(normalize(text))) {
        wordPiece(word, ids)
        if (ids.length >= maxTokens - 1) break
      }
      ids.length = Math.min(ids.length, maxTokens - 1)
      ids.push(sep)
      return ids
    },
  }
}

const l2Normalize = (vector: Float32Array): Float32Array => {
  let sum = 0
  for (const value of vector) sum += value * value
  const norm = Math.sqrt(sum)
  if (norm > 0) for (let i = 0; i < vector.length; i++) vector[i]! /= norm
  return vector
}

/** Opens the model in `dir`. */
export const loadTransformerModel = async (
  dir: string,
  maxTokens = transformerTokensMaxDefault,
): Promise<SentenceEncoder> => {
  const tokenizer = makeWordPiece(JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8")) as TokenizerJson)
  const session = await ort.InferenceSession.create(join(dir, "model.onnx"), {
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    graphOptimizationLevel: "all",
  })
  const outputName = session.outputNames.includes("sentence_embedding") ? "sentence_embedding" : session.outputNames[0]!
  let dimensions = 0

  const run = async (batch: ReadonlyArray<Array<number>>): Promise<Array<Float32Array>> => {
    const sequence = Math.max(...batch.map((ids) => ids.length))
    const size = batch.length * sequence
    const inputIds = new BigInt64Array(size)
    const mask = new BigInt64Array(size)
    batch.forEach((ids, row) => {
      ids.forEach((token, i) => {
        inputIds[row * sequence + i] = BigInt(token)
        mask[row * sequence + i] = 1n
      })
    })
    const dims = [batch.length, sequence]
    const feeds: Record<string, ort.Tensor> = {}
    for (const name of session.inputNames) {
      if (name === "input_ids") feeds[name] = new ort.Tensor("int64", inputIds, dims)
      else if (name === "attention_mask") feeds[name] = new ort.Tensor("int64", mask, dims)
      else if (name === "token_type_ids") feeds[name] = new ort.Tensor("int64", new BigInt64Array(size), dims)
      else throw new Error(`model.onnx: unexpected input ${name}`)
    }
    const output = (await session.run(feeds))[outputName]!
    const data = output.data as Float32Array
    const hidden = output.dims[output.dims.length - 1]!
    dimensions = hidden
    return batch.map((ids, row) => {
      if (output.dims.length === 2) return l2Normalize(data.slice(row * hidden, (row + 1) * hidden))
      const pooled = new Float32Array(hidden)
      for (let t = 0; t < ids.length; t++) {
        const offset = (row * sequence + t) * hidden
        for (let h = 0; h < hidden; h++) pooled[h]! += data[offset + h]!
      }
      for (let h = 0; h < hidden; h++) pooled[h]! /= ids.length
      return l2Normalize(pooled)
    })
  }

  // One probe run learns the hidden size, so `dimensions` is known before any caller asks.
  await run([tokenizer.encode("", maxTokens)])

  return {
    id: transformerModelId(dir),
    get dimensions() {
      return dimensions
    },
    encode: async (texts) => {
      const out: Array<Float32Array | undefined> = []
      for (const chunk of chunksOf(texts, encodeBatchTextsMax))
        out.push(...(await run(chunk.map((text) => tokenizer.encode(text, maxTokens)))))
      return out
    },
    close: () => session.release(),
  }
}
