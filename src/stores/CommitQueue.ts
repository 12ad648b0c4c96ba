/**
 * Carries acknowledged changes from the store actor into LMDB, off the acknowledgement path.
 *
 * The actor acknowledges a batch once its WAL fdatasync returns and hands the batch's changes
 * here. They become visible to readers at once (through `PendingView`) and reach LMDB in
 * coalesced commits: at most one LMDB commit is in flight, and a new one starts `intervalMs` after
 * the last finished, carrying everything that arrived meanwhile. LMDB commits (each with its own
 * background flush) therefore stay few however fast writes come, and never compete with the WAL's
 * fdatasync once per batch. A commit carries the highest WAL sequence it includes, so LMDB's
 * applied sequence always matches its data; anything not yet committed is replayed from the WAL
 * after a crash. A failed commit is remembered in `failure`; the actor restarts on it.
 */
import type { Change, Checkpoint } from "./Checkpoint.ts"
import type { PendingView } from "./PendingView.ts"

export class CommitQueue {
  private queued: Array<Change> = []
  private queuedSeq = 0
  private inFlight: Promise<void> | undefined
  private timer: ReturnType<typeof setTimeout> | undefined
  private idleWaiters: Array<() => void> = []
  /** The error of a failed LMDB commit, if any. */
  failure: unknown = undefined

  constructor(
    private readonly checkpoint: Checkpoint,
    private readonly view: PendingView,
    private readonly salt: number,
    private readonly intervalMs: number,
  ) {}

  /** Makes a batch visible to readers and schedules its LMDB commit. */
  enqueue(changes: ReadonlyArray<Change>, seq: number): void {
    this.view.add(changes, seq)
    for (const change of changes) this.queued.push(change)
    this.queuedSeq = seq
    this.schedule()
  }

  /** Resolves once everything enqueued so far is committed to LMDB (or a commit failed). */
  drain(): Promise<void> {
    if (this.isIdle()) return Promise.resolve()
    if (this.timer !== undefined) {
      clearTimeout(this.timer)
      this.timer = undefined
      this.commitNow()
    }
    return new Promise((resolve) => this.idleWaiters.push(resolve))
  }

  private isIdle(): boolean {
    return this.inFlight === undefined && (this.queued.length === 0 || this.failure !== undefined)
  }

  private schedule(): void {
    if (this.inFlight !== undefined || this.timer !== undefined || this.failure !== undefined) return
    this.timer = setTimeout(() => {
      this.timer = undefined
      this.commitNow()
    }, this.intervalMs)
    this.timer.unref()
  }

  private commitNow(): void {
    if (this.queued.length === 0 || this.failure !== undefined) {
      this.wakeIdle()
      return
    }
    const changes = this.queued
    const seq = this.queuedSeq
    this.queued = []
    this.inFlight = this.checkpoint.commit(changes, seq, this.salt).then(
      () => {
        this.inFlight = undefined
        this.view.evictThrough(seq)
        if (this.idleWaiters.length > 0) this.commitNow()
        else this.schedule()
        if (this.isIdle()) this.wakeIdle()
      },
      (failure: unknown) => {
        this.inFlight = undefined
        this.failure = failure
        this.wakeIdle()
      },
    )
  }

  private wakeIdle(): void {
    if (!this.isIdle()) return
    const waiters = this.idleWaiters
    this.idleWaiters = []
    for (const wake of waiters) wake()
  }
}
