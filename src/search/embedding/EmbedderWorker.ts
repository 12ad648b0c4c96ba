/**
 * The embedder's worker thread: loads its own copy of the encoder and embeds batches, so
 * indexing a burst of documents never holds the main thread (the daemon's event loop).
 *
 * Protocol: `{ id, texts }` in; `{ id, vectors }` (each a transferred Float32Array or null) or
 * `{ id, error }` out. The first message back is `{ ready: true }` or `{ ready: false, error }`.
 * Started with `{ build: dir }` instead, it builds the default model there (first run without
 * `npm run build`) and answers `{ built }`. It does not take the CPU from the main thread when it
 * wakes (ThreadPolicy.ts), and neither do the ONNX runtime's threads it starts once that is set
 * (they inherit it; the policy is set by a spawn, so threads started before it returns do not).
 */
import { parentPort, workerData } from "node:worker_threads"
import { runThisThreadInBatch } from "../../runtime/ThreadPolicy.ts"
import { sharesItsBuffer } from "../index/ArraySlices.ts"
import { type EncoderConfig, loadEncoder } from "./EncoderLoader.ts"
import { buildStaticModel } from "./StaticModelBuild.ts"

/** A request to the worker: embed texts, or release the model and exit. */
export type WorkerRequest = { readonly id: number; readonly texts: ReadonlyArray<string> } | { readonly close: true }

/** A reply from the worker. */
export type WorkerReply =
  | { readonly ready: true; readonly modelId: string; readonly dimensions: number }
  | { readonly ready: false; readonly error: string }
  | { readonly id: number; readonly vectors: ReadonlyArray<Float32Array | null> }
  | { readonly id: number; readonly error: string }
  | { readonly built: true }
  | { readonly built: false; readonly error: string }

runThisThreadInBatch()
const port = parentPort
const data = workerData as EncoderConfig | { readonly build: string }
if (port !== null && "build" in data) {
  // A one-off job: build the default model into `data.build`, then exit.
  try {
    buildStaticModel({ outDir: data.build })
    port.postMessage({ built: true } satisfies WorkerReply)
  } catch (error) {
    port.postMessage({ built: false, error: String(error) } satisfies WorkerReply)
  }
  port.close()
} else if (port !== null) {
  const config = data as EncoderConfig
  loadEncoder(config).then(
    (encoder) => {
      port.postMessage({ ready: true, modelId: encoder.id, dimensions: encoder.dimensions } satisfies WorkerReply)
      let running = Promise.resolve()
      port.on("message", (request: WorkerRequest) => {
        if ("close" in request) {
          // Release the ONNX session before the thread ends: terminating a thread that still holds
          // one aborts the whole process (onnxruntime-node throws from a native destructor).
          void running.then(() => encoder.close()).finally(() => port.close())
          return
        }
        const run = encoder.encode(request.texts)
        running = run.then(
          () => undefined,
          () => undefined,
        )
        run.then(
          (vectors) => {
            // Each vector's buffer is moved, not copied: a slice of a shared chunk (the static
            // model's, ArraySlices.ts) is copied out first, so that moving it takes only its bytes.
            const out = vectors.map((vector) =>
              vector === undefined ? null : sharesItsBuffer(vector) ? vector.slice() : vector,
            )
            port.postMessage(
              { id: request.id, vectors: out } satisfies WorkerReply,
              out.flatMap((v) => (v ? [v.buffer as ArrayBuffer] : [])),
            )
          },
          (error: unknown) => port.postMessage({ id: request.id, error: String(error) } satisfies WorkerReply),
        )
      })
    },
    (error: unknown) => port.postMessage({ ready: false, error: String(error) } satisfies WorkerReply),
  )
}
