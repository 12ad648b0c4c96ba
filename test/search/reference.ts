/**
 * The reference: search by brute force over a plain list of documents and vectors, written from
 * the ranking definitions (LexicalIndex.ts, Ranking.ts), sharing only their formulas. The index
 * must answer exactly what this scan answers. Vectors are scored as the index holds them: compacted
 * to int8 codes and a peak (CompactVector.ts), against the float32 query.
 */
import { compactVector, vectorCodeMax } from "../../src/search/index/CompactVector.ts"
import {
  bm25Field,
  fieldWeights,
  fullTextFields,
  idf,
  isCommonTerm,
  queryTermsMax,
} from "../../src/search/index/LexicalIndex.ts"
import type { SearchDocument } from "../../src/search/index/SearchDocument.ts"
import { documentFieldTerms } from "../../src/search/index/SearchIndex.ts"
import { fullTextTerms } from "../../src/search/index/Tokenizer.ts"
import {
  fuse,
  fusionCandidatesMax,
  passes,
  type SearchFilter,
  type SearchHit,
  type SearchMode,
  semanticSimilarityMin,
  semanticSimilarityWindow,
} from "../../src/search/ranking/Ranking.ts"

const byId = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)

/** Search by scanning every document. */
export const bruteForceSearch = (
  documents: ReadonlyArray<SearchDocument>,
  vectors: ReadonlyMap<string, Float32Array>,
  query: {
    readonly text: string
    readonly mode: SearchMode
    readonly filter: SearchFilter
    readonly limit: number
    readonly vector?: Float32Array | undefined
    readonly now: number
  },
): Array<SearchHit> => {
  const n = documents.length
  const fields = documents.map((document) => documentFieldTerms(document))
  const df = new Map<string, number>()
  fields.forEach((perField) => {
    for (const term of new Set(perField.flat())) df.set(term, (df.get(term) ?? 0) + 1)
  })
  const averages = fullTextFields.map((_, f) => fields.reduce((sum, perField) => sum + perField[f]!.length, 0) / n)
  const terms = [...new Set(fullTextTerms(query.text))]
    .slice(0, queryTermsMax)
    .filter((term) => (df.get(term) ?? 0) > 0)
  const selective = terms.filter((term) => !isCommonTerm(df.get(term)!, n))
  const finders = new Set(selective.length > 0 ? selective : terms)
  const lexical: Array<{ document: SearchDocument; bm25: number }> = []
  if (query.mode !== "semantic" && terms.length > 0)
    documents.forEach((document, d) => {
      if (!passes(query.filter, document)) return
      if (!fields[d]!.some((terms) => terms.some((term) => finders.has(term)))) return
      let score = 0
      for (const term of terms) {
        const termIdf = idf(df.get(term)!, n)
        fullTextFields.forEach((field, f) => {
          const tf = fields[d]![f]!.filter((t) => t === term).length
          if (tf > 0) score += termIdf * fieldWeights[field] * bm25Field(tf, fields[d]![f]!.length, averages[f]!)
        })
      }
      lexical.push({ document, bm25: score })
    })
  lexical.sort((a, b) => b.bm25 - a.bm25 || byId(a.document.id, b.document.id))
  const semantic: Array<{ document: SearchDocument; similarity: number }> = []
  if (query.mode !== "lexical" && query.vector !== undefined)
    for (const document of documents) {
      const vector = vectors.get(document.id)
      if (vector === undefined || !passes(query.filter, document)) continue
      const { codes, peak } = compactVector(vector)
      let sum = 0
      for (let i = 0; i < query.vector.length; i++) sum += codes[i]! * query.vector[i]!
      const similarity = (sum * peak) / vectorCodeMax
      if (similarity >= semanticSimilarityMin) semantic.push({ document, similarity })
    }
  semantic.sort((a, b) => b.similarity - a.similarity || byId(a.document.id, b.document.id))
  const topSemantic = semantic.slice(0, fusionCandidatesMax)
  const best = topSemantic[0]?.similarity ?? 0
  return fuse(
    query.mode,
    lexical.slice(0, fusionCandidatesMax),
    topSemantic.filter((hit) => hit.similarity >= best - semanticSimilarityWindow),
    query.now,
    query.limit,
  )
}

/** Timeline by sorting every document of the anchor's project (and session). */
export const bruteForceTimeline = (documents: ReadonlyArray<SearchDocument>, id: string, window: number) => {
  const anchor = documents.find((document) => document.id === id)
  if (anchor === undefined) return undefined
  const peers = documents
    .filter(
      (document) =>
        document.project === anchor.project && (anchor.session === undefined || document.session === anchor.session),
    )
    .sort((a, b) => a.at - b.at || byId(a.id, b.id))
  const at = peers.findIndex((document) => document.id === id)
  return {
    before: peers.slice(Math.max(0, at - window), at).map((document) => document.id),
    after: peers.slice(at + 1, at + 1 + window).map((document) => document.id),
  }
}
