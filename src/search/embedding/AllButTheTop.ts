/**
 * "All-but-the-top" post-processing of word vectors (Mu & Viswanath, ICLR 2018): subtract the
 * mean vector, remove the projections on the top principal directions, scale to unit length.
 *
 * Raw GloVe vectors share a large common direction that frequent words load on heavily, so
 * unrelated common words look alike ("breaks" and "never" 0.63, "time" and "every" 0.87) and a
 * rare word's nearest neighbours are hubs rather than synonyms. Removing the mean and the top two
 * directions drops those to 0.21 and 0.48 while "breaks"/"stops" keeps 0.31: word-to-word
 * similarity (TermAlignment.ts) and the SIF sentence mean both rank better on the retrieval set.
 * Statistics come from the most frequent words, where the common directions are estimated best.
 */

/** Options of the post-processing. */
export interface AllButTheTopOptions {
  /** Principal directions removed (the paper suggests dimensions / 100; 2 was best here). */
  readonly components: number
  /** Mean and directions are estimated from the first this many rows (the most frequent words). */
  readonly statisticsRows: number
}

/** Chosen on the tune split of the retrieval set. */
export const defaultAllButTheTop: AllButTheTopOptions = { components: 2, statisticsRows: 50_000 }

/** Power iterations per direction: enough for the top eigenvectors of a 100 × 100 covariance. */
const powerIterations = 100

const project = (row: Float64Array, direction: Float64Array): void => {
  let dot = 0
  for (let d = 0; d < row.length; d++) dot += row[d]! * direction[d]!
  for (let d = 0; d < row.length; d++) row[d]! -= dot * direction[d]!
}

/** The top eigenvector of a symmetric `dimensions`² matrix, by power iteration from a fixed start. */
const topEigenvector = (matrix: Float64Array, dimensions: number): Float64Array => {
  let vector = new Float64Array(dimensions).fill(1 / Math.sqrt(dimensions))
  for (let iteration = 0; iteration < powerIterations; iteration++) {
    const next = new Float64Array(dimensions)
    for (let i = 0; i < dimensions; i++)
      for (let j = 0; j < dimensions; j++) next[i]! += matrix[i * dimensions + j]! * vector[j]!
    const norm = Math.hypot(...next) || 1
    for (let i = 0; i < dimensions; i++) next[i]! /= norm
    vector = next
  }
  return vector
}

/** Post-processes `vectors` (rows of `dimensions` floats, most frequent first) into new unit vectors. */
export const allButTheTop = (
  vectors: Float32Array,
  dimensions: number,
  options: AllButTheTopOptions = defaultAllButTheTop,
): Float32Array => {
  const rows = vectors.length / dimensions
  const sampled = Math.min(rows, options.statisticsRows)
  const mean = new Float64Array(dimensions)
  for (let r = 0; r < sampled; r++) for (let d = 0; d < dimensions; d++) mean[d]! += vectors[r * dimensions + d]!
  if (sampled > 0) for (let d = 0; d < dimensions; d++) mean[d]! /= sampled
  // One scratch row, refilled for each vector (no allocation per row).
  const row = new Float64Array(dimensions)
  const centered = (r: number) => {
    for (let d = 0; d < dimensions; d++) row[d] = vectors[r * dimensions + d]! - mean[d]!
    return row
  }
  // One pass for the covariance (upper triangle, mirrored), then the directions one at a time by
  // power iteration, each removed from the matrix (deflation: C − λ·u·uᵀ is the covariance of the
  // rows with u projected out, as u is an eigenvector).
  const covariance = new Float64Array(dimensions * dimensions)
  for (let r = 0; r < sampled; r++) {
    centered(r)
    for (let i = 0; i < dimensions; i++) {
      const value = row[i]!
      for (let j = i; j < dimensions; j++) covariance[i * dimensions + j]! += value * row[j]!
    }
  }
  for (let i = 0; i < dimensions; i++)
    for (let j = 0; j < i; j++) covariance[i * dimensions + j] = covariance[j * dimensions + i]!
  const directions: Array<Float64Array> = []
  for (let component = 0; component < options.components; component++) {
    const direction = topEigenvector(covariance, dimensions)
    let eigenvalue = 0
    for (let i = 0; i < dimensions; i++)
      for (let j = 0; j < dimensions; j++) eigenvalue += direction[i]! * covariance[i * dimensions + j]! * direction[j]!
    for (let i = 0; i < dimensions; i++)
      for (let j = 0; j < dimensions; j++) covariance[i * dimensions + j]! -= eigenvalue * direction[i]! * direction[j]!
    directions.push(direction)
  }
  const out = new Float32Array(vectors.length)
  for (let r = 0; r < rows; r++) {
    centered(r)
    for (const direction of directions) project(row, direction)
    let squares = 0
    for (let d = 0; d < dimensions; d++) squares += row[d]! * row[d]!
    const norm = Math.sqrt(squares) || 1
    for (let d = 0; d < dimensions; d++) out[r * dimensions + d] = row[d]! / norm
  }
  return out
}
