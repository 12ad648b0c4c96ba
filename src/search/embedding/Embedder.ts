/**
 * The embedder: sentence embeddings for search, on onnxruntime-node.
 *
 * Nothing is loaded until something needs a vector: the first semantic or hybrid search, or the
 * first document to embed (a write, or warm-up finding documents without a vector). An idle
 * daemon whose vectors are all persisted never loads the model, onnxruntime or the term aligner;
 * `modelId` names the model from its manifest without loading it (persisted vectors are keyed by
 * it). The model stays loaded from then on.
 *
 * Once loaded, it owns one encoder on the main thread, for queries and small batches (one ONNX
 * run of the static model takes tens of microseconds, less than a round trip to a worker), and,
 * only while large batches come (a bulk import, a re-index), a second one in a worker thread, so
 * the main thread never blocks for long. The worker starts with the first batch above
 * `inlineBatchMax` texts (128 for the static model: a few milliseconds inline) and closes after
 * `workerIdleMs` without one: a daemon holds one copy of the model, not two (each is about
 * 90 MiB resident). `embedBatch` waits for the model;
 * `embedQuery` waits at most `queryModelWaitMs` and then answers `undefined` (search falls back to
 * full text), so a query never waits for a first-run model build.
 *
 * The default model is the static GloVe SIF graph (StaticModelBuild.ts): taken from
 * dist/models/ when `npm run build` made it, else built once into `<dataDir>/search/models/`
 * (in a worker thread, 10–20 s). A transformer model is used when `model` names a directory with
 * model.onnx + tokenizer.json.
 *
 * With the static model, the main thread also holds its term aligner (TermAlignment.ts: the int8
 * word vectors and the WordNet lexicon, ≈ 12 MB), which search uses to re-rank; the worker never
 * aligns, so it does not load it.
 */
import { existsSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import type { Worker } from "node:worker_threads"
import { Context, Duration, Effect, Layer, Option, Schema, type Scope } from "effect"
import type { TermAligner } from "../ranking/TermAlignment.ts"
import { startModuleWorker } from "../thread/WorkerModule.ts"
import type { WorkerReply, WorkerRequest } from "./EmbedderWorker.ts"
import { type EncoderConfig, encoderIdOf, loadEncoder } from "./EncoderLoader.ts"
import { defaultVocabularySize } from "./GloveSource.ts"
import type { SentenceEncoder } from "./SentenceEncoder.ts"
import { isStaticModelCurrent } from "./StaticModelManifest.ts"

/** The embedder failed: the model could not load, or a run failed. */
export class EmbedderError extends Schema.TaggedError<EmbedderError>()("EmbedderError", {
  reason: Schema.Literals(["LoadFailed", "RunFailed"]),
  message: Schema.String,
}) {}

/** Where the embedder is, for health and mem-stats. */
export type EmbedderStatus =
  /** Nothing has needed a vector yet: the model loads on first use. */
  | { readonly state: "unloaded" }
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
    /** Loads the model unless it is loaded (or loading), and waits until it is ready (or failed). */
    readonly ready: Effect.Effect<EmbedderStatus>
    /**
     * The id of the model vectors are made with, read from its files without loading it (when the
     * default model has to be built first, this waits for the build); `undefined` if that failed.
     */
    readonly modelId: Effect.Effect<string | undefined>
    /** Where the model loads from (found as `modelId` is); `undefined` if that failed. */
    readonly model: Effect.Effect<EncoderConfig | undefined>
    readonly status: () => EmbedderStatus
    /**
     * Embeds one query inline, loading the model first (waiting at most `queryModelWaitMs`);
     * `undefined` when the model is not ready by then, failed, or knows no word of the text.
     */
    readonly embedQuery: (text: string) => Effect.Effect<Float32Array | undefined, EmbedderError>
    /**
     * The term aligner of the static model (its word vectors and WordNet lexicon), for re-ranking;
     * `undefined` while loading and for a transformer model.
     */
    readonly aligner: () => TermAligner | undefined
    /**
     * Embeds many texts, loading the model first: inline up to `inlineBatchMax`, above it in the
     * worker thread (when on).
     */
    readonly embedBatch: (
      texts: ReadonlyArray<string>,
    ) => Effect.Effect<ReadonlyArray<Float32Array | undefined>, EmbedderError>
  }
>()("mnemos/search/Embedder") {}

/** The directory name of the default model, under dist/models/ or `<dataDir>/search/models/`. */
export const defaultModelName = "glove-sif-100d"

/**
 * The package root of a module in `start`: the nearest directory above it holding a package.json —
 * from src/search/embedding/, dist/search/embedding/ and the bundle in dist/bundle/ alike.
 */
const packageRootAbove = (start: string): string => {
  for (let dir = start; ; dir = dirname(dir)) {
    if (existsSync(join(dir, "package.json"))) return dir
    if (dirname(dir) === dir) return join(start, "..", "..")
  }
}

/** Where the prebuilt default model (from `npm run build`) of the package holding `start` is. */
export const packagedModelDirAbove = (start: string): string =>
  join(packageRootAbove(start), "dist", "models", defaultModelName)

/** The prebuilt default model of this package, when present and current. */
export const packagedModelDir = (): string => packagedModelDirAbove(dirname(fileURLToPath(import.meta.url)))

/** Where the default model is built on first run when dist/models/ has none. */
const cachedModelDir = (dataDir: string) => join(dataDir, "search", "models", defaultModelName)

/** The default model's directory: dist/models/ when current, else the data directory's built copy. */
export const resolveDefaultModel = (dataDir: string | undefined): string => {
  const packaged = packagedModelDir()
  if (isStaticModelCurrent(packaged, defaultVocabularySize)) return packaged
  if (dataDir === undefined) throw new Error(`no embedding model at ${packaged}: run npm run build`)
  const cached = cachedModelDir(dataDir)
  if (!isStaticModelCurrent(cached, defaultVocabularySize)) throw new Error(`no embedding model at ${cached}`)
  return cached
}

/**
 * Like `resolveDefaultModel`, but when no current model exists the data directory's copy is built
 * first (10–20 s of parsing the GloVe package) in a worker thread, so the daemon keeps answering.
 */
const resolveDefaultModelOffThread = async (
  dataDir: string | undefined,
  own: (close: () => Promise<unknown>) => void,
): Promise<string> => {
  if (dataDir === undefined || isStaticModelCurrent(packagedModelDir(), defaultVocabularySize))
    return resolveDefaultModel(dataDir)
  const cached = cachedModelDir(dataDir)
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
  /**
   * Batches of at most this many texts run inline (default `staticInlineBatchMax` for the static
   * model, `defaultInlineBatchMax` for a transformer; 0: none).
   */
  readonly inlineBatchMax?: number
  /** The worker closes after this long without a batch (default `defaultWorkerIdleMs`). */
  readonly workerIdleMs?: number
}

/** Batches up to this size run on the main thread (a transformer model takes milliseconds a text). */
export const defaultInlineBatchMax = 32
/**
 * Batches of the static model up to this size run on the main thread: about 3 ms of CPU for 128
 * texts of 25 words. An agent's writes (a few dozen texts a drain) then never start the worker and
 * its second copy of the model (≈ 90 MiB); bulk work (an import, a re-index) still goes to it.
 */
export const staticInlineBatchMax = 128
/** An unused batch worker is closed after a minute. */
export const defaultWorkerIdleMs = 60_000

/** Starts a worker running `EmbedderWorker` for `config`. */
const startWorker = (config: EncoderConfig | { readonly build: string }): Worker =>
  startModuleWorker(import.meta.url, "EmbedderWorker", config)

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
  const [{ loadStaticModel, readStaticModelFiles }, { loadTermAligner }] = await Promise.all([
    import("./StaticModel.ts"),
    import("../ranking/TermAlignment.ts"),
  ])
  const files = readStaticModelFiles(config.dir)
  const encoder = await loadStaticModel(config.dir, files)
  return { ...encoder, aligner: loadTermAligner(config.dir, files.vocabulary, files.vectors) }
}

const errorMessage = (error: unknown) => (error instanceof Error ? error.message : String(error))

/** How long a query waits for the model to load before it is answered without a vector. */
export const queryModelWaitMs = 5_000

/** Builds the embedder; the model loads on first use and is released with the scope. */
export const makeEmbedder = (config: EmbedderConfig): Effect.Effect<Embedder["Service"], never, Scope.Scope> =>
  Effect.gen(function* () {
    const useWorker = config.worker ?? true
    let status: EmbedderStatus = { state: "unloaded" }
    let inline: SentenceEncoder | undefined
    let aligner: TermAligner | undefined
    let batchWorker: ReturnType<typeof lazyWorker> | undefined
    let inlineBatchMax = config.inlineBatchMax ?? defaultInlineBatchMax
    const closers: Array<() => Promise<unknown>> = []
    let closed = false
    // Loading goes on in a promise even if the scope closes meanwhile: whatever it opens after
    // that is closed at once, so no worker thread outlives the engine.
    const own = (close: () => Promise<unknown>) => {
      if (closed) void close().catch(() => undefined)
      else closers.push(close)
    }

    let resolvedModel: Promise<EncoderConfig> | undefined
    /** The model's configuration; the default model is found (or built) once. */
    const resolveModel = () => {
      resolvedModel ??= config.model
        ? Promise.resolve(config.model)
        : resolveDefaultModelOffThread(config.dataDir, own).then((dir) => ({ kind: "static", dir }) as const)
      return resolvedModel
    }

    const load = async (): Promise<EmbedderStatus> => {
      const model = await resolveModel()
      const encoder = await loadMainEncoder(model)
      own(encoder.close)
      if (closed) throw new Error("the embedder was closed while loading")
      inline = encoder
      aligner = encoder.aligner
      inlineBatchMax = config.inlineBatchMax ?? (model.kind === "static" ? staticInlineBatchMax : defaultInlineBatchMax)
      if (useWorker) {
        const worker = lazyWorker(model, config.workerIdleMs ?? defaultWorkerIdleMs)
        own(worker.shutdown)
        batchWorker = worker
      }
      return { state: "ready", modelId: encoder.id, dimensions: encoder.dimensions, worker: useWorker }
    }
    let loaded: Promise<EmbedderStatus> | undefined
    /** Starts loading on the first call; every call resolves when the model is ready or failed. */
    const startLoad = (): Promise<EmbedderStatus> => {
      if (loaded === undefined) {
        status = { state: "loading" }
        loaded = load().then(
          (ready) => (status = ready),
          (error: unknown) => (status = { state: "failed", message: errorMessage(error) }),
        )
      }
      return loaded
    }
    yield* Effect.addFinalizer(() =>
      Effect.promise(() => {
        closed = true
        return Promise.allSettled(closers.splice(0).map((close) => close())).then(() => undefined)
      }),
    )

    const ready = Effect.promise(startLoad)
    const run = (encode: SentenceEncoder["encode"], texts: ReadonlyArray<string>) =>
      Effect.tryPromise({
        try: () => encode(texts),
        catch: (error) => new EmbedderError({ reason: "RunFailed", message: errorMessage(error) }),
      })

    return Embedder.of({
      ready,
      modelId: Effect.promise(() =>
        resolveModel().then(
          (model) => (inline !== undefined ? inline.id : encoderIdOf(model)),
          () => undefined,
        ),
      ),
      model: Effect.promise(() => resolveModel().catch(() => undefined)),
      aligner: () => aligner,
      status: () => (status.state === "ready" ? { ...status, workerRunning: batchWorker?.isOpen() ?? false } : status),
      embedQuery: (text) =>
        Effect.gen(function* () {
          if (inline === undefined)
            yield* ready.pipe(
              Effect.timeoutOption(Duration.millis(queryModelWaitMs)),
              Effect.map(Option.getOrUndefined),
            )
          if (inline === undefined) return undefined
          return (yield* run(inline.encode, [text]))[0]
        }),
      embedBatch: (texts) =>
        Effect.gen(function* () {
          if (inline === undefined) {
            const state = yield* ready
            if (state.state === "failed")
              return yield* new EmbedderError({ reason: "LoadFailed", message: state.message })
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
