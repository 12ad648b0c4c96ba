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
import { SortedKeys } from "./SortedKeys.ts"

/** Marks, in the undo log, a key that had no write in this overlay. */
const absent = Symbol("absent")

/** A `StoreWriter` over `base` whose writes stay in memory until `changes()` is taken. */
export class Overlay implements StoreWriter {
  private readonly writes = new Map<string, unknown>()
  /** The keys of `writes`, in key order, for range reads. */
  private readonly written = new SortedKeys()
  /** With `undoable`: what each write replaced (`absent` when the key had no write yet), for `undoTo`. */
  private readonly undo: Array<readonly [key: string, previous: unknown]> | undefined

  constructor(
    private base: StoreView,
    /** Keep what each write replaced, so the writes after a `mark` can be taken back. */
    undoable = false,
  ) {
    this.undo = undoable ? [] : undefined
  }

  /** A point to take writes back to (`undoTo`); only for an undoable overlay. */
  mark(): number {
    return this.undo?.length ?? 0
  }

  /** Takes back every write since `mark` (a command that did not fit its batch). */
  undoTo(mark: number): void {
    const undo = this.undo
    if (undo === undefined) throw new Error("this overlay keeps no undo log")
    while (undo.length > mark) {
      const [key, previous] = undo.pop()!
      if (previous === absent) {
        this.writes.delete(key)
        this.written.delete(key)
      } else this.writes.set(key, previous)
    }
  }

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
    this.write(key, value)
  }

  remove = (key: string): void => {
    this.write(key, removed)
  }

  private write(key: string, value: unknown): void {
    const had = this.writes.has(key)
    this.undo?.push([key, had ? this.writes.get(key) : absent])
    if (!had) this.written.add(key)
    this.writes.set(key, value)
  }

  getRange = (range: KeyRange): Iterable<Entry> =>
    this.writes.size === 0
      ? this.base.getRange(range)
      : mergedRange(this.base, this.written, (key) => this.writes.get(key), range)

  /** Counts keys (LMDB's count, no values read) unless this overlay changed some in the range. */
  count = (range: KeyRange): number =>
    this.written.inRange(range).length === 0 ? this.base.count(range) : [...this.getRange(range)].length

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
