/**
 * The WordNet lexicon of a model's vocabulary, as shipped in the model directory (`lexicon.bin`,
 * written at build time from WordNet.ts) and read at run time by TermAlignment.ts: for each word
 * id, its base forms and its related words, so "failing" meets "fail" and "lapse" meets "expire"
 * without WordNet at run time.
 *
 * File layout, little-endian: "MNLX", u32 version, u32 words, u32 base-form entries, u32 relation
 * entries, then Int32 baseOffsets[words + 1], Int32 baseIds[], Int32 relationOffsets[words + 1],
 * Int32 relationIds[] (sorted within each word), Uint8 relationKinds[]. Row w's entries are
 * [offsets[w], offsets[w + 1]).
 */
import type { WordNetLexicon, WordRelation } from "../embedding/WordNet.ts"

const magic = 0x584c4e4d // "MNLX"
const formatVersion = 1
const headerBytes = 20

/** Relation kinds as stored. */
const kinds: ReadonlyArray<WordRelation> = ["synonym", "similar", "hypernym", "hyponym", "derivation"]

/** A lexicon over word ids. */
export interface Lexicon {
  readonly words: number
  /** Base forms of `id` (other ids), possibly none. */
  readonly baseForms: (id: number) => Int32Array
  /** The relation between lemma ids `a` and `b`, if WordNet has one. */
  readonly relation: (a: number, b: number) => WordRelation | undefined
}

/** Serialises `lexicon` over the ids of `ids` (words outside `ids` are dropped). */
export const encodeLexicon = (lexicon: WordNetLexicon, ids: ReadonlyMap<string, number>): Uint8Array => {
  const words = ids.size
  const rowsOf = <A>(map: ReadonlyMap<string, ReadonlyArray<A>>, idOf: (entry: A) => number | undefined) => {
    const rows: Array<Array<{ id: number; entry: A }>> = Array.from({ length: words }, () => [])
    for (const [word, entries] of map) {
      const id = ids.get(word)
      if (id === undefined) continue
      for (const entry of entries) {
        const other = idOf(entry)
        if (other !== undefined) rows[id]!.push({ id: other, entry })
      }
      rows[id]!.sort((a, b) => a.id - b.id)
    }
    return rows
  }
  const bases = rowsOf(lexicon.baseForms, (word) => ids.get(word))
  const relations = rowsOf(lexicon.relations, (edge) =>
    kinds.includes(edge.relation) ? ids.get(edge.word) : undefined,
  )
  const baseCount = bases.reduce((sum, row) => sum + row.length, 0)
  const relationCount = relations.reduce((sum, row) => sum + row.length, 0)
  const intBytes = 4 * (2 * (words + 1) + baseCount + relationCount)
  const out = new Uint8Array(headerBytes + intBytes + relationCount)
  const view = new DataView(out.buffer)
  ;[magic, formatVersion, words, baseCount, relationCount].forEach((value, i) => {
    view.setUint32(4 * i, value, true)
  })
  let at = headerBytes
  const int = (value: number) => {
    view.setInt32(at, value, true)
    at += 4
  }
  const writeRows = (rows: ReadonlyArray<ReadonlyArray<{ id: number }>>) => {
    let offset = 0
    int(0)
    for (const row of rows) {
      offset += row.length
      int(offset)
    }
    for (const row of rows) for (const entry of row) int(entry.id)
  }
  writeRows(bases)
  writeRows(relations)
  for (const row of relations) for (const { entry } of row) out[at++] = kinds.indexOf(entry.relation)
  return out
}

/** Reads a lexicon written by `encodeLexicon`; nothing keeps the file's buffer alive. */
export const decodeLexicon = (bytes: Uint8Array): Lexicon => {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const header = [0, 1, 2, 3, 4].map((i) => view.getUint32(4 * i, true))
  const [fileMagic, version, words, baseCount, relationCount] = header as [number, number, number, number, number]
  if (fileMagic !== magic || version !== formatVersion)
    throw new Error("lexicon.bin: not a mnemos lexicon of this version")
  // Copied into aligned arrays (the file buffer may start at any offset).
  let at = headerBytes
  const ints = (count: number) => {
    const out = new Int32Array(count)
    for (let i = 0; i < count; i++, at += 4) out[i] = view.getInt32(at, true)
    return out
  }
  const baseOffsets = ints(words + 1)
  const baseIds = ints(baseCount)
  const relationOffsets = ints(words + 1)
  const relationIds = ints(relationCount)
  const relationKinds = Uint8Array.from(bytes.subarray(at, at + relationCount))
  return lexiconOf(words, { baseOffsets, baseIds, relationOffsets, relationIds, relationKinds })
}

/**
 * The lookups over decoded arrays, in a scope of their own: a closure made beside the decoding
 * would share its context, and with it the file's buffer.
 */
const lexiconOf = (
  words: number,
  rows: {
    readonly baseOffsets: Int32Array
    readonly baseIds: Int32Array
    readonly relationOffsets: Int32Array
    readonly relationIds: Int32Array
    readonly relationKinds: Uint8Array
  },
): Lexicon => {
  const { baseOffsets, baseIds, relationOffsets, relationIds, relationKinds } = rows
  return {
    words,
    baseForms: (id) => baseIds.subarray(baseOffsets[id], baseOffsets[id + 1]),
    relation: (a, b) => {
      let low = relationOffsets[a]!
      let high = relationOffsets[a + 1]! - 1
      while (low <= high) {
        const middle = (low + high) >>> 1
        const value = relationIds[middle]!
        if (value === b) return kinds[relationKinds[middle]!]
        if (value < b) low = middle + 1
        else high = middle - 1
      }
      return undefined
    },
  }
}
