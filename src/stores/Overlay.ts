/**
 * A writable view layered over a store's committed state, holding one batch's changes in memory.
 *
 * The store actor decides and applies every command of a batch against an overlay, so a command
 * sees the effects of the commands before it in the same batch, before anything is durable. Only
 * after the durable WAL write do the overlay's changes reach LMDB. Range reads merge the committed
 * range with the overlay's changed keys, in key order, streamed (MergedRange.ts).
 */
import type { Change, Entry, KeyRange, StoreView, StoreWriter } from "./Checkpoint.ts"
import { mergedRange, removed } from "./MergedRange.ts"

/** A `StoreWriter` over `base` whose writes stay in memory until `changes()` is taken. */
export class Overlay implements StoreWriter {
  private readonly writes = new Map<string, unknown>()

  constructor(private base: StoreView) {}

  /**
   * Reads through `base` from now on. Used when the layer this overlay was stacked on (the batch
   * before it, still being written) has reached `base`, so stacks never grow past two overlays.
   */
  rebase(base: StoreView): void {
    this.base = base
  }

  get = (key: string): unknown => {
    if (!this.writes.has(key)) return this.base.get(key)
    const value = this.writes.get(key)
    return value === removed ? undefined : value
  }

  put = (key: string, value: unknown): void => {
    this.writes.set(key, value)
  }

  remove = (key: string): void => {
    this.writes.set(key, removed)
  }

  getRange = (range: KeyRange): Iterable<Entry> =>
    this.writes.size === 0
      ? this.base.getRange(range)
      : mergedRange(this.base, this.writes.keys(), (key) => this.writes.get(key), range)

  count = (range: KeyRange): number => [...this.getRange(range)].length

  /** The batch's net changes; `undefined` marks a removal. */
  changes = (): Array<Change> => {
    const changes: Array<Change> = []
    for (const [key, value] of this.writes) changes.push([key, value === removed ? undefined : value])
    return changes
  }

  get size(): number {
    return this.writes.size
  }
}
