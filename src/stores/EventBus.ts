/**
 * The event bus: every committed event of every store, in commit order per store.
 *
 * Stores publish after their LMDB commit, before they answer the writers, so a subscriber that
 * sees an event can read its effect. Subscribers (search indexer, dashboard, MCP resource
 * subscriptions, audit) get a bounded sliding buffer each: a subscriber that falls more than
 * `eventBusCapacity` events behind loses the oldest ones, and notices, because sequence numbers
 * are gap-free per store; it then resynchronises from the store's state. Publishing never blocks
 * a writer.
 */
import { Context, Deferred, Duration, Effect, Layer, Option, PubSub, type Scope } from "effect"

/** How many events a subscriber may fall behind before the oldest are dropped for it. */
export const eventBusCapacity = 65_536

/** One committed log record: a domain event, or a record of the store kernel's own (`kernel`). */
export interface CommittedEvent {
  readonly store: string
  readonly seq: number
  /** Commit time, ms since the epoch. */
  readonly at: number
  /** The domain event; undefined for a kernel record. */
  readonly event: unknown
  /**
   * Set for a record that is no domain event (an idempotency or snapshot record): announced so a
   * subscriber's sequences stay gap-free, with nothing to apply.
   */
  readonly kernel?: true
  /** In a shared memory: the daemon whose write this is (absent for this daemon's own writes). */
  readonly origin?: string
  /**
   * In a shared memory, for a domain event: the daemon that decided it (this one too) and its
   * number among that daemon's events in the store, 1, 2, 3... (src/stores/OriginCounts.ts).
   */
  readonly decidedBy?: string
  readonly originSeq?: number
}

/** True for a domain event (as opposed to a kernel record). */
export const isDomainEvent = (committed: CommittedEvent): boolean => committed.kernel !== true

/** Publish/subscribe of committed events. */
export class EventBus extends Context.Service<
  EventBus,
  {
    readonly publishAll: (events: ReadonlyArray<CommittedEvent>) => Effect.Effect<void>
    readonly subscribe: Effect.Effect<PubSub.Subscription<CommittedEvent>, never, Scope.Scope>
    /**
     * Completes at the first publication after this call (the call itself is the moment it
     * counts from, not the run of the effect it returns).
     */
    readonly nextPublication: () => Effect.Effect<void>
  }
>()("mnemos/actors/EventBus") {}

/** The in-process bus. */
export const layer: Layer.Layer<EventBus> = Layer.effect(
  EventBus,
  Effect.gen(function* () {
    const pubsub = yield* PubSub.sliding<CommittedEvent>(eventBusCapacity)
    let published = Deferred.makeUnsafe<void>()
    const announce = Effect.sync(() => {
      const waiting = published
      published = Deferred.makeUnsafe<void>()
      Deferred.doneUnsafe(waiting, Effect.void)
    })
    return EventBus.of({
      publishAll: (events) =>
        events.length === 0 ? Effect.void : Effect.andThen(PubSub.publishAll(pubsub, events), announce),
      subscribe: PubSub.subscribe(pubsub),
      nextPublication: () => Deferred.await(published),
    })
  }),
)

/** How a subscriber keeps up with the bus between the reads that drain it (`followBus`). */
export interface Following {
  /** Catches up: drains the subscription (and whatever else the subscriber does in the background). */
  readonly step: Effect.Effect<void>
  /** The least time between two steps while events keep coming: they are taken in batches. */
  readonly intervalMs: number
  /**
   * Work of the subscriber's own that no publication announces: while true, steps go on every
   * `intervalMs`; what makes it true outside a step calls `wake` (and `idleStepMs` bounds the wait
   * for what does not).
   */
  readonly pending?: () => boolean
  /** With nothing published, a step at least this often (never, when absent). */
  readonly idleStepMs?: number
  /** How to wait `ms` (default `Effect.sleep`, the Effect Clock's; wall-clock timers for housekeeping). */
  readonly wait?: (ms: number) => Effect.Effect<void>
}

/**
 * Runs `step` forever (`run`): `intervalMs` apart while `subscription` has events or work is
 * `pending`, then nothing until the next publication, a `wake`, or `idleStepMs`. An idle daemon's subscribers do not
 * wake its event loop: polling every few milliseconds cost an idle daemon about 2% of a core on a
 * shared machine, and kept V8 from handing back the heap it no longer used (docs/benchmarks.md,
 * footprint).
 */
export const followBus = (
  bus: EventBus["Service"],
  subscription: PubSub.Subscription<CommittedEvent>,
  following: Following,
): { readonly run: Effect.Effect<never>; readonly wake: () => void } => {
  const wait = following.wait ?? ((ms: number) => Effect.sleep(Duration.millis(ms)))
  let woken = Deferred.makeUnsafe<void>()
  const run = Effect.forever(
    Effect.gen(function* () {
      yield* wait(following.intervalMs)
      yield* following.step
      // Taken before looking, so that a publication or a wake after the look still ends the wait.
      const published = bus.nextPublication()
      const wakeUp = Deferred.await(woken)
      const waiting = Option.getOrElse(PubSub.remainingUnsafe(subscription), () => 0)
      if (waiting > 0 || following.pending?.() === true) return
      const announced = Effect.raceFirst(published, wakeUp)
      yield* following.idleStepMs === undefined ? announced : Effect.raceFirst(announced, wait(following.idleStepMs))
    }),
  )
  return {
    run,
    /** Work became `pending` unannounced: the next step comes now, not at the next publication. */
    wake: () => {
      const waiting = woken
      woken = Deferred.makeUnsafe<void>()
      Deferred.doneUnsafe(waiting, Effect.void)
    },
  }
}
