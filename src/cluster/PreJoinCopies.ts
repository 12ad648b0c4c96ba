/**
 * Confirms a join: `mnemos cluster join` sets a data directory's local stores aside in
 * `pre-join-<time>/` and publishes their state to the shared memory's streams. Once this replica has
 * opened every store from those streams — each open catches up with everything its stream held, so
 * the published state is in the replica and in the memory — the copies are redundant, and they hold
 * whatever is deleted later in files no compaction rewrites: they are removed, and the log says so.
 *
 * A store that does not open (unreachable NATS, a corrupt stream) leaves the copies in place: then
 * they may be the only readable copy. The check polls the stores' health on the wall clock (it is
 * housekeeping, like the audit ledger's cadence, and must not follow a test clock).
 */
import { Effect, Layer } from "effect"
import { Router } from "../actors/Router.ts"
import { preJoinCopies, removePreJoinCopies } from "../stores/shared/SharedMemory.ts"

/** How often the stores' health is looked at until every store is open. */
export const preJoinCheckIntervalMs = 1_000

const pause = (millis: number) =>
  Effect.callback<void>((resume) => {
    const timer = setTimeout(() => resume(Effect.void), millis)
    return Effect.sync(() => clearTimeout(timer))
  })

/** Removes `dataDir`'s pre-join copies once every store of the router is open (in the background). */
export const layer = (dataDir: string): Layer.Layer<never, never, Router> =>
  Layer.effectDiscard(
    Effect.gen(function* () {
      if (preJoinCopies(dataDir).length === 0) return
      const router = yield* Router
      const allOpen = () => router.health().every((store) => store.state === "running" || store.state === "degraded")
      yield* Effect.forkScoped(
        Effect.gen(function* () {
          while (!allOpen()) yield* pause(preJoinCheckIntervalMs)
          const removed = yield* Effect.try(() => removePreJoinCopies(dataDir))
          if (removed.length > 0)
            yield* Effect.logInfo(
              `every store is open from the shared memory: removed the local copies set aside by mnemos cluster join (${removed.join(", ")})`,
            )
        }).pipe(Effect.catch((error) => Effect.logWarning(`could not remove the pre-join copies: ${String(error)}`))),
      )
    }),
  )
