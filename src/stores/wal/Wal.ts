/**
 * The write-ahead log of one store, as the store kernel sees it: an interface with two
 * implementations, the segmented local files (FileWal.ts, the zero-setup default) and a NATS
 * JetStream stream shared by several daemons (JetStreamWal.ts).
 *
 * What every implementation promises:
 * - Sequence numbers are gap-free and given in `queueBatch` call order.
 * - `queueBatch` returns once the batch is queued, with an effect that resolves only after the batch
 *   is durable (file: one `O_DSYNC` write; JetStream: stored by the stream's replica quorum). Nothing
 *   is acknowledged before. Batches become durable in queue order, and none after one that failed.
 * - A batch is atomic: recovery applies it whole or not at all.
 * - After a failed write the log is poisoned and refuses every further call, because what reached
 *   the log is unknown; the owner reopens it and recovery decides.
 */
import { type Effect, Schema } from "effect"
import type { WalRecord } from "./WalRecord.ts"

/** Why the WAL refused or failed. */
export const WalErrorReason = Schema.Literals([
  "Corrupt",
  "GenerationMismatch",
  "WriteFailed",
  "FsyncFailed",
  "DiskFull",
  "ReadFailed",
  "Poisoned",
  "RecordTooLarge",
  // A shared log only: another writer appended first (the batch was decided on stale state and is
  // not in the log; `position` is the log's position the writer must catch up to, when known).
  "Stale",
  // A shared log only: its servers cannot be reached (the batch may or may not be stored).
  "Unavailable",
])
export type WalErrorReason = typeof WalErrorReason.Type

/** A WAL failure; `file` and `offset` locate damage for `Corrupt`. */
export class WalError extends Schema.TaggedError<WalError>()("WalError", {
  reason: WalErrorReason,
  file: Schema.optional(Schema.String),
  offset: Schema.optional(Schema.Number),
  /** For `Stale`: the shared log's last position when the append was refused, when known. */
  position: Schema.optional(Schema.Number),
  message: Schema.String,
}) {}

/** One entry handed to `appendBatch`; a string payload is written as its UTF-8 bytes. */
export interface WalEntry {
  readonly type: number
  readonly payload: Uint8Array | string
}

/** Where an appended batch landed. */
export interface Appended {
  readonly firstSeq: number
  readonly lastSeq: number
  /** The UTF-8 bytes of the batch's payloads (record headers not counted). */
  readonly payloadBytes: number
  /** A shared log's own position of the batch (a JetStream stream sequence); none for the file log. */
  readonly position?: number
}

/** A batch another writer appended to a shared log, applied in log order by every replica. */
export interface RemoteBatch {
  /** Its position in the shared log. */
  readonly position: number
  /** Its records (one batch: the first has the batch-start flag, the last the batch-end flag and the origin). */
  readonly records: ReadonlyArray<WalRecord>
  /** The daemon that appended it. */
  readonly origin: string
}

/**
 * What a log shared by several writers adds (JetStream): batches others appended, to apply in log
 * order. Own batches are applied by their writer when acknowledged; a remote batch is handed out only
 * when every batch before it (own or remote) has been, so the applying store never sees a gap.
 */
export interface SharedLog {
  /** Takes the remote batches that are next in log order, advancing the log's position past them. */
  readonly takeRemote: () => ReadonlyArray<RemoteBatch>
  /** `wake` is called whenever remote batches may have become available. */
  readonly onRemote: (wake: () => void) => void
  /**
   * Waits until every batch through `position` has been received (after a `Stale` append); without a
   * position, until everything the log held when called.
   */
  readonly awaitReceived: (position?: number) => Effect.Effect<void, WalError>
  /** The last position applied (own or remote), in this generation's stream. */
  readonly position: () => number
  /** The store's generation this log appends to (src/stores/shared/StoreGenerations.ts). */
  readonly generation: number
  /** Set once the store's pointer names a newer generation: the store is to be reopened from it. */
  readonly movedTo: () => number | undefined
  /** Reads the store's pointer now (it is otherwise watched, or read every few seconds): `movedTo` is current after. */
  readonly refreshGeneration: () => Effect.Effect<void, WalError>
  /** Seals the stream: nothing more can be appended to it, by any daemon. Answers its last position. */
  readonly seal: () => Effect.Effect<number, WalError>
  /**
   * Publishes `entries` (the whole state, after everything through the sealed stream's end was
   * applied) as snapshot records into the next generation's stream, its records numbered on from
   * this log's, and moves the store's pointer to it. `Stale` when another daemon moved it first.
   */
  readonly startNextGeneration: (
    entries: Iterable<readonly [string, unknown]>,
    snapshotRecordType: number,
  ) => Effect.Effect<NextGeneration, WalError>
  /** Where the log lives, for messages (the servers and the stream). */
  readonly describe: () => string
  /** This daemon's id: the origin of its own batches. */
  readonly self: string
  /** Why appends fail at once now (the servers are out of reach), if they do; reads go on. */
  readonly unavailable: () => string | undefined
}

/** What `startNextGeneration` did. */
export interface NextGeneration {
  readonly generation: number
  /** The sealed stream the new one replaces (deleted once every live daemon has switched). */
  readonly retired: string
  readonly entries: number
  readonly messages: number
  readonly bytes: number
}

/** What recovery found and did. */
export interface RecoveryReport {
  readonly segments: number
  readonly records: number
  readonly firstSeq: number
  readonly lastSeq: number
  /** Set when a torn or partial tail was cut off. */
  readonly tornTail?: {
    readonly file: string
    readonly offset: number
    readonly bytesCut: number
    readonly why: string
  }
  /**
   * Set when the checkpoint is older than the log's last whole snapshot (a compaction wrote it): the
   * checkpoint must be discarded and rebuilt from the snapshot, which `replay` starts with.
   */
  readonly snapshot?: { readonly firstSeq: number; readonly lastSeq: number }
  /** Records above `discardAfterSeq` that were removed. */
  readonly discardedRecords: number
}

/** Counters since open; batches count once queued. */
export interface WalStats {
  readonly segments: number
  readonly bytes: number
  readonly appends: number
  /** Durable writes issued (one per batch) and data syncs of new segments. */
  readonly fsyncs: number
  /** The sequence the next queued batch starts at. */
  readonly nextSeq: number
  readonly salt: number
  /** A shared log: the position of the last batch applied. */
  readonly position?: number
  /** A shared log: batches received and not applied yet. */
  readonly lag?: number
  /** A shared log: appends refused because another daemon appended first (each decided again). */
  readonly refused?: number
  /** A shared log: the store's generation (StoreGenerations.ts), and whether its stream is sealed. */
  readonly generation?: number
  readonly sealed?: boolean
}

/** A store's log, as the store kernel sees it. */
export interface Wal {
  /**
   * Queues a batch: gives it the next sequence numbers, encodes it and queues its one durable write
   * behind those still on their way to the disk. Returns once it is queued, with an effect that
   * waits until the batch is durable. Batches reach the disk in the order they were queued, each
   * only after the one before is durable, and none after one that failed. Calls must not overlap:
   * one caller (the store's actor) queues its batches one after another.
   */
  readonly queueBatch: (entries: ReadonlyArray<WalEntry>) => Effect.Effect<Effect.Effect<Appended, WalError>, WalError>
  /** `queueBatch`, then waits until the batch is durable. */
  readonly appendBatch: (entries: ReadonlyArray<WalEntry>) => Effect.Effect<Appended, WalError>
  /**
   * Seals the active segment if it holds any record, so a checkpoint can release it: the next
   * append starts a new segment (none is created before one is needed).
   */
  readonly rotate: () => Effect.Effect<void, WalError>
  /** Deletes segments whose records are all at or below `seq` (never one still open for appends). */
  readonly releaseThrough: (seq: number) => Effect.Effect<number, WalError>
  readonly stats: () => WalStats
  readonly close: () => Effect.Effect<void>
  /** Most payload bytes one batch may hold (a shared log's message limit); a bigger batch is refused. */
  readonly batchBytesMax: number
  /** Set for a log shared with other writers. */
  readonly shared?: SharedLog
}

/** An opened WAL with the records to replay (complete batches above `replayAfterSeq`). */
export interface OpenedWal {
  readonly wal: Wal
  /** Whole batches to apply: above the checkpoint, or from the snapshot on (see `report.snapshot`). */
  readonly replay: ReadonlyArray<WalRecord>
  readonly report: RecoveryReport
}
