/**
 * Picks and loads the sentence encoder a configuration names. Apart from SentenceEncoder.ts (the
 * interface every model implements) so the models never import the module that imports them.
 */
import { existsSync } from "node:fs"
import { join } from "node:path"
import { type SentenceEncoder, transformerModelId } from "./SentenceEncoder.ts"
import { readStaticModelManifest } from "./StaticModelManifest.ts"

/** Which model to load. */
export type EncoderConfig =
  | { readonly kind: "static"; readonly dir: string }
  /** A transformer sentence model: `model.onnx` + `tokenizer.json` (WordPiece, e.g. all-MiniLM-L6-v2). */
  | { readonly kind: "transformer"; readonly dir: string; readonly maxTokens?: number }

/** Loads the encoder `config` names (dynamic imports keep the worker bundle small). */
export const loadEncoder = async (config: EncoderConfig): Promise<SentenceEncoder> => {
  if (config.kind === "static") return (await import("./StaticModel.ts")).loadStaticModel(config.dir)
  return (await import("./TransformerModel.ts")).loadTransformerModel(config.dir, config.maxTokens)
}

/** The id the encoder of `config` reports (`SentenceEncoder.id`), read without loading it. */
export const encoderIdOf = (config: EncoderConfig): string =>
  config.kind === "static" ? readStaticModelManifest(config.dir).id : transformerModelId(config.dir)

/**
 * The encoder a model directory holds (`mnemos serve --model DIR`): a static model built by
 * mnemos (manifest.json), or a transformer sentence model (model.onnx + tokenizer.json). Throws,
 * naming what is missing, for anything else.
 */
export const encoderConfigOf = (dir: string): EncoderConfig => {
  if (existsSync(join(dir, "manifest.json"))) return { kind: "static", dir }
  const missing = ["model.onnx", "tokenizer.json"].filter((file) => !existsSync(join(dir, file)))
  if (missing.length === 0) return { kind: "transformer", dir }
  throw new Error(
    `${dir} is not a sentence model directory: ${missing.join(" and ")} missing (a transformer model needs model.onnx and its tokenizer.json)`,
  )
}
