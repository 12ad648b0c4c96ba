/**
 * The store kernel (StoreActor) through the KV test store, on the real file system: round trips,
 * group commit under concurrency, durability across reopen, domain rejections, supervision after
 * a defect, isolation between stores, shutdown with queued sends, the event bus, and refusal of a
 * corrupt log.
 */

import { createHash } from "node:crypto"
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Layer, Option, PubSub, References, Scope } from "effect"
import { TestClock } from "effect/testing"
import { defaultStoreOptions, makeStore, type StoreOptions } from "../../src/actors/StoreActor.ts"
import { openCheckpoint } from "../../src/stores/checkpoint/Checkpoint.ts"
import * as EventBus from "../../src/stores/EventBus.ts"
import type { StoreError } from "../../src/stores/StoreError.ts"
import { openLocalWal } from "../../src/stores/wal/FileWal.ts"
import { layerNode } from "../../src/stores/wal/WalFs.ts"
import {
  parseSegmentFileName,
  readRecordAt,
  recordHeaderBytes,
  segmentHeaderBytes,
} from "../../src/stores/wal/WalRecord.ts"
import { type KvCommand, type KvRejected, kvStore, readAll } from "../support/KvStore.ts"
import * as Sim from "../support/SimulatedDisk.ts"

// ---------------------------------------------------------------------------------------------
// Helpers

const storeLayer = Layer.merge(EventBus.layer, layerNode)

const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "mnemos-store-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true })),
)

const optionsFor = (dir: string, overrides: Partial<StoreOptions> = {}): StoreOptions => ({
  ...defaultStoreOptions,
  restartBackoffMsBase: 1,
  restartBackoffMsMax: 20,
  dir,
  ...overrides,
})

const put = (key: string, value = `v-${key}`): KvCommand => ({ _tag: "Put", key, value })

/** Answers that are failures, by reason or tag; a guard turns a hang into a visible failure. */
const outcomeOf = <A>(exit: Exit.Exit<A, StoreError | KvRejected>): string => {
  if (Exit.isSuccess(exit)) return "ok"
  const error = exit.cause.reasons.find((reason) => reason._tag === "Fail")
  if (error === undefined) return `defect/interrupt: ${String(exit.cause)}`
  const value = (error as { error: StoreError | KvRejected }).error
  return value._tag === "StoreError" ? value.reason : value._tag
}

/** A guard against hangs: fails the test with a message instead of waiting for vitest's timeout. */
const guard = <A, E, R>(what: string, effect: Effect.Effect<A, E, R>) =>
  effect.pipe(
    Effect.timeoutOption("10 seconds"),
    Effect.flatMap((option) =>
      Option.isSome(option) ? Effect.succeed(option.value) : Effect.die(new Error(`hung: ${what}`)),
    ),
  )

/** Lets other fibers and pending I/O callbacks run, without reading the clock. */
const tick = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))

/** Waits (by yielding to the event loop, never the clock) until `condition` holds. */
const waitUntil = (what: string, condition: () => boolean) =>
  Effect.gen(function* () {
    for (let i = 0; i < 100_000; i++) {
      if (condition()) return
      yield* tick
    }
    return yield* Effect.die(new Error(`condition never held: ${what}`))
  })

const sha256 = (file: string) => createHash("sha256").update(readFileSync(file)).digest("hex")

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i)

// ---------------------------------------------------------------------------------------------

describe("StoreActor on the real file system", () => {
  it.live("send and read round trip", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const store = yield* makeStore(kvStore(), optionsFor(dir))
      assert.deepStrictEqual(yield* store.send(put("a", "1")), { changed: true })
      assert.deepStrictEqual(yield* store.send(put("a", "1")), { changed: false })
      assert.deepStrictEqual(yield* store.send(put("b", "2")), { changed: true })
      assert.deepStrictEqual(yield* store.read(readAll), { a: "1", b: "2" })
      assert.deepStrictEqual(yield* store.send({ _tag: "Delete", key: "a" }), { changed: true })
      assert.deepStrictEqual(yield* store.send({ _tag: "Delete", key: "a" }), { changed: false })
      assert.deepStrictEqual(yield* store.read(readAll), { b: "2" })
      assert.strictEqual(yield* store.read((view) => view.get("kv:a")), undefined)
      const health = store.health()
      assert.strictEqual(health.state, "running")
      assert.strictEqual(health.restarts, 0)
      // Put, Put (unchanged still records an event), Put, Delete; the no-op Delete writes nothing.
      assert.strictEqual(health.wal!.nextSeq, 5)
      // LMDB may lag the acknowledgements (its commits run off the ack path), never lead them.
      assert.isAtMost(health.appliedSeq, 4)
    }).pipe(Effect.provide(storeLayer)),
  )

  it.live("500 concurrent sends are all acknowledged, group-committed, and all there after a reopen", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const count = 500
      const stats = yield* Effect.scoped(
        Effect.gen(function* () {
          const store = yield* makeStore(kvStore(), optionsFor(dir))
          const replies = yield* guard(
            "500 concurrent sends",
            Effect.forEach(range(1, count), (i) => store.send(put(`k${i}`)), { concurrency: "unbounded" }),
          )
          assert.strictEqual(replies.length, count)
          assert.isTrue(replies.every((reply) => reply.changed))
          const health = store.health()
          assert.strictEqual(health.wal!.nextSeq, count + 1)
          assert.isAtMost(health.appliedSeq, count)
          return health.wal!
        }),
      )
      // Group commit: far fewer fdatasyncs than writes (each append is one, a new segment two).
      assert.strictEqual(stats.nextSeq, count + 1)
      assert.isBelow(stats.appends, count / 4, `appends ${stats.appends} for ${count} writes`)
      // One per append plus two per segment created (file and directory).
      assert.isAtLeast(stats.fsyncs, stats.appends)
      assert.isAtMost(stats.fsyncs, stats.appends + 2 * stats.segments)
      assert.isBelow(stats.fsyncs / count, 0.25, `fsyncs per write ${stats.fsyncs / count}`)

      const reopened = yield* makeStore(kvStore(), optionsFor(dir))
      const all = yield* reopened.read(readAll)
      assert.strictEqual(Object.keys(all).length, count)
      for (const i of range(1, count)) assert.strictEqual(all[`k${i}`], `v-k${i}`)
      assert.strictEqual(reopened.health().appliedSeq, count)
      assert.deepStrictEqual(yield* reopened.send(put("k1", "new")), { changed: true })
      assert.strictEqual(reopened.health().wal!.nextSeq, count + 2)
    }).pipe(Effect.provide(storeLayer)),
  )

  it.live("a domain rejection fails only that command; the others in the same batch succeed", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const store = yield* makeStore(kvStore(), optionsFor(dir))
      yield* store.send(put("warm"))
      const appendsBefore = store.health().wal!.appends
      const commands: Array<KvCommand> = range(0, 29).map((i) => (i % 5 === 2 ? { _tag: "Reject" } : put(`r${i}`)))
      const exits = yield* guard(
        "mixed batch",
        Effect.forEach(commands, (command) => Effect.exit(store.send(command)), { concurrency: "unbounded" }),
      )
      const outcomes = exits.map(outcomeOf)
      assert.deepStrictEqual(
        outcomes,
        commands.map((command) => (command._tag === "Reject" ? "KvRejected" : "ok")),
      )
      // Fewer appends than successful commands: rejected and accepted commands did share batches.
      const appends = store.health().wal!.appends - appendsBefore
      assert.isBelow(appends, 24)
      const all = yield* store.read(readAll)
      const expected = Object.fromEntries(
        commands
          .flatMap((command) => (command._tag === "Put" ? [[command.key, command.value] as const] : []))
          .concat([["warm", "v-warm"]]),
      )
      assert.deepStrictEqual(all, expected)
      assert.strictEqual(store.health().restarts, 0)
      assert.strictEqual(store.health().wal!.nextSeq, 26)
    }).pipe(Effect.provide(storeLayer)),
  )

  it.live("commands see the effects of earlier ones, inside a batch and across batches", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const store = yield* makeStore(kvStore(), optionsFor(dir))
      // The same Put, 50 times at once: whatever the batching, exactly one of them changes the value.
      const replies = yield* guard(
        "identical concurrent puts",
        Effect.forEach(range(1, 50), () => store.send(put("same", "x")), { concurrency: "unbounded" }),
      )
      assert.strictEqual(replies.filter((reply) => reply.changed).length, 1)
      assert.isBelow(store.health().wal!.appends, 50)
      assert.deepStrictEqual(yield* store.read(readAll), { same: "x" })
    }).pipe(Effect.provide(storeLayer)),
  )

  it.live(
    "Poison: its sender gets WriteFailed, the store restarts once, concurrent sends are answered, later writes succeed",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        const names = range(0, 59).map((i) => `c${i}`)
        yield* Effect.scoped(
          Effect.gen(function* () {
            const store = yield* makeStore(kvStore(), optionsFor(dir))
            yield* store.send(put("before"))
            const commands: Array<KvCommand> = [
              ...names.slice(0, 30).map((key) => put(key)),
              { _tag: "Poison" },
              ...names.slice(30).map((key) => put(key)),
            ]
            const exits = yield* guard(
              "sends around the poison",
              Effect.forEach(commands, (command) => Effect.exit(store.send(command)), { concurrency: "unbounded" }),
            )
            const outcomes = exits.map(outcomeOf)
            assert.strictEqual(outcomes[30], "WriteFailed")
            const poisonError = (exits[30] as Exit.Failure<unknown, StoreError>).cause.reasons[0] as {
              error: StoreError
            }
            assert.include(poisonError.error.message, "poisoned command")
            for (const [index, outcome] of outcomes.entries())
              assert.include(["ok", "WriteFailed"], outcome, `command ${index}`)
            const health = store.health()
            assert.strictEqual(health.restarts, 1)
            assert.include(health.lastError ?? "", "poisoned command")

            // "Not applied" is true for every WriteFailed answer, and every acknowledged write is there.
            const acked = names.filter((_, i) => outcomes[i < 30 ? i : i + 1] === "ok")
            const failed = names.filter((_, i) => outcomes[i < 30 ? i : i + 1] === "WriteFailed")
            assert.strictEqual(acked.length + failed.length, names.length)
            const all = yield* store.read(readAll)
            assert.deepStrictEqual(Object.keys(all).sort(), ["before", ...acked].sort())

            assert.deepStrictEqual(yield* store.send(put("after")), { changed: true })
            assert.deepStrictEqual(yield* store.send(put("before", "changed")), { changed: true })
            assert.strictEqual(store.health().restarts, 1)
            assert.strictEqual(store.health().state, "running")
          }),
        )
        const reopened = yield* makeStore(kvStore(), optionsFor(dir))
        const all = yield* reopened.read(readAll)
        assert.strictEqual(all.before, "changed")
        assert.strictEqual(all.after, "v-after")
        assert.strictEqual(reopened.health().restarts, 0)
      }).pipe(Effect.provide(storeLayer)),
  )

  it.live(
    "a read of a store between two incarnations waits at most readWaitMsMax, then is answered Unavailable with why",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        // The reopen is a minute away (its backoff): a read must not wait for it.
        const store = yield* makeStore(
          kvStore("slow"),
          optionsFor(dir, { restartBackoffMsBase: 60_000, restartBackoffMsMax: 60_000, readWaitMsMax: 200 }),
        )
        yield* store.send(put("k0"))
        yield* Effect.forkChild(Effect.exit(store.send({ _tag: "Poison" })))
        yield* waitUntil("the store restarting", () => store.health().state === "restarting")
        const exit = yield* guard("a read of a store that is reopening", Effect.exit(store.read(readAll)))
        assert.strictEqual(outcomeOf(exit), "Unavailable")
        const error = (exit as Exit.Failure<unknown, StoreError>).cause.reasons[0] as { error: StoreError }
        assert.include(error.error.message, "reopening")
        assert.include(error.error.message, "poisoned command")
      }).pipe(Effect.provide(storeLayer), Effect.provideService(References.MinimumLogLevel, "None")),
  )

  it.effect("poisoning one store does not stop another from answering (restart held back by the test clock)", () =>
    Effect.gen(function* () {
      const dirA = yield* tempDir
      const dirB = yield* tempDir
      const a = yield* makeStore(
        kvStore("a"),
        optionsFor(dirA, { restartBackoffMsBase: 1000, restartBackoffMsMax: 1000 }),
      )
      const b = yield* makeStore(kvStore("b"), optionsFor(dirB))
      yield* a.send(put("a0"))
      yield* b.send(put("b0"))

      const poisoned = yield* Deferred.make<string>()
      const poisonFiber = yield* Effect.forkChild(
        a.send({ _tag: "Poison" }).pipe(
          Effect.exit,
          Effect.flatMap((exit) => Deferred.succeed(poisoned, outcomeOf(exit))),
        ),
      )
      yield* waitUntil("store a restarting", () => a.health().state === "restarting")
      // A write to a waits in its mailbox while a is down.
      const queuedOnA = yield* Effect.forkChild(Effect.exit(a.send(put("a1"))))

      // Store b keeps answering writes and reads while a is down (the test clock holds a's backoff).
      const replies = yield* Effect.forEach(range(1, 50), (i) => b.send(put(`b${i}`)), { concurrency: "unbounded" })
      assert.isTrue(replies.every((reply) => reply.changed))
      assert.strictEqual(Object.keys(yield* b.read(readAll)).length, 51)
      assert.isFalse(yield* Deferred.isDone(poisoned))
      assert.strictEqual(a.health().state, "restarting")
      assert.strictEqual(b.health().state, "running")
      assert.strictEqual(b.health().restarts, 0)

      // Release a's backoff: it reopens, answers the poison, then serves the queued write.
      for (let i = 0; i < 1000 && !(yield* Deferred.isDone(poisoned)); i++) {
        yield* TestClock.adjust("1 second")
        yield* tick
      }
      assert.strictEqual(yield* Deferred.await(poisoned), "WriteFailed")
      yield* Fiber.join(poisonFiber)
      assert.isTrue(Exit.isSuccess(yield* Fiber.join(queuedOnA)))
      assert.deepStrictEqual(yield* a.read(readAll), { a0: "v-a0", a1: "v-a1" })
      assert.strictEqual(a.health().restarts, 1)
      assert.strictEqual(a.health().state, "running")
    }).pipe(Effect.provide(storeLayer)),
  )

  it.live("closing the scope while sends are queued answers every one of them, success or ShuttingDown", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const count = 2000
      const scope = yield* Scope.make()
      const store = yield* makeStore(kvStore(), optionsFor(dir, { batchCommandsMax: 16 })).pipe(Scope.provide(scope))
      yield* store.send(put("first"))
      const sends = yield* Effect.forkChild(
        Effect.forEach(range(1, count), (i) => Effect.exit(store.send(put(`q${i}`))), { concurrency: "unbounded" }),
      )
      yield* waitUntil("sends queued", () => store.health().mailboxDepth > 100)
      yield* Scope.close(scope, Exit.void)
      const exits = yield* guard("sends answered after the scope closed", Fiber.join(sends))
      const outcomes = exits.map(outcomeOf)
      const tally: Record<string, number> = {}
      for (const outcome of outcomes) tally[outcome] = (tally[outcome] ?? 0) + 1
      assert.deepStrictEqual(
        Object.keys(tally).filter((outcome) => outcome !== "ok" && outcome !== "ShuttingDown"),
        [],
        JSON.stringify(tally),
      )
      assert.isAbove(tally.ok ?? 0, 0)
      assert.strictEqual(store.health().state, "stopped")
      // A send after shutdown is refused at once.
      assert.strictEqual(outcomeOf(yield* Effect.exit(store.send(put("late")))), "ShuttingDown")

      // Every acknowledged write is durable; no refused one was applied.
      const reopened = yield* makeStore(kvStore(), optionsFor(dir))
      const all = yield* reopened.read(readAll)
      const acked = range(1, count)
        .filter((i) => outcomes[i - 1] === "ok")
        .map((i) => `q${i}`)
      assert.deepStrictEqual(Object.keys(all).sort(), ["first", ...acked].sort())
    }).pipe(Effect.provide(storeLayer)),
  )

  it.live("closing the scope with more queued senders than the mailbox holds answers every one of them", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const count = 200
      const scope = yield* Scope.make()
      const store = yield* makeStore(kvStore(), optionsFor(dir, { mailboxCapacity: 8, batchCommandsMax: 4 })).pipe(
        Scope.provide(scope),
      )
      yield* store.send(put("first"))
      const sends = yield* Effect.forkChild(
        Effect.forEach(range(1, count), (i) => Effect.exit(store.send(put(`q${i}`))), { concurrency: "unbounded" }),
      )
      // The mailbox is full and the remaining senders wait for room.
      yield* waitUntil("mailbox full", () => store.health().mailboxDepth === 8)
      yield* Scope.close(scope, Exit.void)
      const exits = yield* guard("sends answered after the scope closed", Fiber.join(sends))
      const outcomes = exits.map(outcomeOf)
      assert.deepStrictEqual(
        outcomes.filter((outcome) => outcome !== "ok" && outcome !== "ShuttingDown"),
        [],
      )
      const reopened = yield* makeStore(kvStore(), optionsFor(dir))
      const all = yield* reopened.read(readAll)
      const acked = range(1, count)
        .filter((i) => outcomes[i - 1] === "ok")
        .map((i) => `q${i}`)
      assert.deepStrictEqual(Object.keys(all).sort(), ["first", ...acked].sort())
    }).pipe(Effect.provide(storeLayer)),
  )

  it.live("closing the scope while a poisoned store waits to restart answers the poisoned batch", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const scope = yield* Scope.make()
      const store = yield* makeStore(
        kvStore(),
        optionsFor(dir, { restartBackoffMsBase: 60_000, restartBackoffMsMax: 60_000 }),
      ).pipe(Scope.provide(scope))
      yield* store.send(put("first"))
      const poison = yield* Effect.forkChild(Effect.exit(store.send({ _tag: "Poison" })))
      yield* waitUntil("store restarting", () => store.health().state === "restarting")
      const queued = yield* Effect.forkChild(Effect.exit(store.send(put("queued"))))
      yield* waitUntil("write queued", () => store.health().mailboxDepth === 1)
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(outcomeOf(yield* guard("queued write answered", Fiber.join(queued))), "ShuttingDown")
      assert.include(
        ["WriteFailed", "ShuttingDown"],
        outcomeOf(yield* guard("poisoned batch answered", Fiber.join(poison))),
      )
    }).pipe(Effect.provide(storeLayer)),
  )

  it.live("the event bus delivers every committed event once, in order, with gap-free sequences", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const bus = yield* EventBus.EventBus
      const subscription = yield* bus.subscribe
      const store = yield* makeStore(kvStore(), optionsFor(dir))
      const other = yield* makeStore(kvStore("other"), optionsFor(yield* tempDir))
      const count = 300
      yield* Effect.forEach(range(1, count), (i) => store.send(put(`e${i}`)), { concurrency: "unbounded" })
      yield* other.send(put("elsewhere"))
      yield* store.send({ _tag: "Delete", key: "e1" })
      yield* store.send({ _tag: "Delete", key: "e1" }) // a no-op: no event
      yield* store.send({ _tag: "Reject" }).pipe(Effect.exit) // refused: no event

      const events = yield* PubSub.takeUpTo(subscription, 10_000)
      assert.isTrue(yield* Effect.map(PubSub.remaining(subscription), (n) => n === 0))
      const mine = events.filter((event) => event.store === "kv")
      assert.deepStrictEqual(
        mine.map((event) => event.seq),
        range(1, count + 1),
      )
      const stored = mine.slice(0, count).map((event) => event.event as { _tag: string; key: string })
      assert.isTrue(stored.every((event) => event._tag === "Stored"))
      assert.deepStrictEqual(
        stored.map((event) => event.key).sort(),
        range(1, count)
          .map((i) => `e${i}`)
          .sort(),
      )
      assert.deepStrictEqual(mine[count]!.event, { _tag: "Deleted", key: "e1" })
      const others = events.filter((event) => event.store === "other")
      assert.deepStrictEqual(
        others.map((event) => [event.seq, (event.event as { key: string }).key]),
        [[1, "elsewhere"]],
      )
    }).pipe(Effect.provide(storeLayer)),
  )

  it.live(
    "keyed writes keep the event sequences gap-free; a repeat gets the first reply, before and after a crash",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        const disk = new Sim.SimulatedDisk({ seed: 3 })
        const options = optionsFor(dir)
        yield* Effect.scoped(
          Effect.gen(function* () {
            const bus = yield* EventBus.EventBus
            const subscription = yield* bus.subscribe
            const store = yield* makeStore(kvStore(), options)
            for (const i of range(1, 3)) yield* store.send(put(`k${i}`), { idempotencyKey: `client:${i}` })
            // The same key again, with another command: answered from the record, nothing applied.
            assert.deepStrictEqual(yield* store.send(put("k1", "other"), { idempotencyKey: "client:1" }), {
              changed: true,
            })
            assert.deepStrictEqual(
              (yield* PubSub.takeUpTo(subscription, 100)).map((event) => event.seq),
              [1, 2, 3],
            )
            assert.strictEqual((yield* store.read(readAll)).k1, "v-k1")
            disk.crashAfter(0) // the power goes: the WAL is never released
          }).pipe(Effect.provide(Layer.merge(EventBus.layer, Sim.layer(disk)))),
        )
        const rebooted = disk.crash()
        // As if the power had gone before LMDB committed anything: the store comes back from the WAL alone.
        rmSync(join(dir, "lmdb"), { recursive: true, force: true })
        const after = yield* Effect.scoped(
          Effect.gen(function* () {
            const store = yield* makeStore(kvStore(), options)
            const reply = yield* store.send(put("k2", "other"), { idempotencyKey: "client:2" })
            return { reply, state: yield* store.read(readAll), replayed: store.health().recovery?.records }
          }).pipe(Effect.provide(Layer.merge(EventBus.layer, Sim.layer(rebooted)))),
        )
        assert.strictEqual(after.replayed, 3)
        assert.deepStrictEqual(after.reply, { changed: true })
        assert.deepStrictEqual(after.state, { k1: "v-k1", k2: "v-k2", k3: "v-k3" })
      }).pipe(Effect.provideService(References.MinimumLogLevel, "None")),
  )

  it.live(
    "a keyed no-op and a keyed refusal are remembered: their retries get the first answer after the state changed, also after a restart; every record keeps the published sequences gap-free",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        const options = optionsFor(dir)
        const first = yield* Effect.scoped(
          Effect.gen(function* () {
            const subscription = yield* (yield* EventBus.EventBus).subscribe
            const store = yield* makeStore(kvStore(), options)
            yield* store.send(put("k", "a"))
            const noOp = yield* store.send({ _tag: "Expect", key: "k", value: "a" }, { idempotencyKey: "c:1" })
            const refused = yield* Effect.flip(
              store.send({ _tag: "Expect", key: "k", value: "b" }, { idempotencyKey: "c:2" }),
            )
            yield* store.send(put("k", "b"))
            // Decided again, the first would now be refused and the second succeed: they are not.
            const noOpAgain = yield* store.send({ _tag: "Expect", key: "k", value: "a" }, { idempotencyKey: "c:1" })
            const refusedAgain = yield* Effect.flip(
              store.send({ _tag: "Expect", key: "k", value: "b" }, { idempotencyKey: "c:2" }),
            )
            const published = yield* PubSub.takeUpTo(subscription, 100)
            return { noOp, noOpAgain, refused, refusedAgain, published }
          }).pipe(Effect.provide(storeLayer)),
        )
        assert.deepStrictEqual(first.noOpAgain, first.noOp)
        assert.strictEqual((first.refused as KvRejected).message, "k does not hold b")
        assert.strictEqual((first.refusedAgain as KvRejected)._tag, "KvRejected")
        assert.strictEqual((first.refusedAgain as KvRejected).message, "k does not hold b")
        // put, the no-op's record, the refusal's record, put: four records, four published sequences.
        assert.deepStrictEqual(
          first.published.map((event) => [event.seq, event.kernel === true]),
          [
            [1, false],
            [2, true],
            [3, true],
            [4, false],
          ],
        )
        const afterRestart = yield* Effect.scoped(
          Effect.gen(function* () {
            const store = yield* makeStore(kvStore(), options)
            return yield* Effect.flip(store.send({ _tag: "Expect", key: "k", value: "b" }, { idempotencyKey: "c:2" }))
          }).pipe(Effect.provide(storeLayer)),
        )
        assert.strictEqual((afterRestart as KvRejected).message, "k does not hold b")
      }),
  )

  it.effect("a replayed event carries its commit time, not the restart's", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const disk = new Sim.SimulatedDisk({ seed: 9 })
      const options = optionsFor(dir)
      yield* TestClock.setTime(1_000_000)
      yield* Effect.scoped(
        Effect.gen(function* () {
          const store = yield* makeStore(kvStore(), options)
          yield* store.send(put("timed"))
          disk.crashAfter(0) // the power goes before any checkpoint: the next start replays the record
        }).pipe(Effect.provide(Layer.merge(EventBus.layer, Sim.layer(disk)))),
      )
      yield* TestClock.setTime(9_000_000)
      const rebooted = disk.crash()
      rmSync(join(dir, "lmdb"), { recursive: true, force: true })
      const replayed = yield* Effect.scoped(
        Effect.gen(function* () {
          const subscription = yield* (yield* EventBus.EventBus).subscribe
          yield* makeStore(kvStore(), options)
          return yield* PubSub.take(subscription)
        }).pipe(Effect.provide(Layer.merge(EventBus.layer, Sim.layer(rebooted)))),
      )
      assert.deepStrictEqual([replayed.seq, replayed.at], [1, 1_000_000])
    }).pipe(Effect.provideService(References.MinimumLogLevel, "None")),
  )

  it.live("a log written before idempotency records rode on events still replays them (stand-alone records)", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const now = Date.now()
      yield* Effect.scoped(
        Effect.gen(function* () {
          const { wal } = yield* openLocalWal({ dir: join(dir, "wal"), segmentBytesMax: 1 << 20, replayAfterSeq: 0 })
          yield* wal.appendBatch([
            { type: 1, payload: JSON.stringify({ _tag: "Stored", key: "old", value: "v-old", at: now }) },
            { type: 2, payload: JSON.stringify({ key: "client:9", reply: { changed: true }, at: now }) },
          ])
          yield* wal.close()
        }).pipe(Effect.provide(layerNode)),
      )
      const after = yield* Effect.scoped(
        Effect.gen(function* () {
          const store = yield* makeStore(kvStore(), optionsFor(dir))
          const reply = yield* store.send(put("old", "other"), { idempotencyKey: "client:9" })
          return { reply, state: yield* store.read(readAll) }
        }).pipe(Effect.provide(storeLayer)),
      )
      assert.deepStrictEqual(after, { reply: { changed: true }, state: { old: "v-old" } })
    }),
  )

  it.live("a subscriber that sees an event can read its effect", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const bus = yield* EventBus.EventBus
      const subscription = yield* bus.subscribe
      const store = yield* makeStore(kvStore(), optionsFor(dir))
      const count = 100
      const writer = yield* Effect.forkChild(
        Effect.forEach(range(1, count), (i) => store.send(put(`s${i}`)), { concurrency: 8 }),
      )
      for (let seen = 0; seen < count; seen++) {
        const event = yield* PubSub.take(subscription)
        const key = (event.event as { key: string }).key
        assert.strictEqual(event.seq, seen + 1)
        assert.deepStrictEqual(
          yield* store.read((view) => (view.get(`kv:${key}`) as { value: string } | undefined)?.value),
          `v-${key}`,
        )
      }
      yield* Fiber.join(writer)
    }).pipe(Effect.provide(storeLayer)),
  )

  it.live("a corrupt WAL makes its store refuse send and read with Corrupt naming the file; another store works", () =>
    Effect.gen(function* () {
      const dirA = yield* tempDir
      const dirB = yield* tempDir
      yield* Effect.scoped(
        Effect.gen(function* () {
          const store = yield* makeStore(kvStore(), optionsFor(dirA))
          for (const i of range(1, 10)) yield* store.send(put(`x${i}`))
        }),
      )
      // The stopped store's log (released whole by the clean shutdown's checkpoint) gets ten more
      // batches that LMDB has not seen (as after a crash), written through the WAL itself with the
      // checkpoint's generation, then a flipped byte in the fifth of them: valid records follow.
      const walDir = join(dirA, "wal")
      const checkpoint = yield* openCheckpoint(join(dirA, "lmdb"))
      const appliedSeq = checkpoint.appliedSeq()
      const salt = checkpoint.salt()!
      yield* Effect.promise(() => checkpoint.close())
      assert.strictEqual(appliedSeq, 10)
      const appended = yield* Effect.scoped(
        Effect.gen(function* () {
          const { wal } = yield* Effect.acquireRelease(
            openLocalWal({
              dir: walDir,
              segmentBytesMax: defaultStoreOptions.walSegmentBytesMax,
              replayAfterSeq: appliedSeq,
              salt,
            }),
            (opened) => opened.wal.close(),
          )
          const seqs: Array<number> = []
          for (const i of range(1, 10)) {
            const event = { _tag: "Stored", key: `late${i}`, value: "v", at: 0 }
            seqs.push((yield* wal.appendBatch([{ type: 1, payload: Buffer.from(JSON.stringify(event)) }])).firstSeq)
          }
          return seqs
        }),
      ).pipe(Effect.provide(layerNode))
      const victimSeq = appended[4]!
      const segmentName = readdirSync(walDir)
        .filter((name) => parseSegmentFileName(name) !== undefined && parseSegmentFileName(name)! <= victimSeq)
        .sort()
        .pop()!
      const segment = join(walDir, segmentName)
      const bytes = readFileSync(segment)
      let offset = segmentHeaderBytes
      for (;;) {
        const read = readRecordAt(bytes, offset)
        assert.strictEqual(read._tag, "Record")
        if (read._tag !== "Record" || read.record.seq === victimSeq) break
        offset = read.end
      }
      bytes[offset + recordHeaderBytes + 2] ^= 0xff
      writeFileSync(segment, bytes)
      const hash = sha256(segment)

      const a = yield* makeStore(kvStore(), optionsFor(dirA))
      const b = yield* makeStore(kvStore("b"), optionsFor(dirB))

      const sendError = yield* Effect.flip(guard("send to a corrupt store", a.send(put("y"))))
      assert.strictEqual(sendError._tag, "StoreError")
      assert.strictEqual((sendError as StoreError).reason, "Corrupt")
      assert.include(sendError.message, segmentName)
      assert.include(sendError.message, `at byte ${offset}`)
      const readError = yield* Effect.flip(guard("read of a corrupt store", a.read(readAll)))
      assert.strictEqual(readError.reason, "Corrupt")
      assert.include(readError.message, segmentName)
      // Concurrent sends are all refused, none strands.
      const exits = yield* guard(
        "concurrent sends to a corrupt store",
        Effect.forEach(range(1, 20), (i) => Effect.exit(a.send(put(`z${i}`))), { concurrency: "unbounded" }),
      )
      assert.deepStrictEqual(
        exits.map(outcomeOf),
        range(1, 20).map(() => "Corrupt"),
      )
      assert.strictEqual(a.health().state, "corrupt")
      assert.strictEqual(a.health().restarts, 0)

      // The other store works, and nothing in the damaged log was touched.
      assert.deepStrictEqual(yield* b.send(put("fine")), { changed: true })
      assert.deepStrictEqual(yield* b.read(readAll), { fine: "v-fine" })
      assert.strictEqual(sha256(segment), hash)
    }).pipe(Effect.provide(storeLayer)),
  )
})

/** Resident bytes of this process's maps of `file` (/proc/self/smaps: a closed environment's map is gone). */
const residentBytesOf = (file: string): number => {
  let bytes = 0
  let inFile = false
  for (const line of readFileSync("/proc/self/smaps", "utf8").split("\n")) {
    if (/^[0-9a-f]+-[0-9a-f]+ /.test(line)) inFile = line.endsWith(` ${file}`)
    else if (inFile && line.startsWith("Rss:")) bytes += Number(line.split(/\s+/)[1]) * 1024
  }
  return bytes
}

/** Waits (up to 10 s of real time) until `store` has let go of its mapped pages `times` times. */
const waitUntilReleased = (store: { readonly health: () => { readonly mappedPagesReleased: number } }, times: number) =>
  guard(
    `mapped pages released ${times} times`,
    Effect.gen(function* () {
      while (store.health().mappedPagesReleased < times) yield* Effect.sleep("5 millis")
    }),
  )

/**
 * A store holding `keys` keys of 400 bytes, all committed to LMDB, that lets go of its file's pages
 * once it has been quiet for 50 ms.
 */
const storeOfKeys = (dir: string, keys: number) =>
  Effect.gen(function* () {
    const store = yield* makeStore(
      kvStore(),
      optionsFor(dir, { releaseMappedPagesIdleMs: 50, lmdbCommitIntervalMs: 5 }),
    )
    for (let start = 0; start < keys; start += 500)
      yield* Effect.forEach(range(start, start + 499), (i) => store.send(put(`k${i}`, "x".repeat(400))), {
        concurrency: "unbounded",
      })
    yield* waitUntil("the writes committed", () => store.health().appliedSeq === keys)
    return store
  })

describe("StoreActor lets go of its LMDB file's mapped pages once it idles", () => {
  it.live("a read of the whole store maps its file; once the store idles, its pages leave the resident set", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const store = yield* storeOfKeys(dir, 20_000)
      const file = join(dir, "lmdb", "data.mdb")
      const released = store.health().mappedPagesReleased
      // Writing it mapped pages too (and may have let go of them already): a read of every key maps
      // the whole file, about 9 MiB.
      assert.strictEqual(Object.keys(yield* store.read(readAll)).length, 20_000)
      assert.isAbove(residentBytesOf(file), 6 * 1024 * 1024)
      yield* waitUntilReleased(store, released + 1)
      // What the reopen itself reads (LMDB's meta pages, and the kernel's read-around of each).
      assert.isBelow(residentBytesOf(file), 1024 * 1024)
      // What was let go reads back whole.
      assert.strictEqual(Object.keys(yield* store.read(readAll)).length, 20_000)
    }).pipe(Effect.provide(storeLayer)),
  )

  it.live("a store that walked fewer entries than the threshold keeps its map", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const store = yield* makeStore(
        kvStore(),
        optionsFor(dir, { releaseMappedPagesIdleMs: 20, releaseMappedPagesEntriesMin: 1_000, lmdbCommitIntervalMs: 1 }),
      )
      yield* Effect.forEach(range(1, 100), (i) => store.send(put(`k${i}`)), { concurrency: "unbounded" })
      // Read from LMDB, not from the changes waiting for their commit.
      yield* waitUntil("the writes committed", () => store.health().appliedSeq === 100)
      for (let round = 0; round < 5; round++) yield* store.read(readAll)
      yield* Effect.sleep("200 millis")
      assert.strictEqual(store.health().mappedPagesReleased, 0)
      // 500 more entries read pass it (with the 100 changes committed and the 500 read before).
      for (let round = 0; round < 5; round++) yield* store.read(readAll)
      yield* waitUntilReleased(store, 1)
    }).pipe(Effect.provide(storeLayer)),
  )

  it.live("small reads more often than the idle time do not keep a store read whole mapped", () =>
    Effect.gen(function* () {
      const store = yield* storeOfKeys(yield* tempDir, 6_000)
      const released = store.health().mappedPagesReleased
      assert.strictEqual(Object.keys(yield* store.read(readAll)).length, 6_000)
      // One key read every 10 ms, as a dashboard polling `/api/stats` reads the graph's counters.
      const poll = Effect.forever(
        Effect.andThen(
          store.read((view) => view.get("kv:k1")),
          Effect.sleep("10 millis"),
        ),
      )
      yield* Effect.raceFirst(waitUntilReleased(store, released + 1), poll)
    }).pipe(Effect.provide(storeLayer)),
  )

  it.live("reads and writes racing the releases are all answered and lose nothing, before and after a reopen", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const acked = new Set<string>()
      const releases = yield* Effect.scoped(
        Effect.gen(function* () {
          const store = yield* makeStore(
            kvStore(),
            optionsFor(dir, { releaseMappedPagesIdleMs: 5, releaseMappedPagesEntriesMin: 1 }),
          )
          let next = 0
          const writes = Effect.gen(function* () {
            for (let call = 0; call < Math.floor(Math.random() * 4); call++) {
              const keys = range(1, 1 + Math.floor(Math.random() * 20)).map(() => `k${next++}`)
              yield* Effect.forEach(keys, (key) => store.send(put(key)), { concurrency: "unbounded" })
              for (const key of keys) acked.add(key)
            }
          })
          const reads = Effect.gen(function* () {
            for (let call = 0; call < Math.floor(Math.random() * 4); call++) {
              const ackedBefore = [...acked]
              const seen = yield* store.read(readAll)
              for (const key of ackedBefore) assert.strictEqual(seen[key], `v-${key}`, `acknowledged ${key} read back`)
              const counted = yield* store.read((view) => view.count({ start: "kv:", end: "kv;" }))
              assert.isAtLeast(counted, Object.keys(seen).length)
            }
          })
          // Rounds of calls with pauses of none to three times the idle time between, so releases
          // fall before, between and during the next round's calls.
          for (let round = 0; round < 200; round++) {
            yield* guard("a round of calls", Effect.all([writes, reads, reads], { concurrency: "unbounded" }))
            yield* Effect.sleep(`${Math.floor(Math.random() * 15)} millis`)
          }
          assert.strictEqual(store.health().state, "running")
          assert.strictEqual(store.health().restarts, 0)
          return store.health().mappedPagesReleased
        }),
      )
      // Enough releases to have met the calls at every point of theirs.
      assert.isAbove(releases, 40)
      const reopened = yield* makeStore(kvStore(), optionsFor(dir))
      const all = yield* reopened.read(readAll)
      assert.strictEqual(Object.keys(all).length, acked.size)
      for (const key of acked) assert.strictEqual(all[key], `v-${key}`)
    }).pipe(Effect.provide(storeLayer)),
  )
})
