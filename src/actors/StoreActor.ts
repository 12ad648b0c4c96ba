/**
 * A store actor: one domain store made durable and supervised.
 *
 * The actor is the one owner of its store's kernel (src/stores/StoreKernel.ts: log, LMDB
 * checkpoint, pending layer); nothing else writes them. Commands arrive in a bounded mailbox
 * (Mailbox.ts); the actor takes up to `batchCommandsMax` at a time and serves them by group commit,
 * pipelined (BatchPipeline.ts): one durable write per batch, every caller answered after the write
 * that covers it. An acknowledged write is durable in the log; until its LMDB commit finishes, reads
 * see it through the pending layer. Reads are LMDB read transactions plus that small layer and never
 * wait for the writer.
 *
 * Supervision. A defect anywhere in a batch (a bug in `decide`/`apply`, a failed write or
 * fdatasync, a failed LMDB commit) ends the running incarnation only. When the log failed (a write,
 * a sync, a full disk), the supervisor waits (exponential backoff) and reopens the log alone with the
 * last acknowledged sequence, so a failed batch that reached the disk is cut away and the error its
 * callers get ("not applied") is true; LMDB and the pending layer, which hold exactly the
 * acknowledged state, stay open and keep serving reads. Any other defect (or a log that keeps
 * failing) closes the log and LMDB and reopens the whole store from disk the same way. The failed batch's callers are answered after that reopen (or, when reopening fails,
 * after the log alone is cut: `discardUnacknowledged`); where no cut can be made, they are told that
 * the next open decides. Commands still in the mailbox stay there and are served by the new
 * incarnation. Each restart is counted. A store whose log is corrupt does not restart: it refuses
 * every call with a `Corrupt` error naming file and offset, and the other stores keep serving.
 * After `failFastAfterRestarts` consecutive failed reopens (say a disk that stays broken), waiting
 * callers are failed with `Unavailable` instead of waiting, while reopening goes on with capped
 * backoff.
 *
 * A full disk is not a defect to restart on forever. While the disk holding the store is full (an
 * LMDB commit or a log write refused with ENOSPC), the store is `degraded`: it keeps serving reads
 * (every acknowledged write is in the log and the pending layer), answers each new write at once
 * with a `DiskFull` error naming the directory, and resumes writing by itself once space returns.
 * A batch whose log write failed that way is rolled back like any failed batch, and its callers are
 * told so with `DiskFull`.
 *
 * A shared log (JetStream) whose servers are out of reach is like a full disk: `degraded`, reads
 * served from local state, writes answered at once with `Unavailable` naming the servers; a write
 * whose append was not confirmed is answered `Unavailable` too (it may be stored: if it is, every
 * replica applies it when received), and nothing restarts. An append refused as stale (another daemon
 * appended first) goes back to the mailbox's front; the actor catches up and decides it again.
 *
 * Shutdown (closing the scope): new calls are refused with `ShuttingDown`, the batch in flight
 * finishes, every command already in the mailbox is processed and answered, LMDB is flushed and
 * both files are closed. A batch whose write failed (then, or before, waiting for its restart) is
 * answered after the log is cut, as above.
 */
import { Cause, Clock, Deferred, Duration, Effect, Exit, Fiber, Latch, type Scope } from "effect"
import type { StoreView } from "../stores/checkpoint/Checkpoint.ts"
import type { EventBus } from "../stores/EventBus.ts"
import { idempotencyKeyLengthMax } from "../stores/Idempotency.ts"
import type { StoreDefinition } from "../stores/StoreDefinition.ts"
import { StoreError } from "../stores/StoreError.ts"
import {
  type CompactionReport,
  type CompactionStep,
  type Incarnation,
  type KernelOptions,
  makeStoreKernel,
} from "../stores/StoreKernel.ts"
import { defaultPreallocateBytes } from "../stores/wal/FileWal.ts"
import { type RecoveryReport, WalError, type WalStats } from "../stores/wal/Wal.ts"
import type { WalFs } from "../stores/wal/WalFs.ts"
import { BatchPipeline, type BatchSplit } from "./BatchPipeline.ts"
import { type Control, type Envelope, failAll, isControl, Mailbox } from "./Mailbox.ts"

/** Limits and timings of one store actor. */
export interface StoreOptions extends KernelOptions {
  readonly mailboxCapacity: number
  readonly batchCommandsMax: number
  readonly restartBackoffMsBase: number
  readonly restartBackoffMsMax: number
  readonly failFastAfterRestarts: number
  /**
   * How long a read waits for a store that is opening or reopening before it is answered
   * `Unavailable` (a reopen that needs a server out of reach, say NATS, would otherwise keep it
   * waiting as long as the outage lasts).
   */
  readonly readWaitMsMax: number
  /**
   * Whether commands taken at once are split into two pipelined batches (see BatchPipeline.ts):
   * "adaptive" when the measured CPU per command says it pays, "always" (any two or more commands;
   * tests use it to exercise the pipeline), "never".
   */
  readonly batchSplit: BatchSplit
  /**
   * The checkpoint file's pages mapped by reads and commits are let go (the environment reopened,
   * Checkpoint.ts `releaseMappedPages`) once the store has been quiet for this long…
   */
  readonly releaseMappedPagesIdleMs: number
  /** …walking fewer entries than this meanwhile (small reads, as of `/api/stats`' counters, are quiet)… */
  readonly releaseMappedPagesQuietEntriesMax: number
  /** …and reads and commits walked at least this many entries since it was last reopened. */
  readonly releaseMappedPagesEntriesMin: number
  /** Test seam: runs after each step of a compaction (a crash test cuts the power there). */
  readonly onCompactionStep?: (step: CompactionStep) => Effect.Effect<void>
  /**
   * A shared memory's writer lease (src/cluster/WriterLeases.ts): asked before each batch is
   * decided; when it answers a reason, this daemon must not decide the store's writes now, and the
   * batch's commands are refused `NotWriter` undecided (the write routing sends them to the holder).
   */
  readonly writeGate?: () => string | undefined
}

/** Defaults used by the daemon; tests shrink them. */
export const defaultStoreOptions: Omit<StoreOptions, "dir"> = {
  mailboxCapacity: 4096,
  batchCommandsMax: 256,
  walSegmentBytesMax: 64 * 1024 * 1024,
  walPreallocateBytes: defaultPreallocateBytes,
  checkpointRecordsInterval: 20_000,
  lmdbCommitIntervalMs: 1000,
  // A commit's writes hold the main thread for one turn (CommitQueue.ts): at 4,096 changes 4-6 ms
  // (up to 21), which every call in flight waits out; at 1,024, 1 ms (up to 3.6), 32 writing
  // agents' p99 about 9 % lower and the 10k graph workload's peak on Node 20 about 12 MiB lower,
  // for about 2 % more CPU a sequential call (docs/benchmarks.md, "Smaller checkpoint commits,
  // measured again").
  lmdbCommitChangesMax: 1024,
  lmdbCommitBytesMax: 16 * 1024 * 1024,
  restartBackoffMsBase: 50,
  restartBackoffMsMax: 30_000,
  failFastAfterRestarts: 5,
  readWaitMsMax: 10_000,
  batchSplit: "adaptive",
  // A release takes about a millisecond, and reads wait for it (docs/benchmarks.md, "The store
  // file's pages let go once the store idles"). 4,096 entries walked map at most about 16 MiB (a
  // leaf page each); a store that touched fewer keeps them until it next reopens.
  releaseMappedPagesIdleMs: 1_000,
  // A client polling `/api/stats` (the graph's counters, a few entries) more often than once a
  // second kept a graph store read whole mapped for as long as it polled.
  releaseMappedPagesQuietEntriesMax: 64,
  releaseMappedPagesEntriesMin: 4_096,
}

/** A snapshot of a store's condition, for health reports. */
export interface StoreHealth {
  readonly name: string
  /** `degraded`: reads are served, writes refused because the disk is full (they resume by themselves). */
  readonly state: "starting" | "running" | "degraded" | "restarting" | "unavailable" | "corrupt" | "stopped"
  readonly restarts: number
  readonly lastError?: string
  readonly recovery?: RecoveryReport
  readonly appliedSeq: number
  readonly mailboxDepth: number
  readonly wal?: WalStats
  readonly lmdbBytes?: number
  /** How often the LMDB file's mapped pages were let go since the daemon started (see `releaseMappedPagesIdleMs`). */
  readonly mappedPagesReleased: number
  /** A shared memory: who decides the store's writes (src/cluster/WriterLeases.ts). */
  readonly writer?: WriterHealth
}

/** A shared memory's writer of a store, as health reports it. */
export interface WriterHealth {
  /** The daemon holding the store's writer lease (absent while none does). */
  readonly holder?: string
  /** True when this daemon holds it now. */
  readonly self: boolean
  /** Writes this daemon sent to the holder, and writes it decided for other daemons, since it started. */
  readonly forwarded: number
  readonly served: number
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
  /**
   * Compacts the store after every command sent before it (see `compact` in StoreKernel.ts): when it
   * succeeds, nothing deleted remains in any of the store's files.
   */
  readonly compact: () => Effect.Effect<CompactionReport, StoreError>
  readonly health: () => StoreHealth
  /**
   * A shared log: the position applied here (0 for a file log, or while not open), in the order of
   * every generation of the store's streams: `generation × 2³² + position in that generation's stream`
   * (a newer generation's stream starts with the whole state, so it is after all of an older one's).
   */
  readonly position: () => number
  /**
   * A shared log: waits until every batch through `position` is applied here (what another daemon
   * acknowledged is then readable here too), at most `readWaitMsMax`.
   */
  readonly awaitPosition: (position: number) => Effect.Effect<void, StoreError>
}

/** Options of one send. */
export interface SendOptions {
  /** Applied at most once per key (see Idempotency.ts); at most `idempotencyKeyLengthMax` long. */
  readonly idempotencyKey?: string | undefined
}

/** Positions per generation in `Store.position` (a stream of 2³² messages is far beyond one store). */
const generationSpan = 2 ** 32
/** A `Store.position` as its generation and the position in that generation's stream. */
const splitPosition = (position: number) => ({
  generation: Math.floor(position / generationSpan),
  position: position % generationSpan,
})

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
    type Env = Envelope<Command, Reply, Failure | StoreError>
    const kernel = yield* makeStoreKernel(definition, options)
    const mailbox = yield* Mailbox.make<Command, Reply, Failure | StoreError>(
      options.mailboxCapacity,
      options.batchCommandsMax,
    )
    const ready = yield* Latch.make(false)

    let state: StoreHealth["state"] = "starting"
    let current: Incarnation | undefined
    let refusal: StoreError | undefined
    let restarts = 0
    let lastError: string | undefined
    /** Why the batch in `mailbox.inFlight` failed, once it has. */
    let inFlightCause: string | undefined
    let committedSinceOpen = false
    const pipeline = new BatchPipeline(
      kernel,
      mailbox,
      options.batchSplit,
      () => refusal === undefined,
      () => {
        committedSinceOpen = true
      },
    )

    const storeError = (reason: StoreError["reason"], message: string) =>
      new StoreError({ store: definition.name, reason, message: `store "${definition.name}": ${message}` })

    const rolledBackError = (cause: string | undefined) => {
      const full = kernel.diskFull(current)
      return full !== undefined
        ? storeError("DiskFull", `${diskFullMessage(full)}; this write was rolled back and not applied`)
        : storeError(
            "WriteFailed",
            `the write failed and was rolled back; it was not applied (${cause ?? "unknown cause"})`,
          )
    }

    const diskFullMessage = (why: string) =>
      `the disk holding ${options.dir} is full (${why}); reads keep working and writes resume by themselves once space is freed`

    /** For a failed batch that could not be cut from the log: the next open keeps it if it is whole. */
    const undecidedError = (why: string, cause: string) =>
      storeError(
        "WriteFailed",
        `the write failed and ${why}: whether it is applied is decided when the store next opens (${cause})`,
      )

    const checkpointNow = (incarnation: Incarnation) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => kernel.checkpoint(incarnation, now))

    const isDiskFull = (cause: Cause.Cause<unknown>) => {
      const error = Cause.squash(cause)
      return error instanceof WalError && error.reason === "DiskFull"
    }

    const backoff = (failures: number) =>
      Effect.sleep(
        Duration.millis(
          Math.min(options.restartBackoffMsMax, options.restartBackoffMsBase * 2 ** Math.max(0, failures - 1)),
        ),
      )

    /** Callers of `awaitPosition`, woken whenever batches are applied. */
    let positionWaiters: Array<{ readonly through: number; readonly done: Deferred.Deferred<void> }> = []
    const position = () => {
      const shared = current?.wal.shared
      return shared === undefined ? 0 : shared.generation * generationSpan + shared.position()
    }
    const settlePositions = () => {
      if (positionWaiters.length === 0) return
      const at = position()
      const still: typeof positionWaiters = []
      for (const waiter of positionWaiters) {
        if (waiter.through <= at) Deferred.doneUnsafe(waiter.done, Effect.void)
        else still.push(waiter)
      }
      positionWaiters = still
    }

    /** Whether a "remote" control is in the mailbox already (one is enough to wake the actor). */
    let remotePoked = false
    /** A shared log received batches from other daemons: wake the actor to apply them. */
    const pokeRemote = () => {
      if (remotePoked) return
      const control: Control = { _tag: "Control", name: "remote", reply: Deferred.makeUnsafe<unknown, unknown>() }
      remotePoked = mailbox.offerUnsafe(control)
    }

    const replaceIncarnation = (serving: { incarnation: Incarnation }, next: Incarnation) => {
      serving.incarnation = next
      current = next
      ready.openUnsafe()
      next.wal.shared?.onRemote(pokeRemote)
      settlePositions()
    }

    /**
     * Run by the kernel just before it closes the incarnation readers use (a compaction, a reload
     * from a newer stream): reads wait for the next one (`readWaitMsMax`), as while restarting,
     * instead of reading an LMDB environment that is closing.
     */
    const readsWait = Effect.sync(() => {
      ready.closeUnsafe()
      current = undefined
    })

    /**
     * The checkpoint's mapped pages are let go once the store is quiet: a read or a batch arms a
     * timer (none runs while the store idles), and a timer that finds fewer entries walked since it
     * was armed than `releaseMappedPagesQuietEntriesMax`, with enough walked since the last release,
     * asks the actor to release them between batches (`release-pages`). A busier window arms it again.
     */
    let touchedWhenArmed = 0
    let idleTimer: ReturnType<typeof setTimeout> | undefined
    let releasePoked = false
    const onIdleTimer = () => {
      idleTimer = undefined
      const incarnation = current
      if (incarnation === undefined) return
      const touched = incarnation.checkpoint.entriesTouched()
      // A release since the timer was armed counts from zero again.
      if (touched - Math.min(touchedWhenArmed, touched) >= options.releaseMappedPagesQuietEntriesMax) {
        armIdleTimer()
        return
      }
      if (releasePoked || touched < options.releaseMappedPagesEntriesMin) return
      const control: Control = {
        _tag: "Control",
        name: "release-pages",
        reply: Deferred.makeUnsafe<unknown, unknown>(),
      }
      releasePoked = mailbox.offerUnsafe(control)
    }
    const armIdleTimer = () => {
      touchedWhenArmed = current?.checkpoint.entriesTouched() ?? 0
      idleTimer = setTimeout(onIdleTimer, options.releaseMappedPagesIdleMs)
      idleTimer.unref()
    }
    const noteActivity = () => {
      if (idleTimer === undefined) armIdleTimer()
    }

    /**
     * A shared log whose store moved to a newer stream (a compaction elsewhere): reopened from it.
     * A reopen that fails is a restart (the next open finds the new stream too).
     */
    const followGeneration = (serving: { incarnation: Incarnation }, atLeast?: number) =>
      Effect.gen(function* () {
        const shared = serving.incarnation.wal.shared
        if (shared === undefined) return
        if (shared.movedTo() === undefined && (atLeast === undefined || atLeast <= shared.generation)) return
        replaceIncarnation(serving, yield* kernel.reload(serving.incarnation, readsWait))
      })

    /** Runs a control between batches: a compaction replaces the incarnation it ran on. */
    const runControl = (serving: { incarnation: Incarnation }, control: Control) =>
      Effect.gen(function* () {
        if (control.name === "release-pages") {
          releasePoked = false
          // Reads wait (`readsWait`) while the environment is closed and opened again.
          if (yield* kernel.releaseMappedPages(serving.incarnation, readsWait))
            replaceIncarnation(serving, serving.incarnation)
          yield* Deferred.succeed(control.reply, undefined)
          return
        }
        if (control.name === "remote") {
          remotePoked = false
          yield* kernel.applyRemote(serving.incarnation)
          yield* followGeneration(serving)
          settlePositions()
          yield* Deferred.succeed(control.reply, undefined)
          return
        }
        if (control.name === "catch-up") {
          // A caller waits to read what another daemon acknowledged: receive through its position
          // (fetched directly when the consumer stalls) and apply. A log out of reach is no fault
          // of this store: the caller's wait ends by its own timeout.
          const wanted = control.position === undefined ? undefined : splitPosition(control.position)
          yield* followGeneration(serving, wanted?.generation)
          const shared = serving.incarnation.wal.shared
          if (shared !== undefined && (wanted === undefined || wanted.generation === shared.generation))
            yield* Effect.interruptible(shared.awaitReceived(wanted?.position)).pipe(
              Effect.timeoutOption(Duration.millis(options.readWaitMsMax)),
              Effect.exit,
            )
          yield* kernel.applyRemote(serving.incarnation)
          yield* followGeneration(serving)
          settlePositions()
          yield* Deferred.succeed(control.reply, undefined)
          return
        }
        const now = yield* Clock.currentTimeMillis
        if (kernel.shared) {
          const notWriter = options.writeGate?.()
          if (notWriter !== undefined) return yield* Deferred.fail(control.reply, storeError("NotWriter", notWriter))
          // Compacted from the newest stream: one another daemon made may not have been noticed yet.
          yield* Effect.exit(serving.incarnation.wal.shared!.refreshGeneration())
          yield* followGeneration(serving)
          const compacted = yield* Effect.exit(kernel.compactShared(serving.incarnation, now, readsWait))
          if (Exit.isSuccess(compacted)) {
            replaceIncarnation(serving, compacted.value.incarnation)
            yield* Deferred.succeed(control.reply, compacted.value.report)
            return
          }
          // Failed before the store left its incarnation (a defect after is a restart, below).
          const failure = Cause.findErrorOption(compacted.cause)
          if (failure._tag === "Some") {
            yield* Deferred.fail(
              control.reply,
              storeError("Unavailable", `the compaction failed: ${failure.value.message}`),
            )
            return
          }
          yield* Deferred.fail(
            control.reply,
            storeError("WriteFailed", `the compaction failed: ${describeCause(compacted.cause)}`),
          )
          return yield* Effect.failCause(compacted.cause)
        }
        const compacted = yield* Effect.exit(
          kernel.compact(serving.incarnation, now, options.onCompactionStep, readsWait),
        )
        if (Exit.isSuccess(compacted)) {
          replaceIncarnation(serving, compacted.value.incarnation)
          yield* Deferred.succeed(control.reply, compacted.value.report)
          return
        }
        // Whatever step it failed at, the store restarts from disk and recovery finishes or undoes it.
        yield* Deferred.fail(
          control.reply,
          storeError("WriteFailed", `the compaction failed: ${describeCause(compacted.cause)}`),
        )
        return yield* Effect.failCause(compacted.cause)
      })

    const serve = (serving: { incarnation: Incarnation }) =>
      Effect.gen(function* () {
        // A poke lost with the incarnation before (its control failed with its batch) must not
        // keep every later one out.
        remotePoked = false
        serving.incarnation.wal.shared?.onRemote(pokeRemote)
        while (true) {
          const next = yield* mailbox.takeNext()
          if (next._tag === "Control") {
            yield* Effect.uninterruptible(runControl(serving, next.control))
            continue
          }
          const batch = next.commands
          noteActivity()
          const full = kernel.diskFull(serving.incarnation)
          if (full !== undefined) {
            state = "degraded"
            lastError = `disk full: ${full}`
            yield* failAll(batch, storeError("DiskFull", diskFullMessage(full)))
            // The log's applied segments released, the room it waits for may be there again.
            if (kernel.checkpointFreesLog(serving.incarnation))
              yield* Effect.uninterruptible(checkpointNow(serving.incarnation))
            continue
          }
          state = "running"
          // A shared memory's writer lease held elsewhere: nothing is decided here (see `writeGate`).
          const notWriter = options.writeGate?.()
          if (notWriter !== undefined) {
            yield* failAll(batch, storeError("NotWriter", notWriter))
            continue
          }
          // A shared log: what other daemons appended first, so fewer appends are refused as stale.
          if (kernel.shared) yield* kernel.applyRemote(serving.incarnation)
          const stale = yield* Effect.uninterruptible(pipeline.run(serving.incarnation, batch, true))
          settlePositions()
          // Refused as stale, the batch went back to the mailbox: catch up, then it is decided again.
          if (stale !== undefined) yield* kernel.catchUp(serving.incarnation, stale.position)
          // After the answers: a failed checkpoint restarts the actor but un-acknowledges nothing.
          if (kernel.checkpointDue()) yield* Effect.uninterruptible(checkpointNow(serving.incarnation))
        }
      })

    /**
     * Refuses every call from now on: the log is damaged (see `mnemos repair`), or the store cannot
     * be reopened in this process.
     */
    const refuseForever = (refused: StoreError, as: "corrupt" | "unavailable") =>
      Effect.gen(function* () {
        refusal = refused
        state = as
        yield* ready.open
        // Refuse, never strand: calls that raced past the refusal check still get an answer. The
        // failed batch's fate is the damaged log's.
        yield* failAll(mailbox.inFlight, refused)
        mailbox.inFlight = []
        yield* failAll(mailbox.takeAllRequeued(), refused)
        return yield* Effect.forever(
          Effect.flatMap(mailbox.takeNext(), (next) =>
            failAll(next._tag === "Control" ? [next.control] : next.commands, refused),
          ),
        )
      })

    const supervise = Effect.gen(function* () {
      let consecutiveFailures = 0
      while (true) {
        const opened = yield* Effect.exit(kernel.open)
        // The failed batch is answered once it is rolled back: by the reopen, or, when reopening
        // fails, by cutting the log alone. Until then its callers wait, as the mailbox does.
        if (mailbox.inFlight.length > 0 && (Exit.isSuccess(opened) || (yield* kernel.discardUnacknowledged))) {
          yield* failAll(mailbox.inFlight, rolledBackError(inFlightCause))
          mailbox.inFlight = []
        }
        if (Exit.isFailure(opened)) {
          const error = Cause.squash(opened.cause)
          lastError = describeCause(opened.cause)
          if (error instanceof WalError && (error.reason === "Corrupt" || error.reason === "GenerationMismatch")) {
            return yield* refuseForever(storeError("Corrupt", error.message), "corrupt")
          }
          consecutiveFailures++
          restarts++
          if (consecutiveFailures >= options.failFastAfterRestarts) {
            state = "unavailable"
            refusal = storeError("Unavailable", `cannot reopen after ${consecutiveFailures} attempts: ${lastError}`)
            yield* failAll(
              mailbox.inFlight,
              undecidedError(
                "the store cannot reopen to roll it back",
                `${inFlightCause ?? "unknown cause"}; reopening: ${lastError}`,
              ),
            )
            mailbox.inFlight = []
            yield* failAll(yield* mailbox.clearWaiting(), refusal)
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
        const serving = { incarnation: opened.value }
        let cause: Cause.Cause<unknown>
        // Set when the failure that ends the loop was already counted (a log that keeps failing).
        let counted = false
        while (true) {
          cause = yield* serve(serving).pipe(Effect.catchCause((cause) => Effect.succeed(cause)))
          if (!kernel.isLogFailure(cause)) break
          // The log failed (a write, a sync, a full disk): reopening the log alone rolls the batch back.
          // LMDB and the pending layer hold exactly the acknowledged state, so reads go on meanwhile.
          restarts++
          kernel.noteFailure(cause)
          lastError = describeCause(cause)
          inFlightCause = lastError
          // A full disk is a state, not a fault that repeats: the store is degraded until space
          // returns (writes refused at once), so it neither backs off longer nor fails fast — the
          // batch that found it is rolled back and answered at once, however often space flaps.
          const diskFull = isDiskFull(cause)
          consecutiveFailures = committedSinceOpen || diskFull ? 1 : consecutiveFailures + 1
          committedSinceOpen = false
          counted = consecutiveFailures >= options.failFastAfterRestarts
          if (counted) break
          state = "restarting"
          yield* Effect.logWarning(`store "${definition.name}" reopening its log after: ${lastError}`)
          yield* backoff(consecutiveFailures)
          const reopened = yield* Effect.exit(Effect.uninterruptible(kernel.reopenLog(serving.incarnation)))
          if (Exit.isFailure(reopened)) {
            cause = reopened.cause
            counted = true
            break
          }
          serving.incarnation = reopened.value
          current = serving.incarnation
          serving.incarnation.wal.shared?.onRemote(pokeRemote)
          state = "running"
          yield* failAll(mailbox.inFlight, rolledBackError(inFlightCause))
          mailbox.inFlight = []
        }
        yield* ready.close
        state = "restarting"
        if (!counted) {
          restarts++
          kernel.noteFailure(cause)
          lastError = describeCause(cause)
          inFlightCause = lastError
        }
        current = undefined
        const closed = yield* Effect.exit(kernel.close(serving.incarnation))
        if (Exit.isFailure(closed)) {
          lastError = `${lastError}; then: ${describeCause(closed.cause)}`
          yield* Effect.logError(`store "${definition.name}" cannot restart: ${lastError}`)
          yield* failAll(mailbox.inFlight, undecidedError("the store cannot restart to roll it back", lastError))
          mailbox.inFlight = []
          return yield* refuseForever(storeError("Unavailable", lastError), "unavailable")
        }
        yield* Effect.logWarning(`store "${definition.name}" restarting after: ${lastError}`)
        if (!counted) consecutiveFailures = committedSinceOpen ? 1 : consecutiveFailures + 1
        if (consecutiveFailures >= options.failFastAfterRestarts) {
          state = "unavailable"
          refusal = storeError("Unavailable", `failed ${consecutiveFailures} times in a row: ${lastError}`)
          yield* failAll(yield* mailbox.clearWaiting(), refusal)
        }
        yield* backoff(consecutiveFailures)
      }
    })

    const supervisor = yield* Effect.forkDetach(supervise)

    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        const wasRunning = state === "running"
        state = "stopped"
        clearTimeout(idleTimer)
        refusal = storeError("ShuttingDown", "the store is shutting down")
        yield* Fiber.interrupt(supervisor)
        // Batches whose write failed (one waiting for its restart, or one failing below), answered
        // once the log is closed and they are rolled back.
        const failed: Array<Env> = [...mailbox.inFlight]
        let failedCause = inFlightCause
        mailbox.inFlight = []
        yield* mailbox.end()
        const incarnation = current
        let healthy = incarnation !== undefined && wasRunning
        // `clear` lets blocked senders in as it frees room, so drain until nothing is left.
        for (let pending = yield* mailbox.clearWaiting(); pending.length > 0; pending = yield* mailbox.clearWaiting()) {
          // Maintenance is not started at shutdown; commands are all served.
          const commands = pending.filter((item): item is Env => !isControl(item))
          yield* failAll(
            pending.filter((item) => isControl(item)),
            refusal,
          )
          for (let start = 0; start < commands.length; start += options.batchCommandsMax) {
            const batch = commands.slice(start, start + options.batchCommandsMax)
            if (!healthy || incarnation === undefined) {
              yield* failAll(batch, refusal)
              continue
            }
            const notWriter = options.writeGate?.()
            if (notWriter !== undefined) {
              yield* failAll(batch, storeError("NotWriter", notWriter))
              continue
            }
            const exit = yield* Effect.exit(pipeline.run(incarnation, batch, false))
            // Refused as stale (the batch went back to the mailbox): catch up; the loop serves it again.
            if (Exit.isSuccess(exit) && exit.value !== undefined) {
              const caughtUp = yield* Effect.exit(kernel.catchUp(incarnation, exit.value.position))
              if (Exit.isFailure(caughtUp)) healthy = false
              continue
            }
            if (Exit.isFailure(exit)) {
              healthy = false
              failed.push(...batch)
              failedCause = describeCause(exit.cause)
              mailbox.inFlight = []
            }
          }
        }
        if (incarnation !== undefined && healthy) yield* Effect.exit(checkpointNow(incarnation))
        if (incarnation !== undefined) yield* Effect.exit(kernel.close(incarnation))
        current = undefined
        if (failed.length > 0) {
          yield* failAll(
            failed,
            (yield* kernel.discardUnacknowledged)
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
        if (mailbox.offerUnsafe(envelope)) return Deferred.await(reply)
        return Effect.flatMap(mailbox.offer(envelope), (accepted) =>
          accepted
            ? Deferred.await(reply)
            : Effect.fail(refusal ?? storeError("ShuttingDown", "the store is shutting down")),
        )
      })

    const compact = (): Effect.Effect<CompactionReport, StoreError> =>
      Effect.suspend(() => {
        if (refusal !== undefined) return Effect.fail(refusal)
        // A shared memory's store is compacted by its writer (the caller, WriterLeases.ts, sends it
        // there): a new stream replaces its stream (StoreKernel.ts `compactShared`).
        if (kernel.shared && options.writeGate?.() !== undefined)
          return Effect.fail(storeError("NotWriter", options.writeGate()!))
        const reply = Deferred.makeUnsafe<CompactionReport, StoreError>()
        const control: Control = { _tag: "Control", name: "compact", reply }
        return Effect.flatMap(mailbox.offer(control), (accepted) =>
          accepted
            ? Deferred.await(reply)
            : Effect.fail(refusal ?? storeError("ShuttingDown", "the store is shutting down")),
        )
      })

    const read = <A>(query: (view: StoreView) => A): Effect.Effect<A, StoreError> =>
      Effect.gen(function* () {
        if (current === undefined && refusal === undefined)
          yield* ready.await.pipe(Effect.timeoutOption(Duration.millis(options.readWaitMsMax)))
        if (current === undefined)
          return yield* refusal ??
            storeError(
              "Unavailable",
              `the store is ${state === "starting" ? "still opening" : "reopening"}${lastError !== undefined ? ` after: ${lastError}` : ""}; reads resume once it is open (waited ${options.readWaitMsMax / 1000} s)`,
            )
        const answer = query(current.view)
        // After the query: the quiet window the release waits for starts past what it walked.
        noteActivity()
        return answer
      })

    const health = (): StoreHealth => ({
      name: definition.name,
      // A full disk shows before the next write finds it.
      state:
        state === "running" || state === "degraded"
          ? kernel.diskFull(current) !== undefined || kernel.logUnavailable(current) !== undefined
            ? "degraded"
            : "running"
          : state,
      restarts,
      mailboxDepth: mailbox.size(),
      ...(kernel.logUnavailable(current) !== undefined
        ? { lastError: kernel.logUnavailable(current)! }
        : lastError !== undefined
          ? { lastError }
          : {}),
      ...kernel.health(current),
    })

    const awaitPosition = (through: number): Effect.Effect<void, StoreError> =>
      Effect.suspend(() => {
        if (position() >= through) return Effect.void
        const done = Deferred.makeUnsafe<void>()
        positionWaiters.push({ through, done })
        // The actor receives through the position — from the consumer, or fetched directly when it
        // stalls — and applies it.
        const control: Control = {
          _tag: "Control",
          name: "catch-up",
          position: through,
          reply: Deferred.makeUnsafe<unknown, unknown>(),
        }
        mailbox.offerUnsafe(control)
        return Deferred.await(done).pipe(
          Effect.timeoutOption(Duration.millis(options.readWaitMsMax)),
          Effect.flatMap((waited) =>
            waited._tag === "Some"
              ? Effect.void
              : Effect.fail(
                  storeError(
                    "Unavailable",
                    `the write was acknowledged by the shared memory at position ${through}, but this daemon has applied only through ${position()} after ${options.readWaitMsMax / 1000} s; it will be readable here once applied`,
                  ),
                ),
          ),
        )
      })

    return {
      name: definition.name,
      send,
      read,
      compact,
      health,
      position,
      awaitPosition,
    } satisfies Store<Command, Reply, Failure>
  })
