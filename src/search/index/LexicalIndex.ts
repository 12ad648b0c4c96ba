/**
 * Full-text search: an inverted index per field, scored by BM25F.
 *
 * Postings (term → documents) are one growable list of document numbers per (field, term id), all
 * of a field's lists in one pool (PostingLists.ts), about 4 bytes a posting (a general-purpose engine such as FlexSearch, used before,
 * cost about 1 KiB a document and most of a large index's load time). Beside them, what BM25
 * needs: each document's term frequencies per field (sorted term ids, binary-searched), document
 * frequencies and field lengths. Statistics are global over all stores, so scores from different
 * stores compare. Every document's term frequencies live in one pool (a `Uint32Array`, each
 * document a range of it): a typed array of its own per document cost about 180 bytes of object
 * headers each, 52 MiB for the 300,000 documents of 100,000 entities.
 *
 * Removing a document leaves its postings in place (stale): a posting only suggests, and is
 * confirmed by the document's own terms, so a stale posting (or a duplicate, when a number is
 * reused for a document with the same term) never changes a result. When stale postings outnumber
 * live ones (and `stalePostingsBeforeCompactMin`), every list is rebuilt from the documents' terms,
 * and the pool is rewritten without the removed documents' ranges: amortised O(1) per posting.
 *
 *   score(d, q) = Σ_{t ∈ q} Σ_f idf(t) · w_f · tf·(k1+1) / (tf + k1·(1 − b + b·|d_f|/avg_f))
 *   idf(t)      = ln(1 + (N − df + 0.5) / (df + 0.5))
 *
 * A document is a candidate when it contains a query term. A *common* term (in more than
 * max(`commonTermDocsMin`, `commonTermDocFraction`·N) documents) adds to the score of candidates
 * found by rarer terms but does not make candidates by itself, unless the query has only common
 * terms: scoring the 80,000 documents that say "error" would cost more than the query is worth.
 * The reference scan in the tests implements the same definition.
 */
import { PostingLists } from "./PostingLists.ts"
import { TopK } from "./TopK.ts"

/** The indexed fields and their BM25F weights. */
export const fullTextFields = ["title", "text"] as const
export const fieldWeights: Readonly<Record<(typeof fullTextFields)[number], number>> = { title: 2, text: 1 }
export const bm25K1 = 1.2
export const bm25B = 0.75
export const commonTermDocsMin = 500
export const commonTermDocFraction = 0.02
/** Query terms used (the rest of a very long query is ignored). */
export const queryTermsMax = 32

/** Inverse document frequency. */
export const idf = (df: number, documents: number): number => Math.log(1 + (documents - df + 0.5) / (df + 0.5))

/** One field's BM25 term weight. */
export const bm25Field = (tf: number, length: number, averageLength: number): number =>
  (tf * (bm25K1 + 1)) / (tf + bm25K1 * (1 - bm25B + (bm25B * length) / (averageLength || 1)))

/** True when a term in `df` of `documents` documents only adds to other terms' candidates. */
export const isCommonTerm = (df: number, documents: number): boolean =>
  df > Math.max(commonTermDocsMin, commonTermDocFraction * documents)

/**
 * One document's term frequencies, all fields in one range of the pool, from `start` (separate
 * arrays per field cost about 2 KB a document in object headers alone, one array per document
 * about 180 bytes):
 *
 *   [length_0, count_0, length_1, count_1, …, ids_0 (count_0, ascending), tfs_0 (count_0), ids_1, tfs_1, …]
 *
 * `length_f` is the field's length in terms (BM25's |d_f|), `count_f` its distinct terms; a
 * frequency is capped at `termFrequencyMax`.
 */
type DocumentTerms = Uint32Array
/** Where a document's range starts in the pool; `absent` when the number holds no document. */
const absent = -1

/** Frequencies above this count as this (BM25 saturates long before). */
export const termFrequencyMax = 65_535
/** Stale postings are compacted away once they outnumber live ones and this. */
export const stalePostingsBeforeCompactMin = 1 << 16

/** Documents with more terms than this get arrays of their own rather than grow `Scratch` for good. */
const scratchLengthMax = 1 << 16

/**
 * An array reused from document to document by `add`, which runs to its end without a turn between
 * and leaves the pool a copy of what it packed: arrays of their own for each document's term ids
 * and packed terms each had a backing store outside V8's heap to make and sweep (ArraySlices.ts).
 */
class Scratch {
  private array = new Uint32Array(1024)

  /** An array of at least `length` elements, its contents left over from earlier documents. */
  take(length: number): Uint32Array {
    if (length <= this.array.length) return this.array
    if (length > scratchLengthMax) return new Uint32Array(length)
    this.array = new Uint32Array(Math.min(scratchLengthMax, Math.max(length, 2 * this.array.length)))
    return this.array
  }
}

/** `add`'s term ids, every field's one after another. */
const idsScratch = new Scratch()
/** `add`'s packed terms, until they are stored in the pool. */
const packedScratch = new Scratch()

/**
 * Packs each field's term ids (in text order) into a `DocumentTerms`, sorting each field's array in
 * place: a typed array sorts with no comparator and no copy of the ids as objects (the array sort
 * was the search thread's largest allocation after tokenizing). The result is a view of
 * `packedScratch`, good until the next document is packed.
 */
const packTerms = (fields: ReadonlyArray<Uint32Array>): DocumentTerms => {
  // Loops here and in `add`: no closure made per document (docs/benchmarks.md, "Closures made for each call").
  const distinct: Array<number> = []
  let distinctSum = 0
  for (const ids of fields) {
    ids.sort()
    let count = 0
    for (let i = 0; i < ids.length; i++) if (i === 0 || ids[i] !== ids[i - 1]) count++
    distinct.push(count)
    distinctSum += count
  }
  // Every element is written below (lengths, counts, ids, then each frequency before it is read).
  const size = 2 * fields.length + 2 * distinctSum
  const packed = packedScratch.take(size).subarray(0, size)
  let at = 2 * fields.length
  for (let f = 0; f < fields.length; f++) {
    const ids = fields[f]!
    const count = distinct[f]!
    packed[2 * f] = ids.length
    packed[2 * f + 1] = count
    let last = at - 1
    for (let i = 0; i < ids.length; i++) {
      if (i > 0 && ids[i] === ids[i - 1]) packed[last + count] = Math.min(packed[last + count]! + 1, termFrequencyMax)
      else {
        last++
        packed[last] = ids[i]!
        packed[last + count] = 1
      }
    }
    at += 2 * count
  }
  return packed
}

/** Whether `id` is among the `count` ascending ids of `terms` from `start`. */
const holdsId = (terms: Uint32Array, start: number, count: number, id: number): boolean => {
  let low = start
  let high = start + count - 1
  while (low <= high) {
    const middle = (low + high) >>> 1
    const at = terms[middle]!
    if (at === id) return true
    if (at < id) low = middle + 1
    else high = middle - 1
  }
  return false
}

/** Where field `f`'s ids start in the range of `pool` that begins at `at`. */
const fieldStart = (pool: Uint32Array, at: number, f: number): number => {
  let start = at + 2 * fullTextFields.length
  for (let g = 0; g < f; g++) start += 2 * pool[at + 2 * g + 1]!
  return start
}

/** The size of the range of `pool` that begins at `at`. */
const rangeSize = (pool: Uint32Array, at: number): number => fieldStart(pool, at, fullTextFields.length) - at

/** The frequency of term `id` in field `f` of the document at `at` (0 when absent). */
const termFrequency = (terms: Uint32Array, at: number, f: number, id: number): number => {
  const start = fieldStart(terms, at, f)
  const count = terms[at + 2 * f + 1]!
  let low = start
  let high = start + count - 1
  while (low <= high) {
    const middle = (low + high) >>> 1
    const value = terms[middle]!
    if (value === id) return terms[middle + count]!
    if (value < id) low = middle + 1
    else high = middle - 1
  }
  return 0
}

/** Decides, from the stale and live posting counts, whether the postings are rebuilt now. */
export type CompactWhen = (stalePostings: number, livePostings: number) => boolean

/** Compact once stale postings outnumber live ones and `stalePostingsBeforeCompactMin`. */
export const compactWhenStaleOutnumber: CompactWhen = (stale, live) =>
  stale > Math.max(stalePostingsBeforeCompactMin, live)

/** A full-text hit: a document number and its BM25F score. */
export interface LexicalHit {
  readonly num: number
  readonly score: number
}

/** The full-text index over every store. */
export class LexicalIndex {
  /** When to compact, given stale and live postings (tests compact at every removal). */
  private readonly compactWhen: CompactWhen

  constructor(compactWhen: CompactWhen = compactWhenStaleOutnumber) {
    this.compactWhen = compactWhen
  }

  /** Per field: for each term id, its documents. */
  private readonly postings: Array<PostingLists> = fullTextFields.map(() => new PostingLists())
  private livePostings = 0
  private stalePostings = 0
  private readonly termIds = new Map<string, number>()
  private df: Int32Array = new Int32Array(1024)
  /** Per document number: its store, and where its term frequencies start in `pool` (or `absent`). */
  private readonly storeOf: Array<string | undefined> = []
  private starts: Int32Array = new Int32Array(1024).fill(absent)
  /** One past the highest document number ever indexed. */
  private numsEnd = 0
  /** Every document's term frequencies; `poolEnd` is used, of which `poolRemoved` by removed documents. */
  private pool: Uint32Array = new Uint32Array(4096)
  private poolEnd = 0
  private poolRemoved = 0
  private readonly totalLengths = fullTextFields.map(() => 0)
  private count = 0
  // Per-query scratch, indexed by document number (reused: a query allocates nothing per document).
  private stamps = new Uint32Array(1024)
  private scores = new Float64Array(1024)
  /** Per posting-list walk: documents already taken from this list (a reused number may be posted twice). */
  private walked = new Uint32Array(1024)
  private queryStamp = 0
  private walkStamp = 0

  /** Documents indexed. */
  get size(): number {
    return this.count
  }

  /**
   * Bytes the full-text index takes in its typed arrays (capacities: posting lists, the documents'
   * term frequencies, per-term and per-document counts, a query's scratch); its terms' strings
   * and the per-thread `Scratch` are not counted.
   */
  get bytes(): number {
    let bytes = this.pool.byteLength + this.starts.byteLength + this.df.byteLength
    bytes += this.stamps.byteLength + this.scores.byteLength + this.walked.byteLength
    for (const field of this.postings) bytes += field.bytes
    return bytes
  }

  /** Distinct terms seen. */
  get terms(): number {
    return this.termIds.size
  }

  private termId(term: string): number {
    let id = this.termIds.get(term)
    if (id === undefined) {
      id = this.termIds.size
      this.termIds.set(term, id)
      if (id >= this.df.length) {
        const grown = new Int32Array(this.df.length * 2)
        grown.set(this.df)
        this.df = grown
      }
    }
    return id
  }

  private post(f: number, id: number, num: number): void {
    this.postings[f]!.push(id, num)
    this.livePostings++
  }

  /** Rebuilds every posting list from the documents' terms (dropping stale postings). */
  private compact(): void {
    for (const field of this.postings) field.clear()
    this.livePostings = 0
    this.stalePostings = 0
    this.compactPool()
    const pool = this.pool
    for (let num = 0; num < this.numsEnd; num++) {
      const at = this.starts[num]!
      if (at === absent) continue
      fullTextFields.forEach((_, f) => {
        const start = fieldStart(pool, at, f)
        for (let i = start; i < start + pool[at + 2 * f + 1]!; i++) this.post(f, pool[i]!, num)
      })
    }
  }

  /** Rewrites the pool with the live documents' ranges only. */
  private compactPool(): void {
    const live = this.poolEnd - this.poolRemoved
    const pool = new Uint32Array(Math.max(4096, Math.ceil(live * 1.25)))
    let end = 0
    for (let num = 0; num < this.numsEnd; num++) {
      const at = this.starts[num]!
      if (at === absent) continue
      const size = rangeSize(this.pool, at)
      pool.set(this.pool.subarray(at, at + size), end)
      this.starts[num] = end
      end += size
    }
    this.pool = pool
    this.poolEnd = end
    this.poolRemoved = 0
  }

  /** Appends a copy of `terms` (`add`'s scratch, reused by the next document) to the pool as document `num`'s range. */
  private store(num: number, terms: DocumentTerms): number {
    if (this.poolEnd + terms.length > this.pool.length) {
      const grown = new Uint32Array(Math.max(Math.ceil(this.pool.length * 1.5), this.poolEnd + terms.length))
      grown.set(this.pool.subarray(0, this.poolEnd))
      this.pool = grown
    }
    if (num >= this.starts.length) {
      const starts = new Int32Array(Math.max(num + 1, this.starts.length * 2)).fill(absent)
      starts.set(this.starts)
      this.starts = starts
    }
    const at = this.poolEnd
    this.pool.set(terms, at)
    this.poolEnd += terms.length
    this.starts[num] = at
    this.numsEnd = Math.max(this.numsEnd, num + 1)
    return at
  }

  /** Indexes document `num` (which must not be indexed already) with its tokenized fields. */
  add(num: number, store: string, fieldTerms: ReadonlyArray<ReadonlyArray<string>>): void {
    let total = 0
    for (const field of fieldTerms) total += field.length
    const scratch = idsScratch.take(total)
    const ids: Array<Uint32Array> = []
    let from = 0
    for (const field of fieldTerms) {
      const fieldIds = scratch.subarray(from, from + field.length)
      for (let i = 0; i < field.length; i++) fieldIds[i] = this.termId(field[i]!)
      ids.push(fieldIds)
      from += field.length
    }
    const terms = packTerms(ids)
    const starts: Array<number> = []
    for (let f = 0; f < fieldTerms.length; f++) starts.push(fieldStart(terms, 0, f))
    for (let f = 0; f < fieldTerms.length; f++) {
      const field = fieldTerms[f]!
      this.totalLengths[f]! += field.length
      for (let i = starts[f]!; i < starts[f]! + terms[2 * f + 1]!; i++) {
        const id = terms[i]!
        this.post(f, id, num)
        // Counted once a document: in the first field that has it.
        let earlier = false
        for (let g = 0; g < f && !earlier; g++) earlier = holdsId(terms, starts[g]!, terms[2 * g + 1]!, id)
        if (!earlier) this.df[id]!++
      }
    }
    this.storeOf[num] = store
    this.store(num, terms)
    this.count++
  }

  /** Removes document `num`, if indexed. */
  remove(num: number): void {
    const at = num < this.numsEnd ? this.starts[num]! : absent
    if (at === absent) return
    const pool = this.pool
    const seen = new Set<number>()
    fullTextFields.forEach((_, f) => {
      const start = fieldStart(pool, at, f)
      for (let i = start; i < start + pool[at + 2 * f + 1]!; i++) seen.add(pool[i]!)
      this.totalLengths[f]! -= pool[at + 2 * f]!
      this.livePostings -= pool[at + 2 * f + 1]!
      this.stalePostings += pool[at + 2 * f + 1]!
    })
    for (const id of seen) this.df[id]!--
    this.poolRemoved += rangeSize(pool, at)
    this.starts[num] = absent
    this.storeOf[num] = undefined
    this.count--
    if (this.compactWhen(this.stalePostings, this.livePostings)) this.compact()
    // Documents without terms leave no stale postings behind, only their range.
    else if (this.compactWhen(this.poolRemoved, this.poolEnd - this.poolRemoved)) this.compactPool()
  }

  /**
   * The documents of term `id` in field `f` that really hold it now (stale postings and
   * duplicates skipped), in `stores` (all when undefined).
   */
  private postingsOf(f: number, id: number, stores: ReadonlySet<string> | undefined): Array<number> {
    const field = this.postings[f]!
    const length = field.length(id)
    const out: Array<number> = []
    if (length === 0) return out
    const list = field.items
    const start = field.start(id)
    const walked = this.walked
    if (this.walkStamp === 0xffff_ffff) {
      walked.fill(0) // the stamps wrap: start again
      this.walkStamp = 0
    }
    const stamp = ++this.walkStamp
    for (let i = start; i < start + length; i++) {
      const num = list[i]!
      if (walked[num] === stamp) continue
      walked[num] = stamp
      const at = this.starts[num]!
      if (at === absent || termFrequency(this.pool, at, f, id) === 0) continue
      if (stores !== undefined && !stores.has(this.storeOf[num]!)) continue
      out.push(num)
    }
    return out
  }

  /** Document frequency of `term` (0 when unknown). */
  documentFrequency(term: string): number {
    const id = this.termIds.get(term)
    return id === undefined ? 0 : this.df[id]!
  }

  /**
   * The best `limit` documents for `queryTerms` (already tokenized) in `stores` (all when
   * undefined) that `accept` lets through; ties go to the smaller `order(num)` key.
   */
  search(
    queryTerms: ReadonlyArray<string>,
    stores: ReadonlyArray<string> | undefined,
    accept: (num: number) => boolean,
    limit: number,
    tieBreak: (a: number, b: number) => number,
  ): Array<LexicalHit> {
    const n = this.count
    const terms = [...new Set(queryTerms)].slice(0, queryTermsMax).flatMap((term) => {
      const id = this.termIds.get(term)
      return id === undefined || this.df[id]! === 0 ? [] : [{ term, id, df: this.df[id]! }]
    })
    if (terms.length === 0 || n === 0) return []
    const selective = terms.filter((term) => !isCommonTerm(term.df, n))
    const finders = selective.length > 0 ? selective : terms
    const storeSet = stores === undefined ? undefined : new Set(stores)
    const postingsOf = (id: number) =>
      fullTextFields.map((_, field) => ({ field, nums: this.postingsOf(field, id, storeSet) }))
    const size = this.numsEnd
    if (this.stamps.length < size) {
      this.stamps = new Uint32Array(Math.max(1024, size * 2))
      this.scores = new Float64Array(this.stamps.length)
      this.walked = new Uint32Array(this.stamps.length)
      this.walkStamp = 0
    }
    const stamps = this.stamps
    const scores = this.scores
    // Candidates are marked with this query's stamp: found twice, scored once; filtered once.
    const stamp = ++this.queryStamp
    const rejected = ++this.queryStamp
    const candidates: Array<number> = []
    const finderPostings = new Map<string, Array<{ field: number; nums: Array<number> }>>()
    for (const { term, id } of finders) {
      const postings = postingsOf(id)
      finderPostings.set(term, postings)
      for (const { nums } of postings)
        for (const num of nums) {
          if (stamps[num] === stamp || stamps[num] === rejected) continue
          if (accept(num)) {
            stamps[num] = stamp
            scores[num] = 0
            candidates.push(num)
          } else stamps[num] = rejected
        }
    }
    const averages = this.totalLengths.map((total) => total / n)
    const weights = fullTextFields.map((field) => fieldWeights[field])
    const pool = this.pool
    const starts = this.starts
    /** One (document, field) contribution of a term: idf · w_f · BM25 of the field. */
    const add = (num: number, f: number, id: number, termIdf: number) => {
      const at = starts[num]!
      const tf = termFrequency(pool, at, f, id)
      if (tf > 0) scores[num]! += termIdf * weights[f]! * bm25Field(tf, pool[at + 2 * f]!, averages[f]!)
    }
    // Term by term in query order, field by field (the reference adds in the same order): walk
    // the shorter of the term's postings and the candidate list.
    for (const term of terms) {
      const termIdf = idf(term.df, n)
      const postings = finderPostings.get(term.term) ?? (term.df < candidates.length ? postingsOf(term.id) : undefined)
      if (postings === undefined) {
        for (const num of candidates) for (let f = 0; f < fullTextFields.length; f++) add(num, f, term.id, termIdf)
        continue
      }
      for (const { field, nums } of postings)
        for (const num of nums) if (stamps[num] === stamp) add(num, field, term.id, termIdf)
    }
    const best = new TopK<LexicalHit>(
      limit,
      (a, b) => a.score > b.score || (a.score === b.score && tieBreak(a.num, b.num) < 0),
    )
    for (const num of candidates) best.push({ num, score: scores[num]! })
    return best.sorted()
  }
}
