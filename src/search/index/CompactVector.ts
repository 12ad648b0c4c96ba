/**
 * The in-memory form of a document vector: one signed byte a dimension and one float32 per vector,
 * its peak (largest magnitude): component ≈ code × peak / 127.
 *
 * Search's LMDB stores this form too (SearchPersistence.ts; vectors written before it, as float32,
 * are read as such and compacted by the index as they load), so a load rebuilds exactly what was
 * indexed; going back to float32 would mean embedding everything again. A component is off by at
 * most half a code (peak / 254); for a unit 100-d vector a
 * similarity moves by about 10⁻³, which the retrieval benchmark's default ranking does not see
 * (docs/benchmarks.md). The query stays float32: a similarity is Σ codeᵢ·queryᵢ, times the peak,
 * over 127, in that order, here and in the reference scans of the tests (so a vector's largest
 * component comes back exactly: a one-hot vector scores exactly 1 against itself).
 */

import { arraySlices } from "./ArraySlices.ts"

/** The largest code: components are scaled into [-127, 127] (−128 is left out to stay symmetric). */
export const vectorCodeMax = 127

/** A vector in its compact form (see the module's docblock). */
export interface CompactVector {
  readonly codes: Int8Array
  /** The largest magnitude of a component, as float32 (what the slab stores, so both agree exactly). */
  readonly peak: number
}

/**
 * Codes of compact forms, cut from shared chunks (ArraySlices.ts): the index and search's file each
 * copy a document's codes and drop them. A form that is kept is copied first (`codes.slice()`).
 */
const codeSlices = arraySlices((length) => new Int8Array(length), 16 * 1024)

/**
 * The compact form of `vector`, its codes a slice of a shared chunk (`codeSlices`). A zero vector
 * has peak 0 and zero codes.
 */
export const compactVector = (vector: Float32Array): CompactVector => {
  let largest = 0
  for (let i = 0; i < vector.length; i++) largest = Math.max(largest, Math.abs(vector[i]!))
  const codes = codeSlices(vector.length)
  const peak = Math.fround(largest)
  if (!(peak > 0)) return { codes, peak: 0 }
  for (let i = 0; i < vector.length; i++) codes[i] = Math.round((vector[i]! / peak) * vectorCodeMax)
  return { codes, peak }
}

/** The float32 vector a compact one stands for (each component within peak / 254 of the original). */
export const expandVector = (codes: Int8Array, peak: number): Float32Array =>
  Float32Array.from(codes, (code) => (code * peak) / vectorCodeMax)

/** Similarity of the compact vector at `offset` of `codes` (peak `peak`) with a float32 query. */
export const compactDot = (codes: Int8Array, offset: number, peak: number, query: Float32Array): number => {
  let sum = 0
  for (let i = 0; i < query.length; i++) sum += codes[offset + i]! * query[i]!
  return (sum * peak) / vectorCodeMax
}

/** Bytes one vector of `dimensions` takes in memory: its codes and its peak. */
export const compactVectorBytes = (dimensions: number): number => dimensions + Float32Array.BYTES_PER_ELEMENT
