/**
 * Carries acknowledged changes from the store actor into LMDB, off the acknowledgement path.
 *
 * The actor acknowledges a batch once its WAL write is durable and hands the batch's changes
 * here. They become visible to readers at once (through `PendingView`) and reach LMDB in
 * coalesced commits: at most one LMDB commit is in flight, and the next starts once the oldest
 * waiting change has waited `limits.intervalMs`, or sooner when `limits.changesMax` changes or
 * `limits.bytesMax` bytes of WAL payload are waiting (which bounds the memory the pending layer
 * holds and the cost of merging it into range reads). Every LMDB commit is followed by a flush of
 * its pages to disk, and that flush competes with the WAL's durable writes for the disk: a write
 * acknowledged while a flush runs waits for it. Committing rarely (once a second at a steady few
 * thousand writes per second) is what keeps the acknowledgement latency's tail near one disk
 * sync (docs/benchmarks.md). A commit carries the highest WAL sequence it includes, so LMDB's
 * applied sequence always matches its data; anything not yet committed is replayed from the WAL
 * after a crash. A failed commit is remembered in `failure`; the actor restarts on it.
 *
 * A commit's turn on the event loop issues every write of its transaction at once (lmdb-js makes a
 * turn's writes one transaction): about 12 ms for 4,096 changes, half of it their JSON. So the
 * values are encoded while they wait, a batch at a time, in the turn after the one that
 * acknowledged it (`setImmediate`), the commit's turn encodes only what is left, and it writes
 * each key once, with its last value (`lastOfEachKey`). What is left of the turn grows with
 * `limits.changesMax`, which the daemon's default keeps small for it (StoreActor.ts).
 *
 * A commit that fails because the disk is full (`DiskFullError`) is not a defect: nothing of it was
 * written, its changes stay queued (and readable through the pending layer), `diskFull` says so, and
 * the commit is retried every `diskFullRetryMs` until it succeeds. Meanwhile the actor refuses new
 * writes (the log still holds every acknowledged one) and `drain` does not wait for the disk.
 *
 * A refused commit of several batches is tried again at once with the first half of them, and so on
 * down to one batch: a second's writes (up to `limits.bytesMax`, 16 MiB) can need more room than a
 * disk just freed has, while each batch alone fits. Without it the store stayed refused with 16.1 MiB
 * free for a commit that might need 12.4 and 4 in reserve, its log unable to shrink before LMDB took
 * its records (test/stores/FullDisk.test.ts, on a fast machine). A commit of the first batches
 * records the last one's sequence as applied, so LMDB's applied sequence still matches its data.
 */
import { type Change, type Checkpoint, DiskFullError, encodedValue } from "./Checkpoint.ts"
import type { ChangeSet, PendingView } from "./PendingView.ts"

/** How often a commit refused by a full disk is tried again. */
export const diskFullRetryMs = 1000

/** When the queue starts an LMDB commit. */
export interface CommitLimits {
  /** Longest a change waits for its commit (unless one is in flight). */
  readonly intervalMs: number
  /** Commit as soon as this many changes wait. */
  readonly changesMax: number
  /** Commit as soon as the waiting batches' WAL payloads reach this many bytes. */
  readonly bytesMax: number
}

/**
 * What one transaction of `changes` leaves: the last change of each key (with its encoding), in
 * the order of those last changes. A write call's changes repeat some keys every time (a graph
 * project's counters with every entity created), so a commit of 4,096 changes from one-entity
 * calls wrote each counter about a thousand times; each LMDB write costs its commit's turn ~3 µs.
 */
const lastOfEachKey = (
  changes: Array<Change>,
  encoded: Array<Buffer | undefined>,
): { readonly changes: Array<Change>; readonly encoded: Array<Buffer | undefined> } => {
  const seen = new Set<string>()
  const kept: Array<number> = []
  for (let index = changes.length - 1; index >= 0; index--) {
    const key = changes[index]![0]
    if (seen.has(key)) continue
    seen.add(key)
    kept.push(index)
  }
  if (kept.length === changes.length) return { changes, encoded }
  kept.reverse()
  return { changes: kept.map((index) => changes[index]!), encoded: kept.map((index) => encoded[index]) }
}

/** A batch whose changes wait in the queue: what a commit ending with it records. */
interface QueuedBatch {
  /** How many of `queued`'s changes are its own (they follow the batches before it). */
  readonly changes: number
  /** Its bytes of WAL payload. */
  readonly bytes: number
  /** The WAL sequence it ends at. */
  readonly seq: number
  /** The shared log's position of it or the last batch before it that had one. */
  readonly position: number | undefined
  /** Its number among the batches handed to the pending layer (`enqueued`). */
  readonly through: number
}

export class CommitQueue {
  private queued: Array<Change> = []
  /** `encodedValue` of each of the first `encoded.length` changes of `queued`. */
  private encoded: Array<Buffer | undefined> = []
  /** The batches `queued` holds, in order. */
  private batches: Array<QueuedBatch> = []
  private encoding: ReturnType<typeof setImmediate> | undefined
  private queuedBytes = 0
  private queuedPosition: number | undefined = undefined
  /**
   * Batches handed to the pending layer so far. It evicts by this count, not by WAL sequence: two
   * batches can end at the same sequence (a checkpoint's deletion of expired idempotency records
   * carries the last batch's), and evicting the later with the earlier's commit would hide it from
   * readers before LMDB holds it.
   */
  private enqueued = 0
  private inFlight: Promise<void> | undefined
  private timer: ReturnType<typeof setTimeout> | undefined
  private idleWaiters: Array<() => void> = []
  /** The error of a failed LMDB commit, if any. */
  failure: unknown = undefined
  /** Set while not even the first waiting batch's commit has room on the disk (it is being retried). */
  diskFull: DiskFullError | undefined = undefined

  constructor(
    private readonly checkpoint: Checkpoint,
    private readonly view: PendingView,
    /** The log's store generation, recorded with each commit (a shared log settles it on its first batch). */
    private readonly salt: () => number,
    private readonly limits: CommitLimits,
  ) {}

  /**
   * Makes a batch (`bytes` of WAL payload) visible to readers and schedules its LMDB commit, which
   * records `seq` (and a shared log's `position`) as applied.
   */
  enqueue(changes: ReadonlyArray<Change> | ChangeSet, seq: number, bytes: number, position?: number): void {
    this.view.add(changes, ++this.enqueued)
    const list = "list" in changes ? changes.list : changes
    if (this.queued.length === 0) this.queued = list.slice()
    else for (const change of list) this.queued.push(change)
    this.queuedBytes += bytes
    if (position !== undefined) this.queuedPosition = position
    this.batches.push({ changes: list.length, bytes, seq, position: this.queuedPosition, through: this.enqueued })
    this.encoding ??= setImmediate(() => {
      this.encoding = undefined
      this.encodeQueued()
    })
    if (this.isFull() && this.inFlight === undefined && this.failure === undefined && this.diskFull === undefined) {
      if (this.timer !== undefined) clearTimeout(this.timer)
      this.timer = undefined
      this.commitNow()
    } else this.schedule()
  }

  /** Encodes the queued changes not encoded yet. */
  private encodeQueued(): void {
    const { queued, encoded } = this
    for (let index = encoded.length; index < queued.length; index++) encoded.push(encodedValue(queued[index]![1]))
  }

  private isFull(): boolean {
    return this.queued.length >= this.limits.changesMax || this.queuedBytes >= this.limits.bytesMax
  }

  /**
   * Resolves once everything enqueued so far is committed to LMDB, or a commit failed (`failure`),
   * or the disk is full (`diskFull`: what is queued stays queued).
   */
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
    return (
      this.inFlight === undefined &&
      (this.queued.length === 0 || this.failure !== undefined || this.diskFull !== undefined)
    )
  }

  private schedule(): void {
    if (this.inFlight !== undefined || this.timer !== undefined || this.failure !== undefined) return
    this.timer = setTimeout(
      () => {
        this.timer = undefined
        this.commitNow()
      },
      this.diskFull !== undefined ? diskFullRetryMs : this.limits.intervalMs,
    )
    this.timer.unref()
  }

  /** Commits the first `batchCount` queued batches (all of them unless a refused commit split them). */
  private commitNow(batchCount = this.batches.length): void {
    if (this.queued.length === 0 || this.failure !== undefined) {
      this.wakeIdle()
      return
    }
    this.encodeQueued()
    const all = batchCount >= this.batches.length
    const batches = all ? this.batches : this.batches.slice(0, batchCount)
    let end = 0
    let bytes = 0
    for (const batch of batches) {
      end += batch.changes
      bytes += batch.bytes
    }
    const taken = all ? this.queued : this.queued.slice(0, end)
    const takenEncoded = all ? this.encoded : this.encoded.slice(0, end)
    const { changes, encoded } = lastOfEachKey(taken, takenEncoded)
    const last = batches[batches.length - 1]!
    this.queued = all ? [] : this.queued.slice(end)
    this.encoded = all ? [] : this.encoded.slice(end)
    this.batches = all ? [] : this.batches.slice(batchCount)
    this.queuedBytes -= bytes
    this.inFlight = this.checkpoint.commit(changes, last.seq, this.salt(), last.position, encoded).then(
      () => {
        this.inFlight = undefined
        this.diskFull = undefined
        this.view.evictThrough(last.through)
        // The rest of a split commit has waited for the disk: it goes next.
        if (!all || this.idleWaiters.length > 0 || this.isFull()) this.commitNow()
        else this.schedule()
        if (this.isIdle()) this.wakeIdle()
      },
      (failure: unknown) => {
        this.inFlight = undefined
        if (failure instanceof DiskFullError) {
          // Nothing was written: the batches go back in front of what came since, to be retried,
          // the first half of them at once. Writes are refused only once not one batch fits.
          this.queued = taken.concat(this.queued)
          this.encoded = takenEncoded.concat(this.encoded)
          this.batches = batches.concat(this.batches)
          this.queuedBytes += bytes
          if (batches.length > 1) return this.commitNow(batches.length >> 1)
          this.diskFull = failure
          this.schedule()
        } else this.failure = failure
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
