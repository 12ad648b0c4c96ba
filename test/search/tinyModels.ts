/**
 * Small generated models for tests, written with the same ONNX serialiser as the default model
 * (OnnxProto.ts, on onnx-proto): a BERT-shaped graph with the inputs and output of a MiniLM-class
 * sentence model and a WordPiece tokenizer.json, so the transformer path runs for real.
 */
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { encodeOnnxModel, floatRaw, int64Raw, OnnxType } from "../../src/search/embedding/OnnxProto.ts"

/** A deterministic pseudo-random matrix. */
export const matrix = (rows: number, columns: number, seed: number) => {
  let state = seed
  return Float32Array.from({ length: rows * columns }, () => {
    state = (state * 1103515245 + 12345) % 2 ** 31
    return state / 2 ** 31 - 0.5
  })
}

/** A tiny BERT's shape: its hidden size and the seed of its embedding tables. */
export interface TinyBertShape {
  readonly hidden: number
  readonly seed: number
}

const parts = ({ hidden, seed }: TinyBertShape = { hidden: 8, seed: 11 }) => {
  const vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##aff", "##able", "hello", "world", ",", "!", "cafe"]
  const tokenizerJson = {
    normalizer: { type: "BertNormalizer", lowercase: true, strip_accents: null },
    pre_tokenizer: { type: "BertPreTokenizer" },
    model: {
      type: "WordPiece",
      unk_token: "[UNK]",
      continuing_subword_prefix: "##",
      max_input_chars_per_word: 100,
      vocab: Object.fromEntries(vocab.map((token, id) => [token, id])),
    },
  }
  const wordEmbeddings = matrix(vocab.length, hidden, seed)
  const typeEmbeddings = matrix(2, hidden, seed + 2)

  /** A BERT-shaped graph: embeddings of ids plus token types, zeroed where the mask is 0. */
  const model = () =>
    encodeOnnxModel({
      producer: "mnemos-test",
      graphName: "tiny_bert",
      inputs: [
        { name: "input_ids", type: OnnxType.int64, dims: ["batch", "sequence"] },
        { name: "attention_mask", type: OnnxType.int64, dims: ["batch", "sequence"] },
        { name: "token_type_ids", type: OnnxType.int64, dims: ["batch", "sequence"] },
      ],
      outputs: [{ name: "last_hidden_state", type: OnnxType.float, dims: ["batch", "sequence", hidden] }],
      initializers: [
        { name: "word_embeddings", type: OnnxType.float, dims: [vocab.length, hidden], raw: floatRaw(wordEmbeddings) },
        { name: "type_embeddings", type: OnnxType.float, dims: [2, hidden], raw: floatRaw(typeEmbeddings) },
        { name: "axis_feature", type: OnnxType.int64, dims: [1], raw: int64Raw([2]) },
      ],
      nodes: [
        { opType: "Gather", inputs: ["word_embeddings", "input_ids"], outputs: ["words"] },
        { opType: "Gather", inputs: ["type_embeddings", "token_type_ids"], outputs: ["types"] },
        { opType: "Add", inputs: ["words", "types"], outputs: ["summed"] },
        { opType: "Cast", inputs: ["attention_mask"], outputs: ["mask_float"], attributes: [{ name: "to", int: 1 }] },
        { opType: "Unsqueeze", inputs: ["mask_float", "axis_feature"], outputs: ["mask_3d"] },
        { opType: "Mul", inputs: ["summed", "mask_3d"], outputs: ["last_hidden_state"] },
      ],
    })

  return { vocab, tokenizerJson, hidden, wordEmbeddings, typeEmbeddings, model }
}

/** The pieces of the tiny BERT: vocabulary, tokenizer.json, hidden size and its embedding tables. */
export const tinyBertParts = parts()

/** The tiny BERT's model.onnx bytes: embeddings of ids plus token types, zeroed where the mask is 0. */
export const tinyBertModel = (): Uint8Array => tinyBertParts.model()

/**
 * Writes model.onnx and tokenizer.json of the tiny BERT into `dir` (a model directory like
 * all-MiniLM-L6-v2's); another `shape` makes another model (same vocabulary).
 */
export const writeTinyBert = (dir: string, shape?: TinyBertShape): void => {
  const bert = shape === undefined ? tinyBertParts : parts(shape)
  writeFileSync(join(dir, "model.onnx"), bert.model())
  writeFileSync(join(dir, "tokenizer.json"), JSON.stringify(bert.tokenizerJson))
}
