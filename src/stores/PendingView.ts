/**
 * The committed state as readers must see it: LMDB plus the acknowledged batches whose LMDB
 * commit has not finished yet.
 *
 * The store actor acknowledges a batch as soon as its WAL write is durable; the LMDB commit of
 * the same changes is coalesced (CommitQueue.ts: up to a second later) and runs on lmdb-js's write
 * thread. Until it does, the batch's changes live here, so a read after an acknowledgement always
 * sees the write (read-your-writes) and the writer never waits for LMDB. When LMDB confirms the commit of the
 * batch ending at sequence S, every key whose latest pending change is at or below S is evicted.
 * JavaScript runs a synchronous query to its end without interleaving, and lmdb-js renews its read
 * transaction only between turns, so a query sees one consistent snapshot of both layers.
 */
import type { Change, Entry, KeyRange, StoreView } from "./Checkpoint.ts"
import { mergedRange, removed } from "./MergedRange.ts"

interface PendingValue {
  readonly value: unknown
  readonly seq: number
}

/** LMDB's view overlaid with changes acknowledged but not yet committed there. */
export class PendingView implements StoreView {
  private readonly pending = new Map<string, PendingValue>()
  private readonly batches: Array<{ readonly seq: number; readonly keys: ReadonlyArray<string> }> = []

  constructor(private readonly base: StoreView) {}

  /** Records a batch's changes, durable in the WAL up to `seq`. */
  add(changes: ReadonlyArray<Change>, seq: number): void {
    for (const [key, value] of changes) this.pending.set(key, { value: value === undefined ? removed : value, seq })
    this.batches.push({ seq, keys: changes.map(([key]) => key) })
  }

  /** Forgets changes LMDB has now committed (every batch at or below `seq`). */
  evictThrough(seq: number): void {
    while (this.batches.length > 0 && this.batches[0]!.seq <= seq) {
      for (const key of this.batches.shift()!.keys) {
        const entry = this.pending.get(key)
        if (entry !== undefined && entry.seq <= seq) this.pending.delete(key)
      }
    }
  }

  get size(): number {
    return this.pending.size
  }

  get = (key: string): unknown => {
    const entry = this.pending.get(key)
    if (entry === undefined) return this.base.get(key)
    return entry.value === removed ? undefined : entry.value
  }

  /** The committed range with the pending changes merged in, streamed (see MergedRange.ts). */
  getRange = (range: KeyRange): Iterable<Entry> =>
    this.pending.size === 0
      ? this.base.getRange(range)
      : mergedRange(this.base, this.pending.keys(), (key) => this.pending.get(key)!.value, range)

  count = (range: KeyRange): number =>
    this.pending.size === 0 ? this.base.count(range) : [...this.getRange(range)].length
}
