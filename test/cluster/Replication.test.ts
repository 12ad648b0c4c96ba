/**
 * Replicas of one store on a real 3-node JetStream cluster (R3), in one process: three "daemons"
 * (each its own NATS connection, daemon id and data directory) take random commands concurrently,
 * including keyed retries sent to another daemon than the first try. The property: once they have
 * caught up, every replica holds exactly the state that applying the stream in order on a fresh
 * store gives, every acknowledged write is in it, and a retried keyed command was applied once.
 *
 * Replay a failure with `MNEMOS_FC_SEED=<seed>`.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer, References, Schedule, type Scope } from "effect"
import fc from "fast-check"
import { defaultStoreOptions, makeStore, type Store } from "../../src/actors/StoreActor.ts"
import * as EventBus from "../../src/stores/EventBus.ts"
import type { StoreError } from "../../src/stores/StoreError.ts"
import * as Nats from "../../src/stores/shared/Nats.ts"
import { streamNameOf, subjectOf } from "../../src/stores/shared/StoreGenerations.ts"
import { jetStreamLogs } from "../../src/stores/wal/JetStreamWal.ts"
import { layerNode } from "../../src/stores/wal/WalFs.ts"
import { encodeBatch, readRecordAt, recordHeaderBytes } from "../../src/stores/wal/WalRecord.ts"
import { type KvCommand, type KvRejected, kvStore, readAll } from "../support/KvStore.ts"
import { type NatsCluster, startNatsCluster } from "../support/NatsCluster.ts"

const seed = Number(process.env.MNEMOS_FC_SEED ?? Math.floor(Math.random() * 0x7fffffff))
console.log(`Replication fast-check seed: ${seed} (replay with MNEMOS_FC_SEED=${seed})`)
const runs = Number(process.env.MNEMOS_FC_RUNS ?? 8)

let cluster: NatsCluster
beforeAll(async () => {
  cluster = await startNatsCluster(3)
}, 60_000)
afterAll(async () => {
  await cluster?.stop()
})

type Kv = Store<KvCommand, { readonly changed: boolean }, KvRejected>

/** A replica of the `kv` store of memory `prefix`: its own connection, daemon id and directory. */
const replica = (prefix: string, daemonId: string, serverOrder: number): Effect.Effect<Kv, unknown, Scope.Scope> =>
  Effect.gen(function* () {
    const dir = mkdtempSync(join(tmpdir(), "mnemos-replica-"))
    yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
    const servers = [...cluster.urls.slice(serverOrder), ...cluster.urls.slice(0, serverOrder)]
    const logs = jetStreamLogs.pipe(Layer.provide(Nats.layer({ servers, prefix, daemonId })))
    const context = yield* Layer.build(Layer.mergeAll(logs, EventBus.layer, layerNode))
    return yield* makeStore(kvStore(), {
      ...defaultStoreOptions,
      dir,
      lmdbCommitIntervalMs: 5,
      restartBackoffMsBase: 1,
      restartBackoffMsMax: 50,
    }).pipe(Effect.provide(context))
  })

/** Waits until `store` has applied every batch of its stream (its state then is the stream's). */
const caughtUp = (store: Kv, last: () => number) =>
  Effect.gen(function* () {
    // Up to 30 s: on a loaded 2-core machine a replica's first open of its stream can take seconds.
    for (let attempt = 0; attempt < 3_000; attempt++) {
      const position = store.health().wal?.position
      if (position !== undefined && position >= last()) return
      // A write applies what arrived first; an idle replica applies it when woken.
      yield* Effect.sleep("10 millis")
    }
    const health = store.health()
    return yield* Effect.die(
      new Error(
        `replica stuck at ${health.wal?.position} of ${last()} (state ${health.state}${health.lastError ? `: ${health.lastError}` : ""}; restarts ${health.restarts}, log ${JSON.stringify(health.wal)})`,
      ),
    )
  })

const commandArb = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      _tag: fc.constant("Put" as const),
      key: fc.constantFrom("a", "b", "c", "d"),
      value: fc.string({ maxLength: 6 }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ _tag: fc.constant("Delete" as const), key: fc.constantFrom("a", "b", "c", "d") }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      _tag: fc.constant("Expect" as const),
      key: fc.constantFrom("a", "b"),
      value: fc.string({ maxLength: 2 }),
    }),
  },
)
const stepArb = fc.record({
  daemon: fc.integer({ min: 0, max: 2 }),
  command: commandArb,
  /** Keyed, and sent again to this other daemon after the first answer. */
  retryOn: fc.option(fc.integer({ min: 0, max: 2 }), { nil: undefined }),
})

describe("replicas on a 3-node JetStream cluster", () => {
  it("random commands on three daemons, at once: every replica ends in the state of the stream applied in order; keyed retries on another daemon apply once", async () => {
    let run = 0
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(stepArb, { minLength: 1, maxLength: 6 }), { minLength: 1, maxLength: 6 }),
        async (groups) => {
          const prefix = `prop${seed % 10_000}r${run++}`
          const result = await Effect.runPromise(
            Effect.scoped(
              Effect.gen(function* () {
                const daemons = [
                  yield* replica(prefix, "d0", 0),
                  yield* replica(prefix, "d1", 1),
                  yield* replica(prefix, "d2", 2),
                ]
                let key = 0
                const acked: Array<{ readonly command: KvCommand; readonly reply: unknown }> = []
                const retries: Array<{ readonly first: unknown; readonly again: unknown }> = []
                for (const group of groups) {
                  yield* Effect.forEach(
                    group,
                    (step) =>
                      Effect.gen(function* () {
                        const idempotencyKey = step.retryOn !== undefined ? `client:${++key}` : undefined
                        const first = yield* Effect.exit(daemons[step.daemon]!.send(step.command, { idempotencyKey }))
                        if (Exit.isSuccess(first)) acked.push({ command: step.command, reply: first.value })
                        if (step.retryOn === undefined) return
                        const again = yield* Effect.exit(daemons[step.retryOn]!.send(step.command, { idempotencyKey }))
                        retries.push({ first: outcome(first), again: outcome(again) })
                      }),
                    { concurrency: "unbounded" },
                  )
                }
                const last = () => Math.max(...daemons.map((daemon) => daemon.health().wal?.position ?? 0))
                const end = last()
                yield* Effect.forEach(daemons, (daemon) => caughtUp(daemon, () => end))
                const states = yield* Effect.forEach(daemons, (daemon) => daemon.read(readAll))
                // A fresh replica applies the whole stream in order.
                const fresh = yield* replica(prefix, "fresh", 0)
                yield* caughtUp(fresh, () => end)
                const replayed = yield* fresh.read(readAll)
                return { states, replayed, acked, retries }
              }),
            ).pipe(Effect.provideService(References.MinimumLogLevel, "None")),
          )
          for (const state of result.states) assert.deepStrictEqual(state, result.replayed)
          // A keyed retry gets the first answer, wherever it is sent, and is not applied again.
          for (const retry of result.retries) assert.deepStrictEqual(retry.again, retry.first)
          // Every acknowledged write took effect: its key holds its value, unless a later write changed it.
          const putKeys = new Set(result.acked.flatMap(({ command }) => (command._tag === "Put" ? [command.key] : [])))
          for (const keyName of putKeys) {
            const written = result.acked.filter(({ command }) => command._tag === "Put" && command.key === keyName)
            const deleted = result.acked.some(({ command }) => command._tag === "Delete" && command.key === keyName)
            if (!deleted && written.length === 1)
              assert.strictEqual(result.replayed[keyName], (written[0]!.command as { value: string }).value)
          }
        },
      ),
      { numRuns: runs, seed },
    )
  }, 600_000)

  // nats-server 2.9 answers daemons that create one stream at once with different creation times
  // (and may confirm two different configurations): a generation taken from either split the
  // replicas, each refusing the others' records as "of another store generation". The stream's first
  // record is the same for all; here it is written by a daemon whose salt nothing else would give.
  it("a new store's generation is its stream's first record's, whatever the server says of the stream", async () => {
    const prefix = `genesis${Date.now() % 100_000}`
    const foreignSalt = 0x5eed_0001
    const result = await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          // A first write as the kernel encodes it, taken from a store of another memory.
          const model = yield* replica(`${prefix}model`, "m", 0)
          yield* model.send({ _tag: "Put", key: "first", value: "1" })
          const probe = yield* Nats.makeNats({ servers: cluster.urls, prefix, daemonId: "racer" })
          const modelMessage = yield* Effect.promise(() =>
            probe.manager.streams.getMessage(streamNameOf(`${prefix}model`, "kv"), { seq: 1 }),
          )
          const read = readRecordAt(Buffer.from(modelMessage!.data), 0)
          assert.strictEqual(read._tag, "Record")
          const record = (read as Extract<typeof read, { _tag: "Record" }>).record
          // Two daemons open the empty store at once: each proposes its own salt.
          const [r0, r1] = yield* Effect.all([replica(prefix, "d0", 0), replica(prefix, "d1", 1)], {
            concurrency: "unbounded",
          })
          yield* Effect.forEach([r0, r1], (daemon) => caughtUp(daemon, () => 0))
          const proposed = [r0.health().wal?.salt, r1.health().wal?.salt]
          // A racing daemon's batch takes position 1, with a salt of its own.
          const batch = encodeBatch(
            [{ type: record.type, payload: Buffer.from(record.payload) }],
            1,
            foreignSalt,
            recordHeaderBytes + record.payload.length,
          )
          yield* Effect.promise(() =>
            probe.jetstream.publish(subjectOf(prefix, "kv"), batch, { msgID: "racer.1", expect: { lastSequence: 0 } }),
          )
          const writes = yield* Effect.all(
            [r0.send({ _tag: "Put", key: "a", value: "0" }), r1.send({ _tag: "Put", key: "b", value: "1" })],
            { concurrency: "unbounded" },
          )
          const r2 = yield* replica(prefix, "d2", 2)
          const end = Math.max(r0.position(), r1.position())
          yield* Effect.forEach([r0, r1, r2], (daemon) => caughtUp(daemon, () => end))
          return {
            proposed,
            writes,
            salts: [r0, r1, r2].map((daemon) => daemon.health().wal?.salt),
            states: yield* Effect.forEach([r0, r1, r2], (daemon) => daemon.read(readAll)),
          }
        }),
      ).pipe(Effect.provideService(References.MinimumLogLevel, "None")),
    )
    assert.notStrictEqual(result.proposed[0], result.proposed[1], "each daemon proposed a salt of its own")
    assert.deepStrictEqual(result.writes, [{ changed: true }, { changed: true }])
    assert.deepStrictEqual(result.salts, [foreignSalt, foreignSalt, foreignSalt])
    for (const state of result.states) assert.deepStrictEqual(state, { first: "1", a: "0", b: "1" })
  }, 120_000)

  it("a compaction replaces the store's stream: the other replicas reload from the new one, a new replica starts from it, a compaction cut short after sealing is finished by the next", async () => {
    const prefix = `compact${Date.now() % 100_000}`
    const marker = `deleted-${Math.random().toString(36).slice(2, 12)}`
    const result = await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const r0 = yield* replica(prefix, "d0", 0)
          const r1 = yield* replica(prefix, "d1", 1)
          yield* r0.send({ _tag: "Put", key: "a", value: "1" })
          yield* r0.send({ _tag: "Put", key: "secret", value: marker })
          // Decided on r1's state: a delete of a key it has not applied yet would be a no-op there.
          yield* caughtUp(r1, () => r0.position())
          yield* r1.send({ _tag: "Delete", key: "secret" })
          yield* r1
            .send({ _tag: "Put", key: "b", value: "2" })
            .pipe(Effect.retry({ times: 20, schedule: Schedule.spaced("50 millis") }))
          const first = yield* r0.compact().pipe(Effect.retry({ times: 20, schedule: Schedule.spaced("50 millis") }))
          // A compaction cut short after sealing: writes are refused (nothing stored), the next one finishes it.
          const nats = yield* Nats.makeNats({ servers: cluster.urls, prefix, daemonId: "probe" })
          const current = streamNameOf(prefix, "kv", 1)
          const info = yield* Effect.promise(() => nats.manager.streams.info(current))
          const sealedConfig = { ...info.config, sealed: true }
          yield* Effect.promise(() => nats.manager.streams.update(current, sealedConfig))
          const refusedWhileSealed = yield* Effect.exit(r1.send({ _tag: "Put", key: "c", value: "3" }))
          const second = yield* r1.compact()
          yield* r1.send({ _tag: "Put", key: "c", value: "3" })
          const r2 = yield* replica(prefix, "d2", 2)
          yield* caughtUp(r0, () => r1.position() % 2 ** 32)
          yield* caughtUp(r2, () => r1.position() % 2 ** 32)
          // What the streams hold now: every message of the current one.
          const newest = streamNameOf(prefix, "kv", 2)
          const last = (yield* Effect.promise(() => nats.manager.streams.info(newest))).state.last_seq
          const texts: Array<string> = []
          for (let seq = 1; seq <= last; seq++) {
            const message = yield* Effect.promise(() => nats.manager.streams.getMessage(newest, { seq }))
            texts.push(Buffer.from(message!.data).toString("latin1"))
          }
          return {
            first,
            second,
            refusedWhileSealed,
            generations: [r0, r1, r2].map((store) => store.health().wal?.generation),
            states: [yield* r0.read(readAll), yield* r1.read(readAll), yield* r2.read(readAll)],
            newestHoldsMarker: texts.some((text) => text.includes(marker)),
          }
        }),
      ).pipe(Effect.provideService(References.MinimumLogLevel, "None")),
    )
    assert.strictEqual(result.first.generation, 1)
    assert.strictEqual(result.second.generation, 2)
    assert.isTrue(Exit.isFailure(result.refusedWhileSealed), "a sealed stream takes no write")
    const refusal = Exit.isFailure(result.refusedWhileSealed)
      ? Cause.squash(result.refusedWhileSealed.cause)
      : undefined
    assert.include(String((refusal as StoreError | undefined)?.message), "sealed")
    assert.deepStrictEqual(result.generations, [2, 2, 2], "every replica serves the newest stream")
    for (const state of result.states) assert.deepStrictEqual(state, { a: "1", b: "2", c: "3" })
    assert.isFalse(result.newestHoldsMarker, "the new stream holds no deleted value")
  }, 180_000)
})

const outcome = (exit: Exit.Exit<unknown, StoreError | KvRejected>): unknown =>
  Exit.isSuccess(exit)
    ? { ok: exit.value }
    : {
        failed: (
          exit.cause.reasons.find((reason) => reason._tag === "Fail") as { error?: { message?: string } } | undefined
        )?.error?.message,
      }
