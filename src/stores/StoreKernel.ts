/**
 * The durable kernel of one store: how a domain store's commands become log records and state, and
 * how that state is recovered. The actor runtime (src/actors/StoreActor.ts) decides *when* each step
 * runs; this module is *what* each step does to the log and the checkpoint.
 *
 * Owns, across restarts of the store, the facts about its log: the last acknowledged sequence
 * (`ackedSeq`), the store generation (`salt`) and what recovery found. Each open (`open`) is an
 * `Incarnation`: the LMDB checkpoint, the log (`Wal`), the pending layer readers see (`PendingView`)
 * and the queue of LMDB commits (`CommitQueue`).
 *
 * The steps of a batch:
 * - `prepare` decides every command against an overlay (a command sees the ones before it),
 *   remembers keyed replies (Idempotency.ts) and encodes the WAL entries; it writes nothing.
 * - `queueWrite` queues the entries' one durable write.
 * - `commit`, once the write is durable, makes the changes readable, queues them for LMDB and
 *   publishes the events. `ackedSeq` moves only here, so a failure before it leaves the batch
 *   unacknowledged and the next open cuts it from the log.
 *
 * Recovery replays the log above the checkpoint's applied sequence, whole batches only, and
 * republishes the replayed events. A failed batch whose callers are answered while the store stays
 * closed is cut from the log first (`discardUnacknowledged`), so "not applied" stays true.
 */

import { statSync } from "node:fs"
import { rm } from "node:fs/promises"
import { Cause, Clock, Effect, Result, Schema } from "effect"
import { type Checkpoint, openCheckpoint, type StoreView } from "./checkpoint/Checkpoint.ts"
import { CommitQueue, diskFullRetryMs } from "./checkpoint/CommitQueue.ts"
import { Overlay } from "./checkpoint/Overlay.ts"
import { PendingView } from "./checkpoint/PendingView.ts"
import { type CommittedEvent, EventBus } from "./EventBus.ts"
import {
  eventWithReplyRecordType,
  expiredKeys,
  type IdempotencyRecord,
  idempotencyRecordType,
  idempotencyStateKey,
  isIdempotencyStateKey,
  rememberedReply,
  withheldRecord,
} from "./Idempotency.ts"
import { originCountKey } from "./OriginCounts.ts"
import type { CommandContext, Decision, StoreDefinition } from "./StoreDefinition.ts"
import { StoreError } from "./StoreError.ts"
import { storeLogs } from "./wal/StoreLogs.ts"
import { type Appended, type RecoveryReport, type Wal, type WalEntry, WalError, type WalStats } from "./wal/Wal.ts"
import { WalFs } from "./wal/WalFs.ts"
import { batchEndFlag, payloadLength, type WalRecord } from "./wal/WalRecord.ts"

/**
 * The longest a batch's decide and apply run on the thread before they let the event loop in
 * (between two events; see `prepare`).
 */
export const prepareSliceMsMax = 20

/** What the kernel needs to know of a store's limits (see `StoreOptions` in src/actors/StoreActor.ts). */
export interface KernelOptions {
  /** The store's directory: the WAL lives in `wal/`, the checkpoint in `lmdb/`. */
  readonly dir: string
  readonly walSegmentBytesMax: number
  readonly walPreallocateBytes: number
  readonly checkpointRecordsInterval: number
  readonly lmdbCommitIntervalMs: number
  readonly lmdbCommitChangesMax: number
  readonly lmdbCommitBytesMax: number
}

/** One open of a store: LMDB, the log, the pending layer and the queue of LMDB commits. */
export interface Incarnation {
  readonly checkpoint: Checkpoint
  readonly wal: Wal
  /** LMDB plus acknowledged batches whose LMDB commit is still running. */
  readonly view: PendingView
  readonly commits: CommitQueue
}

/** A command as the kernel sees it: the decoded command and its idempotency key, if any. */
export interface Submitted<Command> {
  readonly command: Command
  readonly idempotencyKey: string | undefined
}

/** A WAL entry of a batch; `event` is set for domain events (published), not for idempotency records. */
interface PreparedEntry<Event> {
  readonly type: number
  readonly payload: string
  readonly event?: Event
}

/** A batch decided and encoded, waiting for (or in) its WAL write. */
export interface Prepared<Event, Reply, Failure> {
  readonly overlay: Overlay
  readonly entries: ReadonlyArray<PreparedEntry<Event>>
  /** A shared log: this daemon's event count in the store before the batch (OriginCounts.ts). */
  readonly originCountBefore?: number
  /** One outcome per command, in order. */
  readonly outcomes: ReadonlyArray<Result.Result<{ readonly reply: Reply }, Failure | StoreError>>
  readonly now: number
}

/**
 * A batch's queued WAL write: waits until the batch is durable. It fails only with a shared log's
 * refusals (`Stale`, `Unavailable`), which the actor handles without a restart; any other failure of
 * the log is a defect.
 */
export type Written = Effect.Effect<Appended, WalError>

/** Keeps a shared log's refusals as failures; any other log failure becomes a defect (a restart). */
const keepRefusals = <A>(effect: Effect.Effect<A, WalError>): Effect.Effect<A, WalError> =>
  Effect.catch(effect, (error) =>
    error.reason === "Stale" || error.reason === "Unavailable" ? Effect.fail(error) : Effect.die(error),
  )

/** What the kernel reports for health. */
export interface KernelHealth {
  readonly appliedSeq: number
  readonly recovery?: RecoveryReport
  readonly wal?: WalStats
  readonly lmdbBytes?: number
  /** How often the checkpoint file's mapped pages were let go since the daemon started (`releaseMappedPages`). */
  readonly mappedPagesReleased: number
}

/**
 * WAL record types. 1: a domain event (older logs); 5: `{at, event}`, a domain event with its
 * commit time; 2 and 3: idempotency records (Idempotency.ts; 3 carries `at` since 5 exists);
 * 4: snapshot records. Replay publishes each event with its commit time (the restart's time for
 * records older than that).
 */
const eventAtRecordType = 5

/** What a record of type 1, 2, 3 or 5 holds. */
const decodeRecord = (
  type: number,
  payload: { readonly at?: number; readonly event?: unknown; readonly remember?: IdempotencyRecord },
): { readonly event?: unknown; readonly remember?: IdempotencyRecord; readonly at?: number } => {
  if (type === idempotencyRecordType) {
    const remember = payload as unknown as IdempotencyRecord
    return { remember, at: remember.at }
  }
  if (type === eventWithReplyRecordType || type === eventAtRecordType) return payload
  return { event: payload }
}
/** WAL record type of a snapshot record: `[[key, value], ...]`, part of a compaction's one snapshot batch. */
export const snapshotRecordType = 4
/** Most payload bytes one snapshot record carries (far below the record limit, to bound the load's memory). */
const snapshotRecordBytesMax = 1024 * 1024
/**
 * After a log write failed for want of space, writes resume once the file system has this much more
 * room than a new segment's preallocation (a new segment is the largest allocation a write makes).
 */
const diskHeadroomBytes = 1024 * 1024
/** Longest a store waits for its LMDB environment to close (see `close`). */
const lmdbCloseTimeoutMs = 10_000

/** The steps of a compaction, after which a test may crash the disk (see `compact`). */
export type CompactionStep = "checkpointed" | "snapshot-written" | "closed" | "checkpoint-removed" | "reloaded"

/** What a compaction did. */
export interface CompactionReport {
  /** Keys in the store (the snapshot's size). */
  readonly keys: number
  readonly bytesBefore: number
  readonly bytesAfter: number
  /** A shared memory's store: the generation its stream is now, and the sealed stream it replaced. */
  readonly generation?: number
  readonly retired?: string
}

const allKeys = { start: "", end: "\u{10FFFF}" }

const fileBytes = (path: string): number => {
  try {
    return statSync(path).size
  } catch {
    return 0
  }
}

/** The refusal of a command whose records do not fit one batch of its log. */
const tooLarge = (store: string, bytes: number, bytesMax: number) =>
  new StoreError({
    store,
    reason: "TooLarge",
    message: `store "${store}": this command's records take ${bytes} bytes, more than one batch of the store's log holds (${bytesMax} bytes); split it into smaller ones`,
  })

/** The refusal of a retried command whose first reply a compaction dropped. */
const replyWithheld = (store: string, key: string) =>
  new StoreError({
    store,
    reason: "ReplyWithheld",
    message: `store "${store}": this request (idempotency key ${key}) was applied before, and its reply was dropped by a compaction; it is not applied again`,
  })

/** The kernel of `definition`, stored under `options.dir`. */
export const makeStoreKernel = <Command, Event, Reply, Failure>(
  definition: StoreDefinition<Command, Event, Reply, Failure>,
  options: KernelOptions,
) =>
  Effect.gen(function* () {
    const fs = yield* WalFs
    const bus = yield* EventBus
    const logs = yield* storeLogs
    yield* Effect.addFinalizer(() => Effect.sync(() => clearInterval(spaceProbe)))
    const encodeEvent = Schema.encodeSync(definition.eventSchema)
    const decodeEvent = Schema.decodeUnknownSync(definition.eventSchema)
    let ackedSeq: number | undefined
    /** The store generation of the last WAL opened (a cut must not touch another generation's log). */
    let walSalt: number | undefined
    /** The log open now: its salt is recorded with each LMDB commit (a shared log settles it late). */
    let currentLog: Wal | undefined
    let recovery: RecoveryReport | undefined
    let recordsSinceCheckpoint = 0
    /** A shared log: the position of the last batch applied (own or remote). */
    let appliedPosition: number | undefined
    /** Set when a log write failed because the disk was full, until the file system has room again. */
    let logDiskFull: string | undefined
    let spaceProbe: ReturnType<typeof setInterval> | undefined

    const committed = (
      seq: number,
      event: Event,
      at: number,
      origin?: string,
      decided?: { readonly by: string; readonly seq: number },
    ): CommittedEvent => ({
      store: definition.name,
      seq,
      at,
      event,
      ...(origin !== undefined ? { origin } : {}),
      ...(decided !== undefined ? { decidedBy: decided.by, originSeq: decided.seq } : {}),
    })
    /** A record of the kernel's own (idempotency, snapshot): announced so sequences stay gap-free. */
    const kernelRecord = (seq: number, at: number): CommittedEvent => ({
      store: definition.name,
      seq,
      at,
      event: undefined,
      kernel: true,
    })

    /**
     * Applies the log's records (whole batches) to the pending layer and queues them for LMDB, as
     * live batches are: recovery writes nothing synchronously, so a store whose disk is full still
     * opens and serves reads. Waits for LMDB whenever the pending layer holds a commit's worth, so
     * a long tail never sits in memory whole.
     */
    const replayInto = (
      view: PendingView,
      commits: CommitQueue,
      records: ReadonlyArray<WalRecord>,
      snapshot: RecoveryReport["snapshot"],
      /** This daemon's id in a shared memory: its own batches' events are published as its own. */
      self?: string,
    ) =>
      Effect.gen(function* () {
        // Records written before commit times were logged are published with the restart's time.
        const restartedAt = yield* Clock.currentTimeMillis
        const applied: Array<CommittedEvent> = []
        let overlay = new Overlay(view)
        let batchBytes = 0
        /** The batch's records so far, published at its end (where the origin is), in order. */
        let batchRecords: Array<{ readonly seq: number; readonly at: number; readonly event?: Event }> = []
        for (const record of records) {
          const payload = JSON.parse(Buffer.from(record.payload).toString("utf8"))
          batchBytes += record.payload.length
          if (record.type === snapshotRecordType) {
            // A snapshot is loaded a record at a time. LMDB's applied sequence stays below the
            // snapshot until its last record: a load cut short is started again from scratch.
            for (const [key, value] of payload as Array<readonly [string, unknown]>) overlay.put(key, value)
            const last = (record.flags & batchEndFlag) !== 0
            commits.enqueue(
              overlay.changes(),
              last ? record.seq : (snapshot?.firstSeq ?? record.seq) - 1,
              batchBytes,
              last ? record.position : undefined,
            )
            if (last && record.position !== undefined) appliedPosition = record.position
            applied.push(kernelRecord(record.seq, restartedAt))
            overlay = new Overlay(view)
            batchBytes = 0
            if (view.size >= options.lmdbCommitChangesMax) yield* Effect.promise(() => commits.drain())
            continue
          }
          const decoded = decodeRecord(record.type, payload)
          if (decoded.remember !== undefined) overlay.put(idempotencyStateKey(decoded.remember.key), decoded.remember)
          if (decoded.event !== undefined) {
            const event = decodeEvent(decoded.event)
            definition.apply(event, overlay)
            batchRecords.push({ seq: record.seq, at: decoded.at ?? restartedAt, event })
          } else batchRecords.push({ seq: record.seq, at: decoded.at ?? restartedAt })
          if (record.flags & batchEndFlag) {
            // A shared log's batch names its origin (its last record): each replica counts that
            // daemon's events alike (OriginCounts.ts).
            const origin = record.origin
            const countBefore =
              origin === undefined ? 0 : ((overlay.get(originCountKey(origin)) as number | undefined) ?? 0)
            let count = countBefore
            for (const { seq, at, event } of batchRecords) {
              applied.push(
                event === undefined
                  ? kernelRecord(seq, at)
                  : origin === undefined
                    ? committed(seq, event, at)
                    : committed(seq, event, at, origin === self ? undefined : origin, { by: origin, seq: ++count }),
              )
            }
            if (count !== countBefore) overlay.put(originCountKey(origin!), count)
            batchRecords = []
            commits.enqueue(overlay.changes(), record.seq, batchBytes, record.position)
            if (record.position !== undefined) appliedPosition = record.position
            overlay = new Overlay(view)
            batchBytes = 0
            if (view.size >= options.lmdbCommitChangesMax) yield* Effect.promise(() => commits.drain())
          }
        }
        return applied
      })

    /** Opens (recovers) the store's log, cutting every record above `ackedSeq` when it is known. */
    const openWal = (replayAfterSeq: number, salt: number | undefined, replayAfterPosition: number | undefined) =>
      logs.open({
        store: definition.name,
        dir: options.dir,
        segmentBytesMax: options.walSegmentBytesMax,
        preallocateBytes: options.walPreallocateBytes,
        replayAfterSeq,
        replayAfterPosition,
        salt,
        discardAfterSeq: ackedSeq,
        snapshotRecordType,
      })

    /**
     * A shared log: applies the batches other daemons appended that are next in log order, as replay
     * does (each is a whole batch, decided once by its writer), and publishes their events.
     */
    const applyRemote = (incarnation: Incarnation): Effect.Effect<number> =>
      Effect.gen(function* () {
        const shared = incarnation.wal.shared
        if (shared === undefined) return 0
        let applied = 0
        for (let batches = shared.takeRemote(); batches.length > 0; batches = shared.takeRemote()) {
          for (const batch of batches) {
            const events = yield* replayInto(
              incarnation.view,
              incarnation.commits,
              batch.records,
              undefined,
              shared.self,
            )
            ackedSeq = batch.records[batch.records.length - 1]!.seq
            recordsSinceCheckpoint += batch.records.length
            yield* bus.publishAll(events)
            applied++
          }
        }
        return applied
      })

    /**
     * A shared log, after an append refused as `Stale`: waits until every batch through `position`
     * (another writer's) has arrived, and applies them, so the refused commands are decided again on
     * the state they missed.
     */
    const catchUp = (incarnation: Incarnation, position: number | undefined) =>
      Effect.gen(function* () {
        const shared = incarnation.wal.shared
        if (shared === undefined) return
        yield* shared.awaitReceived(position)
        yield* applyRemote(incarnation)
      })

    const lmdbDir = `${options.dir}/lmdb`

    /** Opens the store: LMDB, then the log, replaying (and republishing) what LMDB lacks. */
    const open = Effect.gen(function* () {
      let checkpoint = yield* openCheckpoint(lmdbDir)
      // Set once LMDB commits may be queued: an open that fails or is interrupted drains it before
      // LMDB closes (a commit queued to a closed environment would fail outside any handler).
      let commits: CommitQueue | undefined
      let log: Wal | undefined
      return yield* Effect.gen(function* () {
        const opened = yield* openWal(checkpoint.appliedSeq(), checkpoint.salt(), checkpoint.position())
        log = opened.wal
        if (opened.report.snapshot !== undefined) {
          // A compaction's snapshot is newer than LMDB (the compaction was cut short): LMDB is
          // rebuilt from it, from scratch, so no page of the old file (deleted data) survives.
          yield* Effect.promise(() => checkpoint.close().catch(() => undefined))
          yield* removeCheckpointFiles
          checkpoint = yield* openCheckpoint(lmdbDir)
        }
        const wal = opened.wal
        currentLog = wal
        walSalt = wal.stats().salt
        const view = new PendingView(checkpoint.view)
        const queue = new CommitQueue(checkpoint, view, () => (currentLog ?? wal).stats().salt, {
          intervalMs: options.lmdbCommitIntervalMs,
          changesMax: options.lmdbCommitChangesMax,
          bytesMax: options.lmdbCommitBytesMax,
        })
        commits = queue
        const replayed = yield* replayInto(
          view,
          queue,
          opened.replay,
          opened.report.snapshot,
          opened.wal.shared?.self,
        ).pipe(Effect.catchDefect((defect) => Effect.fail(defect)))
        yield* bus.publishAll(replayed)
        recovery = opened.report
        ackedSeq = opened.wal.stats().nextSeq - 1
        appliedPosition = opened.wal.shared?.position()
        return { checkpoint, wal, view, commits: queue } satisfies Incarnation
      }).pipe(
        Effect.onError(() =>
          Effect.andThen(
            log === undefined ? Effect.void : log.close(),
            Effect.promise(async () => {
              await commits?.drain()
              await checkpoint.close().catch(() => undefined)
            }),
          ),
        ),
      )
    })

    /** Deletes the LMDB environment's files (the store is closed, or never opened). */
    const removeCheckpointFiles = Effect.tryPromise({
      try: () => rm(lmdbDir, { recursive: true, force: true }),
      catch: (cause) =>
        new Error(`cannot remove ${lmdbDir}: ${cause instanceof Error ? cause.message : String(cause)}`),
    })

    /**
     * Waits for LMDB's pending commits, then closes the log and LMDB. Fails when LMDB does not close
     * within `lmdbCloseTimeoutMs` (lmdb-js waits for its write thread, which an I/O error can leave
     * stuck): the environment cannot be opened again in this process, so the store must not reopen.
     */
    const close = (incarnation: Incarnation): Effect.Effect<void, Error> =>
      Effect.gen(function* () {
        yield* Effect.promise(() => incarnation.commits.drain())
        yield* incarnation.wal.close()
        const closed = yield* Effect.promise(() => incarnation.checkpoint.close().catch(() => undefined)).pipe(
          Effect.timeoutOption(lmdbCloseTimeoutMs),
        )
        if (closed._tag === "None") {
          return yield* Effect.fail(
            new Error(
              `LMDB in ${options.dir}/lmdb did not close within ${lmdbCloseTimeoutMs / 1000} s after a failure; restart the daemon to reopen this store`,
            ),
          )
        }
      })

    /** Whether a batch failed in the log (a write, a sync, a full disk), not in LMDB or a store's code. */
    const isLogFailure = (cause: Cause.Cause<unknown>): boolean => Cause.squash(cause) instanceof WalError

    /**
     * Reopens the log alone after a log failure, cutting every record above the last acknowledged
     * one (so the failed batch is rolled back), and keeps LMDB and the pending layer: they hold
     * exactly the acknowledged state (a batch reaches them only after its write), so readers go on
     * undisturbed and LMDB — which a full disk can keep from closing — is not touched.
     */
    const reopenLog = (incarnation: Incarnation): Effect.Effect<Incarnation, WalError> =>
      Effect.gen(function* () {
        // A shared log settles its salt on its first batch, after it was opened.
        walSalt = incarnation.wal.stats().salt
        yield* incarnation.wal.close()
        const acked = ackedSeq ?? incarnation.checkpoint.appliedSeq()
        const opened = yield* openWal(acked, walSalt, appliedPosition)
        currentLog = opened.wal
        // A shared log hands back what others appended meanwhile; a file log, nothing.
        const replayed = yield* replayInto(
          incarnation.view,
          incarnation.commits,
          opened.replay,
          undefined,
          opened.wal.shared?.self,
        ).pipe(Effect.orDie)
        yield* bus.publishAll(replayed)
        ackedSeq = opened.wal.stats().nextSeq - 1
        return { ...incarnation, wal: opened.wal }
      })

    /**
     * Cuts every WAL record above the last acknowledged one, as a reopen does, without reopening the
     * store: for a failed batch whose callers are answered while the store stays closed (shutdown, a
     * reopen that keeps failing). Those callers may be told their write was not applied only once
     * it can no longer be replayed: a failed write can still have reached the disk whole. Succeeds
     * with whether the cut was made.
     */
    const discardUnacknowledged: Effect.Effect<boolean> = Effect.suspend(() => {
      // Never opened: nothing was written.
      if (ackedSeq === undefined) return Effect.succeed(true)
      // A shared log is not cut: a failed append is either in it or not, and replicas apply what is.
      if (logs.shared) return Effect.succeed(true)
      return openWal(ackedSeq, walSalt, undefined).pipe(
        Effect.flatMap((opened) => opened.wal.close()),
        Effect.as(true),
        Effect.catchCause(() => Effect.succeed(false)),
      )
    })

    /**
     * Notes why a batch failed: a log write refused by a full disk puts the store in the disk-full
     * state (see `diskFull`) instead of letting each new write fail the same way, and starts probing
     * the file system once per `diskFullRetryMs` until it has room again.
     */
    const noteFailure = (cause: Cause.Cause<unknown>): void => {
      const error = Cause.squash(cause)
      if (!(error instanceof WalError && error.reason === "DiskFull")) return
      logDiskFull = error.message
      if (spaceProbe !== undefined) return
      spaceProbe = setInterval(() => {
        void Effect.runPromise(Effect.exit(fs.freeBytes(options.dir))).then((free) => {
          if (free._tag !== "Success" || free.value < options.walPreallocateBytes + diskHeadroomBytes) return
          logDiskFull = undefined
          clearInterval(spaceProbe)
          spaceProbe = undefined
        })
      }, diskFullRetryMs)
      spaceProbe.unref()
    }

    /** Why a shared log refuses appends now (its servers out of reach), if it does. */
    const logUnavailable = (incarnation: Incarnation | undefined): string | undefined =>
      incarnation?.wal.shared?.unavailable()

    /**
     * Why the disk is full for this store, if it is, so writes must be refused now: LMDB's commit is
     * being retried (CommitQueue.ts), or a log write failed and the file system has not had room since.
     */
    const diskFull = (incarnation: Incarnation | undefined): string | undefined => {
      const lmdb = incarnation?.commits.diskFull
      if (lmdb !== undefined) return `LMDB cannot commit: ${lmdb.message}`
      return logDiskFull === undefined ? undefined : `the log cannot grow: ${logDiskFull}`
    }

    /**
     * Whether a checkpoint would give the log room it is refused for: the log could not grow, but
     * LMDB has taken what it held (its commit is not refused for room), and records were written
     * since the last checkpoint, whose segments the checkpoint releases. Refused writes trigger no
     * checkpoint of their own, and LMDB taking the log's backlog can use the very room that space
     * returning gave back: the store stayed refused until something else freed the disk.
     */
    const checkpointFreesLog = (incarnation: Incarnation): boolean =>
      logDiskFull !== undefined && incarnation.commits.diskFull === undefined && recordsSinceCheckpoint > 0

    /** Whether a checkpoint is due once `records` more are written. */
    const checkpointDue = (records = 0) => recordsSinceCheckpoint + records >= options.checkpointRecordsInterval

    /**
     * Flushes LMDB and releases the WAL segments it no longer needs; prunes expired idempotency
     * records first. A failed LMDB commit is a defect (the actor restarts from disk).
     */
    const checkpoint = (incarnation: Incarnation, now: number) =>
      Effect.gen(function* () {
        const expired = expiredKeys(incarnation.view, now)
        if (expired.length > 0 && ackedSeq !== undefined) {
          incarnation.commits.enqueue(
            expired.map((key) => [key, undefined] as const),
            ackedSeq,
            0,
          )
        }
        yield* Effect.promise(() => incarnation.commits.drain())
        if (incarnation.commits.failure !== undefined) return yield* Effect.die(incarnation.commits.failure)
        // LMDB lags behind the log until the disk has room: nothing can be released yet.
        if (incarnation.commits.diskFull !== undefined) return
        const appliedSeq = incarnation.checkpoint.appliedSeq()
        yield* Effect.promise(() => incarnation.checkpoint.flushed())
        // Everything in the active segment is applied and flushed: start a new one so the old can go,
        // and the next startup scans only what came after this checkpoint.
        if (appliedSeq === ackedSeq) yield* incarnation.wal.rotate().pipe(Effect.orDie)
        yield* incarnation.wal.releaseThrough(appliedSeq).pipe(Effect.orDie)
        recordsSinceCheckpoint = 0
      })

    /** Bytes the store holds on disk: LMDB's file and the log's segments. */
    const bytesOnDisk = (incarnation: Incarnation): number =>
      incarnation.wal.stats().bytes + fileBytes(`${lmdbDir}/data.mdb`)

    /**
     * The store's state as a compaction keeps it: the replies of remembered commands withheld (a
     * reply can quote what was deleted since), each value as the store's `compactValue` keeps it.
     */
    function* liveEntries(incarnation: Incarnation): Generator<readonly [string, unknown]> {
      for (const { key, value } of incarnation.view.getRange(allKeys)) {
        yield [
          key,
          isIdempotencyStateKey(key)
            ? withheldRecord(value as IdempotencyRecord)
            : definition.compactValue === undefined
              ? value
              : definition.compactValue(key, value),
        ]
      }
    }

    /**
     * A shared log whose store moved to a newer stream (a compaction, StoreGenerations.ts): closes
     * the store and opens it again from the stream its pointer names. The checkpoint belongs to a
     * retired stream, so it is discarded and rebuilt from the new stream's snapshot — no page of the
     * old LMDB file (deleted data) survives here either. Its events are the snapshot's records,
     * numbered on from the old stream's: a reader that missed some sees a gap and reads the store
     * again. `leaving` runs just before the incarnation is closed (the actor stops handing it to
     * readers: a read of a closed LMDB fails), here and in the compactions.
     */
    const reload = (incarnation: Incarnation, leaving: Effect.Effect<void> = Effect.void) =>
      Effect.gen(function* () {
        yield* leaving
        yield* close(incarnation)
        return yield* open
      }).pipe(
        // Not a log failure to mend in place: the store restarts (and its next open reloads).
        Effect.catchCause((cause) =>
          Effect.die(new Error(`reopening the store from its new stream failed: ${Cause.pretty(cause)}`)),
        ),
      )

    /**
     * Lets go of the checkpoint file's pages that reads and commits mapped (Checkpoint.ts
     * `releaseMappedPages`): once every queued change is committed, `leaving` stops readers, and
     * the environment is closed and opened again; false, and nothing closed, while a commit failed
     * or waits for disk space (its changes stay queued). Run between batches, so nothing is enqueued
     * meanwhile. A failure to reopen is a defect: the store restarts from disk.
     */
    let mappedPagesReleased = 0
    const releaseMappedPages = (incarnation: Incarnation, leaving: Effect.Effect<void>) =>
      Effect.gen(function* () {
        const { checkpoint, commits } = incarnation
        yield* Effect.promise(() => commits.drain())
        if (commits.failure !== undefined || commits.diskFull !== undefined) return false
        yield* leaving
        yield* Effect.promise(() => checkpoint.releaseMappedPages())
        mappedPagesReleased++
        return true
      })

    /**
     * Compacts a store of a shared memory (its writer lease's holder runs it; StoreGenerations.ts):
     * seals its stream (no daemon can append any more), applies everything through the sealed end,
     * publishes the state as the first messages of the next generation's stream, moves the store's
     * pointer there, and reloads from it. The sealed stream is deleted by the caller once every live
     * daemon has switched (WriterLeases.ts). A failure before the pointer moved leaves the store on
     * its sealed stream, open for reads; the compaction is run again (the lease's holder does when it
     * finds its stream sealed), and what the failed one published is replaced.
     */
    const compactShared = (incarnation: Incarnation, now: number, leaving: Effect.Effect<void> = Effect.void) =>
      Effect.gen(function* () {
        const shared = incarnation.wal.shared!
        const bytesBefore = bytesOnDisk(incarnation)
        const last = yield* shared.seal()
        yield* shared.awaitReceived(last)
        yield* applyRemote(incarnation)
        if (shared.position() < last)
          return yield* new WalError({
            reason: "Unavailable",
            message: `${shared.describe()}: applied through ${shared.position()} of ${last} after sealing`,
          })
        const next = yield* shared.startNextGeneration(liveEntries(incarnation), snapshotRecordType)
        const reopened = yield* reload(incarnation, leaving)
        yield* checkpoint(reopened, now)
        return {
          incarnation: reopened,
          report: {
            keys: next.entries,
            bytesBefore,
            bytesAfter: bytesOnDisk(reopened),
            generation: next.generation,
            retired: next.retired,
          },
        }
      })

    /**
     * Compacts the store so that nothing deleted survives in any of its files, and returns the new
     * incarnation (the old one is closed). Runs between batches (the actor owns the store meanwhile).
     *
     * 1. Checkpoint: LMDB holds every acknowledged write, flushed; the log is released up to it.
     * 2. The whole state goes into the log as one snapshot batch (one durable write), with the
     *    replies of remembered commands withheld (a reply can quote what was deleted since), and
     *    each value as the store's `compactValue` keeps it.
     * 3. LMDB is closed and its files deleted (freed pages of an LMDB file keep deleted bytes), and
     *    the store reopens: recovery finds the snapshot newer than the (empty) checkpoint and loads it.
     * 4. A checkpoint then releases every segment, the snapshot's included.
     *
     * Crash safety is recovery's: until the snapshot is durable the old log and LMDB stand; after it,
     * any start (LMDB old, missing, half loaded) rebuilds LMDB from the snapshot; after the load, LMDB
     * is current and the log is released at the next checkpoint. `onStep` is a test seam.
     */
    const compact = (
      incarnation: Incarnation,
      now: number,
      onStep?: (step: CompactionStep) => Effect.Effect<void>,
      leaving: Effect.Effect<void> = Effect.void,
    ) =>
      Effect.gen(function* () {
        const step = (name: CompactionStep) => (onStep === undefined ? Effect.void : onStep(name))
        const bytesBefore = bytesOnDisk(incarnation)
        yield* checkpoint(incarnation, now)
        if (incarnation.commits.diskFull !== undefined) return yield* Effect.die(incarnation.commits.diskFull)
        yield* step("checkpointed")
        const entries: Array<WalEntry> = []
        let chunk: Array<readonly [string, unknown]> = []
        let chunkBytes = 0
        let keys = 0
        const flush = () => {
          if (chunk.length === 0) return
          entries.push({ type: snapshotRecordType, payload: JSON.stringify(chunk) })
          chunk = []
          chunkBytes = 0
        }
        for (const [key, kept] of liveEntries(incarnation)) {
          chunk.push([key, kept])
          chunkBytes += key.length + JSON.stringify(kept).length
          keys++
          if (chunkBytes >= snapshotRecordBytesMax) flush()
        }
        flush()
        // An empty store still writes one (empty) snapshot record: it marks where the log starts over.
        if (entries.length === 0) entries.push({ type: snapshotRecordType, payload: "[]" })
        const appended = yield* Effect.orDie(incarnation.wal.appendBatch(entries))
        ackedSeq = appended.lastSeq
        yield* step("snapshot-written")
        yield* leaving
        yield* Effect.orDie(close(incarnation))
        yield* step("closed")
        yield* Effect.orDie(removeCheckpointFiles)
        yield* step("checkpoint-removed")
        const reopened = yield* Effect.orDie(open)
        yield* step("reloaded")
        yield* checkpoint(reopened, now)
        return { incarnation: reopened, report: { keys, bytesBefore, bytesAfter: bytesOnDisk(reopened) } }
      })

    const encodeFailure =
      definition.failureSchema === undefined ? undefined : Schema.encodeSync(definition.failureSchema)
    const decodeFailure =
      definition.failureSchema === undefined ? undefined : Schema.decodeUnknownSync(definition.failureSchema)

    /** What a keyed refusal or no-op leaves for its retries (a refusal only when it can be decoded again). */
    const rememberOutcome = (
      key: string,
      outcome: Result.Result<Decision<Event, Reply>, Failure>,
      now: number,
    ): IdempotencyRecord | undefined => {
      if (Result.isSuccess(outcome)) return { key, reply: outcome.success.reply, at: now }
      return encodeFailure === undefined
        ? undefined
        : { key, reply: null, failure: encodeFailure(outcome.failure), at: now }
    }

    /** The first outcome of a command, for its retry. */
    const recalled = (
      remembered: IdempotencyRecord,
    ): Result.Result<{ readonly reply: Reply }, Failure | StoreError> => {
      if (remembered.withheld === true) return Result.fail(replyWithheld(definition.name, remembered.key))
      if (remembered.failure !== undefined && decodeFailure !== undefined)
        return Result.fail(decodeFailure(remembered.failure))
      return Result.succeed({ reply: remembered.reply as Reply })
    }

    /**
     * Decides and applies `batch` against an overlay on `base` and encodes its WAL entries; writes
     * nothing. Once it has held the thread for `prepareSliceMsMax` it lets the event loop run before
     * the next event, so one command at the limits (a cascade of 10,000 deletes, split by its store
     * into events of bounded size) delays /ping and the other stores by a slice, not by its whole
     * cost. Nothing else touches the overlay meanwhile; it is uninterruptible, as it was when it
     * never yielded.
     */
    const prepare = (
      incarnation: Incarnation,
      base: StoreView,
      batch: ReadonlyArray<Submitted<Command>>,
    ): Effect.Effect<Prepared<Event, Reply, Failure>> =>
      Effect.uninterruptible(
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          if (incarnation.commits.failure !== undefined) return yield* Effect.die(incarnation.commits.failure)
          // A log with a batch size limit (a shared log's message size) cuts the batch before the first
          // command that does not fit, taking that command's effects back; the rest go back to the mailbox.
          const bytesMax = incarnation.wal.batchBytesMax
          const bounded = Number.isFinite(bytesMax)
          const overlay = new Overlay(base, bounded)
          const context = { now }
          const entries: Array<PreparedEntry<Event>> = []
          const outcomes: Array<Result.Result<{ readonly reply: Reply }, Failure | StoreError>> = []
          let bytes = 0
          let sliceStartedAt = performance.now()
          for (const submitted of batch) {
            const mark = overlay.mark()
            const entriesBefore = entries.length
            const decided = decideOne(submitted, overlay, context, entries)
            for (let index = 0; index < decided.events.length; index++) {
              if (performance.now() - sliceStartedAt >= prepareSliceMsMax) {
                yield* Effect.yieldNow
                sliceStartedAt = performance.now()
              }
              applyOne(decided, index, overlay, now, entries)
            }
            const outcome = decided.outcome
            if (bounded) {
              let added = 0
              for (let index = entriesBefore; index < entries.length; index++)
                added += payloadLength(entries[index]!.payload)
              if (bytes + added > bytesMax) {
                overlay.undoTo(mark)
                entries.length = entriesBefore
                if (outcomes.length > 0) break // the batch ends here; this command goes in the next one
                outcomes.push(Result.fail(tooLarge(definition.name, added, bytesMax)))
                continue
              }
              bytes += added
            }
            outcomes.push(outcome)
          }
          // A shared log: this daemon's events are numbered in the store as every replica will (OriginCounts.ts).
          const self = incarnation.wal.shared?.self
          if (self === undefined) return { overlay, entries, outcomes, now }
          const originCountBefore = (overlay.get(originCountKey(self)) as number | undefined) ?? 0
          let domainEvents = 0
          for (const entry of entries) if (entry.event !== undefined) domainEvents++
          if (domainEvents > 0) overlay.put(originCountKey(self), originCountBefore + domainEvents)
          return { overlay, entries, outcomes, now, originCountBefore }
        }),
      )

    /** A command decided: its outcome and the events `applyOne` applies, one at a time. */
    interface Decided {
      readonly outcome: Result.Result<{ readonly reply: Reply }, Failure | StoreError>
      /** Empty unless the command succeeded. */
      readonly events: ReadonlyArray<Event>
      readonly key: string | undefined
    }

    /** Decides one command against `overlay`; a refusal or no-op is remembered at once when keyed. */
    const decideOne = (
      submitted: Submitted<Command>,
      overlay: Overlay,
      context: CommandContext,
      entries: Array<PreparedEntry<Event>>,
    ): Decided => {
      const now = context.now
      const key = submitted.idempotencyKey
      const remembered = key === undefined ? undefined : rememberedReply(overlay, key)
      if (remembered !== undefined) return { outcome: recalled(remembered), events: [], key }
      const outcome = definition.decide(submitted.command, overlay, context)
      const events = Result.isSuccess(outcome) ? outcome.success.events : []
      if (key !== undefined && (Result.isFailure(outcome) || events.length === 0)) {
        // A keyed refusal or no-op is remembered too (a record of its own), so a retry is answered
        // the same way instead of being decided again on later state.
        const remember = rememberOutcome(key, outcome, now)
        if (remember !== undefined) {
          overlay.put(idempotencyStateKey(key), remember)
          entries.push({ type: idempotencyRecordType, payload: JSON.stringify(remember) })
        }
      }
      return { outcome, events, key }
    }

    /** Applies the `index`th event of a decided command to `overlay` and adds its log entry. */
    const applyOne = (
      decided: Decided,
      index: number,
      overlay: Overlay,
      now: number,
      entries: Array<PreparedEntry<Event>>,
    ): void => {
      const { events, key, outcome } = decided
      if (Result.isFailure(outcome)) return
      const event = events[index]!
      definition.apply(event, overlay)
      const encoded = JSON.stringify(encodeEvent(event))
      // A keyed command's reply rides on its last event's record (Idempotency.ts).
      if (key === undefined || index !== events.length - 1) {
        entries.push({ type: eventAtRecordType, payload: `{"at":${now},"event":${encoded}}`, event })
        return
      }
      const remember: IdempotencyRecord = { key, reply: outcome.success.reply, at: now }
      overlay.put(idempotencyStateKey(key), remember)
      const payload = `{"at":${now},"event":${encoded},"remember":${JSON.stringify(remember)}}`
      entries.push({ type: eventWithReplyRecordType, payload, event })
    }

    /**
     * Queues the durable WAL write of a prepared batch, if it has anything to write, behind the one
     * still on its way (the WAL writes them in order); gives the effect that waits until it is durable.
     */
    const queueWrite = (
      incarnation: Incarnation,
      prepared: Prepared<Event, Reply, Failure>,
    ): Effect.Effect<Written | undefined, WalError> =>
      prepared.entries.length === 0
        ? Effect.undefined
        : Effect.map(keepRefusals(incarnation.wal.queueBatch(prepared.entries)), keepRefusals)

    /**
     * After a batch's WAL write: its changes become readable and go to LMDB, and its events are
     * published (before its callers are answered, so a caller that reads the bus after its reply
     * finds its events). `ackedSeq` moves only here.
     */
    const commit = (
      incarnation: Incarnation,
      prepared: Prepared<Event, Reply, Failure>,
      appended: Appended | undefined,
    ): Effect.Effect<void> => {
      if (appended === undefined) return Effect.void
      const { entries } = prepared
      incarnation.commits.enqueue(
        prepared.overlay.release(),
        appended.lastSeq,
        appended.payloadBytes,
        appended.position,
      )
      ackedSeq = appended.lastSeq
      if (appended.position !== undefined) appliedPosition = appended.position
      recordsSinceCheckpoint += entries.length
      const events: Array<CommittedEvent> = []
      const self = incarnation.wal.shared?.self
      let originSeq = prepared.originCountBefore ?? 0
      for (let index = 0; index < entries.length; index++) {
        const seq = appended.firstSeq + index
        const event = entries[index]!.event
        events.push(
          event === undefined
            ? kernelRecord(seq, prepared.now)
            : self === undefined
              ? committed(seq, event, prepared.now)
              : committed(seq, event, prepared.now, undefined, { by: self, seq: ++originSeq }),
        )
      }
      return bus.publishAll(events)
    }

    const health = (incarnation: Incarnation | undefined): KernelHealth => ({
      appliedSeq: incarnation?.checkpoint.appliedSeq() ?? ackedSeq ?? 0,
      mappedPagesReleased,
      ...(recovery !== undefined ? { recovery } : {}),
      ...(incarnation !== undefined
        ? { wal: incarnation.wal.stats(), lmdbBytes: incarnation.checkpoint.sizeBytes() }
        : {}),
    })

    return {
      name: definition.name,
      open,
      close,
      discardUnacknowledged,
      compact,
      compactShared,
      reload,
      releaseMappedPages,
      applyRemote,
      catchUp,
      shared: logs.shared,
      isLogFailure,
      reopenLog,
      noteFailure,
      diskFull,
      logUnavailable,
      checkpointFreesLog,
      checkpointDue,
      checkpoint,
      prepare,
      queueWrite,
      commit,
      health,
    }
  })

/** The kernel of one store (see `makeStoreKernel`). */
export type StoreKernel<Command, Event, Reply, Failure> = Effect.Success<
  ReturnType<typeof makeStoreKernel<Command, Event, Reply, Failure>>
>
