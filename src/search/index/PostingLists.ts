/**
 * Growable lists of uint32 numbers, one per list number (a full-text field's posting lists, one per
 * term id), all in one pool: each list is a range of one `Uint32Array`, of which its first
 * `length(list)` numbers are used. A typed array per list cost about 180 bytes of object headers
 * each (23 MiB for the 134,000 lists of 100,000 entities).
 *
 * A full list moves to the pool's end with half again its capacity; the range it leaves is
 * abandoned. Once abandoned ranges pass a quarter of the pool's live capacity, the next move that
 * finds the pool full rewrites it without them (amortised O(1) a push, as growing a list is).
 * Readers take `items` and `start(list)` afresh after any `push`: the pool may have been replaced.
 */

/** A list's first capacity (lists grow by half again). */
const listCapacityMin = 4
/** The pool's first size, in numbers. */
const poolSizeMin = 4096
const none = -1

/** Lists of uint32 numbers in one pool. */
export class PostingLists {
  private pool = new Uint32Array(poolSizeMin)
  /** Numbers of the pool in use: live ranges and abandoned ones. */
  private end = 0
  private abandoned = 0
  private starts = new Int32Array(1024).fill(none)
  private capacities = new Uint32Array(1024)
  private lengths = new Uint32Array(1024)

  /** Bytes the lists take in memory: their arrays' capacities. */
  get bytes(): number {
    return this.pool.byteLength + this.starts.byteLength + this.capacities.byteLength + this.lengths.byteLength
  }

  /** The pool: list `list` is `items[start(list) .. start(list) + length(list))`. */
  get items(): Uint32Array {
    return this.pool
  }

  /** Where `list` starts in `items` (meaningless when its length is 0). */
  start(list: number): number {
    return list < this.starts.length ? this.starts[list]! : none
  }

  length(list: number): number {
    return list < this.lengths.length ? this.lengths[list]! : 0
  }

  /** Appends `value` to `list`. */
  push(list: number, value: number): void {
    if (list >= this.starts.length) this.growLists(list)
    const length = this.lengths[list]!
    if (this.starts[list] === none || length === this.capacities[list]) this.move(list, length)
    this.pool[this.starts[list]! + length] = value
    this.lengths[list] = length + 1
  }

  /** Empties every list (and lets the pool go). */
  clear(): void {
    this.pool = new Uint32Array(poolSizeMin)
    this.end = 0
    this.abandoned = 0
    this.starts.fill(none)
    this.capacities.fill(0)
    this.lengths.fill(0)
  }

  /** Moves `list` (of `length` numbers) to the pool's end with room to grow. */
  private move(list: number, length: number): void {
    const capacity = Math.max(listCapacityMin, Math.ceil(length * 1.5))
    if (this.end + capacity > this.pool.length) {
      if (this.abandoned * 4 > this.end - this.abandoned) this.rewrite()
      if (this.end + capacity > this.pool.length) {
        const pool = new Uint32Array(Math.max(Math.ceil(this.pool.length * 1.5), this.end + capacity))
        pool.set(this.pool.subarray(0, this.end))
        this.pool = pool
      }
    }
    const from = this.starts[list]!
    const at = this.end
    if (from !== none) {
      this.pool.copyWithin(at, from, from + length)
      this.abandoned += this.capacities[list]!
    }
    this.starts[list] = at
    this.capacities[list] = capacity
    this.end += capacity
  }

  /** Copies the live ranges to the start of a pool of the same size, in list order. */
  private rewrite(): void {
    const pool = new Uint32Array(this.pool.length)
    let end = 0
    for (let list = 0; list < this.starts.length; list++) {
      const from = this.starts[list]!
      if (from === none) continue
      pool.set(this.pool.subarray(from, from + this.lengths[list]!), end)
      this.starts[list] = end
      end += this.capacities[list]!
    }
    this.pool = pool
    this.end = end
    this.abandoned = 0
  }

  private growLists(list: number): void {
    const size = Math.max(list + 1, this.starts.length * 2)
    const starts = new Int32Array(size).fill(none)
    starts.set(this.starts)
    const capacities = new Uint32Array(size)
    capacities.set(this.capacities)
    const lengths = new Uint32Array(size)
    lengths.set(this.lengths)
    this.starts = starts
    this.capacities = capacities
    this.lengths = lengths
  }
}
