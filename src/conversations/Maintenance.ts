/**
 * Maintenance of the conversations store that spans several commands: discarding what an
 * interrupted import left behind, waiting for LMDB to catch up with acknowledged writes, and
 * measuring the store's bytes on disk.
 *
 * Imports register themselves here while they run, so maintenance never discards the staging
 * generation of an import that is still in progress in this process. (Only the process holding
 * the data directory's lock runs imports, so an import in staging that is not registered here was
 * interrupted.)
 */
import { Duration, Effect } from "effect"
import type { Store } from "../actors/StoreActor.ts"
import type { StoreError } from "../stores/StoreError.ts"
import type { ConversationCommand, ConversationFailure, ConversationReply } from "./ConversationStore.ts"
import { type GenerationReply, readImportState } from "./Generations.ts"

/** The conversations store's handle. */
export type ConversationStoreHandle = Store<ConversationCommand, ConversationReply, ConversationFailure>

/** How long `waitForCheckpoint` waits for LMDB at most, and how often it looks. */
const checkpointWaitMsMax = 5_000
const checkpointPollMs = 5

const runningImports = new WeakMap<object, Set<string>>()

/** Marks import `id` as running on `store` for the life of `effect`. */
export const whileImportRuns = <A, E, R>(store: object, id: string, effect: Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const running = runningImports.get(store) ?? new Set<string>()
      running.add(id)
      runningImports.set(store, running)
    }),
    () => effect,
    () => Effect.sync(() => runningImports.get(store)?.delete(id)),
  )

/** Sends DropChunk until the generation being dropped (if any) is gone. */
export const finishDropping = (store: ConversationStoreHandle): Effect.Effect<void, ConversationFailure | StoreError> =>
  Effect.gen(function* () {
    let done = false
    while (!done) done = ((yield* store.send({ _tag: "DropChunk" })) as GenerationReply).done
  })

/**
 * Discards an interrupted import's leftovers: its staging generation (unless that import runs in
 * this process) or the old generation a committed import had not finished dropping.
 */
export const discardLeftovers = (
  store: ConversationStoreHandle,
): Effect.Effect<void, ConversationFailure | StoreError> =>
  Effect.gen(function* () {
    const state = yield* store.read(readImportState)
    if (state === undefined) return
    if (state.phase === "staging") {
      if (runningImports.get(store)?.has(state.import_id)) return
      yield* store.send({ _tag: "AbortImport", import_id: state.import_id })
    }
    yield* finishDropping(store)
  })

/** Waits until LMDB holds every acknowledged write (so its size is current), at most a few seconds. */
export const waitForCheckpoint = (store: ConversationStoreHandle): Effect.Effect<void> =>
  Effect.gen(function* () {
    const acked = (store.health().wal?.nextSeq ?? 1) - 1
    for (let waited = 0; waited < checkpointWaitMsMax; waited += checkpointPollMs) {
      if (store.health().appliedSeq >= acked) return
      yield* Effect.sleep(Duration.millis(checkpointPollMs))
    }
  })

/** The store's bytes on disk: LMDB pages in use plus the WAL's segments. */
export const storeBytes = (store: ConversationStoreHandle): number => {
  const health = store.health()
  return (health.lmdbBytes ?? 0) + (health.wal?.bytes ?? 0)
}
