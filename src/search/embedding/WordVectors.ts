/**
 * The static model's word vectors (`word-vectors.bin`): what its sentence embeddings are made of
 * (StaticModel.ts) and what query-time term alignment compares words with (TermAlignment.ts), one
 * copy for both. Unit vectors quantised to int8 with one scale per word: 10 MB instead of 40 in
 * float32, and a cosine moves by less than 0.01.
 *
 * File layout, little-endian: "MNWV", u32 version, u32 words, u32 dimensions, Float32
 * scales[words], Int8 values[words × dimensions]. value × scale is the component.
 *
 * The daemon reads the file on demand (`openWordVectors`): the scales (0.4 MB) are held, each row
 * (a word's 100 bytes) is read from the file when a text or a query uses it, and the last
 * `wordRowsCachedMax` rows read are kept. A search reads a few hundred rows, and the 10 MB of
 * values stay in the kernel's page cache, not in the daemon's memory (docs/benchmarks.md,
 * footprint). `decodeWordVectors` holds them all (the build and the tests).
 */
import { closeSync, openSync, readSync } from "node:fs"

const magic = 0x56574e4d // "MNWV"
const formatVersion = 1
const headerBytes = 16

/** Word vectors by id. */
export interface WordVectors {
  readonly words: number
  readonly dimensions: number
  /** Cosine of the unit vectors of ids `a` and `b`. */
  readonly cosine: (a: number, b: number) => number
  /** Adds `weight` × the unit vector of `id` to `target` (of `dimensions` entries). */
  readonly addScaled: (id: number, weight: number, target: Float64Array) => void
}

/** Scales `vectors` (rows of `dimensions`) to unit length and quantises them into the file format. */
export const encodeWordVectors = (vectors: Float32Array, dimensions: number): Uint8Array => {
  const words = vectors.length / dimensions
  const out = new Uint8Array(headerBytes + 4 * words + words * dimensions)
  const view = new DataView(out.buffer)
  ;[magic, formatVersion, words, dimensions].forEach((value, i) => {
    view.setUint32(4 * i, value, true)
  })
  const values = new Int8Array(out.buffer, headerBytes + 4 * words)
  for (let w = 0; w < words; w++) {
    let largest = 0
    let squares = 0
    for (let d = 0; d < dimensions; d++) {
      const value = vectors[w * dimensions + d]!
      largest = Math.max(largest, Math.abs(value))
      squares += value * value
    }
    const norm = Math.sqrt(squares) || 1
    const scale = largest / norm / 127 || 1
    view.setFloat32(headerBytes + 4 * w, scale, true)
    for (let d = 0; d < dimensions; d++)
      values[w * dimensions + d] = Math.round(vectors[w * dimensions + d]! / norm / scale)
  }
  return out
}

/** The header's counts, checked. */
const readHeader = (view: DataView): { readonly words: number; readonly dimensions: number } => {
  const [fileMagic, version, words, dimensions] = [0, 1, 2, 3].map((i) => view.getUint32(4 * i, true)) as [
    number,
    number,
    number,
    number,
  ]
  if (fileMagic !== magic || version !== formatVersion)
    throw new Error("word-vectors.bin: not mnemos word vectors of this version")
  return { words, dimensions }
}

/** Rows of word values kept by `openWordVectors` (about 400 KB at 100 dimensions). */
export const wordRowsCachedMax = 4096

/** Word vectors read on demand from the file at `path` (see the module's comment); `close` closes it. */
export const openWordVectors = (path: string): WordVectors & { readonly close: () => void } => {
  const fd = openSync(path, "r")
  const header = new Uint8Array(headerBytes)
  readSync(fd, header, 0, headerBytes, 0)
  const { words, dimensions } = readHeader(new DataView(header.buffer))
  const scaleBytes = new Uint8Array(4 * words)
  readSync(fd, scaleBytes, 0, scaleBytes.length, headerBytes)
  const scaleView = new DataView(scaleBytes.buffer)
  const scales = new Float32Array(words)
  for (let w = 0; w < words; w++) scales[w] = scaleView.getFloat32(4 * w, true)
  const valuesStart = headerBytes + 4 * words
  // The cache: a slab of rows and where each cached word's row is; emptied whole when full.
  const slab = new Int8Array(wordRowsCachedMax * dimensions)
  const slots = new Map<number, number>()
  const rowOffset = (id: number): number => {
    const slot = slots.get(id)
    if (slot !== undefined) return slot * dimensions
    if (id < 0 || id >= words) throw new RangeError(`word id ${id} out of range`)
    if (slots.size >= wordRowsCachedMax) slots.clear()
    const next = slots.size
    readSync(fd, slab, next * dimensions, dimensions, valuesStart + id * dimensions)
    slots.set(id, next)
    return next * dimensions
  }
  return {
    words,
    dimensions,
    cosine: (a, b) => {
      const offsetA = rowOffset(a)
      // Reading b's row may empty the cache and take a's slot: a is read again after it if so.
      const offsetB = rowOffset(b)
      const offsetA2 = slots.has(a) ? offsetA : rowOffset(a)
      let dot = 0
      for (let i = 0; i < dimensions; i++) dot += slab[offsetA2 + i]! * slab[offsetB + i]!
      return dot * scales[a]! * scales[b]!
    },
    addScaled: (id, weight, target) => {
      const factor = weight * scales[id]!
      const offset = rowOffset(id)
      for (let i = 0; i < dimensions; i++) target[i] = target[i]! + factor * slab[offset + i]!
    },
    close: () => closeSync(fd),
  }
}

/** Reads vectors written by `encodeWordVectors`; nothing keeps the file's buffer alive. */
export const decodeWordVectors = (bytes: Uint8Array): WordVectors => {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const { words, dimensions } = readHeader(view)
  const scales = new Float32Array(words)
  for (let w = 0; w < words; w++) scales[w] = view.getFloat32(headerBytes + 4 * w, true)
  const start = bytes.byteOffset + headerBytes + 4 * words
  return wordVectorsOf(new Int8Array(bytes.buffer.slice(start, start + words * dimensions)), scales, dimensions)
}

/**
 * The lookups over decoded arrays, in a scope of their own: a closure made beside the decoding
 * would share its context, and with it the file's buffer.
 */
const wordVectorsOf = (values: Int8Array, scales: Float32Array, dimensions: number): WordVectors => ({
  words: scales.length,
  dimensions,
  cosine: (a, b) => {
    let dot = 0
    const offsetA = a * dimensions
    const offsetB = b * dimensions
    for (let i = 0; i < dimensions; i++) dot += values[offsetA + i]! * values[offsetB + i]!
    return dot * scales[a]! * scales[b]!
  },
  addScaled: (id, weight, target) => {
    const factor = weight * scales[id]!
    const offset = id * dimensions
    for (let i = 0; i < dimensions; i++) target[i] = target[i]! + factor * values[offset + i]!
  },
})
