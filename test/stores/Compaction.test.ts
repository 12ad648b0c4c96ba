/**
 * Compaction: deleted means gone. After deletes and a compaction, no deleted value is left in any file
 * of the store (log segments, LMDB), every live value reads back (also after a reopen), a retried
 * command applied before the compaction is not applied again, and a power cut at any point of a
 * compaction loses no acknowledged live record (on the simulated disk, with the power cut at every
 * disk operation of the compaction and after every step of it).
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Layer, Option, References } from "effect"
import fc from "fast-check"
import { defaultStoreOptions, makeStore, type Store, type StoreOptions } from "../../src/actors/StoreActor.ts"
import * as EventBus from "../../src/stores/EventBus.ts"
import type { StoreError } from "../../src/stores/StoreError.ts"
import type { CompactionStep } from "../../src/stores/StoreKernel.ts"
import { layerNode } from "../../src/stores/wal/WalFs.ts"
import { type KvCommand, type KvRejected, kvStore, readAll } from "../support/KvStore.ts"
import * as Sim from "../support/SimulatedDisk.ts"

const seed = Number(process.env.MNEMOS_FC_SEED ?? Math.floor(Math.random() * 0x7fffffff))
console.log(`Compaction fast-check seed: ${seed} (replay with MNEMOS_FC_SEED=${seed})`)
const runs = Number(process.env.MNEMOS_FC_RUNS ?? 6)

const tempBase = existsSync("/dev/shm") ? "/dev/shm" : tmpdir()
const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tempBase, "mnemos-compact-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true })),
)

const optionsFor = (dir: string, overrides: Partial<StoreOptions> = {}): StoreOptions => ({
  ...defaultStoreOptions,
  dir,
  walSegmentBytesMax: 64 * 1024,
  walPreallocateBytes: 0,
  checkpointRecordsInterval: 50,
  lmdbCommitIntervalMs: 1,
  restartBackoffMsBase: 1,
  restartBackoffMsMax: 5,
  failFastAfterRestarts: 3,
  ...overrides,
})

const quiet = Effect.provideService(References.MinimumLogLevel, "None")

const guard = <A, E, R>(what: string, effect: Effect.Effect<A, E, R>) =>
  effect.pipe(
    Effect.timeoutOption("30 seconds"),
    Effect.flatMap((option) =>
      Option.isSome(option) ? Effect.succeed(option.value) : Effect.die(new Error(`hung: ${what}`)),
    ),
  )

/** Every file under `dir`, with its bytes. */
const filesUnder = (dir: string): Array<{ path: string; bytes: Buffer }> =>
  readdirSync(dir, { recursive: true, encoding: "utf8" })
    .map((name) => join(dir, name))
    .filter((path) => statSync(path).isFile())
    .map((path) => ({ path, bytes: readFileSync(path) }))

/** The files of `dir` that hold `marker`. */
const filesHolding = (dir: string, marker: string): Array<string> =>
  filesUnder(dir)
    .filter(({ bytes }) => bytes.includes(marker))
    .map(({ path }) => path)

const put = (key: string, value: string): KvCommand => ({ _tag: "Put", key, value })
const secretOf = (i: number) => `deleted-secret-${i}-${"s".repeat(40)}`
const keepOf = (i: number) => `kept-value-${i}-${"k".repeat(40)}`

describe("compaction", () => {
  it.live(
    "after deletes and a compaction, no deleted value is in any file of the store; live values read back, also after a reopen",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        const options = optionsFor(dir)
        const count = 120
        const live = yield* Effect.scoped(
          Effect.gen(function* () {
            const store = yield* makeStore(kvStore(), options)
            for (let i = 0; i < count; i++) {
              yield* store.send(put(`secret-${i}`, secretOf(i)))
              yield* store.send(put(`kept-${i}`, keepOf(i)))
              // Overwritten values are deleted data too.
              yield* store.send(put(`rewritten-${i}`, `old-${secretOf(i)}`))
              yield* store.send(put(`rewritten-${i}`, keepOf(i)))
            }
            for (let i = 0; i < count; i++) yield* store.send({ _tag: "Delete", key: `secret-${i}` })
            // Wait for LMDB, so the old pages are in its file before the compaction (as they are in life).
            yield* Effect.sleep("50 millis")
            // The test can fail: before the compaction, deleted values are on disk (in LMDB's freed pages,
            // in log segments not released yet).
            const secrets = Array.from({ length: count }, (_, i) => secretOf(i))
            const onDiskBefore = secrets.filter((secret) => filesHolding(dir, secret).length > 0)
            assert.isAbove(onDiskBefore.length, 0, "deleted values are on disk before compacting")
            const report = yield* store.compact()
            assert.strictEqual(report.keys, 2 * count)
            for (const secret of secrets) {
              assert.deepStrictEqual(filesHolding(dir, secret), [], `deleted value ${secret}`)
              assert.deepStrictEqual(filesHolding(dir, `old-${secret}`), [], `overwritten value ${secret}`)
            }
            const state = yield* store.read(readAll)
            // Writes go on after a compaction.
            yield* store.send(put("after", "compaction"))
            return { ...state, after: "compaction" }
          }),
        )
        const expected: Record<string, string> = { after: "compaction" }
        for (let i = 0; i < count; i++) {
          expected[`kept-${i}`] = keepOf(i)
          expected[`rewritten-${i}`] = keepOf(i)
        }
        assert.deepStrictEqual(live, expected)
        const reopened = yield* Effect.scoped(
          Effect.flatMap(makeStore(kvStore(), options), (store) => store.read(readAll)),
        )
        assert.deepStrictEqual(reopened, expected)
        for (let i = 0; i < count; i += 17) assert.deepStrictEqual(filesHolding(dir, secretOf(i)), [])
      }).pipe(Effect.scoped, Effect.provide(Layer.merge(EventBus.layer, layerNode)), quiet),
  )

  it.live("a compaction keeps each value as the store's compactValue keeps it, in every file", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const definition = {
        ...kvStore(),
        compactValue: (key: string, value: unknown) =>
          key.startsWith("kv:old-") ? { ...(value as { at: number }), value: "scrubbed" } : value,
      }
      const state = yield* Effect.scoped(
        Effect.gen(function* () {
          const store = yield* makeStore(definition, optionsFor(dir))
          for (let i = 0; i < 20; i++) {
            yield* store.send(put(`old-${i}`, secretOf(i)))
            yield* store.send(put(`kept-${i}`, keepOf(i)))
          }
          yield* store.compact()
          for (let i = 0; i < 20; i++) assert.deepStrictEqual(filesHolding(dir, secretOf(i)), [], `value ${i}`)
          return yield* store.read(readAll)
        }),
      )
      const expected: Record<string, string> = {}
      for (let i = 0; i < 20; i++) {
        expected[`old-${i}`] = "scrubbed"
        expected[`kept-${i}`] = keepOf(i)
      }
      assert.deepStrictEqual(state, expected)
      const reopened = yield* Effect.scoped(
        Effect.flatMap(makeStore(definition, optionsFor(dir)), (s) => s.read(readAll)),
      )
      assert.deepStrictEqual(reopened, expected)
    }).pipe(Effect.scoped, Effect.provide(Layer.merge(EventBus.layer, layerNode)), quiet),
  )

  it.live(
    "a read made while a compaction has closed the store's LMDB waits for the new one and reads the compacted state",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        let read: Fiber.Fiber<Record<string, string>, StoreError> | undefined
        let store: Store<KvCommand, { readonly changed: boolean }, KvRejected> | undefined
        store = yield* makeStore(
          kvStore(),
          optionsFor(dir, {
            // Between closing the old LMDB and opening the new one: a client's read arrives.
            onCompactionStep: (step) =>
              step === "closed" && store !== undefined
                ? Effect.asVoid(
                    Effect.tap(Effect.forkDetach(store.read(readAll)), (fiber) => Effect.sync(() => (read = fiber))),
                  )
                : Effect.void,
          }),
        )
        yield* store.send(put("kept", "1"))
        yield* store.send(put("gone", "2"))
        yield* store.send({ _tag: "Delete", key: "gone" })
        yield* store.compact()
        assert.isDefined(read, "the read was made while LMDB was closed")
        assert.deepStrictEqual(yield* Fiber.join(read!), { kept: "1" })
      }).pipe(Effect.scoped, Effect.provide(Layer.merge(EventBus.layer, layerNode)), quiet),
  )

  it.live(
    "a command retried after a compaction is not applied again: its reply was dropped, so it is refused with ReplyWithheld",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        const store = yield* makeStore(kvStore(), optionsFor(dir))
        const first = yield* store.send(put("k", "first"), { idempotencyKey: "client:1" })
        assert.deepStrictEqual(first, { changed: true })
        // The same key before the compaction: the first reply.
        assert.deepStrictEqual(yield* store.send(put("k", "first"), { idempotencyKey: "client:1" }), first)
        yield* store.send(put("k", "second"))
        yield* store.compact()
        const retried = yield* Effect.exit(store.send(put("k", "first"), { idempotencyKey: "client:1" }))
        assert.isTrue(Exit.isFailure(retried))
        if (Exit.isFailure(retried)) {
          const error = retried.cause.reasons.find((reason) => reason._tag === "Fail") as
            | { readonly error: StoreError }
            | undefined
          assert.strictEqual(error?.error.reason, "ReplyWithheld")
        }
        assert.deepStrictEqual(yield* store.read(readAll), { k: "second" })
      }).pipe(Effect.scoped, Effect.provide(Layer.merge(EventBus.layer, layerNode)), quiet),
  )

  it("a power cut at any disk operation or step of a compaction loses no acknowledged live record, and a compaction that finished left no deleted value", async () => {
    const steps: ReadonlyArray<CompactionStep> = [
      "checkpointed",
      "snapshot-written",
      "closed",
      "checkpoint-removed",
      "reloaded",
    ]
    const coverage = { workloads: 0, crashPoints: 0, rebuiltFromSnapshot: 0, compactedBeforeCrash: 0 }
    const workloadArb = fc.array(
      fc.oneof(
        {
          weight: 3,
          arbitrary: fc.constantFrom("a", "b", "c", "d", "e").map((key) => ({ _tag: "Put" as const, key })),
        },
        {
          weight: 2,
          arbitrary: fc.constantFrom("a", "b", "c", "d", "e").map((key) => ({ _tag: "Delete" as const, key })),
        },
      ),
      { minLength: 1, maxLength: 16 },
    )
    await fc.assert(
      fc.asyncProperty(workloadArb, fc.integer({ min: 1, max: 0x7fffffff }), async (shapes, diskSeed) => {
        const commands = shapes.map(
          (shape, i): KvCommand => (shape._tag === "Put" ? put(shape.key, `v${i}-${"x".repeat(60)}`) : shape),
        )
        const model = new Map<string, string>()
        for (const command of commands) {
          if (command._tag === "Put") model.set(command.key, command.value)
          else if (command._tag === "Delete") model.delete(command.key)
        }
        const expected = Object.fromEntries([...model].sort(([a], [b]) => (a < b ? -1 : 1)))
        const deletedValues = commands.flatMap((command) =>
          command._tag === "Put" && model.get(command.key) !== command.value ? [command.value] : [],
        )

        /** Runs the workload, then a compaction with the power cut at `cut`; reboots and reopens. */
        const run = (cut: { readonly op?: number; readonly step?: CompactionStep }) =>
          Effect.gen(function* () {
            const dir = yield* tempDir
            const disk = new Sim.SimulatedDisk({ seed: diskSeed })
            const onCompactionStep = (step: CompactionStep) =>
              Effect.sync(() => {
                if (step === cut.step) disk.crashAfter(0)
              })
            const options = optionsFor(dir, { onCompactionStep })
            const first = yield* Effect.scoped(
              Effect.gen(function* () {
                const store = yield* makeStore(kvStore(), options)
                for (const command of commands) yield* guard("a write", store.send(command))
                const opsBefore = disk.opCount
                if (cut.op !== undefined) disk.crashAfter(cut.op)
                const compacted = yield* Effect.exit(guard("the compaction", store.compact()))
                return { compactOps: disk.opCount - opsBefore, compacted: Exit.isSuccess(compacted) }
              }),
            ).pipe(Effect.provide(Layer.merge(EventBus.layer, Sim.layer(disk))))
            const rebooted = disk.crash()
            const second = yield* Effect.scoped(
              Effect.gen(function* () {
                const store = yield* makeStore(kvStore(), optionsFor(dir))
                const recovered = yield* guard("a read after the reboot", store.read(readAll))
                return { recovered, rebuilt: store.health().recovery?.snapshot !== undefined }
              }),
            ).pipe(Effect.provide(Layer.merge(EventBus.layer, Sim.layer(rebooted))))
            const deletedLeft = deletedValues.filter(
              (value) =>
                filesHolding(dir, value).length > 0 ||
                rebooted
                  .files()
                  .some((path) => Buffer.from(rebooted.readWritten(path) ?? new Uint8Array()).includes(value)),
            )
            return { ...first, ...second, deletedLeft }
          }).pipe(Effect.scoped, quiet)

        coverage.workloads++
        const reference = await Effect.runPromise(run({}))
        assert.isTrue(reference.compacted)
        assert.deepStrictEqual(reference.recovered, expected)
        assert.deepStrictEqual(reference.deletedLeft, [], "a finished compaction leaves no deleted value")
        const cuts = [
          ...Array.from({ length: reference.compactOps }, (_, op) => ({ op })),
          ...steps.map((step) => ({ step })),
        ]
        for (const cut of cuts) {
          coverage.crashPoints++
          const result = await Effect.runPromise(run(cut))
          assert.deepStrictEqual(result.recovered, expected, `power cut at ${JSON.stringify(cut)}`)
          if (result.rebuilt) coverage.rebuiltFromSnapshot++
          if (result.compacted) coverage.compactedBeforeCrash++
        }
      }),
      { numRuns: runs, seed },
    )
    console.log(`Compaction crash coverage: ${JSON.stringify(coverage)}`)
    assert.isAbove(coverage.rebuiltFromSnapshot, 0, "some power cuts fell after the snapshot, before LMDB had it")
  }, 600_000)
})
