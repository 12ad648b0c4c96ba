/**
 * Queued durable writes (`WalFile.queueDurable`, `Wal.queueBatch`): a store queues its next batch's
 * write while the last one is still on its way, and the promise that makes this safe is that writes
 * reach the disk one at a time, in queue order, and none after a failed one to the same file.
 * Checked on the real disk through the WAL writer thread and on the simulated disk, which keeps
 * the same contract.
 */
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit } from "effect"
import { openLocalWal } from "../../src/stores/wal/FileWal.ts"
import type { Wal } from "../../src/stores/wal/Wal.ts"
import { type FsError, layerNode, WalFs } from "../../src/stores/wal/WalFs.ts"
import { fileToken, forgetFile, queueWrite, terminateWriterThread } from "../../src/stores/wal/WalWriter.ts"
import * as Sim from "../support/SimulatedDisk.ts"

const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "mnemos-queued-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true })),
)

const bytesOf = (text: string) => Buffer.from(text, "utf8")

describe("the WAL writer thread (real disk)", () => {
  it.effect("a file whose write failed stays refused after the thread stops and a new one starts", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const fs = yield* WalFs
      const file = yield* fs.open(join(dir, "a"), { create: true })
      const other = yield* fs.open(join(dir, "b"), { create: true })
      // No file can reach this offset: the write fails, and a later write would work.
      const failed = yield* Deferred.await(yield* file.queueDurable(2 ** 52, bytesOf("far"))).pipe(Effect.exit)
      assert.isTrue(Exit.isFailure(failed))
      yield* Effect.promise(() => terminateWriterThread())
      const after = yield* Deferred.await(yield* file.queueDurable(0, bytesOf("after"))).pipe(Effect.exit)
      assert.isTrue(Exit.isFailure(after), "the write after the failed one was made")
      yield* Deferred.await(yield* other.queueDurable(0, bytesOf("other")))
      yield* file.close()
      yield* other.close()
      assert.strictEqual(readFileSync(join(dir, "a"), "utf8"), "")
      assert.strictEqual(readFileSync(join(dir, "b"), "utf8"), "other")
    }).pipe(Effect.scoped, Effect.provide(layerNode)),
  )

  it.effect("writes queued without waiting land in queue order and all settle, across files", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const fs = yield* WalFs
      const files = [yield* fs.open(join(dir, "a"), { create: true }), yield* fs.open(join(dir, "b"), { create: true })]
      const settled: Array<string> = []
      const pending: Array<Deferred.Deferred<void, FsError>> = []
      for (let index = 0; index < 40; index++) {
        const file = files[index % 2]!
        const chunk = bytesOf(String(index).padStart(4, "0"))
        const done = yield* file.queueDurable(Math.floor(index / 2) * 4, chunk)
        pending.push(done)
        yield* Effect.forkChild(
          Effect.andThen(
            Deferred.await(done),
            Effect.sync(() => settled.push(String(index))),
          ),
        )
      }
      for (const done of pending) yield* Deferred.await(done)
      yield* Effect.yieldNow
      assert.deepStrictEqual(
        settled,
        Array.from({ length: 40 }, (_, index) => String(index)),
      )
      for (const file of files) yield* file.close()
      const expected = (parity: number) =>
        Array.from({ length: 20 }, (_, i) => String(i * 2 + parity).padStart(4, "0")).join("")
      assert.strictEqual(readFileSync(join(dir, "a"), "utf8"), expected(0))
      assert.strictEqual(readFileSync(join(dir, "b"), "utf8"), expected(1))
    }).pipe(Effect.scoped, Effect.provide(layerNode)),
  )

  it.effect("writes of every size, queued faster than they land, arrive whole and in order", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const fs = yield* WalFs
      const file = yield* fs.open(join(dir, "f"), { create: true })
      // Sizes that fill and wrap the shared ring (1 MiB), and writes larger than a quarter of it,
      // which travel in a message: all must land at their offsets, and settle in queue order.
      const sizes = Array.from({ length: 120 }, (_, index) => [100, 70_000, 300_000, 1, 250_000][index % 5]!)
      const expected = Buffer.alloc(sizes.reduce((sum, size) => sum + size, 0))
      const settled: Array<number> = []
      const pending: Array<Deferred.Deferred<void, FsError>> = []
      let offset = 0
      for (const [index, size] of sizes.entries()) {
        const chunk = Buffer.alloc(size, index % 251)
        chunk.copy(expected, offset)
        const done = yield* file.queueDurable(offset, chunk)
        offset += size
        pending.push(done)
        yield* Effect.forkChild(
          Effect.andThen(
            Deferred.await(done),
            Effect.sync(() => settled.push(index)),
          ),
        )
      }
      for (const done of pending) yield* Deferred.await(done)
      yield* Effect.yieldNow
      yield* file.close()
      assert.deepStrictEqual(
        settled,
        sizes.map((_, index) => index),
      )
      assert.isTrue(readFileSync(join(dir, "f")).equals(expected))
    }).pipe(Effect.scoped, Effect.provide(layerNode)),
  )

  it.effect("close waits for the file's queued writes", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const fs = yield* WalFs
      const file = yield* fs.open(join(dir, "f"), { create: true })
      for (let index = 0; index < 20; index++)
        yield* file.queueDurable(index * 3, bytesOf(`w${String(index).padStart(2, "0")}`))
      yield* file.close()
      assert.strictEqual(readFileSync(join(dir, "f"), "utf8").length, 60)
    }).pipe(Effect.scoped, Effect.provide(layerNode)),
  )

  it.effect("after a failed write, later writes to that file fail without writing; other files go on", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const path = join(dir, "f")
      const other = join(dir, "g")
      const fd = openSync(path, "w+")
      const otherFd = openSync(other, "w+")
      const broken = fileToken()
      const healthy = fileToken()
      // A descriptor that is not open: the first write fails with EBADF.
      const first = queueWrite(broken, 1_000_000, 0, bytesOf("never"))
      const second = queueWrite(broken, fd, 0, bytesOf("must not land"))
      const elsewhere = queueWrite(healthy, otherFd, 0, bytesOf("fine"))
      const [firstResult, secondResult, otherResult] = yield* Effect.promise(() =>
        Promise.allSettled([first, second, elsewhere]),
      )
      assert.strictEqual(firstResult.status, "rejected")
      assert.strictEqual((firstResult as PromiseRejectedResult).reason.code, "EBADF")
      assert.strictEqual(secondResult.status, "rejected")
      assert.match((secondResult as PromiseRejectedResult).reason.message, /an earlier write to this file failed/)
      assert.strictEqual(otherResult.status, "fulfilled")
      assert.strictEqual(readFileSync(path, "utf8"), "", "nothing was written after the failure")
      assert.strictEqual(readFileSync(other, "utf8"), "fine")
      forgetFile(broken)
      forgetFile(healthy)
      closeSync(fd)
      closeSync(otherFd)
    }).pipe(Effect.scoped),
  )
})

const appendOptions = { segmentBytesMax: 1024 * 1024, preallocateBytes: 0, replayAfterSeq: 0 }

const queueThree = (wal: Wal) =>
  Effect.gen(function* () {
    const durable = []
    for (const batch of [["a1", "a2"], ["b1"], ["c1", "c2", "c3"]]) {
      durable.push(yield* wal.queueBatch(batch.map((text) => ({ type: 1, payload: text }))))
    }
    return durable
  })

describe("Wal.queueBatch", () => {
  it.effect("batches queued behind each other get consecutive sequences and replay in order", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const ranges = yield* Effect.scoped(
        Effect.gen(function* () {
          const { wal } = yield* openLocalWal({ dir, ...appendOptions })
          const durable = yield* queueThree(wal)
          // Awaited last first: the ranges were fixed when the batches were queued.
          const appended = []
          for (const written of [...durable].reverse()) appended.unshift(yield* written)
          yield* wal.close()
          return appended
        }),
      )
      assert.deepStrictEqual(
        ranges.map(({ firstSeq, lastSeq }) => [firstSeq, lastSeq]),
        [
          [1, 2],
          [3, 3],
          [4, 6],
        ],
      )
      const { replay } = yield* openLocalWal({ dir, ...appendOptions })
      assert.deepStrictEqual(
        replay.map((record) => Buffer.from(record.payload).toString("utf8")),
        ["a1", "a2", "b1", "c1", "c2", "c3"],
      )
    }).pipe(Effect.scoped, Effect.provide(layerNode)),
  )

  it.effect(
    "on the simulated disk: a failed write fails the batches queued behind it, which never reach the disk",
    () =>
      Effect.gen(function* () {
        const disk = new Sim.SimulatedDisk({ seed: 3, slowSyncs: true })
        const dir = "/wal"
        const outcome = yield* Effect.gen(function* () {
          const { wal } = yield* openLocalWal({ dir, ...appendOptions })
          // The first queued write's data sync fails; the two behind it must not be written at all.
          disk.failAfter(1, { op: "fdatasync" })
          const durable = yield* queueThree(wal)
          const exits = []
          for (const written of durable) exits.push(yield* Effect.exit(written))
          const after = yield* Effect.exit(wal.appendBatch([{ type: 1, payload: "later" }]))
          return { exits, after }
        }).pipe(Effect.scoped, Effect.provide(Sim.layer(disk)))
        assert.isTrue(outcome.exits.every(Exit.isFailure), "every queued batch fails")
        assert.isTrue(Exit.isFailure(outcome.after), "the log is poisoned")
        const image = disk.readWritten(`${dir}/wal-00000000000000000001.log`)!
        const text = Buffer.from(image).toString("latin1")
        assert.include(text, "a2", "the failed batch itself was written (its sync failed)")
        assert.notInclude(text, "b1", "the batch queued behind it was never written")
        assert.notInclude(text, "c3")
      }),
  )
})
