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
import { Context, Effect, Layer, PubSub, type Scope } from "effect"

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
  }
>()("mnemos/actors/EventBus") {}

/** The in-process bus. */
export const layer: Layer.Layer<EventBus> = Layer.effect(
  EventBus,
  Effect.gen(function* () {
    const pubsub = yield* PubSub.sliding<CommittedEvent>(eventBusCapacity)
    return EventBus.of({
      publishAll: (events) => (events.length === 0 ? Effect.void : Effect.asVoid(PubSub.publishAll(pubsub, events))),
      subscribe: PubSub.subscribe(pubsub),
    })
  }),
)
