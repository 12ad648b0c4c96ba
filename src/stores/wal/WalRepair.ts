/**
 * Checking a stopped store's log without changing it, and repairing a corrupt one explicitly.
 *
 * `checkStoreLog` runs the file WAL's own recovery (`openLocalWal`) against a read-only view of the
 * disk, so it judges exactly as a starting store would — corrupt, torn tail (that would be cut),
 * or fine — and changes no byte. It reads the checkpoint's applied sequence first, as the store
 * does, so segments already released below the checkpoint are not mistaken for a gap.
 *
 * `repairStoreLog` is what `mnemos repair` does to a store whose log is `Corrupt`; the caller holds
 * the data directory's lock. It never deletes: the damaged segment is copied whole, and every
 * later segment moved, into `<dataDir>/quarantine/<store>/<time>/`; that is synced to disk (files,
 * then directories) before the damaged segment is cut back to the last complete batch before the
 * damage. If what is left of the log ends below the checkpoint's applied sequence, those segments
 * (wholly applied already) are quarantined too, so the log starts again right after the
 * checkpoint. Then the log is checked again and must open.
 * The report says which sequences the store keeps (checkpoint and log) and which valid records
 * past the kept batches it loses — the damaged batch's readable records included, as a batch is
 * kept or cut whole (they stay in the quarantine, with a REPORT.json).
 */
import * as fs from "node:fs"
import { dirname, join, resolve } from "node:path"
import { Deferred, Effect, Layer } from "effect"
import { writeFileAtomic } from "../../cli/AtomicFile.ts"
import { openCheckpoint } from "../checkpoint/Checkpoint.ts"
import { openLocalWal } from "./FileWal.ts"
import { type FsError, layerNode, WalFs } from "./WalFs.ts"
import {
  batchEndFlag,
  decodeSegmentHeader,
  parseSegmentFileName,
  readRecordAt,
  recordHeaderBytes,
  segmentHeaderBytes,
} from "./WalRecord.ts"

/** What a read-only check of one store's log found. */
export interface StoreLogCheck {
  readonly store: string
  readonly dir: string
  readonly state: "ok" | "torn-tail" | "corrupt" | "unreadable"
  /** The checkpoint's last applied sequence (0 without a checkpoint). */
  readonly appliedSeq: number
  /** The log's last sequence, when it opens. */
  readonly lastSeq?: number
  readonly segments?: number
  readonly file?: string
  readonly offset?: number
  readonly message?: string
}

/** A view of the real disk on which every write is a no-op: recovery can run without touching a byte. */
const readOnlyDisk: Layer.Layer<WalFs> = Layer.effect(
  WalFs,
  Effect.gen(function* () {
    const real = yield* WalFs
    return WalFs.of({
      mkdirp: () => Effect.void,
      list: real.list,
      open: (path) =>
        Effect.map(real.open(path, { create: false }), (file) => ({
          ...file,
          write: () => Effect.void,
          truncate: () => Effect.void,
          datasync: () => Effect.void,
          queueDurable: () =>
            Deferred.make<void, FsError>().pipe(Effect.tap((done) => Deferred.succeed(done, undefined))),
        })),
      remove: () => Effect.void,
      rename: () => Effect.void,
      syncDir: () => Effect.void,
      freeBytes: real.freeBytes,
    })
  }),
).pipe(Layer.provide(layerNode))

const message = (error: unknown) => (error instanceof Error ? error.message : String(error))

/** The checkpoint's applied sequence and store generation; zero/none when there is no checkpoint yet. */
export const readCheckpointSeq = (
  storeDir: string,
): Effect.Effect<{ readonly appliedSeq: number; readonly salt: number | undefined }, string> => {
  const path = join(storeDir, "lmdb")
  if (!fs.existsSync(path)) return Effect.succeed({ appliedSeq: 0, salt: undefined })
  return Effect.acquireUseRelease(
    Effect.mapError(openCheckpoint(path), (error) => `cannot open the checkpoint ${path}: ${error.message}`),
    (checkpoint) => Effect.succeed({ appliedSeq: checkpoint.appliedSeq(), salt: checkpoint.salt() }),
    (checkpoint) => Effect.promise(() => checkpoint.close().catch(() => undefined)),
  )
}

/** Checks `<storeDir>/wal` as a starting store would, changing nothing. */
export const checkStoreLog = (store: string, storeDir: string): Effect.Effect<StoreLogCheck> =>
  Effect.gen(function* () {
    const checkpoint = yield* Effect.result(readCheckpointSeq(storeDir))
    if (checkpoint._tag === "Failure")
      return {
        store,
        dir: storeDir,
        state: "unreadable",
        appliedSeq: 0,
        message: checkpoint.failure,
      } satisfies StoreLogCheck
    const { appliedSeq, salt } = checkpoint.success
    const opened = yield* Effect.result(
      Effect.scoped(
        Effect.map(
          openLocalWal({
            dir: join(storeDir, "wal"),
            segmentBytesMax: Number.MAX_SAFE_INTEGER,
            replayAfterSeq: appliedSeq,
            ...(salt !== undefined ? { salt } : {}),
          }),
          (result) => result.report,
        ),
      ).pipe(Effect.provide(readOnlyDisk)),
    )
    if (opened._tag === "Success") {
      const report = opened.success
      return {
        store,
        dir: storeDir,
        state: report.tornTail === undefined ? "ok" : "torn-tail",
        appliedSeq,
        lastSeq: report.lastSeq,
        segments: report.segments,
        ...(report.tornTail !== undefined
          ? {
              file: report.tornTail.file,
              offset: report.tornTail.offset,
              message: `torn tail of ${report.tornTail.bytesCut} bytes (${report.tornTail.why}); it is cut off when the store starts`,
            }
          : {}),
      } satisfies StoreLogCheck
    }
    const error = opened.failure
    return {
      store,
      dir: storeDir,
      state: error.reason === "Corrupt" ? "corrupt" : "unreadable",
      appliedSeq,
      ...(error.file !== undefined ? { file: error.file } : {}),
      ...(error.offset !== undefined ? { offset: error.offset } : {}),
      message: error.message,
    } satisfies StoreLogCheck
  })

/** What `repairStoreLog` did. */
export interface RepairReport {
  readonly store: string
  readonly damage: { readonly file: string; readonly offset: number; readonly message: string }
  readonly quarantine: string
  /** Files moved or copied into the quarantine. */
  readonly quarantinedFiles: ReadonlyArray<string>
  /** Sequences the store keeps: all up to the checkpoint, and the log's records. */
  readonly kept: { readonly checkpointSeq: number; readonly logFirstSeq?: number; readonly logLastSeq?: number }
  /**
   * Valid records past the kept batches that the store no longer has (they are in the quarantine):
   * the damaged batch's readable ones and every one after the damage.
   */
  readonly lost: { readonly records: number; readonly firstSeq?: number; readonly lastSeq?: number }
  /** The log's state after the repair (must be "ok"). */
  readonly after: StoreLogCheck
}

const segmentNames = (walDir: string): Array<string> =>
  fs
    .readdirSync(walDir)
    .filter((name) => parseSegmentFileName(name) !== undefined)
    .sort()

/** Records of a segment from `from` on, resynchronising after garbage (a valid record of `salt` anywhere). */
const validRecordsFrom = (
  bytes: Buffer,
  from: number,
  salt: number,
): Array<{ seq: number; end: number; flags: number }> => {
  const found: Array<{ seq: number; end: number; flags: number }> = []
  let offset = from
  while (offset + recordHeaderBytes <= bytes.length) {
    const read = readRecordAt(bytes, offset)
    if (read._tag === "Record" && read.salt === salt) {
      found.push({ seq: read.record.seq, end: read.end, flags: read.record.flags })
      offset = read.end
    } else offset++
  }
  return found
}

/** The end of the last complete batch before `damageOffset`, and its last sequence. */
const committedPrefix = (bytes: Buffer, damageOffset: number) => {
  const header = decodeSegmentHeader(bytes)
  if (header === undefined || damageOffset < segmentHeaderBytes)
    return { end: 0, lastSeq: undefined, salt: header?.salt }
  let offset = segmentHeaderBytes
  let end = segmentHeaderBytes
  let lastSeq: number | undefined
  let seq = header.firstSeq
  while (offset < damageOffset) {
    const read = readRecordAt(bytes, offset)
    if (read._tag !== "Record" || read.salt !== header.salt || read.record.seq !== seq || read.end > damageOffset) break
    offset = read.end
    if (read.record.flags & batchEndFlag) {
      end = offset
      lastSeq = read.record.seq
    }
    seq++
  }
  return { end, lastSeq, salt: header.salt }
}

/** fsync of a file or a directory (a directory's entries). */
const fsyncPath = (path: string) => {
  const fd = fs.openSync(path, "r")
  try {
    fs.fsyncSync(fd)
  } finally {
    fs.closeSync(fd)
  }
}

/** Syncs `dir`, then the entry of each directory `mkdirSync` just created in its parent, up to `firstCreated`. */
const syncCreatedDirs = (dir: string, firstCreated: string | undefined) => {
  fsyncPath(dir)
  if (firstCreated === undefined) return
  for (let created = resolve(dir); ; created = dirname(created)) {
    fsyncPath(dirname(created))
    if (created === resolve(firstCreated) || dirname(created) === created) return
  }
}

/**
 * The store generation of a segment's records, for when no header or checkpoint says it: that of
 * the first valid record from the segment's first sequence on (they follow its header).
 */
const saltOfRecords = (bytes: Buffer, name: string): number | undefined => {
  const firstSeq = parseSegmentFileName(name) ?? 1
  for (let offset = segmentHeaderBytes; offset + recordHeaderBytes <= bytes.length; offset++) {
    const read = readRecordAt(bytes, offset)
    if (read._tag === "Record" && read.record.seq >= firstSeq) return read.salt
  }
  return undefined
}

const lastSeqOf = (walDir: string, name: string): number | undefined => {
  const bytes = fs.readFileSync(join(walDir, name))
  const header = decodeSegmentHeader(bytes)
  if (header === undefined) return undefined
  const records = validRecordsFrom(bytes, segmentHeaderBytes, header.salt)
  return records.length === 0 ? header.firstSeq - 1 : records[records.length - 1]!.seq
}

/**
 * Quarantines the damage of a corrupt log (see the module docblock); the caller holds the data
 * directory's lock. Fails (with the reason) when the log is not corrupt or cannot be repaired.
 */
export const repairStoreLog = (
  store: string,
  storeDir: string,
  quarantineRoot: string,
  now: Date,
): Effect.Effect<RepairReport, string> =>
  Effect.gen(function* () {
    const check = yield* checkStoreLog(store, storeDir)
    if (check.state !== "corrupt" || check.file === undefined || check.offset === undefined)
      return yield* Effect.fail(
        `store "${store}" is ${check.state}${check.message !== undefined ? `: ${check.message}` : ""}; nothing to repair`,
      )
    const damage = { file: check.file, offset: check.offset, message: check.message ?? "" }
    // The store generation, to count the lost records by when the damaged segment's header is unreadable.
    const { salt: checkpointSalt } = yield* readCheckpointSeq(storeDir)
    const quarantined = yield* Effect.try({
      try: () => quarantineFrom(storeDir, quarantineRoot, store, damage, check.appliedSeq, checkpointSalt, now),
      catch: (error) => `repairing store "${store}" failed: ${message(error)}`,
    })
    const after = yield* checkStoreLog(store, storeDir)
    const report: RepairReport = { store, damage, ...quarantined, after }
    yield* Effect.try({
      try: () => writeFileAtomic(join(quarantined.quarantine, "REPORT.json"), [`${JSON.stringify(report, null, 2)}\n`]),
      catch: (error) => `writing the repair report of store "${store}" failed: ${message(error)}`,
    })
    if (after.state !== "ok" && after.state !== "torn-tail")
      return yield* Effect.fail(`store "${store}" still does not open after the repair: ${after.message}`)
    return report
  })

const quarantineFrom = (
  storeDir: string,
  quarantineRoot: string,
  store: string,
  damage: { readonly file: string; readonly offset: number },
  appliedSeq: number,
  checkpointSalt: number | undefined,
  now: Date,
): Omit<RepairReport, "store" | "damage" | "after"> => {
  const walDir = join(storeDir, "wal")
  const names = segmentNames(walDir)
  const damagedIndex = names.indexOf(damage.file)
  if (damagedIndex < 0) throw new Error(`the damaged segment ${damage.file} is not in ${walDir}`)
  const quarantine = join(quarantineRoot, store, now.toISOString().replace(/[:.]/g, "-"))
  const firstCreated = fs.mkdirSync(quarantine, { recursive: true, mode: 0o700 })
  const moved: Array<string> = []

  const damagedPath = join(walDir, damage.file)
  const damagedBytes = fs.readFileSync(damagedPath)
  const prefix = committedPrefix(damagedBytes, damage.offset)
  // A damaged first header says no generation; the records' own salt does (a stale one is not counted).
  const salt =
    prefix.salt ??
    checkpointSalt ??
    decodeSegmentHeader(fs.readFileSync(join(walDir, names[0]!)))?.salt ??
    saltOfRecords(damagedBytes, damage.file)

  // What the damaged segment and the later ones still hold past the kept prefix: lost, but counted.
  // That includes the readable records of the damaged batch before the damage: batches are kept whole.
  const afterDamage: Array<number> = []
  if (salt !== undefined) {
    afterDamage.push(
      ...validRecordsFrom(damagedBytes, Math.max(prefix.end, segmentHeaderBytes), salt).map((record) => record.seq),
    )
    for (const name of names.slice(damagedIndex + 1)) {
      const bytes = fs.readFileSync(join(walDir, name))
      afterDamage.push(...validRecordsFrom(bytes, segmentHeaderBytes, salt).map((record) => record.seq))
    }
  }

  fs.copyFileSync(damagedPath, join(quarantine, damage.file))
  fsyncPath(join(quarantine, damage.file))
  moved.push(damage.file)
  for (const name of names.slice(damagedIndex + 1)) {
    fs.renameSync(join(walDir, name), join(quarantine, name))
    moved.push(name)
  }
  // The copy and the moved segments must be on disk before the original is cut: a power cut in
  // between would otherwise lose both.
  syncCreatedDirs(quarantine, firstCreated)
  if (prefix.end > segmentHeaderBytes) {
    const fd = fs.openSync(damagedPath, "r+")
    try {
      fs.ftruncateSync(fd, prefix.end)
      fs.fdatasyncSync(fd)
    } finally {
      fs.closeSync(fd)
    }
  } else fs.rmSync(damagedPath)

  // A log that now ends below the checkpoint cannot open; its records are all applied: set it aside too.
  let remaining = segmentNames(walDir)
  const logLastSeq = remaining.length === 0 ? undefined : lastSeqOf(walDir, remaining[remaining.length - 1]!)
  if (remaining.length > 0 && (logLastSeq === undefined || logLastSeq < appliedSeq)) {
    for (const name of remaining) {
      // The cut damaged segment's whole original is already there; its kept prefix goes beside it.
      const target = moved.includes(name) ? `${name}.cut-prefix` : name
      fs.renameSync(join(walDir, name), join(quarantine, target))
      moved.push(target)
    }
    remaining = []
  }
  fsyncPath(walDir)
  fsyncPath(quarantine)

  const keptLast = remaining.length === 0 ? undefined : lastSeqOf(walDir, remaining[remaining.length - 1]!)
  const keptFirst = remaining.length === 0 ? undefined : parseSegmentFileName(remaining[0]!)
  const keptThrough = Math.max(appliedSeq, keptLast ?? 0)
  const lost = afterDamage.filter((seq) => seq > keptThrough)
  return {
    quarantine,
    quarantinedFiles: moved,
    kept: {
      checkpointSeq: appliedSeq,
      ...(keptFirst !== undefined ? { logFirstSeq: keptFirst } : {}),
      ...(keptLast !== undefined ? { logLastSeq: keptLast } : {}),
    },
    lost: {
      records: lost.length,
      ...(lost.length > 0
        ? { firstSeq: lost.reduce((a, b) => Math.min(a, b)), lastSeq: lost.reduce((a, b) => Math.max(a, b)) }
        : {}),
    },
  }
}

/** The stores that have a directory under `<dataDir>/stores`. */
export const storeDirs = (dataDir: string): ReadonlyArray<{ readonly store: string; readonly dir: string }> => {
  const root = join(dataDir, "stores")
  if (!fs.existsSync(root)) return []
  return fs
    .readdirSync(root, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => ({ store: entry.name, dir: join(root, entry.name) }))
    .sort((a, b) => (a.store < b.store ? -1 : 1))
}
