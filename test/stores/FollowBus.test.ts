/**
 * A bus subscriber's background catch-up (`followBus`, src/stores/EventBus.ts): it steps while
 * events come, batched `intervalMs` apart, and not at all while nothing is published, so an idle
 * daemon's event loop is left alone; a publication wakes it, whenever it comes, as does work of
 * its own (`pending`) within `idleStepMs`. Time is the test clock's: nothing here waits for real.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, PubSub } from "effect"
import { TestClock } from "effect/testing"
import * as EventBus from "../../src/stores/EventBus.ts"

const event = (seq: number): EventBus.CommittedEvent => ({ store: "notes", seq, at: 0, event: { seq } })

/** Lets forked fibers run what they can without the clock moving. */
const settle = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))

describe("followBus", () => {
  it.effect("steps while events come, then not at all until the next publication", () =>
    Effect.gen(function* () {
      const bus = yield* EventBus.EventBus
      const subscription = yield* bus.subscribe
      let steps = 0
      const applied: Array<number> = []
      const step = Effect.map(PubSub.takeUpTo(subscription, Number.MAX_SAFE_INTEGER), (events) => {
        steps++
        for (const committed of events) applied.push(committed.seq)
      })
      yield* Effect.forkScoped(EventBus.followBus(bus, subscription, { intervalMs: 25, step }).run)
      yield* settle

      yield* bus.publishAll([event(1), event(2)])
      yield* TestClock.adjust(25)
      yield* settle
      assert.deepStrictEqual(applied, [1, 2])

      // An hour with nothing published: at most the one step that found the bus empty.
      const before = steps
      for (let minute = 0; minute < 60; minute++) {
        yield* TestClock.adjust("1 minute")
        yield* settle
      }
      assert.isAtMost(steps - before, 1, "stepped while nothing was published")

      yield* bus.publishAll([event(3)])
      yield* TestClock.adjust(25)
      yield* settle
      assert.deepStrictEqual(applied, [1, 2, 3])
    }).pipe(Effect.scoped, Effect.provide(EventBus.layer)),
  )

  it.effect("a wake ends the sleep at once: pending work asked for outside a step is not left for a publication", () =>
    Effect.gen(function* () {
      const bus = yield* EventBus.EventBus
      const subscription = yield* bus.subscribe
      let work = 0
      const step = Effect.sync(() => {
        if (work > 0) work--
      })
      const following = EventBus.followBus(bus, subscription, { intervalMs: 25, pending: () => work > 0, step })
      yield* Effect.forkScoped(following.run)
      yield* settle
      yield* TestClock.adjust(25)
      yield* settle
      work = 2 // a thread that crashed asks for reconciles
      following.wake()
      for (let i = 0; i < 2; i++) {
        yield* TestClock.adjust(25)
        yield* settle
      }
      assert.strictEqual(work, 0, "the woken loop did the work within two intervals")
    }).pipe(Effect.scoped, Effect.provide(EventBus.layer)),
  )

  it.effect("steps for pending work of its own within idleStepMs, and every intervalMs while it lasts", () =>
    Effect.gen(function* () {
      const bus = yield* EventBus.EventBus
      const subscription = yield* bus.subscribe
      let work = 0
      let steps = 0
      const step = Effect.sync(() => {
        steps++
        if (work > 0) work--
      })
      yield* Effect.forkScoped(
        EventBus.followBus(bus, subscription, { intervalMs: 25, idleStepMs: 1000, pending: () => work > 0, step }).run,
      )
      yield* settle
      yield* TestClock.adjust(25)
      yield* settle
      work = 3 // asked for unannounced, as a reconcile after a failure is
      yield* TestClock.adjust(1000)
      yield* settle
      for (let i = 0; i < 3; i++) {
        yield* TestClock.adjust(25)
        yield* settle
      }
      assert.strictEqual(work, 0)
      const idle = steps
      yield* TestClock.adjust("10 seconds")
      yield* settle
      assert.isAtMost(steps - idle, 11, "stepped more often than idleStepMs with nothing to do")
    }).pipe(Effect.scoped, Effect.provide(EventBus.layer)),
  )
})
