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
 * Supervision. A defect anywhere in a batch (a bug in `decide`/`apply`, a failed write or
 * fdatasync, a failed LMDB commit) ends the running incarnation only. The supervisor closes WAL and
 * LMDB, waits (exponential backoff), and reopens from disk with `discardAfterSeq` = the last
 * acknowledged sequence, so a failed batch that reached the disk is cut away and the error its
 * callers get ("not applied") is true. The failed batch's callers are answered after that reopen;
 * commands still in the mailbox stay there and are served by the new incarnation. Each restart is
 * counted. A store whose log is corrupt does not restart: it refuses every call with a `Corrupt`
 * error naming file and offset, and the other stores keep serving. After `failFastAfterRestarts`
 * consecutive failed reopens (say a disk that stays full), waiting callers are failed with
 * `Unavailable` instead of waiting, while reopening goes on with capped backoff.
 *
 * Shutdown (closing the scope): new calls are refused with `ShuttingDown`, the batch in flight
 * finishes, every command already in the mailbox is processed and answered, LMDB is flushed and
 * both files are closed.
 */
import { Cause, Clock, Deferred, Duration, Effect, Exit, Fiber, Latch, Queue, Result, Schema, type Scope } from "effect"
import { type CommittedEvent, EventBus } from "../actors/EventBus.ts"
import { type Checkpoint, openCheckpoint, type StoreView } from "./Checkpoint.ts"
import { CommitQueue } from "./CommitQueue.ts"
import {
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
import { defaultPreallocateBytes, openLocalWal, type RecoveryReport, type Wal, WalError, type WalStats } from "./Wal.ts"
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

    let state: StoreHealth["state"] = "starting"
    let current: Incarnation | undefined
    let refusal: StoreError | undefined
    let restarts = 0
    let lastError: string | undefined
    let recovery: RecoveryReport | undefined
    let ackedSeq: number | undefined
    let recordsSinceCheckpoint = 0
    let inFlight: ReadonlyArray<Env> = []
    let committedSinceOpen = false

    const storeError = (reason: StoreError["reason"], message: string) =>
      new StoreError({ store: definition.name, reason, message: `store "${definition.name}": ${message}` })

    const publishRecords = (records: ReadonlyArray<{ seq: number; event: Event }>, at: number) =>
      bus.publishAll(records.map(({ seq, event }): CommittedEvent => ({ store: definition.name, seq, at, event })))

    const replayInto = (checkpoint: Checkpoint, salt: number, records: ReadonlyArray<WalRecord>) => {
      const applied: Array<{ seq: number; event: Event }> = []
      let batch: Array<{ seq: number; event: Event }> = []
      let remembered: Array<IdempotencyRecord> = []
      for (const record of records) {
        const payload = JSON.parse(Buffer.from(record.payload).toString("utf8"))
        if (record.type === idempotencyRecordType) remembered.push(payload as IdempotencyRecord)
        else batch.push({ seq: record.seq, event: decodeEvent(payload) })
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

    const open = Effect.gen(function* () {
      const checkpoint = yield* openCheckpoint(`${options.dir}/lmdb`)
      return yield* Effect.gen(function* () {
        const knownSalt = checkpoint.salt()
        const opened = yield* openLocalWal({
          dir: `${options.dir}/wal`,
          segmentBytesMax: options.walSegmentBytesMax,
          preallocateBytes: options.walPreallocateBytes,
          replayAfterSeq: checkpoint.appliedSeq(),
          ...(knownSalt !== undefined ? { salt: knownSalt } : {}),
          ...(ackedSeq !== undefined ? { discardAfterSeq: ackedSeq } : {}),
        }).pipe(Effect.provideService(WalFs, fs))
        const salt = opened.wal.stats().salt
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

    const processBatch = (incarnation: Incarnation, batch: ReadonlyArray<Env>) =>
      Effect.gen(function* () {
        if (incarnation.commits.failure !== undefined) return yield* Effect.die(incarnation.commits.failure)
        const now = yield* Clock.currentTimeMillis
        const overlay = new Overlay(incarnation.view)
        // WAL entries in order; `event` is set for domain events (published), not for idempotency records.
        const entries: Array<{ type: number; payload: Uint8Array; event?: Event }> = []
        let byteCount = 0
        const outcomes = batch.map((envelope): Result.Result<{ readonly reply: Reply }, Failure> => {
          const key = envelope.idempotencyKey
          const remembered = key === undefined ? undefined : rememberedReply(overlay, key)
          if (remembered !== undefined) return Result.succeed({ reply: remembered.reply as Reply })
          const outcome = definition.decide(envelope.command, overlay, { now })
          if (Result.isFailure(outcome)) return outcome
          for (const event of outcome.success.events) {
            definition.apply(event, overlay)
            const payload = Buffer.from(JSON.stringify(encodeEvent(event)), "utf8")
            byteCount += payload.length
            entries.push({ type: eventRecordType, payload, event })
          }
          if (key !== undefined && outcome.success.events.length > 0) {
            const record: IdempotencyRecord = { key, reply: outcome.success.reply, at: now }
            overlay.put(idempotencyStateKey(key), record)
            entries.push({ type: idempotencyRecordType, payload: Buffer.from(JSON.stringify(record), "utf8") })
          }
          return outcome
        })
        if (entries.length > 0) {
          const { firstSeq, lastSeq } = yield* incarnation.wal.appendBatch(entries).pipe(Effect.orDie)
          incarnation.commits.enqueue(overlay.changes(), lastSeq, byteCount)
          ackedSeq = lastSeq
          yield* publishRecords(
            entries.flatMap((entry, index) =>
              entry.event === undefined ? [] : [{ seq: firstSeq + index, event: entry.event }],
            ),
            now,
          )
          recordsSinceCheckpoint += entries.length
        }
        // Completing a Deferred only schedules its waiter, so a plain loop answers the whole batch.
        for (let index = 0; index < batch.length; index++) {
          const outcome = outcomes[index]!
          Deferred.doneUnsafe(
            batch[index]!.reply,
            Result.isSuccess(outcome) ? Exit.succeed(outcome.success.reply) : Exit.fail(outcome.failure),
          )
        }
      })

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
          const batch = yield* Queue.takeBetween(mailbox, 1, options.batchCommandsMax)
          inFlight = batch
          yield* Effect.uninterruptible(processBatch(incarnation, batch))
          inFlight = []
          committedSinceOpen = true
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
        if (inFlight.length > 0) {
          const message = Exit.isSuccess(opened)
            ? "the write failed and was rolled back; it was not applied"
            : "the write failed; the store could not restart yet, so it stays unacknowledged"
          yield* failAll(inFlight, storeError("WriteFailed", `${message} (${lastError ?? "unknown cause"})`))
          inFlight = []
        }
        if (Exit.isFailure(opened)) {
          const error = Cause.squash(opened.cause)
          lastError = describeCause(opened.cause)
          if (error instanceof WalError && (error.reason === "Corrupt" || error.reason === "GenerationMismatch")) {
            state = "corrupt"
            refusal = storeError("Corrupt", error.message)
            yield* ready.open
            // Refuse, never strand: calls that raced past the refusal check still get an answer.
            const refused = refusal
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
            yield* failAll(yield* Queue.clear(mailbox), refusal)
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
        current = undefined
        yield* close(opened.value)
        yield* Effect.logWarning(`store "${definition.name}" restarting after: ${lastError}`)
        consecutiveFailures = committedSinceOpen ? 1 : consecutiveFailures + 1
        if (consecutiveFailures >= options.failFastAfterRestarts) {
          state = "unavailable"
          refusal = storeError("Unavailable", `failed ${consecutiveFailures} times in a row: ${lastError}`)
          yield* failAll(yield* Queue.clear(mailbox), refusal)
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
        // A failed batch waiting for its restart is answered now: it was never acknowledged.
        if (inFlight.length > 0) {
          yield* failAll(
            inFlight,
            storeError(
              "WriteFailed",
              `the write failed and the store is shutting down; it was not acknowledged (${lastError ?? "unknown cause"})`,
            ),
          )
          inFlight = []
        }
        yield* Queue.end(mailbox)
        const incarnation = current
        let healthy = incarnation !== undefined && wasRunning
        // `clear` lets blocked senders in as it frees room, so drain until nothing is left.
        for (let pending = yield* Queue.clear(mailbox); pending.length > 0; pending = yield* Queue.clear(mailbox)) {
          for (let start = 0; start < pending.length; start += options.batchCommandsMax) {
            const batch = pending.slice(start, start + options.batchCommandsMax)
            if (!healthy || incarnation === undefined) {
              yield* failAll(batch, refusal)
              continue
            }
            const exit = yield* Effect.exit(processBatch(incarnation, batch))
            if (Exit.isFailure(exit)) {
              healthy = false
              yield* failAll(
                batch,
                storeError("WriteFailed", `the write failed during shutdown: ${describeCause(exit.cause)}`),
              )
            }
          }
        }
        if (incarnation !== undefined && healthy) {
          yield* Effect.exit(Effect.flatMap(Clock.currentTimeMillis, (now) => checkpointNow(incarnation, now)))
        }
        if (incarnation !== undefined) yield* close(incarnation)
        current = undefined
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
        return Effect.flatMap(Queue.offer(mailbox, { command, idempotencyKey, reply }), (accepted) =>
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
