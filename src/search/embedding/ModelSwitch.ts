/**
 * A change of the search model (`mnemos model use`, `--model DIR`, `$MNEMOS_MODEL`) without a gap
 * in search by meaning: the model the stored vectors were made with (the previous one) keeps
 * embedding queries and written documents, and its vectors keep answering, complete, while the
 * new model's vectors are made in the background; once every document has one, the two are
 * swapped at once.
 *
 * What it owns: the previous model's embedder (loaded in a scope of its own, released at the
 * swap) and the progress of the re-embed. The new vectors go to search's persistence as they are
 * made (its second vector slot, SearchPersistence.ts), not into memory: until the swap the heap
 * holds one set of vectors and two models. The swap itself reads the new set into a second
 * in-memory set, in slices (`switchSliceMs`) between which searches and writes go on, then swaps
 * under the lock: for that moment both sets are in memory.
 *
 * Invariants: every document has a vector of the previous model (made at write time, with the
 * previous model) until the swap, and one of the new model from the swap on. A document written
 * during the re-embed is embedded with both models under the index lock, so the background pass
 * only covers what existed when it began (`queue`); its results are stored only when the
 * document's text still hashes as it did when the pass read it (a write in between wins). A
 * restart mid-way finds the previous model's vectors current and the new ones in the other slot:
 * the pass starts again and skips every document whose new vector is there.
 *
 * The previous model is found from its persisted id and where it was loaded from
 * (`previousModelConfig`); when it cannot be loaded any more (its folder removed), there is no
 * switch: IndexCore drops the old vectors and re-embeds, searching by words meanwhile.
 */
import { Effect, Exit, Scope } from "effect"
import { keptVector, type PendingEmbedding, type SearchIndex } from "../index/SearchIndex.ts"
import type { PersistedModel, SearchPersistence } from "../persistence/SearchPersistence.ts"
import { type Embedder, makeEmbedder, resolveDefaultModel } from "./Embedder.ts"
import { type EncoderConfig, encoderConfigOf, encoderIdOf } from "./EncoderLoader.ts"
import { transformerModelId } from "./SentenceEncoder.ts"

/** Texts embedded with the new model per step of the background pass. */
export const reembedChunkTexts = 512
/** Documents a step looks at, at most, past those already re-embedded (a resumed pass skips them). */
export const reembedLookAheadDocuments = 16 * reembedChunkTexts
/** Longest run of moving new vectors into memory before searches and writes get a turn. */
export const switchSliceMs = 10

/** Re-embedding every document after a model change, as health reports it. */
export interface Reembedding {
  readonly from: string
  readonly to: string
  /** Documents re-embedded so far, of `total` (those there when it began). */
  readonly done: number
  readonly total: number
  /** The new model's vectors answer searches. */
  readonly finished: boolean
  /**
   * `answering`: until `finished`, searches by meaning use the previous model and its vectors
   * (complete); `released` once they no longer do; `unavailable`: it could not be loaded, its
   * vectors were dropped, and until `finished` search by meaning covers only what is re-embedded.
   */
  readonly previousModel: "answering" | "released" | "unavailable"
}

/** True when `config`'s files are there and make the model `id`. */
const loadable = (config: EncoderConfig, id: string): boolean => {
  try {
    return encoderConfigOf(config.dir).kind === config.kind && encoderIdOf(config) === id
  } catch {
    return false
  }
}

/**
 * Where the model `previous` loads from, if it still can: its recorded place, else (an index
 * written before places were recorded) the directory a transformer's id names, or the built-in
 * model when the id is the built-in's.
 */
export const previousModelConfig = (
  previous: PersistedModel,
  dataDir: string | undefined,
): EncoderConfig | undefined => {
  const candidates: Array<EncoderConfig> = []
  if (previous.config !== undefined) candidates.push(previous.config)
  const prefix = transformerModelId("")
  if (previous.id.startsWith(prefix)) candidates.push({ kind: "transformer", dir: previous.id.slice(prefix.length) })
  try {
    candidates.push({ kind: "static", dir: resolveDefaultModel(dataDir) })
  } catch {
    // No built-in model built: not a candidate.
  }
  return candidates.find((config) => loadable(config, previous.id))
}

/** What a model switch needs of the index core. */
export interface SwitchContext {
  readonly index: SearchIndex
  readonly persistence: SearchPersistence
  /** The new model. */
  readonly next: Embedder["Service"]
  /** Runs under the core's lock. */
  readonly locked: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** The core's scope: the previous model is released with it, if not at the swap. */
  readonly scope: Scope.Scope
  readonly dataDir?: string | undefined
  /** Texts per step of the background pass (default `reembedChunkTexts`). */
  readonly chunkTexts?: number | undefined
}

/**
 * Starts a switch from `from` (loadable from `fromConfig`) to `to`: the new model's slot is
 * emptied unless it already holds `to`'s vectors (a restart mid-way).
 */
export const makeModelSwitch = (
  context: SwitchContext,
  from: PersistedModel,
  fromConfig: EncoderConfig,
  to: PersistedModel,
) =>
  Effect.gen(function* () {
    const { index, persistence, next, locked } = context
    const chunkTexts = context.chunkTexts ?? reembedChunkTexts
    if (persistence.nextModel()?.id !== to.id) yield* Effect.promise(() => persistence.beginNextModel(to))
    const previousScope = yield* Scope.fork(context.scope)
    const previousEmbedder = yield* makeEmbedder({
      model: fromConfig,
      worker: false,
      ...(context.dataDir !== undefined ? { dataDir: context.dataDir } : {}),
    }).pipe(Scope.provide(previousScope))
    let previous: Embedder["Service"] | undefined = previousEmbedder
    /** The documents of the background pass (those there when it began), and how far it is. */
    let queue: Array<string> | undefined
    let cursor = 0
    let done = 0
    let total = 0
    let finished = false

    /** Embeds `items` with the new model and stores the vectors still current (under the lock). */
    const embedNext = (items: ReadonlyArray<PendingEmbedding>) =>
      Effect.gen(function* () {
        for (let start = 0; start < items.length; start += chunkTexts) {
          const chunk = items.slice(start, start + chunkTexts)
          const vectors = yield* next
            .embedBatch(chunk.map((item) => item.text))
            .pipe(
              Effect.catch((error) =>
                Effect.logWarning(`search: embedding with the new model failed: ${error.message}`).pipe(
                  Effect.as(undefined),
                ),
              ),
            )
          if (vectors !== undefined) storeNext(chunk, vectors)
        }
      })

    const storeNext = (items: ReadonlyArray<PendingEmbedding>, vectors: ReadonlyArray<Float32Array | undefined>) =>
      vectors.forEach((vector, i) => {
        const item = items[i]!
        if (index.embeddingOf(item.id)?.hash !== item.hash) return // changed or gone since
        const stored = keptVector(vector)
        persistence.putNextVector(index.keyOf(item.id)!, item.hash, stored)
        index.setNextVector(item.id, item.hash, stored)
      })

    /** The next documents of the pass that have no current new vector. */
    const nextChunk = (pass: ReadonlyArray<string>): Array<PendingEmbedding> => {
      const chunk: Array<PendingEmbedding> = []
      let looked = 0
      while (cursor < pass.length && chunk.length < chunkTexts && looked++ < reembedLookAheadDocuments) {
        const id = pass[cursor++]!
        const wanted = index.embeddingOf(id)
        if (wanted === undefined || persistence.nextVector(index.keyOf(id)!)?.hash === wanted.hash) done++
        else chunk.push(wanted)
      }
      return chunk
    }

    /** Moves the new vectors into memory in slices, then swaps them in; false if some are missing. */
    const swap = Effect.gen(function* () {
      const ids = yield* locked(
        Effect.sync(() => {
          index.beginNextVectors()
          return index.ids()
        }),
      )
      // What was stored before is read back from persistence (once committed); what is stored
      // from now on goes to the index as well.
      yield* Effect.promise(() => persistence.committed())
      let position = 0
      while (position < ids.length) {
        yield* locked(
          Effect.sync(() => {
            const sliceEnd = performance.now() + switchSliceMs
            while (position < ids.length && performance.now() < sliceEnd) {
              const id = ids[position++]!
              const key = index.keyOf(id)
              const stored = key === undefined ? undefined : persistence.nextVector(key)
              if (stored !== undefined) index.setNextVector(id, stored.hash, stored.vector)
            }
          }),
        )
        yield* Effect.yieldNow
      }
      const cleared = yield* locked(
        Effect.gen(function* () {
          // Written while the new model was not ready, or its run failed: embedded now.
          const missing = index.missingNextVectors()
          if (missing.length > 0) yield* embedNext(missing)
          if (index.missingNextVectors().length > 0) {
            index.dropNextVectors()
            return undefined
          }
          index.switchToNextVectors()
          previous = undefined
          finished = true
          return persistence.switchToNextModel()
        }),
      )
      if (cleared === undefined) return false
      yield* Effect.promise(() => cleared)
      yield* Scope.close(previousScope, Exit.void)
      return true
    })

    /** One step of the background pass, or, once it is through, the swap. */
    const step = Effect.gen(function* () {
      if (finished || (yield* next.ready).state !== "ready") return
      const pass = queue ?? (yield* locked(Effect.sync(() => index.ids())))
      queue = pass
      total = pass.length
      const chunk = yield* locked(Effect.sync(() => nextChunk(pass)))
      if (chunk.length > 0) {
        // Not under the lock: searches and writes go on while the new model runs.
        const vectors = yield* next
          .embedBatch(chunk.map((item) => item.text))
          .pipe(
            Effect.catch((error) =>
              Effect.logWarning(`search: re-embedding failed: ${error.message}`).pipe(Effect.as(undefined)),
            ),
          )
        if (vectors !== undefined) yield* locked(Effect.sync(() => storeNext(chunk, vectors)))
        done += chunk.length
      }
      if (cursor < pass.length) return
      if (yield* swap) {
        queue = undefined
        return
      }
      yield* Effect.logWarning("search: some documents have no vector of the new model yet; re-embedding goes on")
      queue = undefined
      cursor = 0
      done = 0
    })

    return {
      /** The model that embeds queries and written documents for the current vectors, until the swap. */
      previous: (): Embedder["Service"] | undefined => previous,
      embedNext,
      step,
      progress: (): Reembedding => ({
        from: from.id,
        to: to.id,
        done,
        total,
        finished,
        previousModel: finished ? "released" : "answering",
      }),
    }
  })

/** A switch under way (or done, in this process). */
export type ModelSwitch = Effect.Success<ReturnType<typeof makeModelSwitch>>
