/**
 * I/O faults under a running store, injected with the simulated disk's `failAfter`: a write, an
 * fdatasync, or a write failing with ENOSPC (`NoSpace`), once or persistently (until `clearFaults`).
 * A full disk is its own case: the store refuses writes and resumes by itself, it does not restart.
 *
 * Each test acknowledges writes first (enough to rotate and release WAL segments), then injects the
 * fault and sends more. It checks that the callers of a failed batch get a `StoreError` and never
 * a success, that no failed write is visible, that the actor restarts (`health().restarts`), that
 * no caller hangs, that every acknowledged write is still there (read back in place, and after a
 * clean shutdown, a power cut and a reopen), and that new writes succeed once the fault is gone.
 */

import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Layer, Option, References, Scope } from "effect"
import {
  defaultStoreOptions,
  makeStore,
  type Store as StoreHandle,
  type StoreOptions,
} from "../../src/actors/StoreActor.ts"
import * as EventBus from "../../src/stores/EventBus.ts"
import type { StoreError } from "../../src/stores/StoreError.ts"
import { segmentFileName } from "../../src/stores/wal/WalRecord.ts"
import { type KvCommand, type KvRejected, kvStore, readAll } from "../support/KvStore.ts"
import * as Sim from "../support/SimulatedDisk.ts"

// ---------------------------------------------------------------------------------------------
// Helpers

type KvStoreHandle = StoreHandle<KvCommand, { readonly changed: boolean }, KvRejected>

const storeLayer = (disk: Sim.SimulatedDisk) => Layer.merge(EventBus.layer, Sim.layer(disk))

/** LMDB lives on the real disk; on tmpfs when there is one, so its fsyncs stay cheap. */
const tempBase = existsSync("/dev/shm") ? "/dev/shm" : tmpdir()
const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tempBase, "mnemos-faults-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true })),
)

const optionsFor = (dir: string, overrides: Partial<StoreOptions> = {}): StoreOptions => ({
  ...defaultStoreOptions,
  dir,
  walSegmentBytesMax: 4096,
  checkpointRecordsInterval: 20,
  lmdbCommitIntervalMs: 1,
  restartBackoffMsBase: 1,
  restartBackoffMsMax: 5,
  failFastAfterRestarts: 3,
  ...overrides,
})

/** Restart warnings are the point of these tests; keep the output readable. */
const quiet = Effect.provideService(References.MinimumLogLevel, "None")

const put = (key: string, value = `v-${key}`): KvCommand => ({ _tag: "Put", key, value })
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i)

/** A guard against hangs: fails the test with a message instead of waiting for vitest's timeout. */
const guard = <A, E, R>(what: string, effect: Effect.Effect<A, E, R>) =>
  effect.pipe(
    Effect.timeoutOption("20 seconds"),
    Effect.flatMap((option) =>
      Option.isSome(option) ? Effect.succeed(option.value) : Effect.die(new Error(`hung: ${what}`)),
    ),
  )

/** Lets other fibers, timers and I/O callbacks run, without reading the clock. */
const tick = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))

/** Waits (yielding to the event loop) until `condition` holds. */
const waitUntil = (what: string, condition: () => boolean) =>
  Effect.gen(function* () {
    for (let i = 0; i < 200_000; i++) {
      if (condition()) return
      yield* tick
    }
    return yield* Effect.die(new Error(`condition never held: ${what}`))
  })

/** Waits in real time (the disk-full probe runs on a timer) until `condition` holds, at most 20 s. */
const waitFor = (what: string, condition: () => boolean) =>
  guard(
    what,
    Effect.gen(function* () {
      while (!condition()) yield* Effect.sleep("10 millis")
    }),
  )

interface Answer {
  readonly key: string
  readonly outcome: "ok" | StoreError["reason"] | "KvRejected" | "defect"
  readonly message: string
}

const answerOf = (key: string, exit: Exit.Exit<unknown, StoreError | KvRejected>): Answer => {
  if (Exit.isSuccess(exit)) return { key, outcome: "ok", message: "" }
  const failure = exit.cause.reasons.find((reason) => reason._tag === "Fail") as
    | { readonly error: StoreError | KvRejected }
    | undefined
  if (failure === undefined) return { key, outcome: "defect", message: String(exit.cause) }
  return {
    key,
    outcome: failure.error._tag === "StoreError" ? failure.error.reason : failure.error._tag,
    message: failure.error.message,
  }
}

type Store = KvStoreHandle

/** Sends `keys` concurrently (so batches form), each as a Put of `v-<key>`; never hangs. */
const sendAll = (store: Store, keys: ReadonlyArray<string>) =>
  guard(
    `sends of ${keys[0]}..`,
    Effect.forEach(keys, (key) => Effect.map(Effect.exit(store.send(put(key))), (exit) => answerOf(key, exit)), {
      concurrency: "unbounded",
    }),
  )

/** Sends `keys` one after another; never hangs. */
const sendEach = (store: Store, keys: ReadonlyArray<string>) =>
  guard(
    `sends of ${keys[0]}..`,
    Effect.forEach(keys, (key) => Effect.map(Effect.exit(store.send(put(key))), (exit) => answerOf(key, exit))),
  )

/** The first write of a test, acknowledged: `warm: "v-warm"`. */
const sendWarm = (store: Store) =>
  Effect.map(sendEach(store, ["warm"]), (answers) =>
    assert.deepStrictEqual(
      answers.map((answer) => answer.outcome),
      ["ok"],
    ),
  )

/** What a new store (a new process: it knows nothing of earlier failures) reads on `disk`. */
const stateAfterRestart = (disk: Sim.SimulatedDisk, options: StoreOptions) =>
  Effect.scoped(
    Effect.flatMap(makeStore(kvStore(), options), (store) => guard("read after restart", store.read(readAll))),
  ).pipe(Effect.provide(storeLayer(disk)))

const expectedState = (answers: ReadonlyArray<Answer>) =>
  Object.fromEntries(
    answers.filter((answer) => answer.outcome === "ok").map((answer) => [answer.key, `v-${answer.key}`]),
  )

/**
 * Acknowledges 45 writes (in concurrent groups: several checkpoints, segment rotations and releases),
 * then runs `body` with the store; afterwards shuts down cleanly, cuts the power, reopens on the
 * rebooted disk and checks that exactly `body`'s expected state is there.
 */
const withFaultedStore = (
  options: (dir: string) => StoreOptions,
  body: (
    store: Store,
    disk: Sim.SimulatedDisk,
    acked: Record<string, string>,
  ) => Effect.Effect<Record<string, string>, StoreError>,
) =>
  Effect.gen(function* () {
    const dir = yield* tempDir
    const disk = new Sim.SimulatedDisk({ seed: 11 })
    const expected = yield* Effect.scoped(
      Effect.gen(function* () {
        const store = yield* makeStore(kvStore(), options(dir))
        const warmup = [
          ...(yield* sendAll(
            store,
            range(0, 14).map((i) => `before-${i}`),
          )),
          ...(yield* sendAll(
            store,
            range(15, 29).map((i) => `before-${i}`),
          )),
          ...(yield* sendEach(
            store,
            range(30, 44).map((i) => `before-${i}`),
          )),
        ]
        assert.deepStrictEqual(
          warmup.filter((answer) => answer.outcome !== "ok"),
          [],
        )
        const acked = expectedState(warmup)
        assert.deepStrictEqual(yield* store.read(readAll), acked)
        assert.strictEqual(store.health().restarts, 0)
        // Checkpoints rotated the log and released its first segment.
        assert.notInclude(disk.files(), `${dir}/wal/${segmentFileName(1)}`)
        assert.isAtLeast(store.health().wal!.nextSeq, 46)
        return yield* body(store, disk, acked)
      }),
    ).pipe(Effect.provide(storeLayer(disk)))
    // Power loss after the clean shutdown, then a reopen: every acknowledged write is durable.
    const rebooted = disk.crash()
    const reopened = yield* Effect.scoped(
      Effect.gen(function* () {
        const store = yield* makeStore(kvStore(), options(dir))
        const state = yield* guard("read after reopen", store.read(readAll))
        return { state, health: store.health() }
      }),
    ).pipe(Effect.provide(storeLayer(rebooted)))
    assert.deepStrictEqual(reopened.state, expected)
    assert.strictEqual(reopened.health.state, "running")
    assert.isUndefined(reopened.health.recovery?.tornTail)
  }).pipe(quiet)

const faults = [
  { name: "a write fails", op: "write", kind: "Io" },
  { name: "an fdatasync fails", op: "fdatasync", kind: "Io" },
] as const

// ---------------------------------------------------------------------------------------------

describe("I/O faults on the simulated disk", () => {
  for (const fault of faults) {
    it.live(
      `${fault.name} once: its batch gets WriteFailed and is not applied, the actor restarts once, later writes succeed`,
      () =>
        withFaultedStore(optionsFor, (store, disk, acked) =>
          Effect.gen(function* () {
            disk.failAfter(0, { op: fault.op, kind: fault.kind })
            const during = yield* sendAll(
              store,
              range(0, 9).map((i) => `during-${i}`),
            )
            // The first batch (it holds the first command, the mailbox is FIFO) hit the fault.
            assert.strictEqual(during[0]!.outcome, "WriteFailed")
            for (const answer of during) assert.include(["ok", "WriteFailed"], answer.outcome, JSON.stringify(answer))
            for (const answer of during.filter((answer) => answer.outcome === "WriteFailed")) {
              assert.include(answer.message, `simulated ${fault.kind} fault`)
            }
            yield* waitUntil("the store runs again", () => store.health().state === "running")
            const health = store.health()
            assert.strictEqual(health.restarts, 1)
            assert.include(health.lastError ?? "", `simulated ${fault.kind} fault`)

            // Nothing acknowledged is lost; no failed write is visible.
            const expected = { ...acked, ...expectedState(during) }
            assert.deepStrictEqual(yield* store.read(readAll), expected)

            // The fault was one-shot: new writes succeed, without another restart.
            const after = yield* sendAll(
              store,
              range(0, 9).map((i) => `after-${i}`),
            )
            assert.deepStrictEqual(
              after.map((answer) => answer.outcome),
              after.map(() => "ok"),
            )
            const final = { ...expected, ...expectedState(after) }
            assert.deepStrictEqual(yield* store.read(readAll), final)
            assert.strictEqual(store.health().restarts, 1)
            return final
          }),
        ),
    )
  }

  for (const fault of faults) {
    it.live(
      `${fault.name} persistently: every caller gets a StoreError, none hangs, nothing is applied; after clearFaults writes succeed`,
      () =>
        withFaultedStore(optionsFor, (store, disk, acked) =>
          Effect.gen(function* () {
            disk.failAfter(0, { op: fault.op, kind: fault.kind, persistent: true })
            const concurrent = yield* sendAll(
              store,
              range(0, 9).map((i) => `during-${i}`),
            )
            const sequential = yield* sendEach(
              store,
              range(10, 14).map((i) => `during-${i}`),
            )
            const during = [...concurrent, ...sequential]
            // Never a success, never a hang, never anything but a store error.
            assert.deepStrictEqual(
              during.filter((answer) => answer.outcome !== "WriteFailed" && answer.outcome !== "Unavailable"),
              [],
            )
            assert.isAtLeast(store.health().restarts, 2)
            // A read while the fault lasts sees exactly the acknowledged state, or is refused.
            const read = yield* Effect.exit(guard("read under the fault", store.read(readAll)))
            if (Exit.isSuccess(read)) assert.deepStrictEqual(read.value, acked)
            else assert.strictEqual(answerOf("read", read).outcome, "Unavailable")

            disk.clearFaults()
            yield* waitUntil("the store runs again", () => store.health().state === "running")
            const after = yield* sendAll(
              store,
              range(0, 9).map((i) => `after-${i}`),
            )
            assert.deepStrictEqual(
              after.map((answer) => answer.outcome),
              after.map(() => "ok"),
            )
            const final = { ...acked, ...expectedState(after) }
            assert.deepStrictEqual(yield* store.read(readAll), final)
            return final
          }),
        ),
    )
  }

  it.live(
    "every disk operation failing persistently: waiting callers get Unavailable after failFastAfterRestarts, none hangs; clearFaults recovers",
    () =>
      withFaultedStore(optionsFor, (store, disk, acked) =>
        Effect.gen(function* () {
          disk.failAfter(0, { op: "any", persistent: true })
          const during = yield* sendAll(
            store,
            range(0, 9).map((i) => `during-${i}`),
          )
          // The failed batch could not be rolled back (the log cannot even be read): its callers are not
          // told it was not applied, only that its fate is decided when the store next opens.
          assert.strictEqual(during[0]!.outcome, "WriteFailed")
          assert.include(during[0]!.message, "whether it is applied is decided when the store next opens")
          assert.deepStrictEqual(
            during.filter((answer) => answer.outcome !== "WriteFailed" && answer.outcome !== "Unavailable"),
            [],
          )
          // Reopening fails too (the log cannot be read), so the store gives up waiting and fails fast.
          yield* waitUntil("the store is unavailable", () => store.health().state === "unavailable")
          assert.isAtLeast(store.health().restarts, 3)
          const refused = yield* sendEach(store, ["refused-0", "refused-1"])
          assert.deepStrictEqual(
            refused.map((answer) => answer.outcome),
            ["Unavailable", "Unavailable"],
          )
          assert.include(refused[0]!.message, "cannot reopen")

          disk.clearFaults()
          yield* waitUntil("the store runs again", () => store.health().state === "running")
          assert.deepStrictEqual(yield* store.read(readAll), acked)
          const after = yield* sendAll(
            store,
            range(0, 9).map((i) => `after-${i}`),
          )
          assert.deepStrictEqual(
            after.map((answer) => answer.outcome),
            after.map(() => "ok"),
          )
          const final = { ...acked, ...expectedState(after) }
          assert.deepStrictEqual(yield* store.read(readAll), final)
          return final
        }),
      ),
  )

  it.live(
    "a write fails with ENOSPC once: its batch gets DiskFull and is not applied; writes resume by themselves once the file system has room, after one restart",
    () =>
      withFaultedStore(optionsFor, (store, disk, acked) =>
        Effect.gen(function* () {
          disk.failAfter(0, { op: "write", kind: "NoSpace" })
          const during = yield* sendAll(
            store,
            range(0, 9).map((i) => `during-${i}`),
          )
          assert.strictEqual(during[0]!.outcome, "DiskFull")
          for (const answer of during) assert.include(["ok", "DiskFull"], answer.outcome, JSON.stringify(answer))
          assert.include(during[0]!.message, "is full")
          assert.include(during[0]!.message, "rolled back and not applied")
          // The file system reports room again (the fault was one-shot): the probe lets writes resume.
          yield* waitFor("writes resume", () => store.health().state === "running")
          const expected = { ...acked, ...expectedState(during) }
          assert.deepStrictEqual(yield* store.read(readAll), expected)
          const after = yield* sendAll(
            store,
            range(0, 9).map((i) => `after-${i}`),
          )
          assert.deepStrictEqual(
            after.map((answer) => answer.outcome),
            after.map(() => "ok"),
          )
          assert.strictEqual(store.health().restarts, 1)
          const final = { ...expected, ...expectedState(after) }
          assert.deepStrictEqual(yield* store.read(readAll), final)
          return final
        }),
      ),
  )

  // A full disk is not a defect to restart on: the store stays up, serves reads, refuses writes at
  // once with a clear error, and resumes by itself (docs/durability.md, "A full disk").
  it.live(
    "a disk that stays full: reads serve every acknowledged write, every write gets DiskFull at once without a restart loop, health says degraded; writes resume by themselves once space returns",
    () =>
      withFaultedStore(optionsFor, (store, disk, acked) =>
        Effect.gen(function* () {
          disk.failAfter(0, { op: "write", kind: "NoSpace", persistent: true })
          const concurrent = yield* sendAll(
            store,
            range(0, 9).map((i) => `during-${i}`),
          )
          const sequential = yield* sendEach(
            store,
            range(10, 19).map((i) => `during-${i}`),
          )
          const during = [...concurrent, ...sequential]
          assert.deepStrictEqual(
            during.filter((answer) => answer.outcome !== "DiskFull"),
            [],
          )
          for (const answer of during) assert.include(answer.message, "resume by themselves once space is freed")
          // Only the batch that met the full disk restarted the actor; the rest were refused up front.
          assert.strictEqual(store.health().restarts, 1)
          assert.strictEqual(store.health().state, "degraded")
          assert.include(store.health().lastError ?? "", "disk full")
          assert.deepStrictEqual(yield* store.read(readAll), acked)

          disk.clearFaults()
          yield* waitFor("writes resume", () => store.health().state === "running")
          const after = yield* sendAll(
            store,
            range(0, 9).map((i) => `after-${i}`),
          )
          assert.deepStrictEqual(
            after.map((answer) => answer.outcome),
            after.map(() => "ok"),
          )
          assert.strictEqual(store.health().restarts, 1)
          const final = { ...acked, ...expectedState(after) }
          assert.deepStrictEqual(yield* store.read(readAll), final)
          return final
        }),
      ),
  )

  // A batch whose durable write succeeded is answered before the checkpoint that follows it: a
  // failing rotation or release restarts the store but never turns that answer into a false one.
  for (const op of ["unlink", "fsync-dir"] as const) {
    it.live(
      `a failed ${op} in the checkpoint after a durable batch (WAL rotation or release): the answer matches what is applied`,
      () =>
        withFaultedStore(optionsFor, (store, disk, acked) =>
          Effect.gen(function* () {
            // Writes one at a time until the fault fires, at the next checkpoint (every 20 records).
            disk.failAfter(0, { op })
            const answers: Array<Answer> = []
            for (
              let i = 0;
              i < 25 && store.health().restarts === 0 && answers.every((answer) => answer.outcome === "ok");
              i++
            ) {
              answers.push(...(yield* sendEach(store, [`next-${i}`])))
            }
            yield* waitUntil(
              "the fault fired and the store runs again",
              () => store.health().restarts === 1 && store.health().state === "running",
            )
            // Every answer is true: a write is applied exactly when its caller was told it succeeded.
            const state = yield* store.read(readAll)
            const applied = answers.filter((answer) => state[answer.key] !== undefined)
            const wrong = answers
              .filter((answer) => (answer.outcome === "ok") !== (state[answer.key] !== undefined))
              .map(
                (answer) =>
                  `${answer.key} answered ${answer.outcome} ("${answer.message}") but ${state[answer.key] === undefined ? "not " : ""}applied`,
              )
            assert.deepStrictEqual(wrong, [], wrong.join("; "))
            assert.deepStrictEqual(state, { ...acked, ...expectedState(answers) })
            return { ...acked, ...Object.fromEntries(applied.map((answer) => [answer.key, `v-${answer.key}`])) }
          }),
        ),
    )
  }

  it.live(
    "a batch decided while the batch before it was being written is not failed with it: after that write fails and the actor restarts, it is decided again and succeeds",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        // Syncs wait for the event loop, so callers can send while a batch is on its way to the disk.
        const disk = new Sim.SimulatedDisk({ seed: 5, slowSyncs: true })
        yield* Effect.scoped(
          Effect.gen(function* () {
            const store = yield* makeStore(kvStore(), optionsFor(dir))
            yield* sendWarm(store)
            disk.failAfter(0, { op: "fdatasync" })
            const writesBefore = disk.stats.writes
            const first = yield* Effect.forkChild(sendEach(store, ["first"]))
            // Once "first" is written and waits for its sync, more callers send: the actor decides them
            // behind it, against its overlay, while the sync is pending.
            for (let i = 0; i < 10_000 && disk.stats.writes === writesBefore; i++) yield* Effect.yieldNow
            assert.strictEqual(disk.stats.writes, writesBefore + 1)
            const behind = yield* sendAll(
              store,
              range(0, 4).map((i) => `behind-${i}`),
            )
            const [firstAnswer] = yield* Fiber.join(first)
            // The sync of "first" failed: its caller is told so, truthfully (it is not applied) ...
            assert.strictEqual(firstAnswer!.outcome, "WriteFailed")
            // ... while the batch decided behind it never reached the disk and was served after the restart.
            assert.deepStrictEqual(
              behind.map((answer) => answer.outcome),
              behind.map(() => "ok"),
            )
            assert.strictEqual(store.health().restarts, 1)
            const state = yield* store.read(readAll)
            assert.deepStrictEqual(state, { warm: "v-warm", ...expectedState(behind) })
          }),
        ).pipe(Effect.provide(storeLayer(disk)))
      }).pipe(quiet),
  )

  // A failed fdatasync may still leave the batch's bytes whole in the file: only a cut of the log
  // makes "it was not applied" true for the next start, which knows nothing of the failure.
  it.live(
    "a write fails and the store shuts down while it waits to restart: its caller is told it was rolled back, and the next start does not apply it",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        const disk = new Sim.SimulatedDisk({ seed: 13 })
        const options = optionsFor(dir, { restartBackoffMsBase: 60_000, restartBackoffMsMax: 60_000 })
        const failed = yield* Effect.scoped(
          Effect.gen(function* () {
            const store = yield* makeStore(kvStore(), options)
            yield* sendWarm(store)
            // The write of "lost" reaches the file; its data sync fails.
            disk.failAfter(0, { op: "fdatasync" })
            const pending = yield* Effect.forkChild(sendEach(store, ["lost"]))
            yield* waitUntil("the store waits to restart", () => store.health().state === "restarting")
            return pending
          }),
        ).pipe(Effect.provide(storeLayer(disk)), Effect.flatMap(Fiber.join)) // the scope closes during the backoff
        assert.deepStrictEqual(
          failed.map((answer) => answer.outcome),
          ["WriteFailed"],
        )
        // The next start (a new process: no memory of the failure) on the same disk.
        const state = yield* stateAfterRestart(disk, options)
        assert.deepStrictEqual(state, { warm: "v-warm" })
        assert.include(failed[0]!.message, "rolled back; it was not applied")
      }).pipe(quiet),
  )

  it.live(
    "a write fails while the shutdown serves the mailbox: its callers are told it was rolled back, and the next start does not apply it",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        // Syncs wait for the event loop, so callers can send while a batch is on its way to the disk.
        const disk = new Sim.SimulatedDisk({ seed: 17, slowSyncs: true })
        const options = optionsFor(dir, { batchSplit: "never" })
        const answers = yield* Effect.gen(function* () {
          const scope = yield* Scope.make()
          const store = yield* makeStore(kvStore(), options).pipe(Effect.provideService(Scope.Scope, scope))
          yield* sendWarm(store)
          const writesBefore = disk.stats.writes
          const first = yield* Effect.forkChild(sendEach(store, ["first"]))
          for (let i = 0; i < 10_000 && disk.stats.writes === writesBefore; i++) yield* Effect.yieldNow
          assert.strictEqual(disk.stats.writes, writesBefore + 1)
          // "first" waits for its sync; the next sync (the batch the shutdown serves) fails.
          disk.failAfter(1, { op: "fdatasync" })
          const drained = yield* Effect.forkChild(sendAll(store, ["drained-0", "drained-1"]))
          yield* Effect.yieldNow
          yield* Scope.close(scope, Exit.void)
          return [...(yield* Fiber.join(first)), ...(yield* Fiber.join(drained))]
        }).pipe(Effect.provide(storeLayer(disk)))
        assert.deepStrictEqual(
          answers.map((answer) => answer.outcome),
          ["ok", "WriteFailed", "WriteFailed"],
        )
        const state = yield* stateAfterRestart(disk, options)
        assert.deepStrictEqual(state, { warm: "v-warm", first: "v-first" })
        assert.include(answers[1]!.message, "rolled back; it was not applied")
      }).pipe(quiet),
  )
})
