/**
 * A set of keys kept in LMDB's key order (`compareKeys`), for the range reads of the layers that
 * hold uncommitted changes (`Overlay`, `PendingView`). A range read must find the changed keys in
 * its range without looking at the others: one big write (a delete of 10,000 linked entities makes
 * about 140,000 changes, each cascade doing two range reads) would otherwise cost the product of
 * the two, which froze the daemon for minutes.
 *
 * The keys sit in sorted chunks of at most `chunkKeysMax` (a sorted list of sorted lists): adding
 * or removing a key costs a binary search and a move within one chunk; a range read costs a binary
 * search plus the keys it returns.
 */
import type { KeyRange } from "./Checkpoint.ts"
import { compareKeys } from "./KeyCodec.ts"

/** A chunk is split in two once it holds more keys than this. */
const chunkKeysMax = 512

type Compare = (a: string, b: string) => number

/**
 * JavaScript's own string order (UTF-16 code units), ten times faster than `compareKeys`. It is
 * LMDB's order for keys without a code unit from U+D800 up (surrogates and the few characters
 * above them), which is nearly every key: the set uses it while it holds only such keys.
 */
const compareUnits: Compare = (a, b) => (a < b ? -1 : a > b ? 1 : 0)
const hasHighUnit = /[\uD800-\uFFFF]/

/** The first index in sorted `keys` whose key is not below `key`. */
const lowerBound = (keys: ReadonlyArray<string>, key: string, compare: Compare): number => {
  let low = 0
  let high = keys.length
  while (low < high) {
    const middle = (low + high) >>> 1
    if (compare(keys[middle]!, key) < 0) low = middle + 1
    else high = middle
  }
  return low
}

/** Keys in key order, with range reads that cost what they return. */
export class SortedKeys {
  private readonly chunks: Array<Array<string>> = []
  /** The last (greatest) key of each chunk, to find a key's chunk by binary search. */
  private readonly lasts: Array<string> = []
  private count = 0
  /** How many keys held have a code unit from U+D800 up; while none, `compareUnits` orders them. */
  private highKeys = 0

  get size(): number {
    return this.count
  }

  /** The order to search with for `key` (and for every key held). */
  private compareFor(key: string): Compare {
    return this.highKeys === 0 && !hasHighUnit.test(key) ? compareUnits : compareKeys
  }

  /** The chunk a key belongs in: the first whose last key is not below it (else the last chunk). */
  private chunkOf(key: string, compare: Compare): number {
    return Math.min(lowerBound(this.lasts, key, compare), this.chunks.length - 1)
  }

  /** Adds `key`; a key already present is left as it is. */
  add(key: string): void {
    const compare = this.compareFor(key)
    if (this.chunks.length === 0) {
      this.chunks.push([key])
      this.lasts.push(key)
    } else {
      const at = this.chunkOf(key, compare)
      const chunk = this.chunks[at]!
      const position = lowerBound(chunk, key, compare)
      if (position < chunk.length && chunk[position] === key) return
      this.insert(at, position, key)
    }
    this.count++
    if (compare === compareKeys && hasHighUnit.test(key)) this.highKeys++
  }

  private insert(at: number, position: number, key: string): void {
    const chunk = this.chunks[at]!
    chunk.splice(position, 0, key)
    if (position === chunk.length - 1) this.lasts[at] = key
    if (chunk.length > chunkKeysMax) {
      const upper = chunk.splice(chunk.length >> 1)
      this.chunks.splice(at + 1, 0, upper)
      this.lasts.splice(at, 1, chunk[chunk.length - 1]!, upper[upper.length - 1]!)
    }
  }

  /** Removes `key`, if present. */
  delete(key: string): void {
    if (this.chunks.length === 0) return
    const compare = this.compareFor(key)
    const at = this.chunkOf(key, compare)
    const chunk = this.chunks[at]!
    const position = lowerBound(chunk, key, compare)
    if (position === chunk.length || chunk[position] !== key) return
    chunk.splice(position, 1)
    this.count--
    if (compare === compareKeys && hasHighUnit.test(key)) this.highKeys--
    if (chunk.length === 0) {
      this.chunks.splice(at, 1)
      this.lasts.splice(at, 1)
    } else if (position === chunk.length) {
      this.lasts[at] = chunk[chunk.length - 1]!
    }
  }

  /** The keys in `[range.start, range.end)`, ascending (`range.reverse` and `limit` are the caller's). */
  inRange(range: KeyRange): Array<string> {
    const found: Array<string> = []
    if (this.chunks.length === 0) return found
    const compare = this.highKeys === 0 && !hasHighUnit.test(range.start + range.end) ? compareUnits : compareKeys
    for (let at = lowerBound(this.lasts, range.start, compare); at < this.chunks.length; at++) {
      const chunk = this.chunks[at]!
      for (let position = lowerBound(chunk, range.start, compare); position < chunk.length; position++) {
        const key = chunk[position]!
        if (compare(key, range.end) >= 0) return found
        found.push(key)
      }
    }
    return found
  }
}
