/**
 * The local write-ahead log of one store: segmented append-only files (the `Wal` of Wal.ts that
 * every store uses unless it shares a JetStream log).
 *
 * Owns the WAL directory of one store. Invariants:
 * - Sequence numbers are gap-free; segment `wal-<n>.log` starts at sequence n and every record
 *   in it follows its predecessor by exactly one.
 * - A batch is written with one durable write (`WalFile.queueDurable`: one `O_DSYNC` pwrite on
 *   the real disk, equivalent to write + fdatasync, made by the WAL writer thread). `queueBatch`
 *   queues it behind the writes still on their way and gives an effect that resolves only after
 *   it is durable; the caller acknowledges nothing before. Batches reach the disk one at a time,
 *   in queue order, and a new segment receives records only after every earlier write is durable.
 * - Segments rotate only between batches, so a batch never spans two files, and the last record
 *   of every batch carries `batchEndFlag`.
 * - After any failed write or sync the log is poisoned: it refuses every further call, because
 *   what reached the disk is unknown. The owner restarts and reopens it (recovery decides).
 *
 * Recovery (`openLocalWal`) reads every segment in order and:
 * - cuts off, and reports, a torn or partial tail — a bad or short record, or a batch without its
 *   end record, at the end of the last segment with no later batch after it. The sectors of one
 *   unsynced write survive a power cut independently, so damage with only records of the *same*
 *   batch after it is a torn write, not corruption (such a batch was never acknowledged);
 * - refuses to open (`WalError` reason `Corrupt`, naming file and offset, touching no byte) when a
 *   bad record is followed by a valid one, when a sequence skips, or when a segment is damaged
 *   anywhere but at the end of the log;
 * - with `discardAfterSeq`, also cuts records above that sequence: after a failed batch the owner
 *   reopens with its last acknowledged sequence, so an unacknowledged batch that reached the disk
 *   is removed and the error its callers got stays true;
 * - with `snapshotRecordType`, finds the last whole snapshot batch (a compaction's copy of the
 *   state): when the checkpoint is older than it, replay starts there (`report.snapshot`), and a
 *   log that starts after the checkpoint is not missing anything the snapshot does not hold.
 */
import { posix as path } from "node:path"
import { Deferred, Effect } from "effect"
import { type Appended, type OpenedWal, type RecoveryReport, type Wal, WalError, type WalErrorReason } from "./Wal.ts"
import { type FsError, type WalFile, WalFs } from "./WalFs.ts"
import {
  batchEndFlag,
  batchStartFlag,
  decodeSegmentHeader,
  encodeBatch,
  encodeSegmentHeader,
  parseSegmentFileName,
  payloadLength,
  readRecordAt,
  recordHeaderBytes,
  recordPayloadBytesMax,
  segmentFileName,
  segmentHeaderBytes,
  type WalRecord,
} from "./WalRecord.ts"

/** How to open a local WAL. */
export interface LocalWalOptions {
  readonly dir: string
  /** Rotate to a new segment once the active one has reached this size (checked between batches). */
  readonly segmentBytesMax: number
  /** Records at or below this sequence are already applied; only later ones are returned for replay. */
  readonly replayAfterSeq: number
  /** The store generation the caller knows (from its checkpoint); a WAL of another generation is refused. */
  readonly salt?: number
  /** Cut every record above this sequence (used when reopening after a failed batch). */
  readonly discardAfterSeq?: number
  /** Bytes a new segment is zero-filled to (default `defaultPreallocateBytes`, at most `segmentBytesMax`). */
  readonly preallocateBytes?: number
  /**
   * The record type of snapshot records (a compaction's copy of the whole state, one batch). When
   * the log holds a whole snapshot batch above `replayAfterSeq`, replay starts at the last such batch
   * and the records before it are not needed, even if the checkpoint is older than the log.
   */
  readonly snapshotRecordType?: number
}

/**
 * A new segment is written as its header followed by zeros up to 4 MiB (about one checkpoint
 * interval of small records), as PostgreSQL does with its WAL segments: a durable write inside the
 * file's existing size costs one data sync and no journal commit, about half of an appending one on
 * ext4 (docs/benchmarks.md). Recovery reads a zero tail as the end of the log, not as damage.
 */
export const defaultPreallocateBytes = 4 * 1024 * 1024

const fsFailure = (reason: WalErrorReason) => (error: FsError) =>
  new WalError({
    reason: error.reason === "NoSpace" ? "DiskFull" : reason,
    file: error.path,
    message: `${error.op} ${error.path}: ${error.message}`,
  })

/** A failed durable write: the fdatasync half is reported as such, the rest as a failed write. */
const durableWriteFailure = (error: FsError) =>
  fsFailure(error.op === "fdatasync" ? "FsyncFailed" : "WriteFailed")(error)

const corrupt = (file: string, offset: number, message: string) =>
  new WalError({ reason: "Corrupt", file, offset, message: `${file} at byte ${offset}: ${message}` })

interface SegmentScan {
  readonly name: string
  readonly firstSeq: number
  readonly salt: number
  readonly records: Array<WalRecord & { readonly end: number }>
  /** Offset after the last complete batch. */
  readonly committedEnd: number
  /** Where the bytes written end: the file size, or where its zero-filled (preallocated) tail starts. */
  readonly dataEnd: number
  readonly size: number
  readonly damage?: { readonly offset: number; readonly why: string; readonly validAfter: boolean }
}

/** True when a record of a later batch (salt, sequence above `minSeq`, batch-start flag) starts after `from`. */
const hasValidRecordAfter = (bytes: Buffer, from: number, salt: number | undefined, minSeq: number): boolean => {
  for (let offset = from; offset + recordHeaderBytes <= bytes.length; offset++) {
    const read = readRecordAt(bytes, offset)
    if (
      read._tag === "Record" &&
      (salt === undefined || read.salt === salt) &&
      read.record.seq > minSeq &&
      read.record.flags & batchStartFlag
    )
      return true
  }
  return false
}

const scanSegment = (name: string, bytes: Buffer, expectedSeq: number | undefined): SegmentScan | WalError => {
  const header = decodeSegmentHeader(bytes)
  if (header === undefined) {
    return {
      name,
      firstSeq: parseSegmentFileName(name) ?? 0,
      salt: 0,
      records: [],
      committedEnd: 0,
      dataEnd: bytes.length,
      size: bytes.length,
      // Records are appended only after the header was fdatasynced: a valid one behind a bad header is damage.
      damage: {
        offset: 0,
        why: "torn or missing segment header",
        validAfter: hasValidRecordAfter(bytes, segmentHeaderBytes, undefined, (parseSegmentFileName(name) ?? 1) - 1),
      },
    }
  }
  if (header.firstSeq !== parseSegmentFileName(name)) {
    return corrupt(name, 0, `header says first sequence ${header.firstSeq}, file name disagrees`)
  }
  if (expectedSeq !== undefined && header.firstSeq !== expectedSeq) {
    return corrupt(
      name,
      0,
      `sequence gap: expected segment to start at ${expectedSeq}, it starts at ${header.firstSeq}`,
    )
  }
  const records: Array<WalRecord & { end: number }> = []
  let offset = segmentHeaderBytes
  let committedEnd = segmentHeaderBytes
  let committedCount = 0
  let seq = header.firstSeq
  while (offset < bytes.length) {
    const read = readRecordAt(bytes, offset)
    const why =
      read._tag === "Short"
        ? "partial record"
        : read._tag === "Bad"
          ? read.why
          : read.salt !== header.salt
            ? "record of another store generation"
            : read.record.seq !== seq
              ? `sequence ${read.record.seq} where ${seq} was expected`
              : undefined
    // The preallocated tail of a segment: zeros, never a valid record (a zero header fails its checksum).
    if ((why !== undefined || read._tag !== "Record") && isZeroFrom(bytes, offset)) break
    if (why !== undefined || read._tag !== "Record") {
      const validAfter = hasValidRecordAfter(bytes, offset + 1, header.salt, seq - 1)
      records.length = committedCount
      return {
        name,
        ...header,
        records,
        committedEnd,
        dataEnd: bytes.length,
        size: bytes.length,
        damage: { offset, why: why ?? "", validAfter },
      }
    }
    records.push({ ...read.record, end: read.end })
    offset = read.end
    seq++
    if (read.record.flags & batchEndFlag) {
      committedEnd = offset
      committedCount = records.length
    }
  }
  if (committedEnd < offset) {
    records.length = committedCount
    return {
      name,
      ...header,
      records,
      committedEnd,
      dataEnd: offset,
      size: bytes.length,
      damage: { offset: committedEnd, why: "batch without its end record", validAfter: false },
    }
  }
  return { name, ...header, records, committedEnd, dataEnd: offset, size: bytes.length }
}

const zeroChunk = Buffer.alloc(64 * 1024)

/** True when every byte from `offset` to the end is zero (compared a chunk at a time, natively). */
const isZeroFrom = (bytes: Buffer, offset: number): boolean => {
  for (let start = offset; start < bytes.length; start += zeroChunk.length) {
    const end = Math.min(bytes.length, start + zeroChunk.length)
    if (bytes.compare(zeroChunk, 0, end - start, start, end) !== 0) return false
  }
  return true
}

/** Opens (recovering) the WAL in `options.dir`, creating the first segment of a new store. */
export const openLocalWal = Effect.fnUntraced(function* (options: LocalWalOptions) {
  const fs = yield* WalFs
  const { dir } = options
  yield* fs.mkdirp(dir).pipe(Effect.mapError(fsFailure("WriteFailed")))
  const names = (yield* fs.list(dir).pipe(Effect.mapError(fsFailure("ReadFailed"))))
    .filter((name) => parseSegmentFileName(name) !== undefined)
    .sort()

  const scans: Array<SegmentScan> = []
  let expectedSeq: number | undefined
  let tornTail: RecoveryReport["tornTail"]
  for (const [index, name] of names.entries()) {
    const file = yield* fs.open(path.join(dir, name), { create: false }).pipe(Effect.mapError(fsFailure("ReadFailed")))
    const size = yield* file.size().pipe(Effect.mapError(fsFailure("ReadFailed")))
    const bytes = Buffer.from(yield* file.read(0, size).pipe(Effect.mapError(fsFailure("ReadFailed"))))
    yield* file.close()
    const scan = scanSegment(name, bytes, expectedSeq)
    if (scan instanceof WalError) return yield* scan
    const isLast = index === names.length - 1
    if (scan.damage !== undefined) {
      if (!isLast || scan.damage.validAfter) {
        return yield* corrupt(
          name,
          scan.damage.offset,
          `${scan.damage.why}, and valid records follow: refusing to start; every byte is kept (see \`mnemos repair\`)`,
        )
      }
      tornTail = {
        file: name,
        offset: scan.committedEnd,
        bytesCut: scan.size - scan.committedEnd,
        why: scan.damage.why,
      }
    }
    if (options.salt !== undefined && scan.damage?.offset !== 0 && scan.salt !== options.salt) {
      return yield* new WalError({
        reason: "GenerationMismatch",
        file: name,
        offset: 0,
        message: `${name} belongs to store generation ${scan.salt}, the checkpoint to ${options.salt}`,
      })
    }
    scans.push(scan)
    expectedSeq = scan.firstSeq + scan.records.length
  }

  // A segment whose header never made it to disk is dropped whole; otherwise the torn tail is cut.
  const discardAfterSeq = options.discardAfterSeq ?? Number.POSITIVE_INFINITY
  let discardedRecords = 0
  const keep: Array<{ readonly scan: SegmentScan; readonly end: number; readonly records: number }> = []
  const dropped: Array<SegmentScan> = []
  for (const scan of scans) {
    if (scan.damage?.offset === 0 || (scan.firstSeq > discardAfterSeq && keep.length > 0)) dropped.push(scan)
    else keep.push({ scan, end: 0, records: 0 })
  }
  // Whole segments go first, the last one first, and only then is a kept one cut short: a crash in
  // between leaves records that the next open cuts again, never a gap in the sequence.
  for (const scan of dropped.reverse()) {
    discardedRecords += scan.records.length
    yield* fs.remove(path.join(dir, scan.name)).pipe(Effect.mapError(fsFailure("WriteFailed")))
    yield* fs.syncDir(dir).pipe(Effect.mapError(fsFailure("FsyncFailed")))
  }
  for (const [index, { scan }] of keep.entries()) {
    const kept = scan.records.filter((record) => record.seq <= discardAfterSeq).length
    discardedRecords += scan.records.length - kept
    const end = kept === 0 ? segmentHeaderBytes : scan.records[kept - 1]!.end
    // Cut whatever follows the kept records, unless it is only the zero-filled preallocation.
    if (end < scan.dataEnd) {
      const file = yield* fs
        .open(path.join(dir, scan.name), { create: false })
        .pipe(Effect.mapError(fsFailure("WriteFailed")))
      yield* file.truncate(end).pipe(Effect.mapError(fsFailure("WriteFailed")))
      yield* file.datasync().pipe(Effect.mapError(fsFailure("FsyncFailed")))
      yield* file.close()
    }
    keep[index] = { scan, end, records: kept }
  }

  const first = keep[0]
  const lastKept = keep[keep.length - 1]
  const salt = first?.scan.salt ?? options.salt ?? (Math.floor(Math.random() * 0xffffffff) >>> 0 || 1)
  const nextSeq = lastKept ? lastKept.scan.firstSeq + lastKept.records : options.replayAfterSeq + 1
  const snapshot =
    options.snapshotRecordType === undefined
      ? undefined
      : lastSnapshotBatch(
          keep.flatMap(({ scan, records }) => scan.records.slice(0, records)),
          options.snapshotRecordType,
        )
  const rebuild = snapshot !== undefined && snapshot.lastSeq > options.replayAfterSeq ? snapshot : undefined
  const replayFrom = rebuild !== undefined ? rebuild.firstSeq - 1 : options.replayAfterSeq
  if (first !== undefined && first.scan.firstSeq > replayFrom + 1) {
    return yield* corrupt(
      first.scan.name,
      0,
      `the checkpoint holds records up to ${options.replayAfterSeq} but the log starts at ${first.scan.firstSeq}: records are missing`,
    )
  }
  if (nextSeq <= options.replayAfterSeq && first !== undefined) {
    return yield* corrupt(
      lastKept!.scan.name,
      lastKept!.end,
      `the checkpoint holds records up to ${options.replayAfterSeq} but the log ends at ${nextSeq - 1}`,
    )
  }

  const replay: Array<WalRecord> = []
  for (const { scan, records } of keep) {
    for (const record of scan.records.slice(0, records)) {
      if (record.seq > replayFrom)
        replay.push({ seq: record.seq, type: record.type, flags: record.flags, payload: record.payload })
    }
  }

  const segments = keep.map(({ scan, end }) => ({ name: scan.name, firstSeq: scan.firstSeq, size: end }))
  const wal = yield* makeLocalWal({
    dir,
    segmentBytesMax: options.segmentBytesMax,
    preallocateBytes: options.preallocateBytes ?? Math.min(defaultPreallocateBytes, options.segmentBytesMax),
    salt,
    nextSeq,
    segments,
  })
  const report: RecoveryReport = {
    segments: segments.length,
    records: replay.length,
    firstSeq: first?.scan.firstSeq ?? nextSeq,
    lastSeq: nextSeq - 1,
    discardedRecords,
    ...(tornTail !== undefined ? { tornTail } : {}),
    ...(rebuild !== undefined ? { snapshot: rebuild } : {}),
  }
  return { wal, replay, report } satisfies OpenedWal
})

/** The first and last sequence of the last whole batch made only of snapshot records, if any. */
const lastSnapshotBatch = (
  records: ReadonlyArray<WalRecord>,
  snapshotType: number,
): { readonly firstSeq: number; readonly lastSeq: number } | undefined => {
  let found: { firstSeq: number; lastSeq: number } | undefined
  let batchStart: number | undefined
  let allSnapshot = true
  for (const record of records) {
    if (record.flags & batchStartFlag) {
      batchStart = record.seq
      allSnapshot = true
    }
    allSnapshot &&= record.type === snapshotType
    if (record.flags & batchEndFlag) {
      if (allSnapshot && batchStart !== undefined) found = { firstSeq: batchStart, lastSeq: record.seq }
      batchStart = undefined
    }
  }
  return found
}

interface SegmentState {
  name: string
  firstSeq: number
  size: number
}

const makeLocalWal = Effect.fnUntraced(function* (init: {
  readonly dir: string
  readonly segmentBytesMax: number
  readonly preallocateBytes: number
  readonly salt: number
  readonly nextSeq: number
  readonly segments: ReadonlyArray<SegmentState>
}) {
  const fs = yield* WalFs
  const { dir, salt } = init
  const segments: Array<SegmentState> = init.segments.map((segment) => ({ ...segment }))
  let nextSeq = init.nextSeq
  let active: WalFile | undefined
  /** Set by `rotate`: the last segment takes no more records; the next append starts a new one. */
  let sealed = false
  let poisoned: WalError | undefined
  let appends = 0
  let fsyncs = 0

  const poison = (error: WalError) => {
    poisoned ??= new WalError({
      reason: "Poisoned",
      file: error.file,
      message: `log poisoned by an earlier failure: ${error.message}`,
    })
    return error
  }

  /** The last durable write queued (writes settle in queue order, so it settles last). */
  let lastQueued: Deferred.Deferred<void, FsError> | undefined
  /** Waits until every queued write settled; fails, poisoning the log, if the last one failed. */
  const settleQueued = Effect.suspend(() =>
    lastQueued === undefined ? Effect.void : Effect.mapError(Deferred.await(lastQueued), durableWriteFailure),
  )

  const createSegment = Effect.fnUntraced(function* (firstSeq: number) {
    const name = segmentFileName(firstSeq)
    const file = yield* fs.open(path.join(dir, name), { create: true }).pipe(Effect.mapError(fsFailure("WriteFailed")))
    yield* file.truncate(0).pipe(Effect.mapError(fsFailure("WriteFailed")))
    // The header, then zeros up to the preallocation: appends then overwrite blocks that already
    // exist within the file's size, so their data sync needs no metadata (size, allocation) journalled.
    const header = encodeSegmentHeader(salt, firstSeq)
    const initial = Buffer.alloc(Math.max(header.length, init.preallocateBytes))
    initial.set(header, 0)
    yield* file.write(0, initial).pipe(Effect.mapError(fsFailure("WriteFailed")))
    yield* file.datasync().pipe(Effect.mapError(fsFailure("FsyncFailed")))
    yield* fs.syncDir(dir).pipe(Effect.mapError(fsFailure("FsyncFailed")))
    fsyncs += 2
    segments.push({ name, firstSeq, size: segmentHeaderBytes })
    return file
  })

  const activeFile = Effect.fnUntraced(function* () {
    const last = segments[segments.length - 1]
    if (last === undefined || sealed || last.size >= init.segmentBytesMax) {
      // A new segment holds records only once every earlier one is durable: recovery then never
      // finds a torn batch with a later segment after it.
      yield* settleQueued
      if (active !== undefined) yield* active.close()
      active = undefined
      active = yield* createSegment(nextSeq)
      sealed = false
    } else if (active === undefined) {
      active = yield* fs
        .open(path.join(dir, last.name), { create: false })
        .pipe(Effect.mapError(fsFailure("WriteFailed")))
    }
    return active
  })

  const queueBatch: Wal["queueBatch"] = (entries) =>
    Effect.gen(function* () {
      if (poisoned !== undefined) return yield* poisoned
      let byteCount = 0
      let payloadBytes = 0
      for (const entry of entries) {
        const length = payloadLength(entry.payload)
        payloadBytes += length
        if (length > recordPayloadBytesMax) {
          return yield* new WalError({
            reason: "RecordTooLarge",
            message: `a record of ${length} bytes exceeds ${recordPayloadBytesMax}`,
          })
        }
        byteCount += recordHeaderBytes + length
      }
      const file = yield* activeFile()
      // Sequence numbers and bytes are taken now, in call order; a failed write poisons the log, so
      // nothing is ever appended after a batch that did not reach the disk.
      const segment = segments[segments.length - 1]!
      const firstSeq = nextSeq
      const offset = segment.size
      segment.size += byteCount
      nextSeq += entries.length
      const buffer = encodeBatch(entries, firstSeq, salt, byteCount)
      const written = yield* file.queueDurable(offset, buffer)
      lastQueued = written
      appends++
      fsyncs++
      const appended: Appended = { firstSeq, lastSeq: firstSeq + entries.length - 1, payloadBytes }
      return Deferred.await(written).pipe(
        Effect.mapError((error) => poison(durableWriteFailure(error))),
        Effect.as(appended),
      )
    }).pipe(Effect.mapError((error) => (error.reason === "RecordTooLarge" ? error : poison(error))))

  const appendBatch: Wal["appendBatch"] = (entries) => Effect.flatten(queueBatch(entries))

  const rotate: Wal["rotate"] = () =>
    Effect.gen(function* () {
      if (poisoned !== undefined) return yield* poisoned
      const last = segments[segments.length - 1]
      if (last === undefined || last.size <= segmentHeaderBytes) return
      if (active !== undefined) yield* active.close()
      active = undefined
      sealed = true
    }).pipe(Effect.mapError(poison))

  const releaseThrough: Wal["releaseThrough"] = (seq) =>
    Effect.gen(function* () {
      if (poisoned !== undefined) return yield* poisoned
      let removed = 0
      while (segments.length > 0) {
        // A segment's last record: the one before the next segment's first, or, for a sealed last
        // segment, the last one written. The last segment is never released while open for appends.
        const lastSeq =
          segments.length > 1 ? segments[1]!.firstSeq - 1 : sealed ? nextSeq - 1 : Number.POSITIVE_INFINITY
        if (lastSeq > seq) break
        const segment = segments[0]!
        yield* fs.remove(path.join(dir, segment.name)).pipe(Effect.mapError(fsFailure("WriteFailed")))
        // Oldest first, each durable before the next: a power cut leaves a suffix of the log, never a gap.
        yield* fs.syncDir(dir).pipe(Effect.mapError(fsFailure("FsyncFailed")))
        segments.shift()
        removed++
      }
      return removed
    })

  return {
    queueBatch,
    appendBatch,
    rotate,
    releaseThrough,
    stats: () => ({
      segments: segments.length,
      bytes: segments.reduce((sum, segment) => sum + segment.size, 0),
      appends,
      fsyncs,
      nextSeq,
      salt,
    }),
    close: () => (active === undefined ? Effect.void : active.close()),
    // One record at most `recordPayloadBytesMax`; a batch of many such records is one write.
    batchBytesMax: Number.POSITIVE_INFINITY,
  } satisfies Wal
})
