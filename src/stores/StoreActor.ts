/**
 * A store actor: one domain store made durable and supervised.
 *
 * Owns the store's WAL and LMDB checkpoint; nothing else writes them. Commands arrive in a bounded
 * mailbox; the actor takes up to `batchCommandsMax` at a time and, for the whole batch:
 * decides and applies every command against an in-memory overlay (so later commands see earlier
 * ones), appends all events to the WAL with one durable write, hands the overlay's changes to LMDB
 * (committed on lmdb-js's write thread, together with the new applied sequence), publishes the
 * events, and answers every caller (group commit). An acknowledged write is durable in the WAL;
 * until its LMDB commit finishes, reads see it through `PendingView`. Reads are LMDB read
 * transactions plus that small pending layer and never wait for the writer.
 *
 * Pipelining (`processBatches`). While one batch is being written, the actor decides the commands
 * that arrive meanwhile as the next batch, on top of the first one's overlay, and queues its write
 * behind; the WAL writer thread starts it as soon as the first is durable: one write at a time on
 * the disk, the CPU of one batch overlapping the disk time of the other. When many callers arrive
 * at once and serving them costs more CPU than a write takes, the batch is split in two to start
 * this overlap (`splitWorthIt`).
 *
 * Supervision. A defect anywhere in a batch (a bug in `decide`/`apply`, a failed write or
 * fdatasync, a failed LMDB commit) ends the running incarnation only. The supervisor closes WAL and
 * LMDB, waits (exponential backoff), and reopens from disk with `discardAfterSeq` = the last
 * acknowledged sequence, so a failed batch that reached the disk is cut away and the error its
 * callers get ("not applied") is true. The failed batch's callers are answered after that reopen
 * (or, when reopening fails, after the log alone is cut: `discardUnacknowledged`); where no cut can
 * be made, they are told that the next open decides. Commands still in the mailbox stay there and
 * are served by the new incarnation. Each restart is counted. A store whose log is corrupt does not
 * restart: it refuses every call with a `Corrupt` error naming file and offset, and the other
 * stores keep serving. After `failFastAfterRestarts` consecutive failed reopens (say a disk that
 * stays full), waiting callers are failed with `Unavailable` instead of waiting, while reopening
 * goes on with capped backoff.
 *
 * Shutdown (closing the scope): new calls are refused with `ShuttingDown`, the batch in flight
 * finishes, every command already in the mailbox is processed and answered, LMDB is flushed and
 * both files are closed. A batch whose write failed (then, or before, waiting for its restart) is
 * answered after the log is cut, as above.
 */
import { Cause, Clock, Deferred, Duration, Effect, Exit, Fiber, Latch, Queue, Result, Schema, type Scope } from "effect"
import { type CommittedEvent, EventBus } from "../actors/EventBus.ts"
import { type Checkpoint, openCheckpoint, type StoreView } from "./Checkpoint.ts"
import { CommitQueue } from "./CommitQueue.ts"
import {
  eventWithReplyRecordType,
  expiredKeys,
  type IdempotencyRecord,
  idempotencyKeyLengthMax,
  idempotencyRecordType,
  idempotencyStateKey,
  rememberedReply,
} from "./Idempotency.ts"
import { Overlay } from "./Overlay.ts"
import { PendingView } from "./PendingView.ts"
import type { StoreDefinition } from "./StoreDefinition.ts"
import {
  type Appended,
  defaultPreallocateBytes,
  openLocalWal,
  type RecoveryReport,
  type Wal,
  WalError,
  type WalStats,
} from "./Wal.ts"
import { WalFs } from "./WalFs.ts"
import { batchEndFlag, type WalRecord } from "./WalRecord.ts"

/** Limits and timings of one store actor. */
export interface StoreOptions {
  /** The store's directory: the WAL lives in `wal/`, the checkpoint in `lmdb/`. */
  readonly dir: string
  readonly mailboxCapacity: number
  readonly batchCommandsMax: number
  readonly walSegmentBytesMax: number
  /** New WAL segments are zero-filled to this size (see `defaultPreallocateBytes` in Wal.ts). */
  readonly walPreallocateBytes: number
  /** Checkpoint (flush LMDB, release WAL segments) after this many records. */
  readonly checkpointRecordsInterval: number
  /** Longest an acknowledged change waits for its coalesced LMDB commit (see CommitQueue.ts). */
  readonly lmdbCommitIntervalMs: number
  /** Commit to LMDB sooner once this many changes wait. */
  readonly lmdbCommitChangesMax: number
  /** Commit to LMDB sooner once this many bytes of WAL payload wait. */
  readonly lmdbCommitBytesMax: number
  readonly restartBackoffMsBase: number
  readonly restartBackoffMsMax: number
  readonly failFastAfterRestarts: number
  /**
   * Whether commands taken at once are split into two pipelined batches (see `splitWorthIt`):
   * "adaptive" when the measured CPU per command says it pays, "always" (any two or more commands;
   * tests use it to exercise the pipeline), "never".
   */
  readonly batchSplit: "adaptive" | "always" | "never"
}

/** Defaults used by the daemon; tests shrink them. */
export const defaultStoreOptions: Omit<StoreOptions, "dir"> = {
  mailboxCapacity: 4096,
  batchCommandsMax: 256,
  walSegmentBytesMax: 64 * 1024 * 1024,
  walPreallocateBytes: defaultPreallocateBytes,
  checkpointRecordsInterval: 20_000,
  lmdbCommitIntervalMs: 1000,
  lmdbCommitChangesMax: 4096,
  lmdbCommitBytesMax: 16 * 1024 * 1024,
  restartBackoffMsBase: 50,
  restartBackoffMsMax: 30_000,
  failFastAfterRestarts: 5,
  batchSplit: "adaptive",
}

/** Why a store could not serve a call (as opposed to a domain failure of the command itself). */
export class StoreError extends Schema.TaggedError<StoreError>()("StoreError", {
  store: Schema.String,
  reason: Schema.Literals(["WriteFailed", "Unavailable", "Corrupt", "ShuttingDown"]),
  message: Schema.String,
}) {}

/** A snapshot of a store's condition, for health reports. */
export interface StoreHealth {
  readonly name: string
  readonly state: "starting" | "running" | "restarting" | "unavailable" | "corrupt" | "stopped"
  readonly restarts: number
  readonly lastError?: string
  readonly recovery?: RecoveryReport
  readonly appliedSeq: number
  readonly mailboxDepth: number
  readonly wal?: WalStats
  readonly lmdbBytes?: number
}

/** A running store. */
export interface Store<Command, Reply, Failure> {
  readonly name: string
  /**
   * Sends a command; resolves once its events are durable and applied. With an idempotency key,
   * a repeat of an already applied command is answered with the first reply and applied once.
   */
  readonly send: (command: Command, options?: SendOptions) => Effect.Effect<Reply, Failure | StoreError>
  /** Runs `query` against the committed state (an LMDB read transaction). */
  readonly read: <A>(query: (view: StoreView) => A) => Effect.Effect<A, StoreError>
  readonly health: () => StoreHealth
}

/** Options of one send. */
export interface SendOptions {
  /** Applied at most once per key (see Idempotency.ts); at most `idempotencyKeyLengthMax` long. */
  readonly idempotencyKey?: string | undefined
}

interface Envelope<Command, Reply, Failure> {
  readonly command: Command
  readonly idempotencyKey: string | undefined
  readonly reply: Deferred.Deferred<Reply, Failure | StoreError>
}

interface Incarnation {
  readonly checkpoint: Checkpoint
  readonly wal: Wal
  readonly salt: number
  /** LMDB plus acknowledged batches whose LMDB commit is still running. */
  readonly view: PendingView
  readonly commits: CommitQueue
}

const eventRecordType = 1
/** One run of `processBatches` in this many is sampled for its CPU time (see `sampleCpu`). */
const cpuSampleEveryRuns = 16
/** Batches are split in two only when each half has at least this many commands. */
const splitHalfMin = 8

/** An exponentially weighted moving average (weight 1/16 for each new sample), 0 before the first. */
class MovingAverage {
  value = 0
  private samples = 0

  add(sample: number): void {
    this.value = this.samples === 0 ? sample : this.value + (sample - this.value) / 16
    this.samples++
  }
}

/** A batch's queued WAL write: waits until the batch is durable. */
type Written = Effect.Effect<Appended>

const describeCause = (cause: Cause.Cause<unknown>): string => {
  const error = Cause.squash(cause)
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error)
}

/** Starts the supervised actor of `definition`; it stops (draining its mailbox) when the scope closes. */
export const makeStore = <Command, Event, Reply, Failure>(
  definition: StoreDefinition<Command, Event, Reply, Failure>,
  options: StoreOptions,
): Effect.Effect<Store<Command, Reply, Failure>, never, WalFs | EventBus | Scope.Scope> =>
  Effect.gen(function* () {
    const fs = yield* WalFs
    const bus = yield* EventBus
    // Ended (Cause.Done) at shutdown: later offers are refused, senders already waiting still get in.
    const mailbox = yield* Queue.bounded<Envelope<Command, Reply, Failure>, Cause.Done>(options.mailboxCapacity)
    const ready = yield* Latch.make(false)
    const encodeEvent = Schema.encodeSync(definition.eventSchema)
    const decodeEvent = Schema.decodeUnknownSync(definition.eventSchema)
    type Env = Envelope<Command, Reply, Failure>
    /** A WAL entry of a batch; `event` is set for domain events (published), not for idempotency records. */
    type PreparedEntry = { readonly type: number; readonly payload: string; readonly event?: Event }
    /** A batch decided and encoded, waiting for (or in) its WAL write. */
    interface Prepared {
      readonly batch: ReadonlyArray<Env>
      readonly overlay: Overlay
      readonly entries: Array<PreparedEntry>
      readonly outcomes: ReadonlyArray<Result.Result<{ readonly reply: Reply }, Failure>>
      readonly now: number
    }
    // Moving averages (see `splitWorthIt`); zero until measured, so nothing splits before.
    const writeMs = new MovingAverage()
    const cpuMsPerCommand = new MovingAverage()
    // The CPU time at the start of the run being sampled, and the runs since the last sample.
    let lastRunCpuMs: number | undefined
    let runsUnsampled = 0
    let lastRunSerial = false

    let state: StoreHealth["state"] = "starting"
    let current: Incarnation | undefined
    let refusal: StoreError | undefined
    let restarts = 0
    let lastError: string | undefined
    let recovery: RecoveryReport | undefined
    let ackedSeq: number | undefined
    let recordsSinceCheckpoint = 0
    let inFlight: ReadonlyArray<Env> = []
    /** Why the batch in `inFlight` failed, once it has. */
    let inFlightCause: string | undefined
    /** The store generation of the last WAL opened (a cut must not touch another generation's log). */
    let walSalt: number | undefined
    // Taken from the mailbox but never written (decided on top of a batch whose write then failed):
    // served before the mailbox by the next incarnation.
    let requeued: ReadonlyArray<Env> = []
    let committedSinceOpen = false

    const storeError = (reason: StoreError["reason"], message: string) =>
      new StoreError({ store: definition.name, reason, message: `store "${definition.name}": ${message}` })

    const committed = (seq: number, event: Event, at: number): CommittedEvent => ({
      store: definition.name,
      seq,
      at,
      event,
    })

    const publishRecords = (records: ReadonlyArray<{ seq: number; event: Event }>, at: number) =>
      bus.publishAll(records.map(({ seq, event }) => committed(seq, event, at)))

    const replayInto = (checkpoint: Checkpoint, salt: number, records: ReadonlyArray<WalRecord>) => {
      const applied: Array<{ seq: number; event: Event }> = []
      let batch: Array<{ seq: number; event: Event }> = []
      let remembered: Array<IdempotencyRecord> = []
      for (const record of records) {
        const payload = JSON.parse(Buffer.from(record.payload).toString("utf8"))
        if (record.type === idempotencyRecordType) remembered.push(payload as IdempotencyRecord)
        else if (record.type === eventWithReplyRecordType) {
          batch.push({ seq: record.seq, event: decodeEvent(payload.event) })
          remembered.push(payload.remember as IdempotencyRecord)
        } else batch.push({ seq: record.seq, event: decodeEvent(payload) })
        if (record.flags & batchEndFlag) {
          const events = batch
          const records = remembered
          checkpoint.commitWith(
            (writer) => {
              for (const { event } of events) definition.apply(event, writer)
              for (const entry of records) writer.put(idempotencyStateKey(entry.key), entry)
            },
            record.seq,
            salt,
          )
          applied.push(...events)
          batch = []
          remembered = []
        }
      }
      return applied
    }

    /** Opens (recovers) the store's WAL, cutting every record above `ackedSeq` when it is known. */
    const openWal = (replayAfterSeq: number, salt: number | undefined) =>
      openLocalWal({
        dir: `${options.dir}/wal`,
        segmentBytesMax: options.walSegmentBytesMax,
        preallocateBytes: options.walPreallocateBytes,
        replayAfterSeq,
        ...(salt !== undefined ? { salt } : {}),
        ...(ackedSeq !== undefined ? { discardAfterSeq: ackedSeq } : {}),
      }).pipe(Effect.provideService(WalFs, fs))

    const open = Effect.gen(function* () {
      const checkpoint = yield* openCheckpoint(`${options.dir}/lmdb`)
      return yield* Effect.gen(function* () {
        const opened = yield* openWal(checkpoint.appliedSeq(), checkpoint.salt())
        const salt = opened.wal.stats().salt
        walSalt = salt
        const replayed = yield* Effect.try({
          try: () => replayInto(checkpoint, salt, opened.replay),
          catch: (cause) => cause,
        })
        yield* publishRecords(replayed, yield* Clock.currentTimeMillis)
        recovery = opened.report
        ackedSeq = opened.wal.stats().nextSeq - 1
        const view = new PendingView(checkpoint.view)
        const commits = new CommitQueue(checkpoint, view, salt, {
          intervalMs: options.lmdbCommitIntervalMs,
          changesMax: options.lmdbCommitChangesMax,
          bytesMax: options.lmdbCommitBytesMax,
        })
        return { checkpoint, wal: opened.wal, salt, view, commits } satisfies Incarnation
      }).pipe(Effect.onError(() => Effect.promise(() => checkpoint.close())))
    })

    const close = (incarnation: Incarnation) =>
      Effect.gen(function* () {
        yield* Effect.promise(() => incarnation.commits.drain())
        yield* incarnation.wal.close()
        yield* Effect.promise(() => incarnation.checkpoint.close().catch(() => undefined))
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
      return openWal(ackedSeq, walSalt).pipe(
        Effect.flatMap((opened) => opened.wal.close()),
        Effect.as(true),
        Effect.catchCause(() => Effect.succeed(false)),
      )
    })

    const rolledBackError = (cause: string | undefined) =>
      storeError(
        "WriteFailed",
        `the write failed and was rolled back; it was not applied (${cause ?? "unknown cause"})`,
      )

    /** For a failed batch that could not be cut from the log: the next open keeps it if it is whole. */
    const undecidedError = (why: string, cause: string) =>
      storeError(
        "WriteFailed",
        `the write failed and ${why}: whether it is applied is decided when the store next opens (${cause})`,
      )

    const checkpointNow = (incarnation: Incarnation, now: number) =>
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
        const appliedSeq = incarnation.checkpoint.appliedSeq()
        yield* Effect.promise(() => incarnation.checkpoint.flushed())
        // Everything in the active segment is applied and flushed: start a new one so the old can go,
        // and the next startup scans only what came after this checkpoint.
        if (appliedSeq === ackedSeq) yield* incarnation.wal.rotate().pipe(Effect.orDie)
        yield* incarnation.wal.releaseThrough(appliedSeq).pipe(Effect.orDie)
        recordsSinceCheckpoint = 0
      })

    /** Decides and applies `batch` against an overlay on `base` and encodes its WAL entries; writes nothing. */
    const prepare = (incarnation: Incarnation, base: StoreView, batch: ReadonlyArray<Env>) =>
      Effect.map(Clock.currentTimeMillis, (now): Prepared => {
        if (incarnation.commits.failure !== undefined) throw incarnation.commits.failure
        const overlay = new Overlay(base)
        const context = { now }
        const entries: Array<PreparedEntry> = []
        const outcomes = batch.map((envelope): Result.Result<{ readonly reply: Reply }, Failure> => {
          const key = envelope.idempotencyKey
          const remembered = key === undefined ? undefined : rememberedReply(overlay, key)
          if (remembered !== undefined) return Result.succeed({ reply: remembered.reply as Reply })
          const outcome = definition.decide(envelope.command, overlay, context)
          if (Result.isFailure(outcome)) return outcome
          const { events } = outcome.success
          // A keyed command's reply rides on its last event's record (Idempotency.ts).
          const last = key === undefined ? events.length : events.length - 1
          for (let index = 0; index < events.length; index++) {
            const event = events[index]!
            definition.apply(event, overlay)
            if (index !== last) {
              entries.push({ type: eventRecordType, payload: JSON.stringify(encodeEvent(event)), event })
              continue
            }
            const remember: IdempotencyRecord = { key: key!, reply: outcome.success.reply, at: now }
            overlay.put(idempotencyStateKey(key!), remember)
            const payload = JSON.stringify({ event: encodeEvent(event), remember })
            entries.push({ type: eventWithReplyRecordType, payload, event })
          }
          return outcome
        })
        return { batch, overlay, entries, outcomes, now }
      })

    /**
     * Queues the durable WAL write of a prepared batch, if it has anything to write, behind the one
     * still on its way (the WAL writes them in order); gives the effect that waits until it is durable.
     */
    const queueWrite = (incarnation: Incarnation, prepared: Prepared): Effect.Effect<Written | undefined> =>
      prepared.entries.length === 0
        ? Effect.undefined
        : Effect.map(Effect.orDie(incarnation.wal.queueBatch(prepared.entries)), Effect.orDie)

    /**
     * After a batch's WAL write: its changes become readable and go to LMDB, its events are published
     * and its callers answered. `ackedSeq` moves only here, so a failure before it leaves the batch
     * unacknowledged and the reopen cuts it from the log.
     */
    const finish = (incarnation: Incarnation, prepared: Prepared, appended: Appended | undefined) =>
      Effect.suspend(() => {
        const { batch, outcomes, entries } = prepared
        const events: Array<CommittedEvent> = []
        if (appended !== undefined) {
          incarnation.commits.enqueue(prepared.overlay.changes(), appended.lastSeq, appended.payloadBytes)
          ackedSeq = appended.lastSeq
          recordsSinceCheckpoint += entries.length
          for (let index = 0; index < entries.length; index++) {
            const event = entries[index]!.event
            if (event !== undefined) events.push(committed(appended.firstSeq + index, event, prepared.now))
          }
        }
        // Published before the answers: a caller that reads the bus after its reply finds its events.
        return Effect.map(bus.publishAll(events), () => {
          // Completing a Deferred only schedules its waiter, so a plain loop answers the whole batch.
          for (let index = 0; index < batch.length; index++) {
            const outcome = outcomes[index]!
            Deferred.doneUnsafe(
              batch[index]!.reply,
              Result.isSuccess(outcome) ? Exit.succeed(outcome.success.reply) : Exit.fail(outcome.failure),
            )
          }
        })
      })

    /**
     * Called as each run of `processBatches` starts its first write. Every `cpuSampleEveryRuns`-th
     * run notes the process's CPU time at its start; when that run was a single unsplit batch, the
     * CPU time until the next run starts, per command of that next batch, is what serving one
     * command costs the machine, callers' side included (process.cpuUsage counts CPU time only,
     * never time spent waiting for the disk or for requests). Runs that pipelined give no sample.
     * Sampling at run starts keeps the system call off the pipeline's path, and sampling one run in
     * many keeps it from costing more than the small batches of a few writers (at 4 writers, a
     * call at every run took 14% of the actor's thread).
     */
    const sampleCpu = (commands: number) => {
      if (lastRunCpuMs === undefined && ++runsUnsampled < cpuSampleEveryRuns) return
      const { user, system } = process.cpuUsage()
      const cpuMs = (user + system) / 1000
      if (lastRunCpuMs === undefined) {
        lastRunCpuMs = cpuMs
        runsUnsampled = 0
        return
      }
      if (lastRunSerial) cpuMsPerCommand.add((cpuMs - lastRunCpuMs) / commands)
      lastRunCpuMs = undefined
    }

    /**
     * Whether to split `count` commands taken at once into two pipelined batches. One batch costs
     * `count × c` of CPU plus one write `D`, served one after the other; two halves cost two writes
     * but overlap each half's CPU with the other's write, about `max(count × c, 2D)`. That is less
     * exactly when `count × c > D`: at 64 writers of small commands on a disk with 0.1 ms syncs it
     * splits, at 8 it does not.
     */
    const splitWorthIt = (count: number): boolean => {
      if (options.batchSplit === "adaptive") {
        return count >= 2 * splitHalfMin && count * cpuMsPerCommand.value > writeMs.value
      }
      return options.batchSplit === "always" && count >= 2
    }

    const joinWrite = (writing: Written | undefined) => writing ?? Effect.undefined

    /**
     * Decides `batch` on top of `current`, whose write may still be running. Should deciding fail
     * (a defect), `current` is still finished and answered first, then the defect ends the incarnation.
     */
    const prepareNext = (
      incarnation: Incarnation,
      current: Prepared,
      written: Effect.Effect<Appended | undefined>,
      batch: ReadonlyArray<Env>,
    ) =>
      Effect.gen(function* () {
        inFlight = [...current.batch, ...batch]
        const decided = yield* Effect.exit(prepare(incarnation, current.overlay, batch))
        if (Exit.isSuccess(decided)) return decided.value
        const appended = yield* written
        inFlight = batch
        yield* finish(incarnation, current, appended)
        return yield* decided
      })

    /**
     * Serves `taken` and then, for as long as each write has followers, the commands that arrived
     * while it was on disk. Group commit, pipelined: while batch N's durable write is on its way, the
     * actor decides batch N+1 against N's overlay (N+1 sees N's effects before they are durable) and
     * queues N+1's write right behind N's, so the WAL writer starts it the moment N is durable,
     * whatever the actor is doing then; the actor meanwhile answers N's callers and decides N+2. Two
     * writes at most are queued, so batches stay large: each holds what arrived during the write
     * before it. A batch's callers are answered only after its own write, and never before an earlier
     * batch's. When N's write fails, only N's callers fail (after the reopen, which cuts N if it
     * reached the disk); N+1's write fails unwritten behind it (the WAL writes nothing after a failed
     * write), so its commands go back (`requeued`) to be decided afresh by the next incarnation. A
     * defect in deciding N+1 lets N finish first, then fails N+1. `follow: false` serves `taken` alone.
     */
    const processBatches = (incarnation: Incarnation, taken: ReadonlyArray<Env>, follow: boolean) =>
      Effect.gen(function* () {
        // Split what was taken in two when serving it costs more CPU than a write takes: the first
        // half is written while the second is decided. Both halves' callers then stay a write apart,
        // which keeps the pipeline going (see `splitWorthIt`).
        const split = follow && splitWorthIt(taken.length)
        const first = split ? taken.slice(0, taken.length >> 1) : taken
        let held: ReadonlyArray<Env> | undefined = split ? taken.slice(taken.length >> 1) : undefined
        inFlight = first
        const started = yield* Effect.exit(
          Effect.flatMap(prepare(incarnation, incarnation.view, first), (prepared) =>
            Effect.map(queueWrite(incarnation, prepared), (writing) => ({ prepared, writing })),
          ),
        )
        if (Exit.isFailure(started)) {
          // The second half was not decided yet: it is served by the next incarnation.
          if (held !== undefined) requeued = [...held, ...requeued]
          return yield* started
        }
        let current = started.value.prepared
        let writing = started.value.writing
        if (follow) sampleCpu(current.batch.length)
        lastRunSerial = !split
        // When the write of `current` could start: its queueing, or the end of the write before it.
        let writeStartedAt = performance.now()
        while (true) {
          let next: Prepared | undefined
          let nextWriting: Written | undefined
          // Queueing `next` failed (the log broke): `current` is still finished, then the incarnation ends.
          let brokenLog: Cause.Cause<never> | undefined
          const queueNext = (prepared: Prepared) =>
            Effect.map(Effect.exit(queueWrite(incarnation, prepared)), (queued) => {
              if (Exit.isSuccess(queued)) {
                next = prepared
                nextWriting = queued.value
              } else {
                // Served again by the next incarnation, so no longer this one's to answer.
                requeued = [...prepared.batch, ...requeued]
                inFlight = current.batch
                brokenLog = queued.cause
              }
            })
          // Follow the write with more only while it runs, no checkpoint is due and no shutdown began.
          const following =
            follow &&
            writing !== undefined &&
            recordsSinceCheckpoint + current.entries.length < options.checkpointRecordsInterval
          const waiting = () => following && refusal === undefined && Queue.sizeUnsafe(mailbox) > 0
          // Callers answered in the last round have sent again by now (answering a caller runs it up
          // to its next wait): decide what they sent.
          if (held === undefined && waiting()) held = yield* Queue.takeBetween(mailbox, 1, options.batchCommandsMax)
          if (held !== undefined) {
            yield* queueNext(yield* prepareNext(incarnation, current, joinWrite(writing), held))
            held = undefined
          }
          const written = yield* Effect.exit(joinWrite(writing))
          if (Exit.isFailure(written)) {
            // Only the batch that was written fails (after the reopen, which cuts it). The one queued
            // behind it failed unwritten: it goes back to be decided afresh by the next incarnation.
            if (nextWriting !== undefined) yield* Effect.exit(nextWriting)
            if (next !== undefined) requeued = [...next.batch, ...requeued]
            inFlight = current.batch
            return yield* written
          }
          const writtenAt = performance.now()
          if (writing !== undefined) writeMs.add(writtenAt - writeStartedAt)
          writeStartedAt = writtenAt
          const appended = written.value
          if (next === undefined && brokenLog === undefined && waiting()) {
            // Callers that sent during the write without being seen above: decided now, not overlapped
            // this time, but as a batch of their own, so the two groups of callers stay apart.
            const batch = yield* Queue.takeBetween(mailbox, 1, options.batchCommandsMax)
            yield* queueNext(yield* prepareNext(incarnation, current, Effect.succeed(appended), batch))
            writeStartedAt = performance.now()
          }
          yield* finish(incarnation, current, appended)
          committedSinceOpen = true
          if (brokenLog !== undefined) {
            inFlight = []
            return yield* Effect.failCause(brokenLog)
          }
          if (next === undefined) {
            inFlight = []
            return
          }
          lastRunSerial = false
          inFlight = next.batch
          next.overlay.rebase(incarnation.view)
          current = next
          writing = nextWriting
        }
      })

    const takeRequeued = () => {
      const batch = requeued.slice(0, options.batchCommandsMax)
      requeued = requeued.slice(options.batchCommandsMax)
      return batch
    }

    const takeAllRequeued = () => {
      const all = requeued
      requeued = []
      return all
    }

    /** Every command waiting to be served: the requeued ones, then the mailbox. */
    const clearWaiting = Effect.map(Queue.clear(mailbox), (queued) => [...takeAllRequeued(), ...queued])

    const failAll = (envelopes: Iterable<Env>, error: StoreError) =>
      Effect.forEach(envelopes, (envelope) => Deferred.fail(envelope.reply, error), { discard: true })

    const backoff = (failures: number) =>
      Effect.sleep(
        Duration.millis(
          Math.min(options.restartBackoffMsMax, options.restartBackoffMsBase * 2 ** Math.max(0, failures - 1)),
        ),
      )

    const serve = (incarnation: Incarnation) =>
      Effect.gen(function* () {
        while (true) {
          const batch =
            requeued.length > 0 ? takeRequeued() : yield* Queue.takeBetween(mailbox, 1, options.batchCommandsMax)
          yield* Effect.uninterruptible(processBatches(incarnation, batch, true))
          // After the answers: a failed checkpoint restarts the actor but un-acknowledges nothing.
          if (recordsSinceCheckpoint >= options.checkpointRecordsInterval) {
            yield* Effect.uninterruptible(
              Effect.flatMap(Clock.currentTimeMillis, (now) => checkpointNow(incarnation, now)),
            )
          }
        }
      })

    const supervise = Effect.gen(function* () {
      let consecutiveFailures = 0
      while (true) {
        const opened = yield* Effect.exit(open)
        // The failed batch is answered once it is rolled back: by the reopen, or, when reopening
        // fails, by cutting the log alone. Until then its callers wait, as the mailbox does.
        if (inFlight.length > 0 && (Exit.isSuccess(opened) || (yield* discardUnacknowledged))) {
          yield* failAll(inFlight, rolledBackError(inFlightCause))
          inFlight = []
        }
        if (Exit.isFailure(opened)) {
          const error = Cause.squash(opened.cause)
          lastError = describeCause(opened.cause)
          if (error instanceof WalError && (error.reason === "Corrupt" || error.reason === "GenerationMismatch")) {
            state = "corrupt"
            refusal = storeError("Corrupt", error.message)
            yield* ready.open
            // Refuse, never strand: calls that raced past the refusal check still get an answer. The
            // failed batch's fate is the damaged log's (see `mnemos repair`).
            const refused = refusal
            yield* failAll(inFlight, refused)
            inFlight = []
            yield* failAll(takeAllRequeued(), refused)
            return yield* Effect.forever(
              Queue.takeBetween(mailbox, 1, options.batchCommandsMax).pipe(
                Effect.flatMap((batch) => failAll(batch, refused)),
              ),
            )
          }
          consecutiveFailures++
          restarts++
          if (consecutiveFailures >= options.failFastAfterRestarts) {
            state = "unavailable"
            refusal = storeError("Unavailable", `cannot reopen after ${consecutiveFailures} attempts: ${lastError}`)
            yield* failAll(
              inFlight,
              undecidedError(
                "the store cannot reopen to roll it back",
                `${inFlightCause ?? "unknown cause"}; reopening: ${lastError}`,
              ),
            )
            inFlight = []
            yield* failAll(yield* clearWaiting, refusal)
          } else {
            state = "restarting"
          }
          yield* backoff(consecutiveFailures)
          continue
        }
        committedSinceOpen = false
        refusal = undefined
        current = opened.value
        state = "running"
        yield* ready.open
        const cause = yield* serve(opened.value).pipe(Effect.catchCause((cause) => Effect.succeed(cause)))
        yield* ready.close
        state = "restarting"
        restarts++
        lastError = describeCause(cause)
        inFlightCause = lastError
        current = undefined
        yield* close(opened.value)
        yield* Effect.logWarning(`store "${definition.name}" restarting after: ${lastError}`)
        consecutiveFailures = committedSinceOpen ? 1 : consecutiveFailures + 1
        if (consecutiveFailures >= options.failFastAfterRestarts) {
          state = "unavailable"
          refusal = storeError("Unavailable", `failed ${consecutiveFailures} times in a row: ${lastError}`)
          yield* failAll(yield* clearWaiting, refusal)
        }
        yield* backoff(consecutiveFailures)
      }
    })

    const supervisor = yield* Effect.forkDetach(supervise)

    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        const wasRunning = state === "running"
        state = "stopped"
        refusal = storeError("ShuttingDown", "the store is shutting down")
        yield* Fiber.interrupt(supervisor)
        // Batches whose write failed (one waiting for its restart, or one failing below), answered
        // once the log is closed and they are rolled back.
        const failed: Array<Env> = [...inFlight]
        let failedCause = inFlightCause
        inFlight = []
        yield* Queue.end(mailbox)
        const incarnation = current
        let healthy = incarnation !== undefined && wasRunning
        // `clear` lets blocked senders in as it frees room, so drain until nothing is left.
        for (let pending = yield* clearWaiting; pending.length > 0; pending = yield* clearWaiting) {
          for (let start = 0; start < pending.length; start += options.batchCommandsMax) {
            const batch = pending.slice(start, start + options.batchCommandsMax)
            if (!healthy || incarnation === undefined) {
              yield* failAll(batch, refusal)
              continue
            }
            const exit = yield* Effect.exit(processBatches(incarnation, batch, false))
            if (Exit.isFailure(exit)) {
              healthy = false
              failed.push(...batch)
              failedCause = describeCause(exit.cause)
              inFlight = []
            }
          }
        }
        if (incarnation !== undefined && healthy) {
          yield* Effect.exit(Effect.flatMap(Clock.currentTimeMillis, (now) => checkpointNow(incarnation, now)))
        }
        if (incarnation !== undefined) yield* close(incarnation)
        current = undefined
        if (failed.length > 0) {
          yield* failAll(
            failed,
            (yield* discardUnacknowledged)
              ? rolledBackError(failedCause)
              : undecidedError("the store is shutting down without rolling it back", failedCause ?? "unknown cause"),
          )
        }
        yield* ready.open
      }),
    )

    const send = (command: Command, sendOptions?: SendOptions): Effect.Effect<Reply, Failure | StoreError> =>
      Effect.suspend(() => {
        if (refusal !== undefined) return Effect.fail(refusal)
        const idempotencyKey = sendOptions?.idempotencyKey
        if (idempotencyKey !== undefined && idempotencyKey.length > idempotencyKeyLengthMax) {
          return Effect.die(new Error(`idempotency key longer than ${idempotencyKeyLengthMax}`))
        }
        const reply = Deferred.makeUnsafe<Reply, Failure | StoreError>()
        const envelope = { command, idempotencyKey, reply }
        // Room in the mailbox (the usual case): in at once. Otherwise `offer` waits for room, or
        // answers false once the mailbox has ended.
        if (Queue.offerUnsafe(mailbox, envelope)) return Deferred.await(reply)
        return Effect.flatMap(Queue.offer(mailbox, envelope), (accepted) =>
          accepted
            ? Deferred.await(reply)
            : Effect.fail(refusal ?? storeError("ShuttingDown", "the store is shutting down")),
        )
      })

    const read = <A>(query: (view: StoreView) => A): Effect.Effect<A, StoreError> =>
      Effect.gen(function* () {
        if (current === undefined && refusal === undefined) yield* ready.await
        if (current === undefined) return yield* refusal ?? storeError("Unavailable", "the store is not open")
        return query(current.view)
      })

    const health = (): StoreHealth => ({
      name: definition.name,
      state,
      restarts,
      appliedSeq: current?.checkpoint.appliedSeq() ?? ackedSeq ?? 0,
      mailboxDepth: Queue.sizeUnsafe(mailbox),
      ...(lastError !== undefined ? { lastError } : {}),
      ...(recovery !== undefined ? { recovery } : {}),
      ...(current !== undefined ? { wal: current.wal.stats(), lmdbBytes: current.checkpoint.sizeBytes() } : {}),
    })

    return { name: definition.name, send, read, health } satisfies Store<Command, Reply, Failure>
  })
