/**
 * A vocabulary's word → id lookup, packed: every word's UTF-16 code units in one array, where each
 * starts, and an open-addressing hash table of ids. For the default model's 100,050 words that is
 * about 2.9 MB of array buffers, where a `Map` of 100,050 strings took about 6 MB of the heap the
 * daemon's main thread shares with everything else (docs/benchmarks.md, footprint). Built once when
 * the model loads; a lookup allocates nothing.
 */

/** Word → id, for the tokenizer and the term aligner (a `Map` is one too). */
export interface WordIds {
  readonly get: (word: string) => number | undefined
}

/** FNV-1a over UTF-16 code units. */
const hashOf = (word: string): number => {
  let hash = 0x811c9dc5
  for (let i = 0; i < word.length; i++) hash = Math.imul(hash ^ word.charCodeAt(i), 0x01000193)
  return hash >>> 0
}

/** Packs `words` (id = index; a repeated word keeps its first id). */
export const packWordIds = (words: ReadonlyArray<string>): WordIds => {
  let units = 0
  for (const word of words) units += word.length
  const chars = new Uint16Array(units)
  const starts = new Uint32Array(words.length + 1)
  let at = 0
  words.forEach((word, id) => {
    starts[id] = at
    for (let i = 0; i < word.length; i++) chars[at++] = word.charCodeAt(i)
  })
  starts[words.length] = at
  // At most half full: probes stay short.
  let size = 1
  while (size < 2 * words.length) size *= 2
  const mask = size - 1
  const table = new Int32Array(size).fill(-1)
  const equals = (id: number, word: string): boolean => {
    const start = starts[id]!
    if (starts[id + 1]! - start !== word.length) return false
    for (let i = 0; i < word.length; i++) if (chars[start + i] !== word.charCodeAt(i)) return false
    return true
  }
  const get = (word: string): number | undefined => {
    for (let slot = hashOf(word) & mask; ; slot = (slot + 1) & mask) {
      const id = table[slot]!
      if (id === -1) return undefined
      if (equals(id, word)) return id
    }
  }
  words.forEach((word, id) => {
    for (let slot = hashOf(word) & mask; ; slot = (slot + 1) & mask) {
      const found = table[slot]!
      if (found === -1) {
        table[slot] = id
        return
      }
      if (equals(found, word)) return
    }
  })
  return { get }
}
