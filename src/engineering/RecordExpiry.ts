/**
 * The expiry sweeper: deletes records whose time-to-live has run out (sticky notes with a TTL),
 * so they leave search and the deletion is in the audit ledger as `ttl_expiry` by "mnemos".
 *
 * Lists never wait for it — they compare `expiresAt` with the clock themselves — so the sweeper
 * only has to be eventually right. Per store with expiring kinds it runs one fiber: read the
 * earliest entry of the store's expiry index, sleep (Effect clock, so tests drive it with
 * `TestClock`) until then or until the store commits something (a new note may expire sooner),
 * sweep, repeat. A sweep deletes each due record on its own, conditioned on the revision it saw,
 * so a record changed or deleted meanwhile is simply skipped. It subscribes to the bus before
 * its first read, so no commit can slip between the read and the wait.
 */
import { Clock, Context, Duration, Effect, Layer, PubSub } from "effect"
import { Router } from "../actors/Router.ts"
import { EventBus } from "../stores/EventBus.ts"
import type { StoreError } from "../stores/StoreError.ts"
import { allExpiring, type ExpiryEntry, expiringBy, recordKey } from "./RecordKeys.ts"
import type { RecordStoreDefinition, StoredRecord } from "./RecordStore.ts"

/** Most records one sweep deletes per store (the next sweep follows at once). */
export const expirySweepRecordsMax = 1_000
/** Pause after a failed sweep before the next try. */
export const expiryRetryMs = 1_000
/** Who the ledger says deleted an expired record, and through what. */
export const expiryActor = { by: "mnemos", tool: "ttl_expiry" } as const

/** The sweeper. */
export class RecordExpiry extends Context.Service<
  RecordExpiry,
  {
    /** Deletes every record due by now in every store; answers how many. */
    readonly sweep: Effect.Effect<number, StoreError>
  }
>()("mnemos/engineering/RecordExpiry") {}

/** Deletes the due records of one store; answers how many it deleted. */
const sweepStore = (definition: RecordStoreDefinition) =>
  Effect.gen(function* () {
    const store = (yield* Router).store(definition)
    const now = yield* Clock.currentTimeMillis
    const due = yield* store.read((view) => {
      const records: Array<StoredRecord> = []
      for (const { value } of view.getRange({ ...expiringBy(now), limit: expirySweepRecordsMax })) {
        const { project, kind, id } = value as ExpiryEntry
        const record = view.get(recordKey(project, kind, id)) as StoredRecord | undefined
        if (record !== undefined && record.deletedAt === undefined) records.push(record)
      }
      return records
    })
    const outcomes = yield* Effect.forEach(
      due,
      (record) =>
        store
          .send({
            project: record.project,
            ...expiryActor,
            ops: [{ _tag: "Delete", kind: record.kind, id: record.id, expectedRevision: record.revision }],
          })
          .pipe(
            Effect.as(1),
            Effect.catchTag("RecordRejected", () => Effect.succeed(0)),
          ),
      { concurrency: "unbounded" },
    )
    return outcomes.reduce((sum: number, deleted) => sum + deleted, 0)
  })

/** Those of `stores` that the router runs and that have expiring kinds. */
const expiringOf = (stores: ReadonlyArray<RecordStoreDefinition>, router: Router["Service"]) => {
  const running = new Set(router.health().map((store) => store.name))
  return stores.filter((store) => running.has(store.name) && store.kinds.some((kind) => kind.expiresAt !== undefined))
}

/** Deletes every record of `stores` due by now, until none is left; answers how many (a compaction runs it first). */
export const sweepDue = (stores: ReadonlyArray<RecordStoreDefinition>): Effect.Effect<number, StoreError, Router> =>
  Effect.gen(function* () {
    let deleted = 0
    for (const definition of expiringOf(stores, yield* Router)) {
      for (let swept = yield* sweepStore(definition); swept > 0; swept = yield* sweepStore(definition)) deleted += swept
    }
    return deleted
  })

/** Sweeps `stores` (those with expiring kinds) in the background; `sweep` sweeps on demand. */
export const layer = (
  stores: ReadonlyArray<RecordStoreDefinition>,
): Layer.Layer<RecordExpiry, never, Router | EventBus> =>
  Layer.effect(
    RecordExpiry,
    Effect.gen(function* () {
      const router = yield* Router
      const expiring = expiringOf(stores, router)
      const bus = yield* EventBus
      for (const definition of expiring) {
        const commits = yield* bus.subscribe
        const store = router.store(definition)
        const nextExpiry = store.read((view) => {
          for (const { value } of view.getRange({ ...allExpiring, limit: 1 })) return (value as ExpiryEntry).at
          return undefined
        })
        const waitForCommit = Effect.gen(function* () {
          while (true) {
            const events = yield* PubSub.takeAll(commits)
            if (events.some((event) => event.store === definition.name)) return
          }
        })
        yield* Effect.forkScoped(
          Effect.forever(
            Effect.gen(function* () {
              yield* PubSub.takeUpTo(commits, Number.MAX_SAFE_INTEGER)
              while ((yield* sweepStore(definition)) > 0) {}
              const next = yield* nextExpiry
              const now = yield* Clock.currentTimeMillis
              if (next === undefined) return yield* waitForCommit
              yield* Effect.raceFirst(Effect.sleep(Duration.millis(Math.max(0, next - now))), waitForCommit)
            }).pipe(
              Effect.catch((error) =>
                Effect.logWarning(`expiry sweeper (${definition.name}): ${error.message}`).pipe(
                  Effect.andThen(Effect.sleep(Duration.millis(expiryRetryMs))),
                ),
              ),
            ),
          ),
        )
      }
      return RecordExpiry.of({
        sweep: Effect.forEach(expiring, sweepStore).pipe(
          Effect.map((counts) => counts.reduce((sum, count) => sum + count, 0)),
          Effect.provideService(Router, router),
        ),
      })
    }),
  )
