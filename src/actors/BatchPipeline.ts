/**
 * Group commit, pipelined: how a store actor serves the commands it takes from its mailbox.
 *
 * `run` serves `taken` and then, for as long as each write has followers, the commands that arrived
 * while it was on disk. While batch N's durable write is on its way, the actor decides batch N+1
 * against N's overlay (N+1 sees N's effects before they are durable) and queues N+1's write right
 * behind N's, so the log starts it the moment N is durable, whatever the actor is doing then; the
 * actor meanwhile answers N's callers and decides N+2. Two writes at most are queued, so batches
 * stay large: each holds what arrived during the write before it.
 *
 * Invariants:
 * - A batch's callers are answered only after its own write, and never before an earlier batch's.
 * - When N's write fails, only N's callers fail (the supervisor answers them after the rollback:
 *   they stay in `mailbox.inFlight`). N+1's write fails unwritten behind it (the log writes nothing
 *   after a failed write), so its commands are requeued, to be decided afresh by the next incarnation.
 * - A defect in deciding N+1 lets N finish first, then fails N+1.
 * - A shared log may refuse N as stale (another daemon appended first): N and N+1 (chained behind
 *   it) go back to the mailbox's front, and `run` returns `Stale` for the actor to catch up.
 *
 * When many callers arrive at once and serving them costs more CPU than a write takes, the batch is
 * split in two to start this overlap (`SplitPolicy`).
 */
import { Cause, Deferred, Effect, Exit, Result } from "effect"
import { StoreError } from "../stores/StoreError.ts"
import type { Incarnation, Prepared, StoreKernel, Submitted, Written } from "../stores/StoreKernel.ts"
import { type Appended, WalError } from "../stores/wal/Wal.ts"
import { type Envelope, failAll, type Mailbox } from "./Mailbox.ts"

/** A shared log refused an append as stale: catch up to `position` (when known), then go on. */
export interface Stale {
  readonly _tag: "Stale"
  readonly position: number | undefined
}

const staleAppend = (cause: Cause.Cause<unknown>): Stale | undefined => {
  const error = Cause.squash(cause)
  return error instanceof WalError && error.reason === "Stale" ? { _tag: "Stale", position: error.position } : undefined
}

/** A shared log that could not confirm (or take) an append: its servers are unreachable. */
const unavailableAppend = (cause: Cause.Cause<unknown>): WalError | undefined => {
  const error = Cause.squash(cause)
  return error instanceof WalError && error.reason === "Unavailable" ? error : undefined
}

/** How a batch taken at once may be split (see `SplitPolicy`). */
export type BatchSplit = "adaptive" | "always" | "never"

/** One run of `run` in this many is sampled for its CPU time (see `SplitPolicy.sampleCpu`). */
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

/**
 * Whether to split commands taken at once into two pipelined batches. One batch costs `count × c`
 * of CPU plus one write `D`, served one after the other; two halves cost two writes but overlap each
 * half's CPU with the other's write, about `max(count × c, 2D)`. That is less exactly when
 * `count × c > D`: at 64 writers of small commands on a disk with 0.1 ms syncs it splits, at 8 it
 * does not. Both are measured: write latency on every write, CPU per command by sampling.
 */
class SplitPolicy {
  // Zero until measured, so nothing splits before.
  readonly writeMs = new MovingAverage()
  private readonly cpuMsPerCommand = new MovingAverage()
  // The CPU time at the start of the run being sampled, and the runs since the last sample.
  private lastRunCpuMs: number | undefined
  private runsUnsampled = 0
  lastRunSerial = false

  constructor(private readonly mode: BatchSplit) {}

  /**
   * Called as each run starts its first write. Every `cpuSampleEveryRuns`-th run notes the process's
   * CPU time at its start; when that run was a single unsplit batch, the CPU time until the next run
   * starts, per command of that next batch, is what serving one command costs the machine, callers'
   * side included (process.cpuUsage counts CPU time only, never time spent waiting for the disk or
   * for requests). Runs that pipelined give no sample. Sampling at run starts keeps the system call
   * off the pipeline's path, and sampling one run in many keeps it from costing more than the small
   * batches of a few writers (at 4 writers, a call at every run took 14% of the actor's thread).
   */
  sampleCpu(commands: number): void {
    if (this.lastRunCpuMs === undefined && ++this.runsUnsampled < cpuSampleEveryRuns) return
    const { user, system } = process.cpuUsage()
    const cpuMs = (user + system) / 1000
    if (this.lastRunCpuMs === undefined) {
      this.lastRunCpuMs = cpuMs
      this.runsUnsampled = 0
      return
    }
    if (this.lastRunSerial) this.cpuMsPerCommand.add((cpuMs - this.lastRunCpuMs) / commands)
    this.lastRunCpuMs = undefined
  }

  worthIt(count: number): boolean {
    if (this.mode === "adaptive") {
      return count >= 2 * splitHalfMin && count * this.cpuMsPerCommand.value > this.writeMs.value
    }
    return this.mode === "always" && count >= 2
  }
}

/**
 * Serves batches of one store actor through its kernel (see the module docblock). Its callers are
 * answered with their reply, a `Failure` of the domain's, or a `StoreError`.
 */
export class BatchPipeline<Command, Event, Reply, Failure> {
  private readonly split: SplitPolicy

  constructor(
    private readonly kernel: StoreKernel<Command, Event, Reply, Failure>,
    private readonly mailbox: Mailbox<Command, Reply, Failure | StoreError>,
    splitMode: BatchSplit,
    /** False once the actor refuses new work (shutdown): no more followers are taken. */
    private readonly accepting: () => boolean,
    /** Called after each batch is committed and answered. */
    private readonly onCommitted: () => void,
  ) {
    this.split = new SplitPolicy(splitMode)
  }

  /**
   * Serves `taken` and, with `follow`, the commands that arrive while its writes run (see the module
   * docblock). Fails, with `mailbox.inFlight` holding the batch whose write failed, when a write or a
   * decision fails; the supervisor answers those callers after the rollback.
   */
  run(incarnation: Incarnation, taken: ReadonlyArray<Envelope<Command, Reply, Failure | StoreError>>, follow: boolean) {
    const { kernel, mailbox, split, accepting, onCommitted } = this
    type Env = Envelope<Command, Reply, Failure | StoreError>
    interface Batch {
      readonly batch: ReadonlyArray<Env>
      readonly prepared: Prepared<Event, Reply, Failure>
    }
    const joinWrite = (writing: Written | undefined): Effect.Effect<Appended | undefined, WalError> =>
      writing ?? Effect.undefined

    /** Answers a batch whose append a shared log could not confirm: it may or may not be stored. */
    const answerUnavailable = (batch: ReadonlyArray<Env>, error: WalError) =>
      failAll(
        batch,
        new StoreError({
          store: kernel.name,
          reason: "Unavailable",
          message: `store "${kernel.name}": ${error.message}`,
        }),
      )

    const prepare = (
      base: Incarnation["view"] | Prepared<Event, Reply, Failure>["overlay"],
      batch: ReadonlyArray<Env>,
    ) =>
      Effect.map(kernel.prepare(incarnation, base, batch as ReadonlyArray<Submitted<Command>>), (prepared): Batch => {
        // A log with a batch size limit may have taken fewer commands: the rest are served next.
        const taken = prepared.outcomes.length
        if (taken === batch.length) return { batch, prepared }
        mailbox.requeue(batch.slice(taken))
        return { batch: batch.slice(0, taken), prepared }
      })

    /** After a batch's write: commit it (readable, LMDB, bus), then answer its callers. */
    const finish = (current: Batch, appended: Appended | undefined) =>
      Effect.map(kernel.commit(incarnation, current.prepared, appended), () => {
        const { batch, prepared } = current
        // Completing a Deferred only schedules its waiter, so a plain loop answers the whole batch.
        for (let index = 0; index < batch.length; index++) {
          const outcome = prepared.outcomes[index]!
          Deferred.doneUnsafe(
            batch[index]!.reply,
            Result.isSuccess(outcome) ? Exit.succeed(outcome.success.reply) : Exit.fail(outcome.failure),
          )
        }
        onCommitted()
      })

    /**
     * Decides `batch` on top of `current`, whose write may still be running. Should deciding fail
     * (a defect), `current` is still finished and answered first, then the defect ends the incarnation.
     */
    const prepareNext = (
      current: Batch,
      written: Effect.Effect<Appended | undefined, WalError>,
      batch: ReadonlyArray<Env>,
    ) =>
      Effect.gen(function* () {
        mailbox.inFlight = [...current.batch, ...batch]
        const decided = yield* Effect.exit(prepare(current.prepared.overlay, batch))
        if (Exit.isSuccess(decided)) return decided.value
        // A refused append on top of a defect in deciding: the restart answers both.
        const appended = yield* Effect.orDie(written)
        mailbox.inFlight = batch
        yield* finish(current, appended)
        return yield* decided
      })

    return Effect.gen(function* () {
      // Split what was taken in two when serving it costs more CPU than a write takes: the first
      // half is written while the second is decided. Both halves' callers then stay a write apart,
      // which keeps the pipeline going.
      const splitting = follow && split.worthIt(taken.length)
      const first = splitting ? taken.slice(0, taken.length >> 1) : taken
      let held: ReadonlyArray<Env> | undefined = splitting ? taken.slice(taken.length >> 1) : undefined
      mailbox.inFlight = first
      const started = yield* Effect.exit(
        Effect.flatMap(prepare(incarnation.view, first), (current) =>
          Effect.map(kernel.queueWrite(incarnation, current.prepared), (writing) => ({ current, writing })),
        ),
      )
      if (Exit.isFailure(started)) {
        // The second half was not decided yet: it is served next (by the next incarnation, after a defect).
        if (held !== undefined) mailbox.requeue(held)
        const unavailable = unavailableAppend(started.cause)
        if (unavailable === undefined) return yield* Effect.failCause(started.cause)
        yield* answerUnavailable(first, unavailable)
        mailbox.inFlight = []
        return undefined
      }
      let current = started.value.current
      let writing = started.value.writing
      if (follow) split.sampleCpu(current.batch.length)
      split.lastRunSerial = !splitting
      // When the write of `current` could start: its queueing, or the end of the write before it.
      let writeStartedAt = performance.now()
      while (true) {
        let next: Batch | undefined
        let nextWriting: Written | undefined
        // Queueing `next` failed (the log broke): `current` is still finished, then the incarnation ends
        // (a shared log out of reach ends only this run: `next` is served again, and refused at once).
        let brokenLog: Cause.Cause<WalError> | undefined
        const queueNext = (batch: Batch) =>
          Effect.map(Effect.exit(kernel.queueWrite(incarnation, batch.prepared)), (queued) => {
            if (Exit.isSuccess(queued)) {
              next = batch
              nextWriting = queued.value
            } else {
              // Served again (by the next incarnation, after a defect), so no longer this run's to answer.
              mailbox.requeue(batch.batch)
              mailbox.inFlight = current.batch
              brokenLog = queued.cause
            }
          })
        // Follow the write with more only while it runs, no checkpoint is due and no shutdown began.
        const following = follow && writing !== undefined && !kernel.checkpointDue(current.prepared.entries.length)
        const waiting = () => following && accepting() && mailbox.size() > 0
        // Callers answered in the last round have sent again by now (answering a caller runs it up
        // to its next wait): decide what they sent.
        if (held === undefined && waiting()) {
          const followers = yield* mailbox.takeFollowers()
          if (followers.length > 0) held = followers
        }
        if (held !== undefined) {
          yield* queueNext(yield* prepareNext(current, joinWrite(writing), held))
          held = undefined
        }
        const written = yield* Effect.exit(joinWrite(writing))
        const stale = Exit.isFailure(written) ? staleAppend(written.cause) : undefined
        if (stale !== undefined) {
          // A shared log refused the append: another writer was first. Nothing of it (nor of the batch
          // chained behind it) is in the log; both go back, to be decided again once caught up.
          if (nextWriting !== undefined) yield* Effect.exit(nextWriting)
          mailbox.requeue([...current.batch, ...(next?.batch ?? [])])
          mailbox.inFlight = []
          return stale
        }
        if (Exit.isFailure(written)) {
          // Only the batch that was written fails (after the reopen, which cuts it). The one queued
          // behind it failed unwritten: it goes back to be decided afresh by the next incarnation.
          if (nextWriting !== undefined) yield* Effect.exit(nextWriting)
          if (next !== undefined) mailbox.requeue(next.batch)
          const unavailable = unavailableAppend(written.cause)
          if (unavailable !== undefined) {
            // A shared log that did not confirm: the batch may be stored (then it is applied when
            // received); its callers are told so, and nothing restarts.
            yield* answerUnavailable(current.batch, unavailable)
            mailbox.inFlight = []
            return undefined
          }
          mailbox.inFlight = current.batch
          return yield* Effect.failCause(written.cause)
        }
        const writtenAt = performance.now()
        if (writing !== undefined) split.writeMs.add(writtenAt - writeStartedAt)
        writeStartedAt = writtenAt
        const appended = written.value
        const late = next === undefined && brokenLog === undefined && waiting() ? yield* mailbox.takeFollowers() : []
        if (late.length > 0) {
          // Callers that sent during the write without being seen above: decided now, not overlapped
          // this time, but as a batch of their own, so the two groups of callers stay apart.
          yield* queueNext(yield* prepareNext(current, Effect.succeed(appended), late))
          writeStartedAt = performance.now()
        }
        yield* finish(current, appended)
        if (brokenLog !== undefined) {
          mailbox.inFlight = []
          if (unavailableAppend(brokenLog) !== undefined) return undefined
          return yield* Effect.failCause(brokenLog)
        }
        if (next === undefined) {
          mailbox.inFlight = []
          return undefined
        }
        split.lastRunSerial = false
        mailbox.inFlight = next.batch
        next.prepared.overlay.rebase(incarnation.view)
        current = next
        writing = nextWriting
      }
    })
  }
}
