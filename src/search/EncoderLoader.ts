/**
 * Picks and loads the sentence encoder a configuration names. Apart from SentenceEncoder.ts (the
 * interface every model implements) so the models never import the module that imports them.
 */
import type { SentenceEncoder } from "./SentenceEncoder.ts"

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
