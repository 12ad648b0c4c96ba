/**
 * The audit ledger: appends one entry to the `audit` store for every event committed by any
 * other store, and answers queries over it.
 *
 * It reads the event bus through `AuditFeed`, a subscription made before the stores start, so
 * the events a store re-publishes while recovering (its WAL tail) reach the ledger too; the
 * store's dedup by (store, seq) audits each once. Appending runs in the background every
 * `auditDrainIntervalMs` while events come (and sleeps while none are published), and `catchUp`
 * drains synchronously: stores publish before they acknowledge, so after `catchUp` every
 * acknowledged mutation is in the ledger. Both drain under one lock, so an event taken from the bus
 * is always appended before a `catchUp` returns.
 *
 * The background cadence runs on wall-clock timers, not the Effect Clock: it is housekeeping,
 * not domain time, and a test clock that jumps days must not replay thousands of idle drains.
 *
 * In a shared memory the ledger is the audit store shared by every daemon, and each daemon audits
 * only the events it decided (those whose writer lease it held; the bus marks the others with
 * their `origin`): every event is audited once, by one daemon, and the audit store's writes are
 * forwarded to its writer like any other (src/cluster/WriterLeases.ts). Gaps are then found per
 * origin (AuditStore.ts).
 *
 * A failed append keeps its entries (up to `auditPendingEntriesMax`) for the next drain. What
 * is lost anyway — events the bus dropped for a slow ledger, or committed just before a crash
 * and already checkpointed by their store — shows up as a `gap` entry. At shutdown the ledger
 * drains once more before the stores close.
 */
import { Context, Effect, Layer, PubSub, Semaphore } from "effect"
import { Router } from "../actors/Router.ts"
import { type CommittedEvent, EventBus, eventBusCapacity, followBus } from "../stores/EventBus.ts"
import { StoreError } from "../stores/StoreError.ts"
import { auditEntryOf } from "./AuditEntries.ts"
import { type AuditFilter, type AuditPage, queryAudit } from "./AuditQueries.ts"
import { type AuditEntryInput, auditAppendEntriesMax, auditStore } from "./AuditStore.ts"

/** How often the ledger catches up with the bus when nobody asks. */
export const auditDrainIntervalMs = 50
/** Pause after a failed background append before the next try (keeps a broken store from flooding logs). */
export const auditRetryMs = 1_000
/** Most entries kept waiting after failed appends; older ones are dropped (and become a gap). */
export const auditPendingEntriesMax = eventBusCapacity

/** The ledger's subscription to the event bus, opened before the stores start. */
export class AuditFeed extends Context.Service<AuditFeed, PubSub.Subscription<CommittedEvent>>()(
  "mnemos/engineering/AuditFeed",
) {}

/** Subscribes the ledger to the bus; build it before the router so recovery events are seen. */
export const feedLayer: Layer.Layer<AuditFeed, never, EventBus> = Layer.effect(
  AuditFeed,
  Effect.gen(function* () {
    return yield* (yield* EventBus).subscribe
  }),
)

/** Waits `millis` of wall-clock time (see the module docblock for why not `Effect.sleep`). */
const pause = (millis: number) =>
  Effect.callback<void>((resume) => {
    const timer = setTimeout(() => resume(Effect.void), millis)
    return Effect.sync(() => clearTimeout(timer))
  })

/** Ledger counters, for health. */
export interface AuditLedgerStats {
  readonly entriesAppended: number
  readonly entriesPending: number
  readonly appendFailures: number
}

/** The audit ledger. */
export class AuditLedger extends Context.Service<
  AuditLedger,
  {
    /** Appends every event published so far; afterwards the ledger reflects every acknowledged write. */
    readonly catchUp: Effect.Effect<void, StoreError>
    /** Catches up, then queries. */
    readonly query: (filter: AuditFilter) => Effect.Effect<AuditPage, StoreError>
    readonly stats: () => AuditLedgerStats
  }
>()("mnemos/engineering/AuditLedger") {}

const unavailable = new StoreError({
  store: auditStore.name,
  reason: "Unavailable",
  message: 'store "audit" is not running in this engine',
})

export const layer: Layer.Layer<AuditLedger, never, Router | AuditFeed | EventBus> = Layer.effect(
  AuditLedger,
  Effect.gen(function* () {
    const router = yield* Router
    const bus = yield* EventBus
    const feed = yield* AuditFeed
    if (!router.health().some((store) => store.name === auditStore.name)) {
      return AuditLedger.of({
        catchUp: Effect.void,
        query: () => Effect.fail(unavailable),
        stats: () => ({ entriesAppended: 0, entriesPending: 0, appendFailures: 0 }),
      })
    }
    const ledger = router.store(auditStore)
    const lock = yield* Semaphore.make(1)
    let pending: Array<AuditEntryInput> = []
    let entriesAppended = 0
    let appendFailures = 0

    const appendPending = Effect.gen(function* () {
      while (pending.length > 0) {
        const chunk = pending.slice(0, auditAppendEntriesMax)
        const reply = yield* ledger
          .send({ _tag: "Append", entries: chunk })
          .pipe(Effect.tapError(() => Effect.sync(() => appendFailures++)))
        pending = pending.slice(chunk.length)
        entriesAppended += reply.appended
      }
    })

    const drain = Effect.gen(function* () {
      while (true) {
        const events = yield* PubSub.takeUpTo(feed, auditAppendEntriesMax)
        for (const committed of events) {
          // In a shared memory, what another daemon decided is audited by that daemon.
          if (committed.origin !== undefined) continue
          const entry = auditEntryOf(committed)
          if (entry !== undefined) pending.push(entry)
        }
        if (pending.length > auditPendingEntriesMax) pending = pending.slice(pending.length - auditPendingEntriesMax)
        if (events.length < auditAppendEntriesMax) break
      }
      yield* appendPending
    })

    const catchUp = lock.withPermits(1)(drain)

    yield* Effect.forkScoped(
      followBus(bus, feed, {
        intervalMs: auditDrainIntervalMs,
        wait: pause,
        // Entries a failed append kept are tried again without waiting for a publication.
        pending: () => pending.length > 0,
        step: catchUp.pipe(
          Effect.catch((error) =>
            Effect.logWarning(`audit ledger: ${error.message}`).pipe(Effect.andThen(pause(auditRetryMs))),
          ),
        ),
      }).run,
    )
    // Registered after the fork, so it runs first at shutdown, while the stores still serve.
    yield* Effect.addFinalizer(() => catchUp.pipe(Effect.ignore))

    return AuditLedger.of({
      catchUp,
      query: (filter) => catchUp.pipe(Effect.andThen(ledger.read((view) => queryAudit(view, filter)))),
      stats: () => ({ entriesAppended, entriesPending: pending.length, appendFailures }),
    })
  }),
)
