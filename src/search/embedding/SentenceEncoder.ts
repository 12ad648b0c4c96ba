/**
 * What every embedding model offers the embedder: texts in, unit-length vectors out.
 *
 * Plain promises, not Effects: the same encoders run on the main thread (short queries) and in
 * the embedder's worker thread (batches), where no Effect runtime is set up. A leaf module: the
 * models import it, and EncoderLoader.ts picks a model, so no import goes both ways.
 */

/** A loaded sentence-embedding model. */
export interface SentenceEncoder {
  /** Names the model and its version; stored beside vectors, so a model change re-embeds. */
  readonly id: string
  readonly dimensions: number
  /** One L2-normalised vector per text; `undefined` for a text with no known word. */
  readonly encode: (texts: ReadonlyArray<string>) => Promise<Array<Float32Array | undefined>>
  readonly close: () => Promise<void>
}

/** A transformer model's id: its directory (the model files carry no name of their own). */
export const transformerModelId = (dir: string): string => `transformer:${dir}`

/** Texts per onnxruntime run; bigger batches pad more. */
export const encodeBatchTextsMax = 128

/** Splits `items` into runs of at most `size`. */
export const chunksOf = <A>(items: ReadonlyArray<A>, size: number): Array<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let start = 0; start < items.length; start += size) out.push(items.slice(start, start + size))
  return out
}
