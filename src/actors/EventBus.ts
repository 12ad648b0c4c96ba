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

/** One committed event. */
export interface CommittedEvent {
  readonly store: string
  readonly seq: number
  /** Commit time, ms since the epoch. */
  readonly at: number
  readonly event: unknown
}

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
