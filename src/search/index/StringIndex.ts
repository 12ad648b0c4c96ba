/**
 * A map from strings to small non-negative numbers whose strings the caller already holds by
 * number (a document's id, a group's key): an open-addressing table of numbers, probed linearly,
 * each slot compared through `keyOf`. A `Map` of 300,000 ids took about 14 MiB (three words an
 * entry, room doubled); this takes 4 bytes a slot, at most 70% full.
 *
 * Removal shifts the following entries of the probe run back (no tombstones), so a lookup stops
 * at the first empty slot.
 */

/** Slots in use above this share grow the table. */
const fillMax = 0.7

/** FNV-1a of `key`'s UTF-16 code units. */
const hashOf = (key: string): number => {
  let hash = 0x811c9dc5
  for (let i = 0; i < key.length; i++) hash = Math.imul(hash ^ key.charCodeAt(i), 0x01000193)
  return hash >>> 0
}

/** Strings to numbers, the strings kept by the caller. */
export class StringIndex {
  /** num + 1 per slot; 0 is empty. */
  private slots = new Int32Array(1024)
  private count = 0

  /** `keyOf(num)`: the string `num` was set for, while it is set. */
  constructor(private readonly keyOf: (num: number) => string | undefined) {}

  get size(): number {
    return this.count
  }

  get(key: string): number | undefined {
    const mask = this.slots.length - 1
    for (let slot = hashOf(key) & mask; ; slot = (slot + 1) & mask) {
      const stored = this.slots[slot]!
      if (stored === 0) return undefined
      if (this.keyOf(stored - 1) === key) return stored - 1
    }
  }

  /** Maps `key` (not present; `keyOf(num)` answers it already) to `num`. */
  set(key: string, num: number): void {
    if ((this.count + 1) / this.slots.length > fillMax) this.grow()
    this.place(key, num)
    this.count++
  }

  private place(key: string, num: number) {
    const mask = this.slots.length - 1
    let slot = hashOf(key) & mask
    while (this.slots[slot] !== 0) slot = (slot + 1) & mask
    this.slots[slot] = num + 1
  }

  private grow() {
    const old = this.slots
    this.slots = new Int32Array(old.length * 2)
    for (const stored of old) if (stored !== 0) this.place(this.keyOf(stored - 1)!, stored - 1)
  }

  /** Removes `key`, if present (`keyOf` still answers it and every other entry). */
  delete(key: string): void {
    const slots = this.slots
    const mask = slots.length - 1
    let slot = hashOf(key) & mask
    while (this.keyOf(slots[slot]! - 1) !== key) {
      if (slots[slot] === 0) return
      slot = (slot + 1) & mask
    }
    // Backward shift: move each later entry of the run into the hole when its home allows.
    let hole = slot
    for (let next = (hole + 1) & mask; slots[next] !== 0; next = (next + 1) & mask) {
      const home = hashOf(this.keyOf(slots[next]! - 1)!) & mask
      // The entry may move to the hole when its home is not cyclically in (hole, next].
      const stays = hole < next ? home > hole && home <= next : home > hole || home <= next
      if (!stays) {
        slots[hole] = slots[next]!
        hole = next
      }
    }
    slots[hole] = 0
    this.count--
  }
}
