/**
 * The in-memory search index: every searchable document, its full-text postings and its vector.
 *
 * Owns document numbers (dense, reused after deletes) and the group → documents map of the
 * searchable-documents contract. Synchronous and single-owner: the indexer calls it under its
 * lock. Vectors arrive later than documents (they are computed in the embedder's worker), so
 * `setVector` takes the content hash the vector was computed from and ignores it when the
 * document has changed since.
 *
 * During a model switch (ModelSwitch.ts) a second set of vectors, the next model's, is filled
 * beside the one searches use (`beginNextVectors` … `switchToNextVectors`); documents replaced or
 * removed meanwhile update both, so the swap finds each set as current as the other.
 */

import {
  alignmentCandidates,
  alignmentWeights,
  fuse,
  fusionCandidatesMax,
  passes,
  realign,
  type SearchFilter,
  type SearchHit,
  type SearchMode,
  semanticSimilarityMin,
  semanticSimilarityWindow,
} from "../ranking/Ranking.ts"
import type { TermAligner } from "../ranking/TermAlignment.ts"
import type { CompactVector } from "./CompactVector.ts"
import { type CompactWhen, fullTextFields, LexicalIndex } from "./LexicalIndex.ts"
import { embeddingText, hashText, type SearchDocument } from "./SearchDocument.ts"
import { fullTextTerms } from "./Tokenizer.ts"
import { VectorIndex } from "./VectorIndex.ts"

interface Entry {
  readonly num: number
  readonly document: SearchDocument
  /** Hash of `embeddingText(document)`: the vector is valid while it is unchanged. */
  readonly hash: string
  readonly groupKey: string
}

/** A document that needs (re-)embedding. */
export interface PendingEmbedding {
  readonly id: string
  readonly hash: string
  readonly text: string
}

/** One query. */
export interface IndexQuery {
  readonly text: string
  readonly mode: SearchMode
  readonly filter: SearchFilter
  readonly limit: number
  /** The query's embedding; without it the semantic list is empty. */
  readonly vector?: Float32Array | undefined
  /** The current time, for recency. */
  readonly now: number
  /** Re-ranks the best hits by term alignment (hybrid and semantic mode); without it, fusion decides. */
  readonly aligner?: TermAligner | undefined
}

/** Counts for mem-stats and health. */
export interface IndexStats {
  readonly documents: number
  readonly vectors: number
  readonly terms: number
  readonly sessions: number
  readonly byStore: Record<string, number>
  readonly byKind: Record<string, number>
  readonly annReady: boolean
  readonly annBacklog: number
  /** Bytes the vectors searches use take in memory (the slab's capacity: CompactVector.ts). */
  readonly vectorBytes: number
}

/** One side of a timeline. */
export interface Timeline {
  readonly anchor: SearchDocument
  readonly before: ReadonlyArray<SearchDocument>
  readonly after: ReadonlyArray<SearchDocument>
}

/** The vector of a text with no known word: "embedded, nothing to find by meaning". */
export const noVector = new Float32Array(0)

const groupKeyOf = (store: string, group: string) => `${store}\u0000${group}`
const compareIds = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)
/** Timeline order: by time, then id. */
const compareInTime = (a: SearchDocument, b: SearchDocument) => a.at - b.at || compareIds(a.id, b.id)

const sameDocument = (a: SearchDocument, b: SearchDocument) => JSON.stringify(a) === JSON.stringify(b)

/** The terms of each full-text field of a document. */
export const documentFieldTerms = (document: SearchDocument): Array<Array<string>> =>
  fullTextFields.map((field) => fullTextTerms(field === "title" ? document.title : document.text))

/** Documents, postings and vectors. */
export class SearchIndex {
  private readonly byId = new Map<string, Entry>()
  private readonly byNum: Array<Entry | undefined> = []
  private readonly freeNums: Array<number> = []
  private readonly groups = new Map<string, Set<string>>()
  private readonly lexical: LexicalIndex
  private live = new VectorIndex()
  /** Documents embedded without a vector (no word the model knows): not pending, nothing to find by meaning. */
  private withoutVector = new Set<number>()
  /** The next model's vectors, while a model switch moves them in. */
  private next: { readonly vectors: VectorIndex; readonly without: Set<number> } | undefined

  /** `compactWhen`: when the full-text postings are rebuilt (LexicalIndex; tests compact often). */
  constructor(compactWhen?: CompactWhen) {
    this.lexical = new LexicalIndex(compactWhen)
  }

  get size(): number {
    return this.byId.size
  }

  /** The vectors searches use. */
  get vectors(): VectorIndex {
    return this.live
  }

  get(id: string): SearchDocument | undefined {
    return this.byId.get(id)?.document
  }

  /** The stored vector of `id`, as float32 (within half a code of what was set: CompactVector.ts). */
  vectorOf(id: string): Float32Array | undefined {
    const entry = this.byId.get(id)
    return entry === undefined ? undefined : this.live.get(entry.num)
  }

  /** Every document, in no particular order. */
  *documents(): Iterable<SearchDocument> {
    for (const entry of this.byId.values()) yield entry.document
  }

  /** The ids of a group. */
  groupIds(store: string, group: string): ReadonlyArray<string> {
    return [...(this.groups.get(groupKeyOf(store, group)) ?? [])]
  }

  /** Every group of `store`, as keys of `replaceGroup`. */
  groupsOf(store: string): Array<string> {
    const prefix = `${store}\u0000`
    return [...this.groups.keys()].filter((key) => key.startsWith(prefix)).map((key) => key.slice(prefix.length))
  }

  /** Stores that have documents. */
  stores(): Set<string> {
    const out = new Set<string>()
    for (const entry of this.byId.values()) out.add(entry.document.store)
    return out
  }

  /** Live counts per store, kind and session, kept as documents come and go (health reads them often). */
  private readonly counts = {
    store: new Map<string, number>(),
    kind: new Map<string, number>(),
    session: new Map<string, number>(),
  }

  private count(document: SearchDocument, delta: 1 | -1) {
    const bump = (map: Map<string, number>, key: string | undefined) => {
      if (key === undefined) return
      const next = (map.get(key) ?? 0) + delta
      if (next === 0) map.delete(key)
      else map.set(key, next)
    }
    bump(this.counts.store, document.store)
    bump(this.counts.kind, document.kind)
    bump(this.counts.session, document.session)
  }

  private removeEntry(entry: Entry) {
    this.count(entry.document, -1)
    this.lexical.remove(entry.num)
    this.live.remove(entry.num)
    this.withoutVector.delete(entry.num)
    this.next?.vectors.remove(entry.num)
    this.next?.without.delete(entry.num)
    this.byId.delete(entry.document.id)
    this.byNum[entry.num] = undefined
    this.freeNums.push(entry.num)
  }

  /** Removes one document. */
  remove(id: string): boolean {
    const entry = this.byId.get(id)
    if (entry === undefined) return false
    this.removeEntry(entry)
    const members = this.groups.get(entry.groupKey)
    members?.delete(id)
    if (members?.size === 0) this.groups.delete(entry.groupKey)
    return true
  }

  /**
   * Makes `documents` the whole of group `group` of `store`: adds and updates them, removes the
   * group's others. Returns the documents whose embedding is now missing or stale.
   */
  replaceGroup(
    store: string,
    group: string,
    documents: ReadonlyArray<SearchDocument>,
    /** Receives the documents actually added or changed (unchanged ones are skipped). */
    changed?: Array<SearchDocument>,
  ): Array<PendingEmbedding> {
    const key = groupKeyOf(store, group)
    const previous = this.groups.get(key) ?? new Set<string>()
    const next = new Set<string>()
    const pending: Array<PendingEmbedding> = []
    for (const document of documents) {
      if (next.has(document.id)) continue
      next.add(document.id)
      const text = embeddingText(document)
      const hash = hashText(text)
      const existing = this.byId.get(document.id)
      if (existing !== undefined && existing.groupKey === key && sameDocument(existing.document, document)) {
        if (!this.isEmbedded(existing.num)) pending.push({ id: document.id, hash, text })
        continue
      }
      // Moved in their compact form: nothing to expand and compact again.
      let vector: Float32Array | CompactVector | undefined
      let nextVector: Float32Array | CompactVector | undefined
      if (existing !== undefined) {
        if (existing.hash === hash) {
          vector = this.withoutVector.has(existing.num) ? noVector : this.live.getCompact(existing.num)
          nextVector = this.next?.without.has(existing.num) ? noVector : this.next?.vectors.getCompact(existing.num)
        }
        if (existing.groupKey !== key) this.remove(document.id)
        else this.removeEntry(existing)
      }
      changed?.push(document)
      const num = this.freeNums.pop() ?? this.byNum.length
      const entry: Entry = { num, document, hash, groupKey: key }
      this.byNum[num] = entry
      this.byId.set(document.id, entry)
      this.count(document, 1)
      this.lexical.add(num, store, documentFieldTerms(document))
      if (vector !== undefined) this.putVector(num, vector)
      else pending.push({ id: document.id, hash, text })
      if (nextVector !== undefined) this.putNextVector(num, nextVector)
    }
    for (const id of previous) if (!next.has(id)) this.remove(id)
    if (next.size > 0) this.groups.set(key, next)
    else this.groups.delete(key)
    return pending
  }

  private isEmbedded(num: number): boolean {
    return this.live.has(num) || this.withoutVector.has(num)
  }

  private putVector(num: number, vector: Float32Array | CompactVector) {
    if (vector instanceof Float32Array && vector.length === 0) {
      this.live.remove(num)
      this.withoutVector.add(num)
    } else {
      this.withoutVector.delete(num)
      this.live.set(num, vector)
    }
  }

  private putNextVector(num: number, vector: Float32Array | CompactVector) {
    if (this.next === undefined) return
    if (vector instanceof Float32Array && vector.length === 0) {
      this.next.vectors.remove(num)
      this.next.without.add(num)
    } else {
      this.next.without.delete(num)
      this.next.vectors.set(num, vector)
    }
  }

  /** Starts an empty set of the next model's vectors (dropping any other). */
  beginNextVectors(): void {
    this.next = { vectors: new VectorIndex(), without: new Set() }
  }

  /** Like `setVector`, for the next model's set; false also when there is none. */
  setNextVector(id: string, hash: string, vector: Float32Array): boolean {
    const entry = this.byId.get(id)
    if (this.next === undefined || entry === undefined || entry.hash !== hash) return false
    this.putNextVector(entry.num, vector)
    return true
  }

  /** Documents the next model's set has no vector for. */
  missingNextVectors(): Array<PendingEmbedding> {
    const next = this.next
    if (next === undefined) return []
    const out: Array<PendingEmbedding> = []
    for (const entry of this.byId.values())
      if (!next.vectors.has(entry.num) && !next.without.has(entry.num))
        out.push({ id: entry.document.id, hash: entry.hash, text: embeddingText(entry.document) })
    return out
  }

  /** Makes the next model's set the one searches use; the former one is let go. */
  switchToNextVectors(): void {
    if (this.next === undefined) throw new Error("no next vectors to switch to")
    this.live = this.next.vectors
    this.withoutVector = this.next.without
    this.next = undefined
  }

  /** Lets the next model's set go (a switch given up). */
  dropNextVectors(): void {
    this.next = undefined
  }

  /** Every document id, in no particular order. */
  ids(): Array<string> {
    return [...this.byId.keys()]
  }

  /** What `id` is embedded from now, or undefined when it is gone. */
  embeddingOf(id: string): PendingEmbedding | undefined {
    const entry = this.byId.get(id)
    return entry === undefined ? undefined : { id, hash: entry.hash, text: embeddingText(entry.document) }
  }

  /**
   * Sets `id`'s vector if its content still hashes to `hash`; false when stale or gone. An empty
   * vector records that the text has none (no word the model knows).
   */
  setVector(id: string, hash: string, vector: Float32Array): boolean {
    const entry = this.byId.get(id)
    if (entry === undefined || entry.hash !== hash) return false
    this.putVector(entry.num, vector)
    return true
  }

  /** Documents whose embedding is pending (not yet computed for their current content). */
  missingVectors(): Array<PendingEmbedding> {
    const out: Array<PendingEmbedding> = []
    for (const entry of this.byId.values())
      if (!this.isEmbedded(entry.num))
        out.push({ id: entry.document.id, hash: entry.hash, text: embeddingText(entry.document) })
    return out
  }

  private readonly tieBreak = (a: number, b: number) =>
    compareIds(this.byNum[a]!.document.id, this.byNum[b]!.document.id)

  /** Ranked hits for `query`. */
  search(query: IndexQuery): Array<SearchHit> {
    const filter = query.filter
    const accept = (num: number) => passes(filter, this.byNum[num]!.document)
    const lexical =
      query.mode === "semantic"
        ? []
        : this.lexical
            .search(fullTextTerms(query.text), filter.stores, accept, fusionCandidatesMax, this.tieBreak)
            .map((hit) => ({ document: this.byNum[hit.num]!.document, bm25: hit.score }))
    const semantic =
      query.mode === "lexical" || query.vector === undefined
        ? []
        : this.live
            .search(query.vector, accept, fusionCandidatesMax, semanticSimilarityMin, this.tieBreak)
            .filter((hit, _, hits) => hit.similarity >= hits[0]!.similarity - semanticSimilarityWindow)
            .map((hit) => ({ document: this.byNum[hit.num]!.document, similarity: hit.similarity }))
    const aligner = alignmentWeights[query.mode] > 0 ? query.aligner : undefined
    if (aligner === undefined) return fuse(query.mode, lexical, semantic, query.now, query.limit)
    const fused = fuse(query.mode, lexical, semantic, query.now, Math.max(query.limit, alignmentCandidates))
    const alignments = aligner.align(
      query.text,
      fused.map((hit) => embeddingText(hit.document)),
      alignmentCandidates,
    )
    return realign(query.mode, fused, alignments).slice(0, query.limit)
  }

  /**
   * What came before and after `id` in time: up to `window` documents each side, from the same
   * project (and the same session, when the document has one).
   */
  timeline(id: string, window: number): Timeline | undefined {
    const anchor = this.get(id)
    if (anchor === undefined) return undefined
    const before: Array<SearchDocument> = [] // nearest last
    const after: Array<SearchDocument> = [] // nearest first
    for (const { document } of this.byId.values()) {
      if (document.id === id || document.project !== anchor.project) continue
      if (anchor.session !== undefined && document.session !== anchor.session) continue
      if (compareInTime(document, anchor) < 0) {
        if (before.length === window && compareInTime(document, before[0]!) <= 0) continue
        let at = before.length
        while (at > 0 && compareInTime(before[at - 1]!, document) > 0) at--
        before.splice(at, 0, document)
        if (before.length > window) before.shift()
      } else {
        if (after.length === window && compareInTime(document, after[after.length - 1]!) >= 0) continue
        let at = after.length
        while (at > 0 && compareInTime(after[at - 1]!, document) > 0) at--
        after.splice(at, 0, document)
        if (after.length > window) after.pop()
      }
    }
    return { anchor, before, after }
  }

  /** Counts. */
  stats(): IndexStats {
    return {
      documents: this.byId.size,
      vectors: this.live.size,
      terms: this.lexical.terms,
      sessions: this.counts.session.size,
      byStore: Object.fromEntries(this.counts.store),
      byKind: Object.fromEntries(this.counts.kind),
      annReady: this.live.annReady,
      annBacklog: this.live.annBacklogSize,
      vectorBytes: this.live.bytes,
    }
  }
}
