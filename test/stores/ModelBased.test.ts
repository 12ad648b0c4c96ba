/**
 * Model-based test of a store on the simulated disk (`fc.commands`): the real system is the KV store
 * (`test/support/KvStore.ts`) on a `SimulatedDisk`, the model a `Map`. Commands:
 *
 * - Put / Delete: one write; its reply (`changed`) must match the model.
 * - Burst: many concurrent puts, enough to cross `checkpointRecordsInterval` (LMDB commit and flush,
 *   WAL rotation and release), all acknowledged.
 * - Read: `store.read(readAll)` equals the model.
 * - Restart: clean shutdown (closing the store's scope) and a reopen on the same disk and directory.
 * - Crash: power loss while idle (`disk.crash()`), with the LMDB checkpoint rolled back to what it
 *   held when the power went (LMDB commits only at checkpoints here), then a reopen. The model is
 *   unchanged: every acknowledged write was fdatasynced, so it comes back (replayed from the WAL).
 * - CrashDuringBurst: the power goes at the k-th disk operation of a burst; then a reboot and a reopen.
 *   The model becomes exactly the acknowledged writes, plus the batch in flight only if it survived
 *   whole (it was not acknowledged, so either is allowed; half of it never is).
 *
 * Sectors are larger than a segment and segments rotate only at checkpoints here: torn multi-record
 * batches and multi-segment releases have their own tests in CrashSimulation.test.ts.
 *
 * Replay a failure with `MNEMOS_FC_SEED=<seed>` (printed at the start and by fast-check).
 */

import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { type Context, Effect, Exit, Layer, References, Scope } from "effect"
import fc from "fast-check"
import { defaultStoreOptions, makeStore, type Store, type StoreOptions } from "../../src/actors/StoreActor.ts"
import * as EventBus from "../../src/stores/EventBus.ts"
import type { StoreError } from "../../src/stores/StoreError.ts"
import type { WalFs } from "../../src/stores/wal/WalFs.ts"
import { type KvCommand, type KvRejected, kvStore, readAll } from "../support/KvStore.ts"
import * as Sim from "../support/SimulatedDisk.ts"

// ---------------------------------------------------------------------------------------------
// The real system

const seed = Number(process.env.MNEMOS_FC_SEED ?? Math.floor(Math.random() * 0x7fffffff))
console.log(`ModelBased fast-check seed: ${seed} (replay with MNEMOS_FC_SEED=${seed})`)

const tempBase = existsSync("/dev/shm") ? "/dev/shm" : tmpdir()
const sectorBytes = 64 * 1024

type KvStoreHandle = Store<KvCommand, { readonly changed: boolean }, KvRejected>

const optionsFor = (dir: string): StoreOptions => ({
  ...defaultStoreOptions,
  dir,
  walSegmentBytesMax: 16 * 1024,
  checkpointRecordsInterval: 20,
  // LMDB commits only when a checkpoint (or shutdown) drains the queue; reads in between go
  // through the pending view, and a crash finds LMDB at its last checkpoint.
  lmdbCommitIntervalMs: 60_000,
  restartBackoffMsBase: 1,
  restartBackoffMsMax: 5,
  failFastAfterRestarts: 3,
})

const quiet = Effect.provideService(References.MinimumLogLevel, "None")

class Real {
  disk = new Sim.SimulatedDisk({ seed, sectorBytes })
  private scope: Scope.Closeable | undefined
  private current: KvStoreHandle | undefined
  /** Counts of what happened, for the coverage report. */
  readonly seen = { restarts: 0, crashes: 0, crashesDuringBurst: 0, inFlightKept: 0, replayed: 0 }

  constructor(readonly dir: string) {}

  get store(): KvStoreHandle {
    if (this.current === undefined) throw new Error("the store is not open")
    return this.current
  }

  /** Runs a store effect; a failure rejects (and fails the test) with the store's error. */
  run<A>(effect: Effect.Effect<A, StoreError | KvRejected>): Promise<A> {
    return Effect.runPromise(effect)
  }

  async open(): Promise<void> {
    const scope = await Effect.runPromise(Scope.make())
    const context: Context.Context<EventBus.EventBus | WalFs> = await Effect.runPromise(
      Layer.buildWithScope(Layer.merge(EventBus.layer, Sim.layer(this.disk)), scope),
    )
    this.current = await Effect.runPromise(
      makeStore(kvStore(), optionsFor(this.dir)).pipe(Scope.provide(scope), Effect.provideContext(context), quiet),
    )
    this.scope = scope
    // Wait for the first incarnation (recovery done) before the next command looks at health().
    await this.run(this.store.read(() => undefined))
  }

  async close(): Promise<void> {
    const scope = this.scope
    this.scope = undefined
    this.current = undefined
    if (scope !== undefined) await Effect.runPromise(Scope.close(scope, Exit.void))
  }

  /** Copies LMDB's data file as it is now (LMDB is idle between checkpoints here). */
  snapshotCheckpoint(): string {
    const copy = join(this.dir, `checkpoint-snapshot.mdb`)
    copyFileSync(join(this.dir, "lmdb", "data.mdb"), copy)
    return copy
  }

  /** Puts a snapshot back as LMDB's data (the store must be closed). */
  restoreCheckpoint(copy: string): void {
    rmSync(join(this.dir, "lmdb"), { recursive: true, force: true })
    mkdirSync(join(this.dir, "lmdb"))
    copyFileSync(copy, join(this.dir, "lmdb", "data.mdb"))
    rmSync(copy)
  }
}

// ---------------------------------------------------------------------------------------------
// The model and the commands

interface Model {
  readonly state: Map<string, string>
}

const stateOf = (model: Model) => Object.fromEntries([...model.state].sort(([a], [b]) => (a < b ? -1 : 1)))
const canonical = (state: Record<string, string>) =>
  JSON.stringify(Object.entries(state).sort(([a], [b]) => (a < b ? -1 : 1)))

type Cmd = fc.AsyncCommand<Model, Real>

class Put implements Cmd {
  constructor(
    readonly key: string,
    readonly value: string,
  ) {}
  check = () => true
  async run(model: Model, real: Real) {
    const reply = await real.run(real.store.send({ _tag: "Put", key: this.key, value: this.value }))
    assert.deepStrictEqual(reply, { changed: model.state.get(this.key) !== this.value }, this.toString())
    model.state.set(this.key, this.value)
  }
  toString = () => `Put(${this.key}=${this.value})`
}

class Delete implements Cmd {
  constructor(readonly key: string) {}
  check = () => true
  async run(model: Model, real: Real) {
    const reply = await real.run(real.store.send({ _tag: "Delete", key: this.key }))
    assert.deepStrictEqual(reply, { changed: model.state.has(this.key) }, this.toString())
    model.state.delete(this.key)
  }
  toString = () => `Delete(${this.key})`
}

/** Puts of `count` distinct keys, sent concurrently: batches of several commands, at least one checkpoint. */
class Burst implements Cmd {
  constructor(
    readonly count: number,
    readonly tag: number,
  ) {}
  check = () => true
  keys = () => Array.from({ length: this.count }, (_, i) => `b${i}`)
  async run(model: Model, real: Real) {
    const replies = await real.run(
      Effect.forEach(this.keys(), (key) => real.store.send({ _tag: "Put", key, value: `${this.tag}` }), {
        concurrency: "unbounded",
      }),
    )
    assert.deepStrictEqual(
      replies,
      this.keys().map((key) => ({ changed: model.state.get(key) !== `${this.tag}` })),
      this.toString(),
    )
    for (const key of this.keys()) model.state.set(key, `${this.tag}`)
    // The burst crossed the checkpoint interval: the log was rotated and released behind it.
    const wal = real.store.health().wal!
    assert.isAtMost(wal.segments, 2, `WAL segments after a burst: ${JSON.stringify(wal)}`)
  }
  toString = () => `Burst(${this.count} puts = ${this.tag})`
}

class Read implements Cmd {
  check = () => true
  async run(model: Model, real: Real) {
    assert.deepStrictEqual(await real.run(real.store.read(readAll)), stateOf(model))
  }
  toString = () => "Read"
}

/** The store's last sequence must survive a restart exactly: nothing lost, nothing invented. */
const lastSeqOf = (real: Real) => real.store.health().wal!.nextSeq - 1

const checkReopened = async (real: Real, model: Model, lastSeq: number, what: string) => {
  const health = real.store.health()
  assert.strictEqual(health.state, "running", what)
  assert.strictEqual(health.restarts, 0, what)
  assert.strictEqual(health.recovery?.lastSeq, lastSeq, `${what}: recovery ${JSON.stringify(health.recovery)}`)
  assert.isUndefined(health.recovery?.tornTail, what)
  assert.deepStrictEqual(await real.run(real.store.read(readAll)), stateOf(model), what)
}

class Restart implements Cmd {
  check = () => true
  async run(model: Model, real: Real) {
    const lastSeq = lastSeqOf(real)
    await real.close()
    await real.open()
    real.seen.restarts++
    await checkReopened(real, model, lastSeq, this.toString())
  }
  toString = () => "Restart(clean)"
}

class Crash implements Cmd {
  check = () => true
  async run(model: Model, real: Real) {
    const lastSeq = lastSeqOf(real)
    const appliedBefore = real.store.health().appliedSeq
    // The power goes now: the disk keeps what was durable, LMDB what it had committed.
    const snapshot = real.snapshotCheckpoint()
    const rebooted = real.disk.crash()
    await real.close()
    real.restoreCheckpoint(snapshot)
    real.disk = rebooted
    await real.open()
    real.seen.crashes++
    const health = real.store.health()
    // LMDB was behind: the acknowledged records after its checkpoint came back from the WAL.
    assert.strictEqual(
      health.recovery?.records,
      lastSeq - appliedBefore,
      `replayed records: ${JSON.stringify(health.recovery)}`,
    )
    real.seen.replayed += health.recovery?.records ?? 0
    await checkReopened(real, model, lastSeq, this.toString())
  }
  toString = () => "Crash(idle)"
}

class CrashDuringBurst implements Cmd {
  constructor(
    readonly crashAt: number,
    readonly count: number,
    readonly tag: number,
  ) {}
  check = () => true
  async run(model: Model, real: Real) {
    const keys = Array.from({ length: this.count }, (_, i) => `c${i}`)
    const value = `${this.tag}`
    real.disk.crashAfter(this.crashAt)
    const exits = await Effect.runPromise(
      Effect.forEach(keys, (key) => Effect.exit(real.store.send({ _tag: "Put", key, value })), {
        concurrency: "unbounded",
      }),
    )
    const outcomes = exits.map((exit) => {
      if (Exit.isSuccess(exit)) return "ok"
      const failure = exit.cause.reasons.find((reason) => reason._tag === "Fail") as
        | { readonly error: StoreError | KvRejected }
        | undefined
      return failure?.error._tag === "StoreError" ? failure.error.reason : String(exit.cause)
    })
    for (const outcome of outcomes) assert.include(["ok", "WriteFailed", "Unavailable"], outcome, this.toString())
    const rebooted = real.disk.crash()
    await real.close()
    real.disk = rebooted
    await real.open()
    real.seen.crashesDuringBurst++
    const recovered = await real.run(real.store.read(readAll))
    const acked = new Map(model.state)
    for (const [i, key] of keys.entries()) if (outcomes[i] === "ok") acked.set(key, value)
    const withBatch = new Map(acked)
    for (const [i, key] of keys.entries()) if (outcomes[i] === "WriteFailed") withBatch.set(key, value)
    const kept = canonical(recovered) === canonical(stateOf({ state: withBatch }))
    assert.isTrue(
      kept || canonical(recovered) === canonical(stateOf({ state: acked })),
      `${this.toString()}: outcomes ${JSON.stringify(outcomes)}, recovered ${JSON.stringify(recovered)}, model ${JSON.stringify(stateOf(model))}`,
    )
    if (kept && outcomes.includes("WriteFailed")) real.seen.inFlightKept++
    // From now on the model is exactly what survived: every acknowledged write (and the whole batch, if kept).
    model.state.clear()
    for (const [key, v] of kept ? withBatch : acked) model.state.set(key, v)
    const health = real.store.health()
    assert.strictEqual(health.state, "running")
    assert.strictEqual(health.restarts, 0)
  }
  toString = () => `CrashDuringBurst(power cut at op ${this.crashAt}, ${this.count} puts = ${this.tag})`
}

const keyArb = fc.constantFrom("a", "b", "c", "b1", "c2")
const commandArbs: Array<fc.Arbitrary<Cmd>> = [
  fc.tuple(keyArb, fc.nat({ max: 99 })).map(([key, n]) => new Put(key, `p${n}`)),
  keyArb.map((key) => new Delete(key)),
  fc.tuple(fc.integer({ min: 20, max: 45 }), fc.nat({ max: 999 })).map(([count, tag]) => new Burst(count, tag)),
  fc.constant(new Read()),
  fc.constant(new Restart()),
  fc.constant(new Crash()),
  fc
    .tuple(fc.nat({ max: 24 }), fc.integer({ min: 3, max: 30 }), fc.nat({ max: 999 }))
    .map(([crashAt, count, tag]) => new CrashDuringBurst(crashAt, count, tag)),
]

// ---------------------------------------------------------------------------------------------

describe("model-based: the store on the simulated disk against a Map", () => {
  it("puts, deletes, checkpoint bursts, reads, clean restarts and crashes agree with the model", async () => {
    const totals = { runs: 0, restarts: 0, crashes: 0, crashesDuringBurst: 0, inFlightKept: 0, replayed: 0 }
    await fc.assert(
      fc.asyncProperty(fc.commands(commandArbs, { maxCommands: 30, size: "large" }), async (commands) => {
        const dir = mkdtempSync(join(tempBase, "mnemos-model-"))
        const real = new Real(dir)
        try {
          await real.open()
          const model: Model = { state: new Map() }
          await fc.asyncModelRun(() => ({ model, real }), commands)
          // Whatever the sequence, a final read agrees with the model.
          await new Read().run(model, real)
        } finally {
          await real.close()
          rmSync(dir, { recursive: true, force: true })
        }
        totals.runs++
        for (const key of Object.keys(real.seen) as Array<keyof Real["seen"]>) totals[key] += real.seen[key]
      }),
      { numRuns: Number(process.env.MNEMOS_FC_RUNS ?? 60), seed, endOnFailure: true },
    )
    console.log(`ModelBased coverage: ${JSON.stringify(totals)}`)
    assert.isAbove(totals.restarts, 0)
    assert.isAbove(totals.crashes, 0)
    assert.isAbove(totals.crashesDuringBurst, 0)
    assert.isAbove(totals.replayed, 0)
  })
})
