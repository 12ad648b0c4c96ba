/**
 * The embedder: sentence embeddings for search, on onnxruntime-node.
 *
 * Owns one encoder on the main thread, for queries and small batches (one ONNX run of the static
 * model takes tens of microseconds, less than a round trip to a worker), and, only while large
 * batches come (a bulk import, a re-index), a second one in a worker thread, so the main thread
 * never blocks for long. The worker starts with the first batch above `inlineBatchMax` texts and
 * closes after `workerIdleMs` without one: an idle daemon holds one copy of the model, not two
 * (each is about 90 MiB resident). The model loads in the background: until it is ready,
 * `embedQuery` answers `undefined` and search falls back to full text; `ready` waits for it.
 *
 * The default model is the static GloVe SIF graph (StaticModelBuild.ts): taken from
 * dist/models/ when `npm run build` made it, else built once into `<dataDir>/search/models/`.
 * A transformer model is used when `model` names a directory with model.onnx + tokenizer.json.
 *
 * With the static model, the main thread also holds its term aligner (TermAlignment.ts: the int8
 * word vectors and the WordNet lexicon, ≈ 12 MB), which search uses to re-rank; the worker never
 * aligns, so it does not load it.
 */
import { existsSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { Worker } from "node:worker_threads"
import { Context, Deferred, Effect, Exit, Layer, Schema, type Scope } from "effect"
import type { WorkerReply, WorkerRequest } from "./EmbedderWorker.ts"
import { type EncoderConfig, loadEncoder } from "./EncoderLoader.ts"
import type { SentenceEncoder } from "./SentenceEncoder.ts"
import { loadStaticModel, readStaticModelFiles } from "./StaticModel.ts"
import { buildStaticModel, defaultVocabularySize, isStaticModelCurrent } from "./StaticModelBuild.ts"
import { loadTermAligner, type TermAligner } from "./TermAlignment.ts"

/** The embedder failed: the model could not load, or a run failed. */
export class EmbedderError extends Schema.TaggedError<EmbedderError>()("EmbedderError", {
  reason: Schema.Literals(["LoadFailed", "RunFailed"]),
  message: Schema.String,
}) {}

/** Where the embedder is, for health and mem-stats. */
export type EmbedderStatus =
  | { readonly state: "loading" }
  | {
      readonly state: "ready"
      readonly modelId: string
      readonly dimensions: number
      /** Large batches go to a worker thread. */
      readonly worker: boolean
      /** That worker is started now (it closes when idle). */
      readonly workerRunning?: boolean
    }
  | { readonly state: "failed"; readonly message: string }

/** Sentence embeddings. */
export class Embedder extends Context.Service<
  Embedder,
  {
    /** Waits until the model is loaded (or failed). */
    readonly ready: Effect.Effect<EmbedderStatus>
    readonly status: () => EmbedderStatus
    /** Embeds one query inline; `undefined` while loading or when no word is known. */
    readonly embedQuery: (text: string) => Effect.Effect<Float32Array | undefined, EmbedderError>
    /**
     * The term aligner of the static model (its word vectors and WordNet lexicon), for re-ranking;
     * `undefined` while loading and for a transformer model.
     */
    readonly aligner: () => TermAligner | undefined
    /** Embeds many texts: inline up to `inlineBatchMax`, above it in the worker thread (when on). */
    readonly embedBatch: (
      texts: ReadonlyArray<string>,
    ) => Effect.Effect<ReadonlyArray<Float32Array | undefined>, EmbedderError>
  }
>()("mnemos/search/Embedder") {}

/** The directory name of the default model, under dist/models/ or `<dataDir>/search/models/`. */
export const defaultModelName = "glove-sif-100d"

/** The package root: two levels above this module, from src/search/ and dist/search/ alike. */
const packageRoot = () => join(dirname(fileURLToPath(import.meta.url)), "..", "..")

/** The prebuilt default model (from `npm run build`), when present and current. */
export const packagedModelDir = (): string => join(packageRoot(), "dist", "models", defaultModelName)

/** Finds the default model, building it into the data directory when nothing current exists. */
export const resolveDefaultModel = (dataDir: string | undefined): string => {
  const packaged = packagedModelDir()
  if (isStaticModelCurrent(packaged, defaultVocabularySize)) return packaged
  if (dataDir === undefined) throw new Error(`no embedding model at ${packaged}: run npm run build`)
  const cached = join(dataDir, "search", "models", defaultModelName)
  if (!isStaticModelCurrent(cached, defaultVocabularySize)) buildStaticModel({ outDir: cached })
  return cached
}

/**
 * Like `resolveDefaultModel`, but a first-run build (10–20 s of parsing the GloVe package) runs in
 * a worker thread, so the daemon keeps answering meanwhile.
 */
const resolveDefaultModelOffThread = async (
  dataDir: string | undefined,
  own: (close: () => Promise<unknown>) => void,
): Promise<string> => {
  const packaged = packagedModelDir()
  if (isStaticModelCurrent(packaged, defaultVocabularySize) || dataDir === undefined)
    return resolveDefaultModel(dataDir)
  const cached = join(dataDir, "search", "models", defaultModelName)
  if (isStaticModelCurrent(cached, defaultVocabularySize)) return cached
  await new Promise<void>((resolve, reject) => {
    const worker = startWorker({ build: cached })
    own(() => worker.terminate())
    worker.once("message", (reply: WorkerReply) =>
      "built" in reply && reply.built ? resolve() : reject(new Error("error" in reply ? reply.error : "build failed")),
    )
    worker.once("error", reject)
  })
  return cached
}

/** How the embedder is set up. */
export interface EmbedderConfig {
  /** The model; default: the static GloVe model (see `resolveDefaultModel`). */
  readonly model?: EncoderConfig
  /** Used to cache a default model built on first run. */
  readonly dataDir?: string
  /** Embed large batches in a worker thread (default true). */
  readonly worker?: boolean
  /** Batches of at most this many texts run inline (default `defaultInlineBatchMax`; 0: none). */
  readonly inlineBatchMax?: number
  /** The worker closes after this long without a batch (default `defaultWorkerIdleMs`). */
  readonly workerIdleMs?: number
}

/** Batches up to this size run on the main thread: about 0.4 ms of ONNX for the static model. */
export const defaultInlineBatchMax = 32
/** An unused batch worker is closed after a minute. */
export const defaultWorkerIdleMs = 60_000

/** Starts a worker running `EmbedderWorker` for `config`; from source, through tsx's loader. */
const startWorker = (config: EncoderConfig | { readonly build: string }): Worker => {
  const here = fileURLToPath(import.meta.url)
  if (here.endsWith(".js")) return new Worker(new URL("./EmbedderWorker.js", import.meta.url), { workerData: config })
  const tsxApi = pathToFileURL(
    createRequire(import.meta.url)
      .resolve("tsx/esm/api")
      .replace(/\.cjs$/, ".mjs"),
  ).href
  const target = new URL("./EmbedderWorker.ts", import.meta.url).href
  const code = `(async () => { const { register } = await import(${JSON.stringify(tsxApi)}); register(); await import(${JSON.stringify(target)}) })()`
  return new Worker(code, { eval: true, workerData: config })
}

/** How long a worker may take to release its model and exit before it is terminated. */
const workerCloseTimeoutMs = 5_000

/** A worker-backed batch encoder. */
interface BatchWorker {
  readonly encode: SentenceEncoder["encode"]
  /** Asks the worker to release its model and exit; terminates it if it does not in time. */
  readonly close: () => Promise<void>
}

/** Starts a worker-backed batch encoder; resolves once the worker's model is loaded. */
const openWorker = (config: EncoderConfig): Promise<BatchWorker> =>
  new Promise((resolve, reject) => {
    const worker = startWorker(config)
    const close = async () => {
      worker.removeAllListeners("exit")
      const exited = new Promise<void>((done) => worker.once("exit", () => done()))
      worker.postMessage({ close: true } satisfies WorkerRequest)
      const timer = setTimeout(() => void worker.terminate(), workerCloseTimeoutMs)
      await exited
      clearTimeout(timer)
    }
    const pending = new Map<
      number,
      { resolve: (v: Array<Float32Array | undefined>) => void; reject: (e: Error) => void }
    >()
    let nextId = 0
    let failed: Error | undefined
    const failAll = (error: Error) => {
      failed = error
      for (const waiter of pending.values()) waiter.reject(error)
      pending.clear()
    }
    worker.on("error", (error) => {
      failAll(error)
      reject(error)
    })
    worker.on("exit", (code) => {
      failAll(new Error(`embedder worker exited (${code})`))
      reject(new Error(`embedder worker exited (${code}) before its model loaded`))
    })
    worker.on("message", (reply: WorkerReply) => {
      if ("ready" in reply) {
        if (!reply.ready) {
          void worker.terminate()
          return reject(new Error(reply.error))
        }
        return resolve({
          encode: (texts) => {
            if (failed !== undefined) return Promise.reject(failed)
            const id = nextId++
            return new Promise((resolveRun, rejectRun) => {
              pending.set(id, { resolve: resolveRun, reject: rejectRun })
              worker.postMessage({ id, texts } satisfies WorkerRequest)
            })
          },
          close,
        })
      }
      if (!("id" in reply)) return
      const waiter = pending.get(reply.id)
      if (waiter === undefined) return
      pending.delete(reply.id)
      if ("error" in reply) waiter.reject(new Error(reply.error))
      else waiter.resolve(reply.vectors.map((vector) => vector ?? undefined))
    })
  })

/**
 * The batch worker of one embedder: started on first use, closed after `idleMs` without a batch
 * (never while one runs), closed for good by `shutdown`. A worker that failed is replaced by the
 * next batch.
 */
const lazyWorker = (config: EncoderConfig, idleMs: number) => {
  let current: Promise<BatchWorker> | undefined
  let running = 0
  let idleTimer: ReturnType<typeof setTimeout> | undefined
  let shut = false
  const release = (worker: Promise<BatchWorker> | undefined) =>
    worker?.then((opened) => opened.close()).catch(() => undefined) ?? Promise.resolve()
  const armIdle = () => {
    if (idleTimer !== undefined) clearTimeout(idleTimer)
    idleTimer = setTimeout(() => {
      idleTimer = undefined
      if (running > 0) return armIdle()
      const idle = current
      current = undefined
      void release(idle)
    }, idleMs)
    idleTimer.unref()
  }
  return {
    encode: async (texts: ReadonlyArray<string>): Promise<Array<Float32Array | undefined>> => {
      if (shut) throw new Error("the embedder was closed")
      current ??= openWorker(config)
      const opened = current
      running++
      try {
        return await (await opened).encode(texts)
      } catch (error) {
        if (current === opened) current = undefined
        void release(opened)
        throw error
      } finally {
        running--
        armIdle()
      }
    },
    /** True while a worker is started or running. */
    isOpen: () => current !== undefined,
    shutdown: () => {
      shut = true
      if (idleTimer !== undefined) clearTimeout(idleTimer)
      const last = current
      current = undefined
      return release(last)
    },
  }
}

/**
 * The main thread's encoder, with the static model's term aligner: the vocabulary is read once for
 * both. The worker thread loads a plain encoder (EncoderLoader.ts); it never aligns.
 */
const loadMainEncoder = async (
  config: EncoderConfig,
): Promise<SentenceEncoder & { readonly aligner?: TermAligner | undefined }> => {
  if (config.kind !== "static") return loadEncoder(config)
  const files = readStaticModelFiles(config.dir)
  const encoder = await loadStaticModel(config.dir, files)
  return { ...encoder, aligner: loadTermAligner(config.dir, files.vocabulary) }
}

const errorMessage = (error: unknown) => (error instanceof Error ? error.message : String(error))

/** Builds the embedder; the model loads in the background and is released with the scope. */
export const makeEmbedder = (config: EmbedderConfig): Effect.Effect<Embedder["Service"], never, Scope.Scope> =>
  Effect.gen(function* () {
    const useWorker = config.worker ?? true
    const inlineBatchMax = config.inlineBatchMax ?? defaultInlineBatchMax
    let status: EmbedderStatus = { state: "loading" }
    let inline: SentenceEncoder | undefined
    let aligner: TermAligner | undefined
    let batchWorker: ReturnType<typeof lazyWorker> | undefined
    const closers: Array<() => Promise<unknown>> = []
    let closed = false
    // Loading goes on in a promise even if the scope closes meanwhile: whatever it opens after
    // that is closed at once, so no worker thread outlives the engine.
    const own = (close: () => Promise<unknown>) => {
      if (closed) void close().catch(() => undefined)
      else closers.push(close)
    }
    const loaded = yield* Deferred.make<EmbedderStatus>()

    const load = Effect.tryPromise({
      try: async () => {
        const model: EncoderConfig = config.model ?? {
          kind: "static",
          dir: await resolveDefaultModelOffThread(config.dataDir, own),
        }
        const encoder = await loadMainEncoder(model)
        own(encoder.close)
        if (closed) throw new Error("the embedder was closed while loading")
        inline = encoder
        aligner = encoder.aligner
        if (useWorker) {
          const worker = lazyWorker(model, config.workerIdleMs ?? defaultWorkerIdleMs)
          own(worker.shutdown)
          batchWorker = worker
        }
        return { state: "ready", modelId: encoder.id, dimensions: encoder.dimensions, worker: useWorker } as const
      },
      catch: (error) => new EmbedderError({ reason: "LoadFailed", message: errorMessage(error) }),
    })
    yield* Effect.addFinalizer(() =>
      Effect.promise(() => {
        closed = true
        return Promise.allSettled(closers.splice(0).map((close) => close())).then(() => undefined)
      }),
    )
    yield* Effect.forkScoped(
      Effect.exit(load).pipe(
        Effect.flatMap((exit) => {
          status = Exit.isSuccess(exit) ? exit.value : { state: "failed", message: exit.cause.toString() }
          return Deferred.succeed(loaded, status)
        }),
      ),
    )

    const run = (encode: SentenceEncoder["encode"], texts: ReadonlyArray<string>) =>
      Effect.tryPromise({
        try: () => encode(texts),
        catch: (error) => new EmbedderError({ reason: "RunFailed", message: errorMessage(error) }),
      })

    return Embedder.of({
      ready: Deferred.await(loaded),
      aligner: () => aligner,
      status: () => (status.state === "ready" ? { ...status, workerRunning: batchWorker?.isOpen() ?? false } : status),
      embedQuery: (text) =>
        inline === undefined ? Effect.succeed(undefined) : Effect.map(run(inline.encode, [text]), (out) => out[0]),
      embedBatch: (texts) =>
        Effect.gen(function* () {
          if (inline === undefined) {
            const ready = yield* Deferred.await(loaded)
            if (ready.state === "failed")
              return yield* new EmbedderError({ reason: "LoadFailed", message: ready.message })
          }
          if (batchWorker !== undefined && texts.length > inlineBatchMax) return yield* run(batchWorker.encode, texts)
          return yield* run(inline!.encode, texts)
        }),
    })
  })

/** The embedder as a layer. */
export const layer = (config: EmbedderConfig): Layer.Layer<Embedder> => Layer.effect(Embedder, makeEmbedder(config))

/** Resolves true when the model files exist where `resolveDefaultModel` would look first. */
export const hasPackagedModel = (): boolean => existsSync(packagedModelDir())
