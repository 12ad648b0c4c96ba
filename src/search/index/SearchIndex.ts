/**
 * The in-memory search index: every searchable document's full-text postings, its vector, and the
 * columns ranking and filters read (DocumentTable.ts); the documents themselves are kept whole in
 * a document store (DocumentStore.ts: search's LMDB) and read from it for the hits a search
 * returns, the candidates term alignment re-ranks, a timeline and re-embedding. The index writes
 * the documents it adds, changes and removes to that store, so the two agree whenever the index
 * is not in the middle of a call (`loadGroup` adds documents read from the store, writing nothing).
 *
 * Owns document numbers (dense, reused after deletes) and the group → documents lists of the
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
  type Rankable,
  realign,
  type SearchFilter,
  type SearchHit,
  type SearchMode,
  semanticSimilarityMin,
  semanticSimilarityWindow,
} from "../ranking/Ranking.ts"
import type { TermAligner } from "../ranking/TermAlignment.ts"
import { type CompactVector, compactVector } from "./CompactVector.ts"
import { type DocumentStore, groupKey, keyInGroup, makeMemoryDocumentStore } from "./DocumentStore.ts"
import { DocumentTable } from "./DocumentTable.ts"
import { type CompactWhen, fullTextFields, LexicalIndex } from "./LexicalIndex.ts"
import { embeddingText, hashText, type SearchDocument } from "./SearchDocument.ts"
import { fullTextTerms } from "./Tokenizer.ts"
import { VectorIndex } from "./VectorIndex.ts"

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
  /** Bytes the full-text index takes in memory (its typed arrays' capacities: LexicalIndex.ts `bytes`). */
  readonly termBytes: number
}

/** One side of a timeline. */
export interface Timeline {
  readonly anchor: SearchDocument
  readonly before: ReadonlyArray<SearchDocument>
  readonly after: ReadonlyArray<SearchDocument>
}

/** The vector of a text with no known word: "embedded, nothing to find by meaning". */
export const noVector = new Float32Array(0)

/**
 * An embedding as the index and search's persistence keep it: compact (CompactVector.ts), made
 * once for both, or `noVector` when the model gave none.
 */
export const keptVector = (vector: Float32Array | undefined): Float32Array | CompactVector =>
  vector === undefined || vector.length === 0 ? noVector : compactVector(vector)

/** The group of a key of `groupKey` (a group may hold the separator, a store's name does not). */
const groupOfKey = (key: string) => key.slice(key.indexOf("\u0000") + 1)
const compareIds = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)

/** The terms of each full-text field of a document. */
export const documentFieldTerms = (document: SearchDocument): Array<Array<string>> => {
  const terms: Array<Array<string>> = []
  for (const field of fullTextFields) terms.push(fullTextTerms(field === "title" ? document.title : document.text))
  return terms
}

/** What ranking reads of a candidate, from the columns (the document is read once it is shown). */
interface Candidate extends Rankable {
  readonly num: number
}

/** Documents' postings, vectors and columns; the documents themselves in a `DocumentStore`. */
export class SearchIndex {
  private readonly table = new DocumentTable()
  private readonly lexical: LexicalIndex
  private readonly store: DocumentStore
  private live = new VectorIndex()
  /** Documents embedded without a vector (no word the model knows): not pending, nothing to find by meaning. */
  private withoutVector = new Set<number>()
  /** The next model's vectors, while a model switch moves them in. */
  private next: { readonly vectors: VectorIndex; readonly without: Set<number> } | undefined

  /**
   * `compactWhen`: when the full-text postings are rebuilt (LexicalIndex; tests compact often).
   * `documents`: where documents are kept whole (search's persistence; in memory when absent).
   */
  constructor(compactWhen?: CompactWhen, documents: DocumentStore = makeMemoryDocumentStore()) {
    this.lexical = new LexicalIndex(compactWhen)
    this.store = documents
  }

  get size(): number {
    return this.table.size
  }

  /** The vectors searches use. */
  get vectors(): VectorIndex {
    return this.live
  }

  /** Document `num` as the store keeps it. */
  private read(num: number): SearchDocument {
    const table = this.table
    const id = table.id(num)!
    const document = this.store.document(table.storeOf(num), groupOfKey(table.groupKey(table.groupOf(num))), id)
    // The index writes every document it holds to the store before it holds it (and reads it
    // only under the same lock): a document missing there is a bug, not a race.
    if (document === undefined) throw new Error(`search: document ${id} is indexed but not in the document store`)
    return document
  }

  get(id: string): SearchDocument | undefined {
    const num = this.table.num(id)
    return num === undefined ? undefined : this.read(num)
  }

  /** The stored vector of `id`, as float32 (within half a code of what was set: CompactVector.ts). */
  vectorOf(id: string): Float32Array | undefined {
    const num = this.table.num(id)
    return num === undefined ? undefined : this.live.get(num)
  }

  /** Every document, in no particular order (each read from the store). */
  *documents(): Iterable<SearchDocument> {
    for (const id of [...this.table.allIds()]) {
      const num = this.table.num(id)
      if (num !== undefined) yield this.read(num)
    }
  }

  /** The ids of a group. */
  groupIds(store: string, group: string): ReadonlyArray<string> {
    const num = this.table.groupNum(groupKey(store, group))
    return num === undefined ? [] : this.table.members(num).map((member) => this.table.id(member)!)
  }

  /** Every group of `store`, as keys of `replaceGroup`. */
  groupsOf(store: string): Array<string> {
    const prefix = `${store}\u0000`
    return [...this.table.allGroupKeys()].filter((key) => key.startsWith(prefix)).map((key) => key.slice(prefix.length))
  }

  /** Stores that have documents. */
  stores(): Set<string> {
    return new Set(Object.keys(this.table.stores.counts()))
  }

  /** Drops document `num` from the postings, vectors and columns (not from the store). */
  private removeNum(num: number) {
    this.lexical.remove(num)
    this.live.remove(num)
    this.withoutVector.delete(num)
    this.next?.vectors.remove(num)
    this.next?.without.delete(num)
    this.table.remove(num)
  }

  /** Removes one document, from the index and the store. */
  remove(id: string): boolean {
    const num = this.table.num(id)
    if (num === undefined) return false
    const store = this.table.storeOf(num)
    const group = groupOfKey(this.table.groupKey(this.table.groupOf(num)))
    this.removeNum(num)
    this.store.removeDocument(store, group, id)
    return true
  }

  /** Indexes `document` (not held) in group `key`; its vector, when known, moved in compact form. */
  private addNum(
    store: string,
    key: string,
    document: SearchDocument,
    hash: string,
    vector: Float32Array | CompactVector | undefined,
    nextVector: Float32Array | CompactVector | undefined,
  ): number {
    const num = this.table.add(document, key, hash)
    this.lexical.add(num, store, documentFieldTerms(document))
    if (vector !== undefined) this.putVector(num, vector)
    if (nextVector !== undefined) this.putNextVector(num, nextVector)
    return num
  }

  /**
   * Makes `documents` the whole of group `group` of `store`: adds and updates them (in the store
   * too), removes the group's others. Returns the documents whose embedding is now missing or stale.
   */
  replaceGroup(store: string, group: string, documents: ReadonlyArray<SearchDocument>): Array<PendingEmbedding> {
    const key = groupKey(store, group)
    const groupNum = this.table.groupNum(key)
    const previous: Array<string> = []
    if (groupNum !== undefined) for (const num of this.table.members(groupNum)) previous.push(this.table.id(num)!)
    const next = new Set<string>()
    const pending: Array<PendingEmbedding> = []
    for (const document of documents) {
      if (next.has(document.id)) continue
      next.add(document.id)
      const text = embeddingText(document)
      const hash = hashText(text)
      const existing = this.table.num(document.id)
      const sameGroup = existing !== undefined && this.table.groupKey(this.table.groupOf(existing)) === key
      if (existing !== undefined && sameGroup && this.store.holds(group, document)) {
        if (!this.isEmbedded(existing)) pending.push({ id: document.id, hash, text })
        continue
      }
      // Moved in their compact form: nothing to expand and compact again.
      let vector: Float32Array | CompactVector | undefined
      let nextVector: Float32Array | CompactVector | undefined
      if (existing !== undefined) {
        if (this.table.hashOf(existing) === hash) {
          vector = this.withoutVector.has(existing) ? noVector : this.live.getCompact(existing)
          nextVector = this.next?.without.has(existing) ? noVector : this.next?.vectors.getCompact(existing)
        }
        if (!sameGroup) this.remove(document.id)
        else this.removeNum(existing)
      }
      this.store.putDocument(group, document)
      this.addNum(store, key, document, hash, vector, nextVector)
      // A document from another group keeps its vectors in memory, but their persisted copies were
      // keyed by where it was (and went with it): embedded again, they are stored where it is now.
      if (vector === undefined || (existing !== undefined && !sameGroup)) pending.push({ id: document.id, hash, text })
    }
    for (const id of previous) if (!next.has(id)) this.remove(id)
    return pending
  }

  /**
   * Adds group `group` of `store` as read from the document store (a load): nothing is written
   * back. Documents the index holds already are replaced, as `replaceGroup` would.
   */
  loadGroup(store: string, group: string, documents: ReadonlyArray<SearchDocument>): void {
    const key = groupKey(store, group)
    const seen = new Set<string>()
    for (const document of documents) {
      if (seen.has(document.id)) continue
      seen.add(document.id)
      const existing = this.table.num(document.id)
      if (existing !== undefined) this.removeNum(existing)
      this.addNum(store, key, document, hashText(embeddingText(document)), undefined, undefined)
    }
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

  /** The number of `id` if its embedding text still hashes to `hash`. */
  private current(id: string, hash: string): number | undefined {
    const num = this.table.num(id)
    return num !== undefined && this.table.hashOf(num) === hash ? num : undefined
  }

  /** Like `setVector`, for the next model's set; false also when there is none. */
  setNextVector(id: string, hash: string, vector: Float32Array | CompactVector): boolean {
    const num = this.current(id, hash)
    if (this.next === undefined || num === undefined) return false
    this.putNextVector(num, vector)
    return true
  }

  /** What document `num` is embedded from (its text read from the store). */
  private pendingOf(num: number): PendingEmbedding {
    return { id: this.table.id(num)!, hash: this.table.hashOf(num), text: embeddingText(this.read(num)) }
  }

  /** Documents the next model's set has no vector for. */
  missingNextVectors(): Array<PendingEmbedding> {
    const next = this.next
    if (next === undefined) return []
    const out: Array<PendingEmbedding> = []
    for (let num = 0; num < this.table.numsEnd; num++)
      if (this.table.id(num) !== undefined && !next.vectors.has(num) && !next.without.has(num))
        out.push(this.pendingOf(num))
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
    return [...this.table.allIds()]
  }

  /**
   * Where `id` is kept in the document store (`documentKey`): search's persistence keeps its vectors
   * under the same key, so a transaction's vectors land on the leaves its documents do.
   */
  keyOf(id: string): string | undefined {
    const num = this.table.num(id)
    return num === undefined ? undefined : keyInGroup(this.table.groupKey(this.table.groupOf(num)), id)
  }

  /** What `id` is embedded from now, or undefined when it is gone. */
  embeddingOf(id: string): PendingEmbedding | undefined {
    const num = this.table.num(id)
    return num === undefined ? undefined : this.pendingOf(num)
  }

  /**
   * Sets `id`'s vector if its content still hashes to `hash`; false when stale or gone. An empty
   * vector records that the text has none (no word the model knows).
   */
  setVector(id: string, hash: string, vector: Float32Array | CompactVector): boolean {
    const num = this.current(id, hash)
    if (num === undefined) return false
    this.putVector(num, vector)
    return true
  }

  /** Documents whose embedding is pending (not yet computed for their current content). */
  missingVectors(): Array<PendingEmbedding> {
    const out: Array<PendingEmbedding> = []
    for (let num = 0; num < this.table.numsEnd; num++)
      if (this.table.id(num) !== undefined && !this.isEmbedded(num)) out.push(this.pendingOf(num))
    return out
  }

  private readonly tieBreak = (a: number, b: number) => compareIds(this.table.id(a)!, this.table.id(b)!)

  private candidate(num: number): Candidate {
    return { num, id: this.table.id(num)!, at: this.table.atOf(num), importance: this.table.importanceOf(num) }
  }

  /** `hits` with their documents read from the store. */
  private withDocuments(hits: ReadonlyArray<SearchHit<Candidate>>): Array<SearchHit> {
    return hits.map((hit) => ({ ...hit, document: this.read(hit.document.num) }))
  }

  /** Ranked hits for `query`. */
  search(query: IndexQuery): Array<SearchHit> {
    const filter = this.table.compile(query.filter)
    const accept = (num: number) => this.table.passes(filter, num)
    const lexical =
      query.mode === "semantic"
        ? []
        : this.lexical
            .search(fullTextTerms(query.text), query.filter.stores, accept, fusionCandidatesMax, this.tieBreak)
            .map((hit) => ({ document: this.candidate(hit.num), bm25: hit.score }))
    const semantic =
      query.mode === "lexical" || query.vector === undefined
        ? []
        : this.live
            .search(query.vector, accept, fusionCandidatesMax, semanticSimilarityMin, this.tieBreak)
            .filter((hit, _, hits) => hit.similarity >= hits[0]!.similarity - semanticSimilarityWindow)
            .map((hit) => ({ document: this.candidate(hit.num), similarity: hit.similarity }))
    const aligner = alignmentWeights[query.mode] > 0 ? query.aligner : undefined
    if (aligner === undefined) return this.withDocuments(fuse(query.mode, lexical, semantic, query.now, query.limit))
    const fused = this.withDocuments(
      fuse(query.mode, lexical, semantic, query.now, Math.max(query.limit, alignmentCandidates)),
    )
    const alignments = aligner.align(
      query.text,
      fused.map((hit) => embeddingText(hit.document)),
      alignmentCandidates,
    )
    return realign(query.mode, fused, alignments).slice(0, query.limit)
  }

  /** Timeline order: by time, then id. */
  private readonly compareInTime = (a: number, b: number) =>
    this.table.atOf(a) - this.table.atOf(b) || compareIds(this.table.id(a)!, this.table.id(b)!)

  /**
   * What came before and after `id` in time: up to `window` documents each side, from the same
   * project (and the same session, when the document has one).
   */
  timeline(id: string, window: number): Timeline | undefined {
    const table = this.table
    const anchor = table.num(id)
    if (anchor === undefined) return undefined
    const project = table.projectCode(anchor)
    const session = table.sessionCode(anchor)
    const before: Array<number> = [] // nearest last
    const after: Array<number> = [] // nearest first
    for (let num = 0; num < table.numsEnd; num++) {
      if (num === anchor || table.id(num) === undefined || table.projectCode(num) !== project) continue
      if (session !== 0 && table.sessionCode(num) !== session) continue
      if (this.compareInTime(num, anchor) < 0) {
        if (before.length === window && this.compareInTime(num, before[0]!) <= 0) continue
        let at = before.length
        while (at > 0 && this.compareInTime(before[at - 1]!, num) > 0) at--
        before.splice(at, 0, num)
        if (before.length > window) before.shift()
      } else {
        if (after.length === window && this.compareInTime(num, after[after.length - 1]!) >= 0) continue
        let at = after.length
        while (at > 0 && this.compareInTime(after[at - 1]!, num) > 0) at--
        after.splice(at, 0, num)
        if (after.length > window) after.pop()
      }
    }
    const read = (num: number) => this.read(num)
    return { anchor: this.read(anchor), before: before.map(read), after: after.map(read) }
  }

  /** Counts. */
  stats(): IndexStats {
    return {
      documents: this.table.size,
      vectors: this.live.size,
      terms: this.lexical.terms,
      sessions: this.table.sessions.size,
      byStore: this.table.stores.counts(),
      byKind: this.table.kinds.counts(),
      annReady: this.live.annReady,
      annBacklog: this.live.annBacklogSize,
      vectorBytes: this.live.bytes,
      termBytes: this.lexical.bytes,
    }
  }
}
