/**
 * A key range of a committed view with a set of uncommitted changes merged in: what the batch
 * overlay (`Overlay`) and the pending layer (`PendingView`) both show. The changes in the range
 * are taken (from the layer's `SortedKeys`, so the changes outside the range cost nothing) when
 * the call is made; the committed entries are pulled one by one, so a range costs memory for the
 * changes in it, not for the range. A committed entry whose key has a
 * change is replaced by it; a `removed` change hides it.
 *
 * The changes are ordered and bounded with `compareKeys`, LMDB's order, not JavaScript's `<`: the
 * merge interleaves them with LMDB's entries, so a different order would skip or repeat entries
 * of a paged range and make a limited read answer differently before and after the commit.
 */
import type { Entry, KeyRange, StoreView } from "./Checkpoint.ts"
import { compareKeys } from "./KeyCodec.ts"
import type { SortedKeys } from "./SortedKeys.ts"

/** The value of a change that removes its key. */
export const removed: unique symbol = Symbol("removed")

/**
 * `base`'s entries in `range`, with the changes applied: `keys` holds every changed key, `valueAt`
 * gives a changed key's value or `removed`. Only the changed keys in the range are looked at.
 */
export const mergedRange = (
  base: StoreView,
  keys: SortedKeys,
  valueAt: (key: string) => unknown,
  range: KeyRange,
): Iterable<Entry> => {
  const sorted = keys.inRange(range)
  if (sorted.length === 0) return base.getRange(range)
  const changed = new Map<string, unknown>()
  for (const key of sorted) changed.set(key, valueAt(key))
  if (range.reverse) sorted.reverse()
  const before = range.reverse
    ? (a: string, b: string) => compareKeys(a, b) > 0
    : (a: string, b: string) => compareKeys(a, b) < 0
  const limit = range.limit ?? Number.POSITIVE_INFINITY
  return {
    *[Symbol.iterator]() {
      if (limit <= 0) return
      let emitted = 0
      let next = 0
      // The changed keys up to `key` (all that are left when undefined); false once the limit is reached.
      const flushUntil = function* (key: string | undefined): Generator<Entry, boolean> {
        while (next < sorted.length && (key === undefined || before(sorted[next]!, key))) {
          const changedKey = sorted[next++]!
          const value = changed.get(changedKey)
          if (value === removed) continue
          yield { key: changedKey, value }
          if (++emitted >= limit) return false
        }
        return true
      }
      for (const entry of base.getRange({ start: range.start, end: range.end, reverse: range.reverse })) {
        if (!(yield* flushUntil(entry.key))) return
        if (changed.has(entry.key)) continue
        yield entry
        if (++emitted >= limit) return
      }
      yield* flushUntil(undefined)
    },
  }
}
