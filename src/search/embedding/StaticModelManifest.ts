/**
 * What a static model directory holds and how to tell a complete, current one: its file names, its
 * manifest and the builder version. A leaf module, so the embedder can find and name a model (its
 * id keys the persisted vectors) without loading the builder, the model or onnxruntime.
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"

/** Bump when the produced files change; a model built by another version is rebuilt. */
export const staticModelBuilderVersion = 4

/** File names inside a model directory. */
export const staticModelFiles = {
  vocabulary: "vocabulary.json",
  manifest: "manifest.json",
  /** The word vectors, quantised (WordVectors.ts): the embeddings are made of them, and term alignment reads them. */
  vectors: "word-vectors.bin",
  /** The vocabulary's WordNet lexicon (Lexicon.ts). */
  lexicon: "lexicon.bin",
}

/** What was built. */
export interface StaticModelManifest {
  readonly format: "mnemos-static-embedding"
  readonly builderVersion: number
  readonly id: string
  readonly dimensions: number
  readonly vocabularySize: number
  readonly sourceWords: number
  readonly sifA: number
  readonly zipfHarmonic: number
  /** How the GloVe vectors were changed before use. */
  readonly postprocessing: string
  readonly wordVectorsBytes: number
  readonly lexiconBytes: number
  readonly buildMs: number
  readonly source: string
}

/** The manifest of the model in `dir` (throws when there is none). */
export const readStaticModelManifest = (dir: string): StaticModelManifest =>
  JSON.parse(readFileSync(join(dir, staticModelFiles.manifest), "utf8")) as StaticModelManifest

/** True when `dir` holds a complete model from this builder version (with at least `vocabularySize` words). */
export const isStaticModelCurrent = (dir: string, vocabularySize?: number): boolean => {
  try {
    const manifest = readStaticModelManifest(dir)
    return (
      manifest.builderVersion === staticModelBuilderVersion &&
      (vocabularySize === undefined || manifest.vocabularySize >= vocabularySize)
    )
  } catch {
    return false
  }
}
