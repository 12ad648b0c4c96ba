/**
 * The segmented WAL on the real file system (`layerNode`): append and replay, rotation and
 * release, torn tails, all-or-nothing batches, corruption that must stop recovery without
 * touching a byte, `discardAfterSeq`, and store generations.
 */

import { createHash } from "node:crypto"
import {
  appendFileSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { type LocalWalOptions, openLocalWal } from "../../src/stores/wal/FileWal.ts"
import type { Appended, WalError } from "../../src/stores/wal/Wal.ts"
import { FsError, layerNode, WalFs } from "../../src/stores/wal/WalFs.ts"
import {
  batchEndFlag,
  decodeSegmentHeader,
  encodeRecordInto,
  readRecordAt,
  recordHeaderBytes,
  segmentFileName,
  segmentHeaderBytes,
} from "../../src/stores/wal/WalRecord.ts"

// ---------------------------------------------------------------------------------------------
// Helpers

/** A fresh temp dir, removed when the test's scope closes. */
const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "mnemos-wal-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true })),
)

/**
 * Most tests damage a segment by its end (truncate, append), so they write segments without the
 * zero-filled preallocation (a layout recovery must read too: segments that outgrew theirs);
 * "preallocated segments" below covers the zero-filled layout.
 */
const unpreallocated = { segmentBytesMax: 1024 * 1024, replayAfterSeq: 0, preallocateBytes: 0 }

/** Opens the WAL in `dir`, closing it when the test's scope closes. */
const openWal = (dir: string, options: Partial<Omit<LocalWalOptions, "dir">> = {}) =>
  Effect.acquireRelease(
    openLocalWal({ dir, ...unpreallocated, ...options }).pipe(Effect.provide(layerNode)),
    (opened) => opened.wal.close(),
  )

/** Opens, expecting a refusal; returns the error. */
const openFails = (dir: string, options: Partial<Omit<LocalWalOptions, "dir">> = {}) =>
  Effect.flip(openLocalWal({ dir, ...unpreallocated, ...options }).pipe(Effect.provide(layerNode)))

/** Opens, appends `batches` (each a list of payload strings), closes; returns the seq range of every batch. */
const writeBatches = (
  dir: string,
  batches: ReadonlyArray<ReadonlyArray<string>>,
  options: Partial<Omit<LocalWalOptions, "dir">> = {},
) =>
  Effect.scoped(
    Effect.gen(function* () {
      const { wal } = yield* openWal(dir, options)
      const ranges: Array<Appended> = []
      for (const batch of batches) {
        ranges.push(yield* wal.appendBatch(batch.map((text) => ({ type: 1, payload: Buffer.from(text, "utf8") }))))
      }
      return ranges
    }),
  )

const text = (payload: Uint8Array) => Buffer.from(payload).toString("utf8")

/** `n` batches of `size` records each, payload `b<batch>-r<record>` padded to `pad` characters. */
const makeBatches = (sizes: ReadonlyArray<number>, pad = 0) =>
  sizes.map((size, b) => Array.from({ length: size }, (_, r) => `b${b}-r${r}`.padEnd(pad, ".")))

const segmentFiles = (dir: string) =>
  readdirSync(dir)
    .filter((name) => name.endsWith(".log"))
    .sort()

interface ParsedRecord {
  readonly seq: number
  readonly flags: number
  readonly offset: number
  readonly end: number
  readonly payload: string
}

/** Parses one segment file independently of recovery: header plus every whole, valid record. */
const parseSegment = (file: string) => {
  const bytes = readFileSync(file)
  const header = decodeSegmentHeader(bytes)
  const records: Array<ParsedRecord> = []
  let offset = segmentHeaderBytes
  while (offset < bytes.length) {
    const read = readRecordAt(bytes, offset)
    if (read._tag !== "Record" && bytes.subarray(offset).every((byte) => byte === 0)) break // preallocated tail
    if (read._tag !== "Record") throw new Error(`unparseable record in ${file} at ${offset}: ${read._tag}`)
    records.push({
      seq: read.record.seq,
      flags: read.record.flags,
      offset,
      end: read.end,
      payload: text(read.record.payload),
    })
    offset = read.end
  }
  return { header, records, size: bytes.length }
}

const sha256 = (file: string) => createHash("sha256").update(readFileSync(file)).digest("hex")

const flipByte = (file: string, offset: number) => {
  const bytes = readFileSync(file)
  bytes[offset] = bytes[offset]! ^ 0x5a
  writeFileSync(file, bytes)
}

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i)

// ---------------------------------------------------------------------------------------------

describe("Wal on the real file system", () => {
  it.effect("writes string payloads as UTF-8 and reports their bytes", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const payloads = ["a", "é", "日本", '{"emoji":"😀"}']
      const appended = yield* Effect.scoped(
        Effect.flatMap(openWal(dir), ({ wal }) => wal.appendBatch(payloads.map((payload) => ({ type: 1, payload })))),
      )
      assert.deepStrictEqual(appended, {
        firstSeq: 1,
        lastSeq: 4,
        payloadBytes: payloads.reduce((sum, payload) => sum + Buffer.byteLength(payload, "utf8"), 0),
      })
      assert.strictEqual(appended.payloadBytes, 1 + 2 + 6 + 16)
      const { replay } = yield* Effect.scoped(openWal(dir))
      assert.deepStrictEqual(
        replay.map((record) => text(record.payload)),
        payloads,
      )
    }),
  )

  it.effect("replays appended batches in order with gap-free sequences; replayAfterSeq skips applied ones", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const batches = makeBatches([1, 3, 5, 2])
      const ranges = yield* writeBatches(dir, batches)
      assert.deepStrictEqual(ranges, [
        { firstSeq: 1, lastSeq: 1, payloadBytes: 5 },
        { firstSeq: 2, lastSeq: 4, payloadBytes: 15 },
        { firstSeq: 5, lastSeq: 9, payloadBytes: 25 },
        { firstSeq: 10, lastSeq: 11, payloadBytes: 10 },
      ])

      const all = yield* Effect.scoped(
        Effect.gen(function* () {
          const opened = yield* openWal(dir)
          return { ...opened, stats: opened.wal.stats() }
        }),
      )
      assert.deepStrictEqual(
        all.replay.map((record) => record.seq),
        range(1, 11),
      )
      assert.deepStrictEqual(
        all.replay.map((record) => text(record.payload)),
        batches.flat(),
      )
      // The batch-end flag sits on the last record of every batch, and only there.
      assert.deepStrictEqual(
        all.replay.filter((record) => record.flags & batchEndFlag).map((record) => record.seq),
        [1, 4, 9, 11],
      )
      assert.strictEqual(all.report.records, 11)
      assert.strictEqual(all.report.firstSeq, 1)
      assert.strictEqual(all.report.lastSeq, 11)
      assert.strictEqual(all.report.segments, 1)
      assert.strictEqual(all.report.discardedRecords, 0)
      assert.isUndefined(all.report.tornTail)
      assert.strictEqual(all.stats.nextSeq, 12)

      yield* Effect.scoped(
        Effect.gen(function* () {
          const { wal, replay, report } = yield* openWal(dir, { replayAfterSeq: 4 })
          assert.deepStrictEqual(
            replay.map((record) => record.seq),
            range(5, 11),
          )
          assert.deepStrictEqual(
            replay.map((record) => text(record.payload)),
            batches.flat().slice(4),
          )
          assert.strictEqual(report.records, 7)
          assert.strictEqual(report.lastSeq, 11)
          // The generation survives a reopen, and appends continue the sequence.
          assert.strictEqual(wal.stats().salt, all.stats.salt)
          assert.deepStrictEqual(yield* wal.appendBatch([{ type: 1, payload: Buffer.from("after") }]), {
            firstSeq: 12,
            lastSeq: 12,
            payloadBytes: 5,
          })
        }),
      )

      const fullyApplied = yield* Effect.scoped(openWal(dir, { replayAfterSeq: 12 }))
      assert.deepStrictEqual(fullyApplied.replay, [])
      assert.strictEqual(fullyApplied.report.lastSeq, 12)
    }),
  )

  it.effect("a fresh WAL starts at replayAfterSeq + 1 and counts one fdatasync per append", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const { wal, replay, report } = yield* openWal(dir)
      assert.deepStrictEqual(replay, [])
      assert.strictEqual(report.segments, 0)
      assert.strictEqual(report.lastSeq, 0)
      yield* wal.appendBatch([{ type: 1, payload: Buffer.from("a") }])
      const afterFirst = wal.stats()
      for (let i = 0; i < 5; i++)
        yield* wal.appendBatch([
          { type: 1, payload: Buffer.from(`x${i}`) },
          { type: 1, payload: Buffer.from(`y${i}`) },
        ])
      const stats = wal.stats()
      assert.strictEqual(stats.appends, 6)
      assert.strictEqual(stats.fsyncs - afterFirst.fsyncs, 5)
      assert.strictEqual(stats.nextSeq, 12)
      assert.strictEqual(stats.segments, 1)
      assert.strictEqual(stats.bytes, statSync(join(dir, segmentFileName(1))).size)
    }),
  )

  it.effect("rotates into several segments, never splitting a batch, and reopening replays everything", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      // Records of 24 + 40 bytes; segments rotate once they reach 200 bytes.
      const sizes = [1, 3, 2, 4, 1, 2, 3, 1, 1, 4, 2, 2, 3, 1, 2]
      const batches = makeBatches(sizes, 40)
      const ranges = yield* writeBatches(dir, batches, { segmentBytesMax: 200 })
      const total = sizes.reduce((a, b) => a + b, 0)

      const files = segmentFiles(dir)
      assert.isAtLeast(files.length, 4)
      const parsed = files.map((name) => ({ name, ...parseSegment(join(dir, name)) }))
      let expected = 1
      for (const segment of parsed) {
        assert.isDefined(segment.header)
        assert.strictEqual(segment.name, segmentFileName(segment.header!.firstSeq))
        assert.strictEqual(segment.header!.firstSeq, expected)
        assert.isAbove(segment.records.length, 0)
        for (const record of segment.records) assert.strictEqual(record.seq, expected++)
        // Every file ends on a batch end: no batch continues into the next file.
        assert.strictEqual(segment.records[segment.records.length - 1]!.flags & batchEndFlag, batchEndFlag)
        // Rotation happens only between batches, once the size limit was reached.
        const lastBatchStart = ranges.find(
          (r) => r.lastSeq === segment.records[segment.records.length - 1]!.seq,
        )!.firstSeq
        const beforeLastBatch = segment.records.find((record) => record.seq === lastBatchStart)!.offset
        assert.isBelow(beforeLastBatch, 200)
      }
      assert.strictEqual(expected - 1, total)
      for (const { firstSeq, lastSeq } of ranges) {
        const holders = parsed.filter((segment) => segment.records.some((r) => r.seq >= firstSeq && r.seq <= lastSeq))
        assert.strictEqual(holders.length, 1, `batch ${firstSeq}..${lastSeq} spans ${holders.length} files`)
        const holder = holders[0]!
        assert.strictEqual(
          holder.records.filter((r) => r.seq >= firstSeq && r.seq <= lastSeq).length,
          lastSeq - firstSeq + 1,
        )
      }

      const { wal, replay, report } = yield* openWal(dir, { segmentBytesMax: 200 })
      assert.deepStrictEqual(
        replay.map((record) => record.seq),
        range(1, total),
      )
      assert.deepStrictEqual(
        replay.map((record) => text(record.payload)),
        batches.flat(),
      )
      assert.strictEqual(report.segments, files.length)
      assert.strictEqual(wal.stats().segments, files.length)
      assert.isUndefined(report.tornTail)
    }),
  )

  it.effect("releaseThrough deletes only segments whose records are all at or below seq, never the active one", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      yield* writeBatches(dir, makeBatches([2, 2, 2, 2, 2, 2, 2, 2, 2, 2], 40), { segmentBytesMax: 200 })
      const files = segmentFiles(dir)
      assert.isAtLeast(files.length, 4)
      const firstSeqs = files.map((name) => decodeSegmentHeader(readFileSync(join(dir, name)))!.firstSeq)

      yield* Effect.scoped(
        Effect.gen(function* () {
          const { wal } = yield* openWal(dir, { segmentBytesMax: 200 })
          // The first segment still holds firstSeqs[1] - 1: nothing goes.
          assert.strictEqual(yield* wal.releaseThrough(firstSeqs[1]! - 2), 0)
          assert.deepStrictEqual(segmentFiles(dir), files)
          // Now all of the first segment is at or below seq.
          assert.strictEqual(yield* wal.releaseThrough(firstSeqs[1]! - 1), 1)
          assert.deepStrictEqual(segmentFiles(dir), files.slice(1))
          assert.strictEqual(wal.stats().segments, files.length - 1)
          // Beyond the end of the log: everything but the active segment goes.
          assert.strictEqual(yield* wal.releaseThrough(1_000_000), files.length - 2)
          assert.deepStrictEqual(segmentFiles(dir), files.slice(-1))
          assert.strictEqual(yield* wal.releaseThrough(1_000_000), 0)
          assert.deepStrictEqual(segmentFiles(dir), files.slice(-1))
          // The log still appends after releasing.
          assert.deepStrictEqual(yield* wal.appendBatch([{ type: 1, payload: Buffer.from("z") }]), {
            firstSeq: 21,
            lastSeq: 21,
            payloadBytes: 1,
          })
        }),
      )

      const lastFirst = firstSeqs[firstSeqs.length - 1]!
      const { replay, report } = yield* openWal(dir, { segmentBytesMax: 200, replayAfterSeq: lastFirst - 1 })
      assert.deepStrictEqual(
        replay.map((record) => record.seq),
        range(lastFirst, 21),
      )
      assert.strictEqual(report.firstSeq, lastFirst)
      // A checkpoint that claims less than the log now holds is told records are missing.
      const missing = yield* openFails(dir, { segmentBytesMax: 200, replayAfterSeq: 0 })
      assert.strictEqual(missing.reason, "Corrupt")
      assert.strictEqual(missing.file, segmentFileName(lastFirst))
    }),
  )

  it.effect("rotate seals a segment that holds records; release deletes it; the next append starts a new segment", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      yield* Effect.scoped(
        Effect.gen(function* () {
          const { wal } = yield* openWal(dir)
          yield* wal.appendBatch([
            { type: 1, payload: Buffer.from("a") },
            { type: 1, payload: Buffer.from("b") },
          ])
          // Records above the release point keep their sealed segment.
          yield* wal.rotate()
          assert.deepStrictEqual(segmentFiles(dir), [segmentFileName(1)])
          assert.strictEqual(yield* wal.releaseThrough(1), 0)
          assert.deepStrictEqual(segmentFiles(dir), [segmentFileName(1)])
          // Sealed and all released: no segment is left, and none is made before it is needed.
          assert.strictEqual(yield* wal.releaseThrough(2), 1)
          assert.deepStrictEqual(segmentFiles(dir), [])
          assert.strictEqual(wal.stats().segments, 0)
          assert.deepStrictEqual(yield* wal.appendBatch([{ type: 1, payload: Buffer.from("c") }]), {
            firstSeq: 3,
            lastSeq: 3,
            payloadBytes: 1,
          })
          assert.deepStrictEqual(segmentFiles(dir), [segmentFileName(3)])
          // An open segment is never released, even when all its records are below the point.
          assert.strictEqual(yield* wal.releaseThrough(3), 0)
          // A segment without records is not sealed.
          yield* wal.rotate()
          yield* wal.rotate()
          assert.strictEqual(yield* wal.releaseThrough(3), 1)
          yield* wal.appendBatch([{ type: 1, payload: Buffer.from("d") }])
          assert.deepStrictEqual(segmentFiles(dir), [segmentFileName(4)])
          yield* wal.rotate()
          yield* wal.rotate()
          assert.deepStrictEqual(segmentFiles(dir), [segmentFileName(4)])
        }),
      )
      const { replay, report } = yield* openWal(dir, { replayAfterSeq: 3 })
      assert.deepStrictEqual(
        replay.map((record) => [record.seq, text(record.payload)]),
        [[4, "d"]],
      )
      assert.strictEqual(report.firstSeq, 4)
      assert.isUndefined(report.tornTail)
    }),
  )

  it.effect("a log released whole reopens at the sequence after the checkpoint", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      yield* writeBatches(dir, [["a", "b"]])
      yield* Effect.scoped(
        Effect.gen(function* () {
          const { wal } = yield* openWal(dir)
          yield* wal.rotate()
          assert.strictEqual(yield* wal.releaseThrough(2), 1)
        }),
      )
      assert.deepStrictEqual(segmentFiles(dir), [])
      const { wal, replay, report } = yield* openWal(dir, { replayAfterSeq: 2 })
      assert.deepStrictEqual(replay, [])
      assert.strictEqual(report.lastSeq, 2)
      assert.deepStrictEqual(yield* wal.appendBatch([{ type: 1, payload: Buffer.from("c") }]), {
        firstSeq: 3,
        lastSeq: 3,
        payloadBytes: 1,
      })
    }),
  )

  describe("preallocated segments", () => {
    const preallocated = { preallocateBytes: 64 * 1024 }

    it.effect(
      "a new segment is zero-filled to the preallocation; appends fill it from the front and count only their bytes",
      () =>
        Effect.gen(function* () {
          const dir = yield* tempDir
          yield* writeBatches(dir, makeBatches([2, 1]), preallocated)
          const file = join(dir, segmentFileName(1))
          const bytes = readFileSync(file)
          assert.strictEqual(bytes.length, 64 * 1024)
          const whole = parseSegment(file)
          assert.deepStrictEqual(
            whole.records.map((record) => record.seq),
            [1, 2, 3],
          )
          const dataEnd = whole.records[2]!.end
          assert.isTrue(bytes.subarray(dataEnd).every((byte) => byte === 0))
          const stats = yield* Effect.scoped(Effect.map(openWal(dir, preallocated), ({ wal }) => wal.stats()))
          assert.strictEqual(stats.bytes, dataEnd)
        }),
    )

    it.effect(
      "reopening reads the zero tail as the end of the log: nothing reported, nothing cut, appends continue after the last record",
      () =>
        Effect.gen(function* () {
          const dir = yield* tempDir
          yield* writeBatches(dir, makeBatches([2, 1]), preallocated)
          const file = join(dir, segmentFileName(1))
          yield* Effect.scoped(
            Effect.gen(function* () {
              const { wal, replay, report } = yield* openWal(dir, preallocated)
              assert.isUndefined(report.tornTail)
              assert.deepStrictEqual(
                replay.map((record) => record.seq),
                [1, 2, 3],
              )
              assert.strictEqual(statSync(file).size, 64 * 1024)
              assert.deepStrictEqual(yield* wal.appendBatch([{ type: 1, payload: Buffer.from("after", "utf8") }]), {
                firstSeq: 4,
                lastSeq: 4,
                payloadBytes: 5,
              })
            }),
          )
          const { replay } = yield* Effect.scoped(openWal(dir, preallocated))
          assert.deepStrictEqual(
            replay.map((record) => text(record.payload)),
            ["b0-r0", "b0-r1", "b1-r0", "after"],
          )
          assert.strictEqual(statSync(file).size, 64 * 1024)
        }),
    )

    it.effect(
      "a batch without its end record before the zeros is cut and reported; the file is cut back to the last whole batch",
      () =>
        Effect.gen(function* () {
          const dir = yield* tempDir
          yield* writeBatches(dir, makeBatches([2, 3]), preallocated)
          const file = join(dir, segmentFileName(1))
          const whole = parseSegment(file)
          const keptEnd = whole.records.find((record) => record.seq === 2)!.end
          // The last batch's final record never reached the disk: zeros where it was.
          const lastRecord = whole.records.find((record) => record.seq === 5)!
          const bytes = readFileSync(file)
          bytes.fill(0, lastRecord.offset, lastRecord.end)
          writeFileSync(file, bytes)
          const { replay, report } = yield* Effect.scoped(openWal(dir, preallocated))
          assert.deepStrictEqual(
            replay.map((record) => record.seq),
            [1, 2],
          )
          assert.match(report.tornTail!.why, /batch without its end record/)
          assert.strictEqual(report.tornTail!.offset, keptEnd)
          assert.strictEqual(statSync(file).size, keptEnd)
        }),
    )

    it.effect("a flipped byte in a record before the zero tail, valid records after it: Corrupt, no byte changes", () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        yield* writeBatches(dir, makeBatches([1, 1, 1]), preallocated)
        const file = join(dir, segmentFileName(1))
        const first = parseSegment(file).records[0]!
        flipByte(file, first.offset + recordHeaderBytes)
        const before = sha256(file)
        const error = yield* openFails(dir, preallocated)
        assert.strictEqual(error.reason, "Corrupt")
        assert.strictEqual(error.offset, first.offset)
        assert.strictEqual(sha256(file), before)
      }),
    )
  })

  describe("torn tail", () => {
    const tails: ReadonlyArray<{
      readonly name: string
      readonly damage: (file: string) => void
      /** Whole batches expected to survive (the fixture has batches [2, 1, 3, 1]). */
      readonly survivingSeqs: number
      readonly why: RegExp
    }> = [
      {
        name: "the last record cut in the middle of its payload",
        damage: (file) => truncateSync(file, statSync(file).size - 10),
        survivingSeqs: 6,
        why: /partial record/,
      },
      {
        name: "the last record cut inside its header",
        damage: (file) => truncateSync(file, statSync(file).size - (recordHeaderBytes + 20) + 7),
        survivingSeqs: 6,
        why: /partial record/,
      },
      {
        name: "garbage appended after the last batch",
        damage: (file) =>
          appendFileSync(file, Buffer.from("this is not a record, just noise from a torn write, more than 24 bytes")),
        survivingSeqs: 7,
        why: /checksum|exceeds|partial/,
      },
      {
        name: "a torn record before a zero-filled tail",
        damage: (file) =>
          appendFileSync(
            file,
            Buffer.concat([Buffer.from("torn record bytes, more than a header"), Buffer.alloc(512)]),
          ),
        survivingSeqs: 7,
        why: /checksum|exceeds|partial/,
      },
      {
        name: "a partial record header appended",
        damage: (file) => {
          const record = Buffer.alloc(recordHeaderBytes + 4)
          const bytes = readFileSync(file)
          const salt = bytes.readUInt32LE(8)
          encodeRecordInto(record, 0, { seq: 8, salt, type: 1, flags: batchEndFlag, payload: Buffer.from("next") })
          appendFileSync(file, record.subarray(0, 13))
        },
        survivingSeqs: 7,
        why: /partial record/,
      },
    ]

    for (const tail of tails) {
      it.effect(`${tail.name}: open cuts back to the last whole batch, reports it, and appends continue`, () =>
        Effect.gen(function* () {
          const dir = yield* tempDir
          const batches = makeBatches([2, 1, 3, 1], 20)
          yield* writeBatches(dir, batches)
          const file = join(dir, segmentFileName(1))
          const whole = parseSegment(file)
          const keptEnd = whole.records.find((record) => record.seq === tail.survivingSeqs)!.end
          tail.damage(file)
          const damagedSize = statSync(file).size

          yield* Effect.scoped(
            Effect.gen(function* () {
              const { wal, replay, report } = yield* openWal(dir)
              assert.deepStrictEqual(report.tornTail && { ...report.tornTail, why: "" }, {
                file: segmentFileName(1),
                offset: keptEnd,
                bytesCut: damagedSize - keptEnd,
                why: "",
              })
              assert.match(report.tornTail!.why, tail.why)
              assert.strictEqual(statSync(file).size, keptEnd)
              assert.deepStrictEqual(
                replay.map((record) => record.seq),
                range(1, tail.survivingSeqs),
              )
              assert.deepStrictEqual(
                replay.map((record) => text(record.payload)),
                batches.flat().slice(0, tail.survivingSeqs),
              )
              assert.strictEqual(report.lastSeq, tail.survivingSeqs)
              const next = tail.survivingSeqs + 1
              assert.deepStrictEqual(
                yield* wal.appendBatch([
                  { type: 1, payload: Buffer.from("n1") },
                  { type: 1, payload: Buffer.from("n2") },
                ]),
                {
                  firstSeq: next,
                  lastSeq: next + 1,
                  payloadBytes: 4,
                },
              )
            }),
          )

          const { replay, report } = yield* openWal(dir)
          assert.isUndefined(report.tornTail)
          assert.deepStrictEqual(
            replay.map((record) => record.seq),
            range(1, tail.survivingSeqs + 2),
          )
          assert.deepStrictEqual(
            replay.slice(-2).map((record) => text(record.payload)),
            ["n1", "n2"],
          )
        }),
      )
    }

    it.effect("a torn header of a freshly rotated last segment drops that file whole; appends recreate it", () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        yield* writeBatches(dir, makeBatches([2, 2, 2, 2], 40), { segmentBytesMax: 100 })
        const files = segmentFiles(dir)
        assert.isAtLeast(files.length, 3)
        const last = files[files.length - 1]!
        const lastFirstSeq = decodeSegmentHeader(readFileSync(join(dir, last)))!.firstSeq
        // Simulate a crash after the new segment was created but before its header was durable.
        truncateSync(join(dir, last), 11)

        yield* Effect.scoped(
          Effect.gen(function* () {
            const { wal, replay, report } = yield* openWal(dir, { segmentBytesMax: 100 })
            assert.deepStrictEqual(report.tornTail, {
              file: last,
              offset: 0,
              bytesCut: 11,
              why: "torn or missing segment header",
            })
            assert.isFalse(existsSync(join(dir, last)))
            assert.deepStrictEqual(
              replay.map((record) => record.seq),
              range(1, lastFirstSeq - 1),
            )
            assert.deepStrictEqual(yield* wal.appendBatch([{ type: 1, payload: Buffer.from("again") }]), {
              firstSeq: lastFirstSeq,
              lastSeq: lastFirstSeq,
              payloadBytes: 5,
            })
          }),
        )
        const { replay, report } = yield* openWal(dir, { segmentBytesMax: 100 })
        assert.isUndefined(report.tornTail)
        assert.deepStrictEqual(
          replay.map((record) => record.seq),
          range(1, lastFirstSeq),
        )
      }),
    )
  })

  describe("a batch without its end record at the tail is dropped whole", () => {
    for (const recordsLeft of [1, 2]) {
      it.effect(`${recordsLeft} of 3 records of the last batch on disk`, () =>
        Effect.gen(function* () {
          const dir = yield* tempDir
          const batches = makeBatches([2, 1, 3], 16)
          yield* writeBatches(dir, batches)
          const file = join(dir, segmentFileName(1))
          const whole = parseSegment(file)
          const batchStart = whole.records.find((record) => record.seq === 4)!
          assert.strictEqual(batchStart.flags & batchEndFlag, 0)
          const cutAt = whole.records.find((record) => record.seq === 3 + recordsLeft)!.end
          truncateSync(file, cutAt)

          yield* Effect.scoped(
            Effect.gen(function* () {
              const { wal, replay, report } = yield* openWal(dir)
              assert.deepStrictEqual(report.tornTail, {
                file: segmentFileName(1),
                offset: batchStart.offset,
                bytesCut: cutAt - batchStart.offset,
                why: "batch without its end record",
              })
              assert.deepStrictEqual(
                replay.map((record) => record.seq),
                [1, 2, 3],
              )
              assert.strictEqual(statSync(file).size, batchStart.offset)
              assert.deepStrictEqual(yield* wal.appendBatch([{ type: 1, payload: Buffer.from("later") }]), {
                firstSeq: 4,
                lastSeq: 4,
                payloadBytes: 5,
              })
            }),
          )
          const { replay } = yield* openWal(dir)
          assert.deepStrictEqual(
            replay.map((record) => [record.seq, text(record.payload)]),
            [
              [1, "b0-r0".padEnd(16, ".")],
              [2, "b0-r1".padEnd(16, ".")],
              [3, "b1-r0".padEnd(16, ".")],
              [4, "later"],
            ],
          )
        }),
      )
    }
  })

  describe("corruption refuses to open and touches no byte", () => {
    const flips: ReadonlyArray<{ readonly name: string; readonly at: (record: ParsedRecord) => number }> = [
      { name: "payload", at: (record) => record.offset + recordHeaderBytes + 3 },
      { name: "sequence field", at: (record) => record.offset + 9 },
      { name: "checksum field", at: (record) => record.offset + 5 },
      { name: "length field", at: (record) => record.offset + 1 },
    ]
    for (const flip of flips) {
      it.effect(`a flipped byte in the ${flip.name} of a record followed by valid records`, () =>
        Effect.gen(function* () {
          const dir = yield* tempDir
          yield* writeBatches(dir, makeBatches([2, 2, 2, 2, 2], 20))
          const file = join(dir, segmentFileName(1))
          const victim = parseSegment(file).records.find((record) => record.seq === 4)!
          flipByte(file, flip.at(victim))
          const before = sha256(file)
          const sizeBefore = statSync(file).size

          const error: WalError = yield* openFails(dir)
          assert.strictEqual(error._tag, "WalError")
          assert.strictEqual(error.reason, "Corrupt")
          assert.strictEqual(error.file, segmentFileName(1))
          assert.strictEqual(error.offset, victim.offset)
          assert.include(error.message, segmentFileName(1))
          assert.strictEqual(sha256(file), before)
          assert.strictEqual(statSync(file).size, sizeBefore)
          // Refusing is stable: a second attempt refuses the same way and still writes nothing.
          const again = yield* openFails(dir, { discardAfterSeq: 2 })
          assert.strictEqual(again.reason, "Corrupt")
          assert.strictEqual(again.offset, victim.offset)
          assert.strictEqual(sha256(file), before)
          assert.deepStrictEqual(segmentFiles(dir), [segmentFileName(1)])
        }),
      )
    }

    for (const where of ["middle", "last record"] as const) {
      it.effect(`a flipped byte in the ${where} of a non-last segment`, () =>
        Effect.gen(function* () {
          const dir = yield* tempDir
          yield* writeBatches(dir, makeBatches([1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1], 40), { segmentBytesMax: 200 })
          const files = segmentFiles(dir)
          assert.isAtLeast(files.length, 3)
          const victimFile = files[1]!
          const { records } = parseSegment(join(dir, victimFile))
          assert.isAtLeast(records.length, 3)
          const victim = where === "middle" ? records[1]! : records[records.length - 1]!
          flipByte(join(dir, victimFile), victim.offset + recordHeaderBytes + 7)
          const hashes = files.map((name) => sha256(join(dir, name)))

          const error = yield* openFails(dir, { segmentBytesMax: 200 })
          assert.strictEqual(error.reason, "Corrupt")
          assert.strictEqual(error.file, victimFile)
          assert.strictEqual(error.offset, victim.offset)
          assert.deepStrictEqual(segmentFiles(dir), files)
          assert.deepStrictEqual(
            files.map((name) => sha256(join(dir, name))),
            hashes,
          )
        }),
      )
    }

    it.effect("a missing middle segment (a sequence gap) is corruption, not a torn tail", () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        yield* writeBatches(dir, makeBatches([1, 1, 1, 1, 1, 1, 1, 1, 1], 40), { segmentBytesMax: 150 })
        const files = segmentFiles(dir)
        assert.isAtLeast(files.length, 3)
        rmSync(join(dir, files[1]!))
        const error = yield* openFails(dir, { segmentBytesMax: 150 })
        assert.strictEqual(error.reason, "Corrupt")
        assert.strictEqual(error.file, files[2])
        assert.deepStrictEqual(segmentFiles(dir), [files[0], files[2], ...files.slice(3)])
      }),
    )
  })

  it.effect("discardAfterSeq cuts the records above it, removing a whole later segment", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const batches = makeBatches([2, 1, 2, 1, 2, 1, 2, 1, 2, 1], 40)
      const ranges = yield* writeBatches(dir, batches, { segmentBytesMax: 200 })
      const total = ranges[ranges.length - 1]!.lastSeq
      const files = segmentFiles(dir)
      assert.isAtLeast(files.length, 3)
      const parsed = files.map((name) => ({ name, ...parseSegment(join(dir, name)) }))
      // Keep through the first batch end inside the second segment that is not its last record.
      const second = parsed[1]!
      const keepThrough = second.records.find(
        (record) => record.flags & batchEndFlag && record !== second.records[second.records.length - 1],
      )!
      assert.isDefined(keepThrough)

      yield* Effect.scoped(
        Effect.gen(function* () {
          const { wal, replay, report } = yield* openWal(dir, {
            segmentBytesMax: 200,
            discardAfterSeq: keepThrough.seq,
          })
          assert.strictEqual(report.discardedRecords, total - keepThrough.seq)
          assert.strictEqual(report.lastSeq, keepThrough.seq)
          assert.isUndefined(report.tornTail)
          assert.deepStrictEqual(
            replay.map((record) => record.seq),
            range(1, keepThrough.seq),
          )
          assert.deepStrictEqual(segmentFiles(dir), files.slice(0, 2))
          assert.strictEqual(statSync(join(dir, second.name)).size, keepThrough.end)
          assert.deepStrictEqual(yield* wal.appendBatch([{ type: 1, payload: Buffer.from("fresh") }]), {
            firstSeq: keepThrough.seq + 1,
            lastSeq: keepThrough.seq + 1,
            payloadBytes: 5,
          })
        }),
      )

      const { replay, report } = yield* openWal(dir, { segmentBytesMax: 200 })
      assert.isUndefined(report.tornTail)
      assert.strictEqual(report.discardedRecords, 0)
      assert.deepStrictEqual(
        replay.map((record) => record.seq),
        range(1, keepThrough.seq + 1),
      )
      assert.strictEqual(text(replay[replay.length - 1]!.payload), "fresh")
    }),
  )

  it.effect("discardAfterSeq interrupted at any step leaves a log that opens: records cut again, never a gap", () =>
    Effect.gen(function* () {
      const batches = makeBatches([2, 1, 2, 1, 2, 1, 2, 1, 2, 1], 40)
      for (let failAt = 0; ; failAt++) {
        const dir = yield* tempDir
        const ranges = yield* writeBatches(dir, batches, { segmentBytesMax: 200 })
        const total = ranges[ranges.length - 1]!.lastSeq
        assert.isAtLeast(segmentFiles(dir).length, 4)
        // Unacknowledged records spanning the tail of one segment and every later one.
        const keepThrough = ranges[3]!.lastSeq
        // The `failAt`-th change the cut makes to the disk fails, as a crash there would end it.
        let changes = 0
        const failing = Layer.effect(
          WalFs,
          Effect.map(Effect.provide(Effect.service(WalFs), layerNode), (base) => {
            const step = <A>(effect: Effect.Effect<A, FsError>) =>
              Effect.suspend(() =>
                changes++ === failAt
                  ? Effect.fail(new FsError({ op: "crash", path: dir, reason: "Io", message: "crashed here" }))
                  : effect,
              )
            return WalFs.of({
              ...base,
              remove: (path) => step(base.remove(path)),
              syncDir: (path) => step(base.syncDir(path)),
              open: (path, options) =>
                Effect.map(base.open(path, options), (file) => ({
                  ...file,
                  truncate: (length: number) => step(file.truncate(length)),
                  datasync: () => step(file.datasync()),
                })),
            })
          }),
        )
        const cut = yield* Effect.exit(
          openLocalWal({ dir, ...unpreallocated, segmentBytesMax: 200, discardAfterSeq: keepThrough }).pipe(
            Effect.flatMap((opened) => opened.wal.close()),
            Effect.provide(failing),
          ),
        )
        // Opened as the next process would, knowing nothing of the cut: a prefix of the log, whole batches.
        const { replay, report } = yield* openWal(dir, { segmentBytesMax: 200 })
        const seqs = replay.map((record) => record.seq)
        const last = seqs.length
        assert.deepStrictEqual(seqs, range(1, last), `interrupted at change ${failAt}`)
        assert.isAtLeast(last, keepThrough, `interrupted at change ${failAt}`)
        assert.include(
          ranges.map((batch) => batch.lastSeq),
          last,
          `interrupted at change ${failAt}: not a whole batch`,
        )
        assert.isUndefined(report.tornTail)
        if (cut._tag === "Success") {
          assert.strictEqual(last, keepThrough)
          assert.isAbove(failAt, 0)
          assert.isBelow(keepThrough, total)
          return
        }
      }
    }),
  )

  it.effect("discardAfterSeq at or above the end of the log discards nothing", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      yield* writeBatches(dir, makeBatches([2, 3]))
      const before = sha256(join(dir, segmentFileName(1)))
      const { replay, report } = yield* openWal(dir, { discardAfterSeq: 5 })
      assert.strictEqual(report.discardedRecords, 0)
      assert.strictEqual(replay.length, 5)
      assert.strictEqual(sha256(join(dir, segmentFileName(1))), before)
    }),
  )

  it.effect("a WAL of another generation (salt mismatch) is refused as GenerationMismatch", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      yield* writeBatches(dir, makeBatches([2, 2]), { salt: 0x1234 })
      const file = join(dir, segmentFileName(1))
      assert.strictEqual(readFileSync(file).readUInt32LE(8), 0x1234)
      const before = sha256(file)

      const error = yield* openFails(dir, { salt: 0x4321 })
      assert.strictEqual(error.reason, "GenerationMismatch")
      assert.strictEqual(error.file, segmentFileName(1))
      assert.strictEqual(sha256(file), before)

      const { wal, replay } = yield* openWal(dir, { salt: 0x1234 })
      assert.strictEqual(wal.stats().salt, 0x1234)
      assert.strictEqual(replay.length, 4)
    }),
  )

  it.effect("records of another generation inside a segment are not taken for current ones", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      yield* writeBatches(dir, makeBatches([1, 1]), { salt: 7 })
      const file = join(dir, segmentFileName(1))
      // A leftover record with the right next sequence but an old salt, at the tail.
      const stale = Buffer.alloc(recordHeaderBytes + 5)
      encodeRecordInto(stale, 0, { seq: 3, salt: 6, type: 1, flags: batchEndFlag, payload: Buffer.from("stale") })
      const sizeBefore = statSync(file).size
      appendFileSync(file, stale)

      const { replay, report } = yield* openWal(dir, { salt: 7 })
      assert.deepStrictEqual(
        replay.map((record) => record.seq),
        [1, 2],
      )
      assert.deepStrictEqual(report.tornTail, {
        file: segmentFileName(1),
        offset: sizeBefore,
        bytesCut: stale.length,
        why: "record of another store generation",
      })
    }),
  )
})
