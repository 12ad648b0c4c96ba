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
import { Cause, Effect, Exit, Layer, References, type Scope } from "effect"
import fc from "fast-check"
import { defaultStoreOptions, makeStore, type Store } from "../../src/actors/StoreActor.ts"
import * as EventBus from "../../src/stores/EventBus.ts"
import { StoreError } from "../../src/stores/StoreError.ts"
import * as Nats from "../../src/stores/shared/Nats.ts"
import { jetStreamLogs } from "../../src/stores/wal/JetStreamWal.ts"
import { layerNode } from "../../src/stores/wal/WalFs.ts"
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
      const position = store.health().wal?.position ?? 0
      if (position >= last()) return
      // A write applies what arrived first; an idle replica applies it when woken.
      yield* Effect.sleep("10 millis")
    }
    const health = store.health()
    return yield* Effect.die(
      new Error(
        `replica stuck at ${health.wal?.position} of ${last()} (state ${health.state}${health.lastError ? `: ${health.lastError}` : ""})`,
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

  it("a store of a shared memory refuses compaction (its history is the stream), and keeps serving", async () => {
    const refused = await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const store = yield* replica(`compact${Date.now() % 100_000}`, "d0", 0)
          yield* store.send({ _tag: "Put", key: "a", value: "1" })
          const compacted = yield* Effect.exit(store.compact())
          const after = yield* store.send({ _tag: "Put", key: "b", value: "2" })
          return { compacted, after, state: yield* store.read(readAll) }
        }),
      ).pipe(Effect.provideService(References.MinimumLogLevel, "None")),
    )
    assert.isTrue(Exit.isFailure(refused.compacted))
    const error = Exit.isFailure(refused.compacted) ? Cause.squash(refused.compacted.cause) : undefined
    assert.instanceOf(error, StoreError)
    assert.strictEqual((error as StoreError).reason, "Unsupported")
    assert.deepStrictEqual(refused.state, { a: "1", b: "2" })
  }, 120_000)
})

const outcome = (exit: Exit.Exit<unknown, StoreError | KvRejected>): unknown =>
  Exit.isSuccess(exit)
    ? { ok: exit.value }
    : {
        failed: (
          exit.cause.reasons.find((reason) => reason._tag === "Fail") as { error?: { message?: string } } | undefined
        )?.error?.message,
      }
