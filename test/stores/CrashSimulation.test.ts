/**
 * Power loss at every disk operation, on the simulated disk (`test/support/SimulatedDisk.ts`).
 *
 * - Crash points: a random workload of Put/Delete commands, sent in concurrent groups so the actor
 *   forms batches of several commands, is run once to count the disk operations it makes; then, for
 *   EVERY operation index k, it is run again on a fresh disk with the power cut at operation k, the
 *   disk is rebooted (`crash()`, which keeps what was durable and tears the rest per sector) and the
 *   store is reopened. The recovered state must be the model after every acknowledged command, plus
 *   possibly the whole batch that was in flight when the power went, never part of it, and nothing
 *   after it; the reopened store must run and take new writes. Run twice: with sectors larger than a
 *   segment (a write survives whole or is cut short), and with 512-byte sectors and tiny segments.
 * - A flipped byte anywhere in a durable log but its last record (a batch of one): the store refuses
 *   with `Corrupt` naming the segment, and not a byte of the log changes. Also in segment headers.
 * - A write torn by the power cut (one record, or a batch of several, across sectors): the store
 *   opens, reports exactly the torn tail it cut off, and keeps every acknowledged write.
 * - A power cut while several released segments wait for their directory sync: the log reopens.
 *
 * Four of these fail on the current src/ (three bugs, reported with proposed fixes): the 512-byte-sector
 * property and the torn multi-record batch (recovery calls a torn final batch corruption), the
 * released-segments test (removals made durable in any order leave a sequence gap), and the
 * last-segment header flip (the segment is deleted as a "torn header", acknowledged records with it).
 *
 * The WAL lives on the simulated disk, the LMDB checkpoint on the real one (a fresh temp directory
 * per run). LMDB only ever holds acknowledged changes, all of which are durable in the WAL, so
 * reopening the same LMDB directory with the rebooted WAL image models a machine's power loss.
 *
 * Replay a failure with `MNEMOS_FC_SEED=<seed printed at the start / by fast-check>`.
 */

import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer, Option, PubSub, References } from "effect"
import fc from "fast-check"
import { defaultStoreOptions, makeStore, type StoreHealth, type StoreOptions } from "../../src/actors/StoreActor.ts"
import * as EventBus from "../../src/stores/EventBus.ts"
import type { StoreError } from "../../src/stores/StoreError.ts"
import {
  batchEndFlag,
  decodeSegmentHeader,
  parseSegmentFileName,
  readRecordAt,
  segmentFileName,
  segmentHeaderBytes,
} from "../../src/stores/wal/WalRecord.ts"
import { type KvCommand, type KvRejected, kvStore, readAll } from "../support/KvStore.ts"
import * as Sim from "../support/SimulatedDisk.ts"

// ---------------------------------------------------------------------------------------------
// Helpers

const seed = Number(process.env.MNEMOS_FC_SEED ?? Math.floor(Math.random() * 0x7fffffff))
console.log(`CrashSimulation fast-check seed: ${seed} (replay with MNEMOS_FC_SEED=${seed})`)

const storeLayer = (disk: Sim.SimulatedDisk) => Layer.merge(EventBus.layer, Sim.layer(disk))

/** On tmpfs when there is one: LMDB's fsyncs are real and would dominate the runtime. */
const tempBase = existsSync("/dev/shm") ? "/dev/shm" : tmpdir()

/** A fresh real directory for the LMDB checkpoint; the WAL goes to `${dir}/wal` on the simulated disk. */
const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tempBase, "mnemos-crash-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true })),
)

/** Small segments and a small checkpoint interval, so a short workload rotates and releases segments. */
const optionsFor = (dir: string, overrides: Partial<StoreOptions> = {}): StoreOptions => ({
  ...defaultStoreOptions,
  dir,
  walSegmentBytesMax: 256,
  // The damage tests below locate records by the end of the file; the power-cut test with
  // whole-sector writes runs with preallocated (zero-filled) segments.
  walPreallocateBytes: 0,
  checkpointRecordsInterval: 6,
  batchCommandsMax: 3,
  lmdbCommitIntervalMs: 1,
  restartBackoffMsBase: 1,
  restartBackoffMsMax: 5,
  failFastAfterRestarts: 3,
  ...overrides,
})

/** The restart warnings of crashed stores are expected; keep the output readable. */
const quiet = Effect.provideService(References.MinimumLogLevel, "None")

/** A guard against hangs: fails with a message instead of waiting for vitest's timeout. */
const guard = <A, E, R>(what: string, effect: Effect.Effect<A, E, R>) =>
  effect.pipe(
    Effect.timeoutOption("20 seconds"),
    Effect.flatMap((option) =>
      Option.isSome(option) ? Effect.succeed(option.value) : Effect.die(new Error(`hung: ${what}`)),
    ),
  )

type Outcome = "ok" | StoreError["reason"] | "KvRejected" | `defect: ${string}`

const outcomeOf = <A>(exit: Exit.Exit<A, StoreError | KvRejected>): Outcome => {
  if (Exit.isSuccess(exit)) return "ok"
  const failure = exit.cause.reasons.find((reason) => reason._tag === "Fail")
  if (failure === undefined) return `defect: ${String(exit.cause)}`
  const error = (failure as { readonly error: StoreError | KvRejected }).error
  return error._tag === "StoreError" ? error.reason : error._tag
}

type State = Record<string, string>

/** Compact: `[put a v0, del b] [put c v2]` (Put values cut at their first dash). */
const showGroups = (groups: ReadonlyArray<ReadonlyArray<KvCommand>>) =>
  groups
    .map(
      (group) =>
        `[${group.map((c) => (c._tag === "Put" ? `put ${c.key} ${c.value.split("-")[0]}` : c._tag === "Delete" ? `del ${c.key}` : c._tag)).join(", ")}]`,
    )
    .join(" ")

/** The model: commands applied in order to a map (Delete of an absent key changes nothing). */
const modelAfter = (commands: ReadonlyArray<KvCommand>, count: number): State => {
  const state = new Map<string, string>()
  for (const command of commands.slice(0, count)) {
    if (command._tag === "Put") state.set(command.key, command.value)
    else if (command._tag === "Delete") state.delete(command.key)
  }
  return Object.fromEntries([...state].sort(([a], [b]) => (a < b ? -1 : 1)))
}

const showState = (state: State) =>
  `{${Object.entries(state)
    .map(([key, value]) => `${key}: ${value.split("-")[0]}`)
    .join(", ")}}`
const canonical = (state: State) => JSON.stringify(Object.entries(state).sort(([a], [b]) => (a < b ? -1 : 1)))
const sameState = (a: State, b: State) => canonical(a) === canonical(b)

/** Every segment file of the WAL at `walDir` with its bytes, as reads see them. */
const walImage = (disk: Sim.SimulatedDisk, walDir: string) =>
  new Map(
    disk
      .files()
      .filter((path) => path.startsWith(`${walDir}/`))
      .map((path) => [path, Buffer.from(disk.readWritten(path)!)] as const),
  )

/** `name:size` of every segment file, as reads see them. */
const walListing = (disk: Sim.SimulatedDisk, walDir: string) =>
  [...walImage(disk, walDir)].map(([path, bytes]) => `${path.slice(walDir.length + 1)}:${bytes.length}`)

interface ParsedRecord {
  readonly seq: number
  readonly flags: number
  readonly offset: number
  readonly end: number
}

/** Parses one segment independently of recovery: every whole, valid record. */
const parseRecords = (bytes: Buffer): Array<ParsedRecord> => {
  const records: Array<ParsedRecord> = []
  let offset = segmentHeaderBytes
  while (offset < bytes.length) {
    const read = readRecordAt(bytes, offset)
    if (read._tag !== "Record" && bytes.subarray(offset).every((byte) => byte === 0)) break // preallocation
    if (read._tag !== "Record") throw new Error(`unparseable record at ${offset}: ${read._tag}`)
    records.push({ seq: read.record.seq, flags: read.record.flags, offset, end: read.end })
    offset = read.end
  }
  return records
}

// ---------------------------------------------------------------------------------------------
// One run of a workload, with or without a power cut, then a reboot and a reopen

interface RunResult {
  readonly outcomes: ReadonlyArray<Outcome>
  readonly replies: ReadonlyArray<{ readonly changed: boolean } | undefined>
  /** WAL appends (batches written) before the shutdown, by the first incarnation. */
  readonly batches: number
  /** Put values in the order their events were published (the reference run only). */
  readonly publishedValues: ReadonlyArray<string>
  readonly opCount: number
  readonly crashed: boolean
  readonly recovered: State
  readonly health: StoreHealth
  readonly afterWrite: Outcome
  readonly afterState: State
  /** Segment files (name:size) after the reboot, before recovery touched them. */
  readonly walFiles: ReadonlyArray<string>
  /** Why the rebooted store would not open, if it would not. */
  readonly openError: string | undefined
}

/** Waits `turns` turns of the event loop (none: returns at once). */
const afterTurns = (turns: number) =>
  Effect.promise(async () => {
    for (let turn = 0; turn < turns; turn++) await new Promise<void>((resolve) => setImmediate(resolve))
  })

const runWorkload = (
  groups: ReadonlyArray<ReadonlyArray<KvCommand>>,
  diskSeed: number,
  crashAt: number | undefined,
  overrides: Partial<StoreOptions>,
  sectorBytes = Sim.defaultSectorBytes,
  slowSyncs = false,
) =>
  Effect.gen(function* () {
    const dir = yield* tempDir
    const disk = new Sim.SimulatedDisk({ seed: diskSeed, sectorBytes, slowSyncs })
    if (crashAt !== undefined) disk.crashAfter(crashAt)
    const first = yield* Effect.scoped(
      Effect.gen(function* () {
        const subscription = yield* (yield* EventBus.EventBus).subscribe
        const store = yield* makeStore(kvStore(), optionsFor(dir, overrides))
        const exits: Array<Exit.Exit<{ readonly changed: boolean }, StoreError | KvRejected>> = []
        for (const [index, group] of groups.entries()) {
          exits.push(
            ...(yield* guard(
              `group ${index} (crash at ${crashAt})`,
              Effect.forEach(
                group,
                // With slow syncs, command i of a group is sent i turns of the event loop later, so
                // commands reach the actor while the ones before them are being written.
                (command, i) => Effect.andThen(afterTurns(slowSyncs ? i : 0), Effect.exit(store.send(command))),
                { concurrency: "unbounded" },
              ),
            )),
          )
        }
        const events = yield* PubSub.takeUpTo(subscription, 100_000)
        return {
          batches: store.health().wal?.appends ?? 0,
          outcomes: exits.map(outcomeOf),
          replies: exits.map((exit) => (Exit.isSuccess(exit) ? exit.value : undefined)),
          publishedValues: events.flatMap(({ event }) =>
            (event as { _tag: string })._tag === "Stored" ? [(event as { value: string }).value] : [],
          ),
        }
      }),
    ).pipe(Effect.provide(storeLayer(disk)))
    const opCount = disk.opCount
    const crashed = disk.crashed
    // Power loss (after the clean shutdown when the cut never came): what was durable survives, the rest tears.
    const rebooted = disk.crash()
    const walFiles = walListing(rebooted, `${dir}/wal`)
    const second = yield* Effect.scoped(
      Effect.gen(function* () {
        const store = yield* makeStore(kvStore(), optionsFor(dir, overrides))
        const read = yield* Effect.exit(guard("read after reboot", store.read(readAll)))
        const health = store.health()
        if (Exit.isFailure(read)) {
          return {
            recovered: {},
            health,
            afterWrite: outcomeOf(read),
            afterState: {},
            openError: String(Cause.squash(read.cause)),
          }
        }
        const recovered = read.value
        const afterWrite = outcomeOf(
          yield* Effect.exit(guard("write after reboot", store.send({ _tag: "Put", key: "after", value: "reboot" }))),
        )
        const afterState = yield* store.read(readAll)
        return { recovered, health, afterWrite, afterState, openError: undefined }
      }),
    ).pipe(Effect.provide(storeLayer(rebooted)))
    return { ...first, opCount, crashed, walFiles, ...second } satisfies RunResult
  }).pipe(Effect.scoped, quiet)

// ---------------------------------------------------------------------------------------------
// Arbitraries

const keyArb = fc.constantFrom("a", "b", "c", "d")
const commandShapeArb = fc.oneof(
  { weight: 3, arbitrary: keyArb.map((key) => ({ _tag: "Put" as const, key })) },
  { weight: 1, arbitrary: keyArb.map((key) => ({ _tag: "Delete" as const, key })) },
)
/** Groups of commands sent concurrently; Put values are unique (`v<index>`), so every write is traceable. */
const workloadArb = fc
  .array(fc.array(commandShapeArb, { minLength: 1, maxLength: 5 }), { minLength: 1, maxLength: 8 })
  .map((groups) => {
    let index = 0
    return groups.map((group) =>
      group.map((shape): KvCommand => {
        const i = index++
        return shape._tag === "Put" ? { _tag: "Put", key: shape.key, value: `v${i}-`.padEnd(100, "x") } : shape
      }),
    )
  })

// ---------------------------------------------------------------------------------------------

/**
 * The crash-point property: for a random workload, a power cut at every disk operation in turn.
 * Returns what the runs covered, so a test can check it exercised what it claims to.
 */
const crashAtEveryOperation = async (
  overrides: Partial<StoreOptions>,
  sectorBytes: number,
  numRuns: number,
  slowSyncs = false,
) => {
  const coverage = {
    workloads: 0,
    /** Reference runs that wrote more batches than the workload has groups: batches decided during writes. */
    pipelined: 0,
    crashPoints: 0,
    inFlightBatchKept: 0,
    inFlightBatchLost: 0,
    tornTails: 0,
    rotations: 0,
  }
  await fc.assert(
    fc.asyncProperty(workloadArb, fc.integer({ min: 1, max: 0x7fffffff }), async (groups, diskSeed) => {
      const commands = groups.flat()
      const n = commands.length
      const describeRun = (k: number | undefined, run: RunResult) =>
        `crash at op ${k} of ${run.opCount}; groups ${showGroups(groups)}; outcomes ${JSON.stringify(run.outcomes)}; ` +
        `WAL after reboot ${JSON.stringify(run.walFiles)}; recovered ${showState(run.recovered)}; open error ${run.openError}`

      // The reference run: no power cut until after the clean shutdown.
      const reference = await Effect.runPromise(
        runWorkload(groups, diskSeed, undefined, overrides, sectorBytes, slowSyncs),
      )
      assert.isFalse(reference.crashed)
      assert.deepStrictEqual(
        reference.outcomes,
        commands.map(() => "ok"),
        describeRun(undefined, reference),
      )
      // The model's assumption: commands commit in send order (groups in order, each group in index order).
      const putValues = commands.flatMap((command) => (command._tag === "Put" ? [command.value] : []))
      assert.deepStrictEqual(reference.publishedValues, putValues, "commit order differs from send order")
      // Replies follow the model, command by command.
      commands.forEach((command, i) => {
        const before = modelAfter(commands, i)
        const changed =
          command._tag === "Put"
            ? before[command.key] !== command.value
            : command._tag === "Delete" && before[command.key] !== undefined
        assert.deepStrictEqual(reference.replies[i], { changed }, `reply to command ${i}`)
      })
      assert.isUndefined(reference.openError, describeRun(undefined, reference))
      assert.deepStrictEqual(reference.recovered, modelAfter(commands, n), describeRun(undefined, reference))
      assert.strictEqual(reference.health.state, "running")
      assert.isUndefined(reference.health.recovery?.tornTail)
      if ((reference.health.recovery?.firstSeq ?? 1) > 1) coverage.rotations++
      coverage.workloads++
      if (reference.batches > groups.length) coverage.pipelined++

      for (let k = 0; k <= reference.opCount; k++) {
        const run = await Effect.runPromise(runWorkload(groups, diskSeed + k, k, overrides, sectorBytes, slowSyncs))
        const context = describeRun(k, run)
        coverage.crashPoints++
        assert.isUndefined(run.openError, `the rebooted store would not open: ${context}`)
        // Acknowledged commands are a prefix of the send order: after the power cut nothing succeeds.
        let a = 0
        while (a < n && run.outcomes[a] === "ok") a++
        // Then the batch in flight when the power went (its callers get WriteFailed), then refusals.
        let b = a
        while (b < n && run.outcomes[b] === "WriteFailed") b++
        assert.deepStrictEqual(
          run.outcomes,
          [...Array(a).fill("ok"), ...Array(b - a).fill("WriteFailed"), ...Array(n - b).fill("Unavailable")],
          context,
        )
        if (!run.crashed) assert.strictEqual(a, n, context)
        // Acknowledged replies are the reference replies (same decisions on the same state).
        for (let i = 0; i < a; i++) assert.deepStrictEqual(run.replies[i], reference.replies[i], context)

        // Recovery: every acknowledged write, plus the in-flight batch whole or not at all, nothing later.
        const withoutBatch = modelAfter(commands, a)
        const withBatch = modelAfter(commands, b)
        const keptBatch = sameState(run.recovered, withBatch)
        assert.isTrue(
          keptBatch || sameState(run.recovered, withoutBatch),
          `recovered state is neither the acknowledged prefix nor it plus the whole in-flight batch: ${context}`,
        )
        if (!sameState(withBatch, withoutBatch)) {
          if (keptBatch) coverage.inFlightBatchKept++
          else coverage.inFlightBatchLost++
        }
        if (run.health.recovery?.tornTail !== undefined) coverage.tornTails++

        // The reopened store serves: running, no restart, and a new write sticks.
        assert.strictEqual(run.health.state, "running", context)
        assert.strictEqual(run.health.restarts, 0, context)
        assert.strictEqual(run.afterWrite, "ok", context)
        assert.deepStrictEqual(run.afterState, { ...run.recovered, after: "reboot" }, context)
      }
    }),
    { numRuns, seed, endOnFailure: true },
  )
  return coverage
}

const runs = Number(process.env.MNEMOS_FC_RUNS ?? 20)

/** Deep copies of the WAL image, for byte-for-byte comparison. */
const imageOf = (disk: Sim.SimulatedDisk, walDir: string) =>
  [...walImage(disk, walDir)].map(([path, bytes]) => [path, bytes.toString("hex")] as const)

/**
 * A log of several segments, all durable: writes acknowledged one by one and in concurrent groups
 * (so some batches hold several records), then a power cut while idle. (A clean shutdown checkpoints
 * and releases the whole log, leaving nothing to damage.) LMDB holds every write.
 */
const durableLog = (dir: string, diskSeed: number) =>
  Effect.gen(function* () {
    const disk = new Sim.SimulatedDisk({ seed: diskSeed })
    const options = optionsFor(dir, { walSegmentBytesMax: 256, checkpointRecordsInterval: 10_000 })
    const acked = yield* Effect.scoped(
      Effect.gen(function* () {
        const store = yield* makeStore(kvStore(), options)
        for (let i = 0; i < 8; i++) yield* store.send({ _tag: "Put", key: `k${i}`, value: `v${i}` })
        for (let g = 0; g < 3; g++) {
          yield* Effect.forEach([0, 1, 2], (i) => store.send({ _tag: "Put", key: `g${g}-${i}`, value: `w${g}-${i}` }), {
            concurrency: "unbounded",
          })
        }
        // The log ends with a batch of one record: a torn final write and damage to the final batch
        // look the same, so "the last record" is "the last batch".
        yield* store.send({ _tag: "Put", key: "last", value: "z" })
        const state = yield* store.read(readAll)
        const rebooted = disk.crash()
        return { state, rebooted }
      }),
    ).pipe(Effect.provide(storeLayer(disk)))
    return { ...acked, options }
  }).pipe(quiet)

/** Opens the store on `disk` and reports how it answers. */
const reopen = (disk: Sim.SimulatedDisk, options: StoreOptions) =>
  Effect.scoped(
    Effect.gen(function* () {
      const store = yield* makeStore(kvStore(), options)
      const read = yield* Effect.exit(guard("read", store.read(readAll)))
      const send = yield* Effect.exit(guard("send", store.send({ _tag: "Put", key: "probe", value: "x" })))
      return { read, send, health: store.health() }
    }),
  ).pipe(Effect.provide(storeLayer(disk)), quiet)

const storeErrorOf = <A, E>(exit: Exit.Exit<A, E>): StoreError | undefined => {
  if (Exit.isSuccess(exit)) return undefined
  const failure = exit.cause.reasons.find((reason) => reason._tag === "Fail") as
    | { readonly error: { readonly _tag: string } }
    | undefined
  return failure?.error._tag === "StoreError" ? (failure.error as StoreError) : undefined
}

/**
 * Acknowledges five writes, then cuts the power during the write of one batch of `values.length`
 * records (values of `valueBytes` characters, sent concurrently), over forty disk seeds. Checks every
 * acknowledged write survives, the batch survives whole or not at all, and the cut tail is reported.
 */
const tornWrite = async (count: number, valueBytes: number) => {
  const big = (i: number) => `${i}`.padEnd(valueBytes, "x")
  const indices = Array.from({ length: count }, (_, i) => i)
  let torn = 0
  let batchKept = 0
  const refusals: Array<string> = []
  for (let diskSeed = 1; diskSeed <= 40; diskSeed++) {
    const dir = mkdtempSync(join(tempBase, "mnemos-torn-"))
    try {
      const options = optionsFor(dir, { walSegmentBytesMax: 64 * 1024, checkpointRecordsInterval: 10_000 })
      const segment = `${dir}/wal/${segmentFileName(1)}`
      const disk = new Sim.SimulatedDisk({ seed: diskSeed })
      const before = await Effect.runPromise(
        Effect.scoped(
          Effect.gen(function* () {
            const store = yield* makeStore(kvStore(), options)
            for (let i = 0; i < 5; i++) yield* store.send({ _tag: "Put", key: `a${i}`, value: `v${i}` })
            const acked = yield* store.read(readAll)
            const committedEnd = disk.readDurable(segment)!.length
            // The power goes during the next disk operation: the write of a batch spanning several sectors.
            disk.crashAfter(0)
            const exits = yield* guard(
              "sends during the power cut",
              Effect.forEach(indices, (i) => Effect.exit(store.send({ _tag: "Put", key: `b${i}`, value: big(i) })), {
                concurrency: "unbounded",
              }),
            )
            return { acked, committedEnd, outcomes: exits.map(outcomeOf) }
          }),
        ).pipe(Effect.provide(storeLayer(disk)), quiet),
      )
      assert.strictEqual(before.outcomes[0], "WriteFailed")
      assert.isTrue(
        before.outcomes.every((outcome) => outcome === "WriteFailed" || outcome === "Unavailable"),
        JSON.stringify(before.outcomes),
      )
      const failedBatch = indices.filter((i) => before.outcomes[i] === "WriteFailed")
      const rebooted = disk.crash()
      const sizeAfterReboot = rebooted.readWritten(segment)!.length
      // A lost write that left only zeros beyond the last whole batch looks like preallocation: kept as is.
      const zerosOnly = rebooted
        .readWritten(segment)!
        .subarray(before.committedEnd)
        .every((byte) => byte === 0)
      const after = await Effect.runPromise(
        Effect.scoped(
          Effect.gen(function* () {
            const store = yield* makeStore(kvStore(), options)
            const read = yield* Effect.exit(guard("read after reboot", store.read(readAll)))
            const health = store.health()
            if (Exit.isFailure(read)) return { _tag: "Refused" as const, error: String(Cause.squash(read.cause)) }
            const sizeAfterRecovery = rebooted.readWritten(segment)!.length
            const write = outcomeOf(yield* Effect.exit(store.send({ _tag: "Put", key: "after", value: "reboot" })))
            return { _tag: "Opened" as const, state: read.value, health, sizeAfterRecovery, write }
          }),
        ).pipe(Effect.provide(storeLayer(rebooted)), quiet),
      )
      if (after._tag === "Refused") {
        refusals.push(
          `seed ${diskSeed}: failed batch b${failedBatch.join(",b")}, ${sizeAfterReboot - before.committedEnd} bytes past the last acknowledged batch: ${after.error}`,
        )
        continue
      }
      const context = `seed ${diskSeed}: committed end ${before.committedEnd}, size after reboot ${sizeAfterReboot}, after recovery ${after.sizeAfterRecovery}, recovery ${JSON.stringify(after.health.recovery)}, state ${showState(after.state)}`
      // Every acknowledged write; the failed batch whole or not at all.
      const withBatch = { ...before.acked, ...Object.fromEntries(failedBatch.map((i) => [`b${i}`, big(i)])) }
      const kept = sameState(after.state, withBatch)
      assert.isTrue(kept || sameState(after.state, before.acked), context)
      assert.strictEqual(after.sizeAfterRecovery, kept || zerosOnly ? sizeAfterReboot : before.committedEnd, context)
      // The tail beyond the last whole batch was cut, and reported exactly.
      if (sizeAfterReboot > after.sizeAfterRecovery) {
        torn++
        assert.deepInclude(
          after.health.recovery!.tornTail!,
          {
            file: segmentFileName(1),
            offset: after.sizeAfterRecovery,
            bytesCut: sizeAfterReboot - after.sizeAfterRecovery,
          },
          context,
        )
      } else {
        assert.isUndefined(after.health.recovery!.tornTail, context)
      }
      if (kept && failedBatch.length > 0) batchKept++
      assert.strictEqual(after.health.state, "running", context)
      assert.strictEqual(after.health.restarts, 0, context)
      assert.strictEqual(after.write, "ok", context)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }
  return { torn, batchKept, refusals }
}

describe("crash simulation on the simulated disk", () => {
  it("power cut at every disk operation, whole-sector writes: acked writes survive, an unacked batch is all or nothing", async () => {
    // Sectors larger than a segment: a torn write keeps or loses all of what it wrote (its tail may still
    // be cut short or zero-filled). Segments rotate only at checkpoints, so each release removes one.
    const coverage = await crashAtEveryOperation({ walSegmentBytesMax: 16 * 1024 }, 64 * 1024, runs)
    console.log(`CrashSimulation coverage (whole-sector writes): ${JSON.stringify(coverage)}`)
    // The runs exercised what they claim to: lost and kept in-flight batches, torn tails, released segments.
    assert.isAbove(coverage.inFlightBatchKept, 0)
    assert.isAbove(coverage.inFlightBatchLost, 0)
    assert.isAbove(coverage.tornTails, 0)
    assert.isAbove(coverage.rotations, 0)
  })

  it("power cut at every disk operation, 512-byte sectors, small preallocated segments: the same, and the log always reopens", async () => {
    // Real sector tearing (a batch's sectors persist independently) into zero-filled segments of one or
    // two records, so a torn write leaves a damaged record before zeros, and a checkpoint releases
    // several segments under one directory sync.
    const coverage = await crashAtEveryOperation(
      { walSegmentBytesMax: 400, walPreallocateBytes: 1024 },
      Sim.defaultSectorBytes,
      runs,
    )
    console.log(`CrashSimulation coverage (512-byte sectors): ${JSON.stringify(coverage)}`)
    assert.isAbove(coverage.inFlightBatchKept, 0)
    assert.isAbove(coverage.inFlightBatchLost, 0)
    assert.isAbove(coverage.tornTails, 0)
    assert.isAbove(coverage.rotations, 0)
  })

  it("power cut at every disk operation while callers send during writes, batches split and pipelined: the same", async () => {
    // Syncs wait for the event loop, and a group's commands are sent a turn apart, so they reach the
    // actor while earlier ones are being written: it decides them behind that write and writes them as
    // the next batch. Commands taken together are always split in two the same way. A power cut can
    // then find two batches unacknowledged: the one written (kept or lost whole) and the one decided
    // behind it (never written: its callers wait for the restart, which the dead disk refuses).
    const coverage = await crashAtEveryOperation(
      { walSegmentBytesMax: 16 * 1024, batchSplit: "always" },
      64 * 1024,
      runs,
      true,
    )
    console.log(`CrashSimulation coverage (slow syncs): ${JSON.stringify(coverage)}`)
    assert.isAbove(coverage.pipelined, 0)
    assert.isAbove(coverage.inFlightBatchKept, 0)
    assert.isAbove(coverage.inFlightBatchLost, 0)
  })

  it("a flipped byte anywhere in the log but its last record: the store refuses with Corrupt naming the segment, no byte changes", async () => {
    const dir = mkdtempSync(join(tempBase, "mnemos-flip-"))
    try {
      const { rebooted: disk, state, options } = await Effect.runPromise(durableLog(dir, seed))
      assert.strictEqual(Object.keys(state).length, 18)
      const walDir = `${dir}/wal`
      const segments = [...walImage(disk, walDir)]
      assert.isAtLeast(segments.length, 4, "the log spans several segments")
      const allRecords = segments.flatMap(([, bytes]) => parseRecords(bytes))
      assert.isTrue(
        (allRecords.at(-1)!.flags & batchEndFlag) !== 0 && (allRecords.at(-2)!.flags & batchEndFlag) !== 0,
        "the last batch is one record",
      )
      // Every byte of every record but the log's last one (record headers and payloads).
      const candidates = segments.flatMap(([path, bytes], s) => {
        const records = parseRecords(bytes)
        const eligible = s === segments.length - 1 ? records.slice(0, -1) : records
        return eligible.map((record) => ({ path, name: path.slice(walDir.length + 1), record }))
      })
      assert.isAtLeast(candidates.length, 16)
      const before = imageOf(disk, walDir)
      const seen = new Set<string>()
      await fc.assert(
        fc.asyncProperty(fc.nat({ max: candidates.length - 1 }), fc.nat(), async (which, within) => {
          const { path, name, record } = candidates[which]!
          const offset = record.offset + (within % (record.end - record.offset))
          disk.flipByte(path, offset)
          try {
            const damaged = imageOf(disk, walDir)
            const { read, send, health } = await Effect.runPromise(reopen(disk, options))
            const answers: ReadonlyArray<readonly [string, StoreError | undefined]> = [
              ["read", storeErrorOf(read)],
              ["send", storeErrorOf(send)],
            ]
            for (const [what, error] of answers) {
              assert.strictEqual(
                error?.reason,
                "Corrupt",
                `${what} after flipping byte ${offset} of ${name} (record ${record.seq})`,
              )
              assert.include(error!.message, name)
            }
            assert.strictEqual(health.state, "corrupt")
            assert.strictEqual(health.restarts, 0)
            // Not one byte was touched: same files, same contents.
            assert.deepStrictEqual(imageOf(disk, walDir), damaged)
            seen.add(name)
          } finally {
            disk.flipByte(path, offset)
          }
        }),
        { numRuns: 60, seed },
      )
      assert.deepStrictEqual(imageOf(disk, walDir), before)
      assert.isAtLeast(seen.size, 2)
      // With the byte restored, the log opens and holds every acknowledged write.
      const { read } = await Effect.runPromise(reopen(disk, options))
      assert.deepStrictEqual(Exit.isSuccess(read) ? read.value : read, state)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("a flipped byte in the header of a segment that is not the last: Corrupt, no byte changes", async () => {
    const dir = mkdtempSync(join(tempBase, "mnemos-flip-"))
    try {
      const { rebooted: disk, options } = await Effect.runPromise(durableLog(dir, seed))
      const walDir = `${dir}/wal`
      const [path] = [...walImage(disk, walDir)][1]!
      const name = path.slice(walDir.length + 1)
      disk.flipByte(path, 3) // in the magic
      const damaged = imageOf(disk, walDir)
      const { read, health } = await Effect.runPromise(reopen(disk, options))
      assert.strictEqual(storeErrorOf(read)?.reason, "Corrupt")
      assert.include(storeErrorOf(read)!.message, name)
      assert.strictEqual(health.state, "corrupt")
      assert.deepStrictEqual(imageOf(disk, walDir), damaged)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("a flipped byte in the header of the last segment, valid records after it: Corrupt, nothing deleted or lost", async () => {
    const dir = mkdtempSync(join(tempBase, "mnemos-flip-"))
    try {
      const { rebooted: disk, state, options } = await Effect.runPromise(durableLog(dir, seed))
      const walDir = `${dir}/wal`
      const segments = [...walImage(disk, walDir)]
      const [path, bytes] = segments[segments.length - 1]!
      const name = path.slice(walDir.length + 1)
      const records = parseRecords(bytes)
      assert.isAtLeast(records.length, 1, "the last segment holds acknowledged records")
      assert.isDefined(decodeSegmentHeader(bytes))
      assert.strictEqual(decodeSegmentHeader(bytes)!.firstSeq, parseSegmentFileName(name))
      disk.flipByte(path, 10) // in the salt, covered by the header checksum
      const damaged = imageOf(disk, walDir)
      // No LMDB checkpoint (as before its first flush): the log is the only copy of the writes.
      rmSync(join(dir, "lmdb"), { recursive: true, force: true })
      const { read, health } = await Effect.runPromise(reopen(disk, options))
      const missing = Exit.isSuccess(read) ? Object.keys(state).filter((key) => read.value[key] !== state[key]) : []
      const note = `state ${health.state}; recovery ${JSON.stringify(health.recovery)}; ${
        Exit.isSuccess(read)
          ? `opened, acknowledged keys missing: ${JSON.stringify(missing)}`
          : storeErrorOf(read)?.message
      }; WAL now ${JSON.stringify(walListing(disk, walDir))}`
      // Never silently skipped: refused as Corrupt naming the segment, every byte kept.
      assert.strictEqual(storeErrorOf(read)?.reason, "Corrupt", note)
      assert.include(storeErrorOf(read)!.message, name)
      assert.deepStrictEqual(imageOf(disk, walDir), damaged, `the damaged segment was changed or removed: ${note}`)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("a single-record write torn across sectors: the store opens, reports the torn tail, keeps every acknowledged write", async () => {
    const { torn, refusals } = await tornWrite(1, 1500)
    assert.deepStrictEqual(refusals, [])
    // Most of the forty seeds leave a torn piece of the record behind (the property test above covers kept ones).
    assert.isAbove(torn, 10)
  })

  it("a multi-record batch torn across sectors: the store opens, reports the torn tail, keeps every acknowledged write", async () => {
    const { torn, refusals } = await tornWrite(3, 450)
    // A power cut is not corruption: the store must open after every one of them.
    assert.deepStrictEqual(refusals, [])
    assert.isAbove(torn, 10)
  })

  it("a power cut while several released segments await their directory sync leaves an openable log", async () => {
    // Segments of two records; a checkpoint every 6 records rotates and releases three segments at once.
    const overrides: Partial<StoreOptions> = { walSegmentBytesMax: 160, checkpointRecordsInterval: 6 }
    const failures: Array<string> = []
    for (let diskSeed = 1; diskSeed <= 16; diskSeed++) {
      // Five acknowledged writes, then the sixth triggers the checkpoint: append (write, fdatasync),
      // rotate (open, truncate, write, fdatasync, fsync-dir), release (unlink x3), fsync-dir: op 11.
      const groups = [
        ...Array.from(
          { length: 6 },
          (_, i): ReadonlyArray<KvCommand> => [{ _tag: "Put", key: `k${i}`, value: `v${i}` }],
        ),
      ]
      const reference = await Effect.runPromise(runWorkload(groups, diskSeed, undefined, overrides))
      const run = await Effect.runPromise(runWorkload(groups, diskSeed, reference.opCount - 1, overrides))
      if (run.openError !== undefined)
        failures.push(`seed ${diskSeed}: WAL after reboot ${JSON.stringify(run.walFiles)}: ${run.openError}`)
    }
    assert.deepStrictEqual(failures, [])
  })
})
