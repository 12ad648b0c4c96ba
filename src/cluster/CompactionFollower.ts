/**
 * A compaction of a shared store reaches this daemon's search files too. The store itself is
 * reloaded from its new stream by its actor (StoreKernel.ts `reload`), which leaves no page of the
 * old LMDB file; but search keeps its own LMDB here, whose freed pages still hold the texts of
 * records deleted before — on every daemon, not only the one whose `mnemos compact` ran. So when a
 * store's generation moves on (StoreGenerations.ts), search's files are rewritten once the index has
 * caught up with the reloaded store (a daemon that was behind reads the store again first).
 *
 * It watches the stores' health on the wall clock (housekeeping, like PreJoinCopies.ts).
 */
import { Effect, Layer } from "effect"
import { Router } from "../actors/Router.ts"
import { SearchIndexer } from "../search/Indexer.ts"

/** How often the stores' generations are looked at. */
export const generationCheckIntervalMs = 2_000
/** The longest search's catching up is waited for before its files are rewritten anyway. */
const catchUpWaitMs = 60_000

const pause = (millis: number) =>
  Effect.callback<void>((resume) => {
    const timer = setTimeout(() => resume(Effect.void), millis)
    return Effect.sync(() => clearTimeout(timer))
  })

/** Compacts search's files after any store of the router moved to a newer generation (in the background). */
export const layer: Layer.Layer<never, never, Router | SearchIndexer> = Layer.effectDiscard(
  Effect.gen(function* () {
    const router = yield* Router
    const indexer = yield* SearchIndexer
    const known = new Map<string, number>()
    yield* Effect.forkScoped(
      Effect.forever(
        Effect.gen(function* () {
          yield* pause(generationCheckIntervalMs)
          const moved: Array<readonly [string, number]> = []
          for (const store of router.health()) {
            const generation = store.wal?.generation
            if (generation === undefined) continue
            const before = known.get(store.name)
            // Moved on while running, or opened by rebuilding from a newer stream (away during a compaction).
            if (before === undefined ? generation > 0 && store.recovery?.snapshot !== undefined : generation > before)
              moved.push([store.name, generation])
            known.set(store.name, Math.max(generation, before ?? 0))
          }
          if (moved.length === 0) return
          const waitUntil = Date.now() + catchUpWaitMs
          while ((yield* indexer.health).lagEvents > 0 && Date.now() < waitUntil) yield* pause(250)
          const compacted = yield* indexer.compact
          yield* Effect.logInfo(
            `${moved.map(([store, generation]) => `${store} (generation ${generation})`).join(", ")} compacted by the shared memory: search's files rewritten here (${compacted.bytesBefore} → ${compacted.bytesAfter} bytes)`,
          )
        }).pipe(Effect.catchCause((cause) => Effect.logWarning(`search compaction after a shared one: ${cause}`))),
      ),
    )
  }),
)
