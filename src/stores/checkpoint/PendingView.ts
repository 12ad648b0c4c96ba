/**
 * The committed state as readers must see it: LMDB plus the acknowledged batches whose LMDB
 * commit has not finished yet.
 *
 * The store actor acknowledges a batch as soon as its WAL write is durable; the LMDB commit of
 * the same changes is coalesced (CommitQueue.ts: up to a second later) and runs on lmdb-js's write
 * thread. Until it does, the batch's changes live here, so a read after an acknowledgement always
 * sees the write (read-your-writes) and the writer never waits for LMDB. Batches are numbered in the
 * order they are added; when LMDB confirms the commit of everything through batch N, every key
 * whose latest pending change is in batch N or before is evicted.
 * A large batch comes with its overlay's own index (`ChangeSet`), which the layer adopts rather than
 * copy, and a commit of everything added empties the layer at once: the cost of a batch here does
 * not grow with its size (140,000 changes cost about half a second to copy in and evict one by one).
 * JavaScript runs a synchronous query to its end without interleaving, and lmdb-js renews its read
 * transaction only between turns, so a query sees one consistent snapshot of both layers.
 */
import type { Change, Entry, KeyRange, StoreView } from "./Checkpoint.ts"
import { mergedRange, removed } from "./MergedRange.ts"
import { SortedKeys } from "./SortedKeys.ts"

/**
 * A batch's changes with their index, as the batch overlay hands them over (`Overlay.release`):
 * `byKey` maps each key to its tuple in `list`, `keys` holds the keys in key order.
 */
export interface ChangeSet {
  readonly list: ReadonlyArray<Change>
  readonly byKey: Map<string, Change>
  readonly keys: SortedKeys
}

const isChangeSet = (changes: ReadonlyArray<Change> | ChangeSet): changes is ChangeSet => "byKey" in changes

/** LMDB's view overlaid with changes acknowledged but not yet committed there. */
export class PendingView implements StoreView {
  /** The latest pending change of each key: the very tuple its batch handed to `add`. */
  private pending = new Map<string, Change>()
  /** The keys of `pending`, in key order, for range reads. */
  private pendingKeys = new SortedKeys()
  private readonly batches: Array<{ readonly batch: number; readonly changes: ReadonlyArray<Change> }> = []

  constructor(private readonly base: StoreView) {}

  /**
   * Records the changes of `batch`, a number greater than every batch's added before. A `ChangeSet`
   * becomes the layer's index when it is the larger of the two (what was pending is merged into it,
   * where the batch did not change the key since); it must not be used by its giver afterwards.
   */
  add(changes: ReadonlyArray<Change> | ChangeSet, batch: number): void {
    if (!isChangeSet(changes)) {
      this.merge(changes)
      this.batches.push({ batch, changes })
      return
    }
    if (changes.byKey.size < this.pending.size) this.merge(changes.list)
    else {
      const older = this.pending
      this.pending = changes.byKey
      this.pendingKeys = changes.keys
      for (const [key, change] of older) {
        if (this.pending.has(key)) continue
        this.pending.set(key, change)
        this.pendingKeys.add(key)
      }
    }
    this.batches.push({ batch, changes: changes.list })
  }

  private merge(changes: ReadonlyArray<Change>): void {
    for (const change of changes) {
      const size = this.pending.size
      this.pending.set(change[0], change)
      if (this.pending.size !== size) this.pendingKeys.add(change[0])
    }
  }

  /**
   * Forgets changes LMDB has now committed (every batch numbered `batch` or less). A key stays while
   * a later batch's change of it is still pending: the map then holds that later tuple, not this one.
   */
  evictThrough(batch: number): void {
    const last = this.batches[this.batches.length - 1]
    if (last !== undefined && last.batch <= batch) {
      // Everything pending is committed: let it all go at once.
      this.batches.length = 0
      this.pending = new Map()
      this.pendingKeys = new SortedKeys()
      return
    }
    while (this.batches.length > 0 && this.batches[0]!.batch <= batch) {
      for (const change of this.batches.shift()!.changes) {
        if (this.pending.get(change[0]) !== change) continue
        this.pending.delete(change[0])
        this.pendingKeys.delete(change[0])
      }
    }
  }

  get size(): number {
    return this.pending.size
  }

  get = (key: string): unknown => {
    const change = this.pending.get(key)
    // A pending removal is a change whose value is undefined.
    return change === undefined ? this.base.get(key) : change[1]
  }

  /** The committed range with the pending changes merged in, streamed (see MergedRange.ts). */
  getRange = (range: KeyRange): Iterable<Entry> =>
    this.pending.size === 0
      ? this.base.getRange(range)
      : mergedRange(
          this.base,
          this.pendingKeys,
          (key) => {
            const value = this.pending.get(key)![1]
            return value === undefined ? removed : value
          },
          range,
        )

  count = (range: KeyRange): number =>
    this.pendingKeys.inRange(range).length === 0 ? this.base.count(range) : [...this.getRange(range)].length
}
