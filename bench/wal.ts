/**
 * The durability benchmark: acknowledged (fdatasync'd) writes through a store actor with 1, 8
 * and 64 concurrent writers, against the raw one-fdatasync-per-append rate of the same disk
 * measured in the same run; pipelined batches against never-split ones at 64 writers; and
 * recovery time against WAL tail length. Each writer row starts with unmeasured warm-up writes (as
 * many as it measures at 8 and 64 writers), so it reports the steady state of a running daemon,
 * not V8's first compilations.
 */
import { closeSync, constants, fdatasyncSync, mkdtempSync, openSync, rmSync, writeSync } from "node:fs"
import { open } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Deferred, Effect, Exit, Layer, Queue, Schema } from "effect"
import { defaultStoreOptions, makeStore, type StoreOptions } from "../src/actors/StoreActor.ts"
import { openCheckpoint } from "../src/stores/checkpoint/Checkpoint.ts"
import * as EventBus from "../src/stores/EventBus.ts"
import { defaultPreallocateBytes, openLocalWal } from "../src/stores/wal/FileWal.ts"
import { layerNode } from "../src/stores/wal/WalFs.ts"
import { recordHeaderBytes } from "../src/stores/wal/WalRecord.ts"
import { KvEvent, kvStore, readAll } from "../test/support/KvStore.ts"
import { type BenchSuite, quantile, round } from "./Table.ts"

const services = Layer.merge(EventBus.layer, layerNode)
const benchDir = () => mkdtempSync(join(process.env.MNEMOS_BENCH_DIR ?? tmpdir(), "mnemos-bench-wal-"))

/** One fdatasync per 100-byte append, synchronously: the physical limit of this disk. */
const rawFsync = (appends: number) => {
  const dir = benchDir()
  const fd = openSync(join(dir, "raw.log"), "w")
  const payload = Buffer.alloc(100, 7)
  const latencies: Array<number> = []
  const started = performance.now()
  for (let index = 0; index < appends; index++) {
    const before = performance.now()
    writeSync(fd, payload)
    fdatasyncSync(fd)
    latencies.push(performance.now() - before)
  }
  const elapsedMs = performance.now() - started
  closeSync(fd)
  rmSync(dir, { recursive: true, force: true })
  latencies.sort((a, b) => a - b)
  return { perSecond: (appends / elapsedMs) * 1000, p50Ms: quantile(latencies, 0.5) }
}

/** CPU time of this process (every thread: the actor's, libuv's, lmdb-js's, the GC's), in µs. */
const cpuMicros = () => {
  const { user, system } = process.cpuUsage()
  return user + system
}

/**
 * The floor: the least a durable actor on Effect does per write, on this disk and runtime. Writers
 * send over a bounded Queue and wait on a Deferred; the actor takes up to 256, JSON-encodes the
 * same event the store writes (plus as many bytes as a record header), makes the batch durable
 * with one O_DSYNC write into a zero-filled file (the WAL's I/O, byte for byte the same amount)
 * and completes the Deferreds. No decide/apply, no CRC, no LMDB, no event bus. The store's rows
 * are compared with this, measured right next to them.
 */
const floorWrites = (writers: number, writesTotal: number, warmupWrites: number) =>
  Effect.gen(function* () {
    const dir = benchDir()
    const handle = yield* Effect.promise(async () => {
      const file = await open(join(dir, "floor.log"), constants.O_RDWR | constants.O_CREAT | constants.O_DSYNC)
      await file.write(Buffer.alloc(defaultPreallocateBytes), 0, defaultPreallocateBytes, 0)
      return file
    })
    const mailbox = yield* Queue.bounded<{ readonly key: string; readonly done: Deferred.Deferred<void> }>(4096)
    let position = 0
    yield* Effect.forkChild(
      Effect.forever(
        Effect.gen(function* () {
          const batch = yield* Queue.takeBetween(mailbox, 1, 256)
          const header = " ".repeat(recordHeaderBytes)
          const bytes = Buffer.from(
            batch
              .map(
                ({ key }) => header + JSON.stringify({ _tag: "Stored", key, value: `value of ${key}`, at: Date.now() }),
              )
              .join(""),
          )
          yield* Effect.promise(() => handle.write(bytes, 0, bytes.length, position))
          position += bytes.length
          for (const { done } of batch) Deferred.doneUnsafe(done, Exit.void)
        }),
      ),
    )
    const write = (key: string) =>
      Effect.suspend(() => {
        const done = Deferred.makeUnsafe<void>()
        return Effect.andThen(Queue.offer(mailbox, { key, done }), Deferred.await(done))
      })
    const { latencies, elapsedMs, cpuMicrosPerWrite } = yield* measuredWrites(writers, writesTotal, warmupWrites, write)
    yield* Effect.promise(() => handle.close())
    rmSync(dir, { recursive: true, force: true })
    return {
      perSecond: (latencies.length / elapsedMs) * 1000,
      p50Ms: quantile(latencies, 0.5),
      p99Ms: quantile(latencies, 0.99),
      cpuMicrosPerWrite,
    }
  }).pipe(Effect.scoped)

/**
 * `writers` concurrent writers, each in a loop, first `warmupWrites` writes in all (not measured:
 * they let V8 optimise the path, as in a daemon that has been running), then `writesTotal`
 * measured ones. Latencies come back sorted, with the process's CPU time per measured write.
 */
const measuredWrites = <E>(
  writers: number,
  writesTotal: number,
  warmupWrites: number,
  write: (key: string) => Effect.Effect<unknown, E>,
  onMeasureStart: () => void = () => undefined,
) =>
  Effect.gen(function* () {
    const run = (count: number, prefix: string, latencies?: Array<number>) =>
      Effect.forEach(
        Array.from({ length: writers }, (_, writer) => writer),
        (writer) =>
          Effect.gen(function* () {
            const perWriter = Math.ceil(count / writers)
            for (let index = 0; index < perWriter; index++) {
              const before = performance.now()
              yield* write(`${prefix}${writer}-${index}`)
              latencies?.push(performance.now() - before)
            }
          }),
        { concurrency: "unbounded", discard: true },
      )
    yield* run(warmupWrites, "warm")
    onMeasureStart()
    const latencies: Array<number> = []
    const cpuBefore = cpuMicros()
    const started = performance.now()
    yield* run(writesTotal, "w", latencies)
    const elapsedMs = performance.now() - started
    const cpuMicrosPerWrite = (cpuMicros() - cpuBefore) / latencies.length
    latencies.sort((a, b) => a - b)
    return { latencies, elapsedMs, cpuMicrosPerWrite }
  })

const storeWrites = (
  writers: number,
  writesTotal: number,
  warmupWrites: number,
  batchSplit: StoreOptions["batchSplit"] = defaultStoreOptions.batchSplit,
) => {
  const dir = benchDir()
  return Effect.gen(function* () {
    const store = yield* makeStore(kvStore(), { ...defaultStoreOptions, dir, batchSplit })
    let fsyncsBefore = 0
    const { latencies, elapsedMs, cpuMicrosPerWrite } = yield* measuredWrites(
      writers,
      writesTotal,
      warmupWrites,
      (key) => store.send({ _tag: "Put", key, value: `value of ${key}` }),
      () => {
        fsyncsBefore = store.health().wal!.fsyncs
      },
    )
    const wal = store.health().wal!
    return {
      writers,
      batchSplit,
      writes: latencies.length,
      perSecond: (latencies.length / elapsedMs) * 1000,
      p50Ms: quantile(latencies, 0.5),
      p99Ms: quantile(latencies, 0.99),
      fsyncsPerWrite: (wal.fsyncs - fsyncsBefore) / latencies.length,
      cpuMicrosPerWrite,
    }
  }).pipe(
    Effect.scoped,
    Effect.provide(services),
    Effect.ensuring(Effect.sync(() => rmSync(dir, { recursive: true, force: true }))),
  )
}

type StoreRun = Effect.Success<ReturnType<typeof storeWrites>>

/** The columns of one measured store run, its throughput against `rawPerSecond`. */
const storeHeader = ["acked writes/s", "x raw", "p50 ms", "p99 ms", "durable writes/write", "CPU µs/write"]
const storeColumns = (run: StoreRun, rawPerSecond: number) => [
  round(run.perSecond, 0),
  round(run.perSecond / rawPerSecond, 2),
  round(run.p50Ms),
  round(run.p99Ms),
  round(run.fsyncsPerWrite, 4),
  round(run.cpuMicrosPerWrite, 1),
]

/**
 * Recovery: a store whose LMDB checkpoint is `corpus` records (WAL released) and whose WAL holds
 * `tail` more records not yet in LMDB (as after kill -9 between checkpoints), opened until its
 * first read is answered. The tail is written with the WAL API directly, so it is all tail.
 */
const recovery = (corpus: number, tail: number) => {
  const dir = benchDir()
  const options: StoreOptions = { ...defaultStoreOptions, dir }
  const encode = Schema.encodeSync(KvEvent)
  return Effect.gen(function* () {
    if (corpus > 0) {
      yield* Effect.gen(function* () {
        const store = yield* makeStore(kvStore(), options)
        for (let start = 0; start < corpus; start += 256) {
          yield* Effect.forEach(
            Array.from({ length: Math.min(256, corpus - start) }, (_, index) => start + index),
            (key) => store.send({ _tag: "Put", key: `k${key}`, value: `value of ${key}` }),
            { concurrency: "unbounded" },
          )
        }
      }).pipe(Effect.scoped) // a clean close checkpoints and releases the WAL
    }
    if (tail > 0) {
      // The clean close released the whole log: the tail continues the checkpoint's generation.
      const checkpoint = yield* openCheckpoint(`${dir}/lmdb`).pipe(Effect.orDie)
      const salt = checkpoint.salt()
      yield* Effect.promise(() => checkpoint.close())
      const opened = yield* openLocalWal({
        dir: `${dir}/wal`,
        segmentBytesMax: options.walSegmentBytesMax,
        replayAfterSeq: corpus,
        ...(salt !== undefined ? { salt } : {}),
      })
      for (let start = 0; start < tail; start += 256) {
        const entries = Array.from({ length: Math.min(256, tail - start) }, (_, index) => ({
          type: 1,
          payload: JSON.stringify(
            encode({ _tag: "Stored", key: `t${start + index}`, value: `tail ${start + index}`, at: 0 }),
          ),
        }))
        yield* opened.wal.appendBatch(entries)
      }
      yield* opened.wal.close()
    }
    const started = performance.now()
    const { openMs, keys } = yield* Effect.gen(function* () {
      const store = yield* makeStore(kvStore(), options)
      yield* store.read((view) => view.get("kv:k0"))
      const openMs = performance.now() - started
      return { openMs, keys: Object.keys(yield* store.read(readAll)).length }
    }).pipe(Effect.scoped)
    return { corpus, tail, openMs, keys }
  }).pipe(Effect.provide(services), Effect.ensuring(Effect.sync(() => rmSync(dir, { recursive: true, force: true }))))
}

export const suite: BenchSuite = {
  title: "durable writes through a store actor, group commit, recovery",
  run: async ({ quick }) => {
    const verdict = (met: boolean) =>
      quick ? "quick run: the target applies to the full run's steady state" : met ? "met" : "NOT met"
    // The disk is shared and noisy: measure the raw rate right before each writer row too, and
    // compare each row with the raw rate measured next to it.
    // Steady state needs a long warm-up: at 64 writers throughput keeps rising for the first ~100,000
    // writes of a process (V8 optimising the path, LMDB and the heap growing). The quick variant
    // (CI) measures the first few thousand writes, which is not steady state.
    const sizes = (writers: number) =>
      quick
        ? { writes: writers === 1 ? 1000 : 4000, warmup: 2000 }
        : writers === 64
          ? { writes: 100_000, warmup: 100_000 }
          : writers === 8
            ? { writes: 30_000, warmup: 30_000 }
            : { writes: 7_500, warmup: 10_000 }
    const rows = []
    for (const writers of [1, 8, 64]) {
      const { writes, warmup } = sizes(writers)
      const rawNow = rawFsync(quick ? 500 : 2000)
      const floor = await Effect.runPromise(floorWrites(writers, writes, warmup))
      const row = await Effect.runPromise(storeWrites(writers, writes, warmup))
      rows.push({ ...row, rawPerSecond: rawNow.perSecond, rawP50Ms: rawNow.p50Ms, floor })
    }
    // The same 64 writers with batches never split: what pipelining adds, measured right beside it,
    // alternating twice so neither setting gets the quieter moment of a noisy machine.
    const unsplit = await (async () => {
      const { writes, warmup } = sizes(64)
      const rawNow = rawFsync(quick ? 500 : 2000)
      const runs: Array<StoreRun> = []
      for (let round = 0; round < 2; round++) {
        runs.push(await Effect.runPromise(storeWrites(64, writes, warmup, "adaptive")))
        runs.push(await Effect.runPromise(storeWrites(64, writes, warmup, "never")))
      }
      const mean = (batchSplit: string) => {
        const mine = runs.filter((run) => run.batchSplit === batchSplit)
        return mine.reduce((sum, run) => sum + run.perSecond, 0) / mine.length
      }
      return { rawPerSecond: rawNow.perSecond, runs, ratio: mean("adaptive") / mean("never") }
    })()
    const raw = {
      perSecond: quantile(
        rows.map((row) => row.rawPerSecond).sort((a, b) => a - b),
        0.5,
      ),
      p50Ms: quantile(
        rows.map((row) => row.rawP50Ms).sort((a, b) => a - b),
        0.5,
      ),
    }
    const recoveries = []
    const corpus = quick ? 20000 : 100000
    for (const tail of quick ? [0, 1000, 10000] : [0, 1000, 10000, 100000]) {
      recoveries.push(await Effect.runPromise(recovery(0, tail)))
      recoveries.push(await Effect.runPromise(recovery(corpus, tail)))
    }
    const one = rows.find((row) => row.writers === 1)!
    const many = rows.find((row) => row.writers === 64)!
    const speedup = many.perSecond / many.rawPerSecond
    const oneP99Ratio = one.p99Ms / one.rawP50Ms
    return {
      tables: [
        {
          title: `raw disk (median of rows): ${round(raw.perSecond, 0)} fdatasync'd appends/s, one fdatasync p50 ${round(raw.p50Ms)} ms`,
          header: ["writers", "raw appends/s", ...storeHeader],
          rows: rows.map((row) => [row.writers, round(row.rawPerSecond, 0), ...storeColumns(row, row.rawPerSecond)]),
        },
        {
          title: `pipelining, 64 writers, measured side by side, alternating (raw ${round(unsplit.rawPerSecond, 0)} appends/s): batches split when serving costs more CPU than a write ("adaptive", the default) against never split`,
          header: ["batchSplit", ...storeHeader],
          rows: unsplit.runs.map((row) => [row.batchSplit, ...storeColumns(row, unsplit.rawPerSecond)]),
        },
        {
          title:
            "floor, measured beside each row: a bare Effect actor writing the same bytes (Queue + Deferred, JSON, one O_DSYNC write per batch into a zero-filled file; no store logic)",
          header: [
            "writers",
            "floor writes/s",
            "floor x raw",
            "floor p50 ms",
            "floor p99 ms",
            "floor CPU µs/write",
            "store / floor",
          ],
          rows: rows.map((row) => [
            row.writers,
            round(row.floor.perSecond, 0),
            round(row.floor.perSecond / row.rawPerSecond, 2),
            round(row.floor.p50Ms),
            round(row.floor.p99Ms),
            round(row.floor.cpuMicrosPerWrite, 1),
            round(row.perSecond / row.floor.perSecond, 2),
          ]),
        },
        {
          title: "recovery: open until the first read is answered",
          header: ["checkpointed records", "WAL tail records", "open ms", "keys read"],
          rows: recoveries.map((row) => [row.corpus, row.tail, round(row.openMs, 1), row.keys]),
        },
      ],
      notes: [
        // The quick variant measures the first thousands of writes of a process, not a running daemon.
        `target 64 writers >= 20x raw: ${round(speedup, 2)}x (${verdict(speedup >= 20)})`,
        `target 1-writer p99 <= 3x one fdatasync: ${round(oneP99Ratio, 2)}x (${verdict(oneP99Ratio <= 3)})`,
        `floor at 64 writers: ${round(many.floor.perSecond / many.rawPerSecond, 2)}x raw; floor 1-writer p99: ${round(one.floor.p99Ms / one.rawP50Ms, 2)}x one fdatasync`,
        `pipelining at 64 writers: ${round(unsplit.ratio, 2)}x the writes/s of never splitting (mean of two runs each)`,
      ],
      json: {
        raw,
        writes: rows,
        pipelining: unsplit,
        recoveries,
        targets: { speedup64: speedup, oneWriterP99OverFsync: oneP99Ratio },
      },
    }
  },
}
