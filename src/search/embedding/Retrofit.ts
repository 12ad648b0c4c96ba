/**
 * Retrofitting (Faruqui et al. 2015, "Retrofitting Word Vectors to Semantic Lexicons"): moves each
 * word vector towards the vectors of its lexicon neighbours while keeping it close to where it
 * was, so that synonyms ("expire", "lapse"), a word and its hypernym ("token", "credential") and a
 * word and its inflections end up nearer than co-occurrence alone put them.
 *
 * Each iteration sets, for every word i with neighbours j,
 *
 *   q_i ← (α · q̂_i + Σ_j β_ij · q_j) / (α + Σ_j β_ij),   β_ij = w(relation_ij) / deg(i)
 *
 * where q̂_i is the original vector. Words are updated in place, in vocabulary order, as in the
 * paper's reference code. Deterministic: the same vectors and graph give the same result.
 */
import { relationOrder, type WordEdge, type WordRelation } from "./WordNet.ts"

/** How strongly each relation pulls (the paper uses 1 for every edge). */
export type RelationWeights = Readonly<Record<WordRelation, number>>

/** Options of one retrofitting run. */
export interface RetrofitOptions {
  readonly iterations: number
  /** Weight of a word's original vector. */
  readonly alpha: number
  readonly relationWeights: RelationWeights
  /** Neighbours kept per word: closest relations first, then the more frequent words. */
  readonly neighboursMax: number
}

/** Chosen on the tune split of the retrieval set (bench/retrieval.ts). */
export const defaultRetrofitOptions: RetrofitOptions = {
  iterations: 10,
  alpha: 1,
  relationWeights: { synonym: 1, inflection: 1, derivation: 1, similar: 1, hypernym: 1, hyponym: 1 },
  neighboursMax: 32,
}

/**
 * Retrofits `vectors` (row `id` of `dimensions` floats per word of `ids`) to `graph`; returns new
 * vectors, the input is left as it was.
 */
export const retrofit = (
  vectors: Float32Array,
  dimensions: number,
  ids: ReadonlyMap<string, number>,
  graph: ReadonlyMap<string, ReadonlyArray<WordEdge>>,
  options: RetrofitOptions = defaultRetrofitOptions,
): Float32Array => {
  const out = Float32Array.from(vectors)
  const rows: Array<{ readonly id: number; readonly neighbours: Int32Array; readonly weights: Float32Array }> = []
  for (const [word, edges] of graph) {
    const id = ids.get(word)
    if (id === undefined) continue
    const kept = edges
      .flatMap((edge) => {
        const other = ids.get(edge.word)
        const weight = options.relationWeights[edge.relation]
        return other === undefined || weight <= 0 ? [] : [{ other, weight, order: relationOrder[edge.relation] }]
      })
      .sort((a, b) => a.order - b.order || a.other - b.other)
      .slice(0, options.neighboursMax)
    if (kept.length === 0) continue
    rows.push({
      id,
      neighbours: Int32Array.from(kept, (edge) => edge.other),
      weights: Float32Array.from(kept, (edge) => edge.weight / kept.length),
    })
  }
  rows.sort((a, b) => a.id - b.id)
  const sum = new Float64Array(dimensions)
  for (let iteration = 0; iteration < options.iterations; iteration++) {
    for (const { id, neighbours, weights } of rows) {
      let total = options.alpha
      for (let d = 0; d < dimensions; d++) sum[d] = options.alpha * vectors[id * dimensions + d]!
      for (let n = 0; n < neighbours.length; n++) {
        const weight = weights[n]!
        const offset = neighbours[n]! * dimensions
        total += weight
        for (let d = 0; d < dimensions; d++) sum[d]! += weight * out[offset + d]!
      }
      for (let d = 0; d < dimensions; d++) out[id * dimensions + d] = sum[d]! / total
    }
  }
  return out
}
