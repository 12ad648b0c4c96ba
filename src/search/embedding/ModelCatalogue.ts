/**
 * The sentence models `mnemos model pull` knows: where each lives on the Hugging Face hub (repository
 * and pinned commit) and the size and SHA-256 of every file it needs. A download that does not hash
 * to the pinned sum is refused, so a model is either exactly these bytes or absent.
 *
 * The sums are the hub's own records for the pinned commit (the LFS pointer `oid sha256:` of
 * `onnx/model.onnx`, and the served bytes of `tokenizer.json`), cross-checked in several public
 * projects that pin the same commit. The table is a value passed to the pull, so tests pull models
 * of their own from a loopback hub.
 */

/** One file of a model: its path in the repository, its name in the model directory, and its pin. */
export interface PinnedFile {
  readonly path: string
  readonly as: "model.onnx" | "tokenizer.json"
  readonly bytes: number
  readonly sha256: string
}

/** A model that can be pulled. */
export interface PinnedModel {
  readonly repo: string
  readonly revision: string
  readonly files: ReadonlyArray<PinnedFile>
}

/** Pinned models by the name they are pulled, used and listed under. */
export type ModelCatalogue = Readonly<Record<string, PinnedModel>>

/** The model `mnemos model pull` fetches without a name. */
export const defaultModelName = "all-MiniLM-L6-v2"

/** The models mnemos ships pins for. */
export const builtinCatalogue: ModelCatalogue = {
  "all-MiniLM-L6-v2": {
    repo: "sentence-transformers/all-MiniLM-L6-v2",
    revision: "1110a243fdf4706b3f48f1d95db1a4f5529b4d41",
    files: [
      {
        path: "onnx/model.onnx",
        as: "model.onnx",
        bytes: 90_405_214,
        sha256: "6fd5d72fe4589f189f8ebc006442dbb529bb7ce38f8082112682524616046452",
      },
      {
        path: "tokenizer.json",
        as: "tokenizer.json",
        bytes: 466_247,
        sha256: "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
      },
    ],
  },
}

/** The hub `mnemos model pull` downloads from without `--hub` or `$HF_ENDPOINT` (the hub's own variable). */
export const defaultHubUrl = "https://huggingface.co"

/** Where a file of a model is served: the hub's `/<repo>/resolve/<revision>/<path>` layout. */
export const fileUrl = (hub: string, model: PinnedModel, file: PinnedFile): string =>
  `${hub.replace(/\/+$/, "")}/${model.repo}/resolve/${model.revision}/${file.path}`
