/**
 * The static model's word vectors (`word-vectors.bin`): what its sentence embeddings are made of
 * (StaticModel.ts) and what query-time term alignment compares words with (TermAlignment.ts), one
 * copy for both. Unit vectors quantised to int8 with one scale per word: 10 MB instead of 40 in
 * float32, and a cosine moves by less than 0.01.
 *
 * File layout, little-endian: "MNWV", u32 version, u32 words, u32 dimensions, Float32
 * scales[words], Int8 values[words × dimensions]. value × scale is the component.
 */

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

/** Reads vectors written by `encodeWordVectors`; nothing keeps the file's buffer alive. */
export const decodeWordVectors = (bytes: Uint8Array): WordVectors => {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const header = [0, 1, 2, 3].map((i) => view.getUint32(4 * i, true))
  const [fileMagic, version, words, dimensions] = header as [number, number, number, number]
  if (fileMagic !== magic || version !== formatVersion)
    throw new Error("word-vectors.bin: not mnemos word vectors of this version")
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
