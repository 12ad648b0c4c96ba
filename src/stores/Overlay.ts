/**
 * A writable view layered over a store's committed state, holding one batch's changes in memory.
 *
 * The store actor decides and applies every command of a batch against an overlay, so a command
 * sees the effects of the commands before it in the same batch, before anything is durable. Only
 * after the durable WAL write do the overlay's changes reach LMDB. Range reads
 * merge the committed range with the overlay's changed keys, in key order.
 */
import type { Change, Entry, KeyRange, StoreView, StoreWriter } from "./Checkpoint.ts"

const removed = Symbol("removed")

/** A `StoreWriter` over `base` whose writes stay in memory until `changes()` is taken. */
export class Overlay implements StoreWriter {
  private readonly writes = new Map<string, unknown>()

  constructor(private readonly base: StoreView) {}

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

  getRange = (range: KeyRange): Iterable<Entry> => {
    if (this.writes.size === 0) return this.base.getRange(range)
    const inRange = [...this.writes.keys()].filter((key) => key >= range.start && key < range.end)
    if (inRange.length === 0) return this.base.getRange(range)
    const merged = new Map<string, unknown>()
    for (const entry of this.base.getRange({ start: range.start, end: range.end, reverse: range.reverse })) {
      merged.set(entry.key, entry.value)
    }
    for (const key of inRange) {
      const value = this.writes.get(key)
      if (value === removed) merged.delete(key)
      else merged.set(key, value)
    }
    const keys = [...merged.keys()].sort()
    if (range.reverse) keys.reverse()
    const limited = range.limit === undefined ? keys : keys.slice(0, range.limit)
    return limited.map((key) => ({ key, value: merged.get(key) }))
  }

  count = (range: KeyRange): number => [...this.getRange(range)].length

  /** The batch's net changes; `undefined` marks a removal. */
  changes = (): Array<Change> =>
    [...this.writes].map(([key, value]) => [key, value === removed ? undefined : value] as const)

  get size(): number {
    return this.writes.size
  }
}
