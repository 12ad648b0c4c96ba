/**
 * Ranking of search candidates: the order (score, then importance, then newer, then larger id),
 * a bounded sorted list of the best, and the score of a field from the query terms it holds.
 */
/** Rounds a score to 4 decimals (scores are shown and compared rounded, so ties are real). */
export const round4 = (value: number): number => Math.round(value * 10_000) / 10_000

/** What ranking reads of a document. */
export interface RankedDocument {
  readonly id: string
  readonly importance: number
  readonly timestamp: number
}

/** A candidate while ranking: its document and its (rounded) score. */
export interface Ranked<Doc extends RankedDocument = RankedDocument> {
  readonly docNo: number
  readonly doc: Doc
  readonly score: number
}

/** Ranks a before b: score, then importance, then newer, then larger id. */
export const ranksBefore = (a: Ranked, b: Ranked): boolean =>
  a.score !== b.score
    ? a.score > b.score
    : a.doc.importance !== b.doc.importance
      ? a.doc.importance > b.doc.importance
      : a.doc.timestamp !== b.doc.timestamp
        ? a.doc.timestamp > b.doc.timestamp
        : a.doc.id > b.doc.id

/** Keeps `best` sorted and at most `limit` long. */
export const insertRanked = <Doc extends RankedDocument>(
  best: Array<Ranked<Doc>>,
  candidate: Ranked<Doc>,
  limit: number,
): void => {
  if (best.length === limit && !ranksBefore(candidate, best[best.length - 1]!)) return
  let low = 0
  let high = best.length
  while (low < high) {
    const middle = (low + high) >>> 1
    if (ranksBefore(best[middle]!, candidate)) low = middle + 1
    else high = middle
  }
  best.splice(low, 0, candidate)
  if (best.length > limit) best.pop()
}

/** The weight of the bits set in `bits` (bit i: query term i), over the total, rounded. */
export const partOf = (bits: number, weights: ReadonlyArray<number>, totalWeight: number): number => {
  let sum = 0
  for (let bit = 0; bits !== 0; bit++, bits >>>= 1) if (bits & 1) sum += weights[bit]!
  return round4(sum / totalWeight)
}
