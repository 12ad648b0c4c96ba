/**
 * The in-memory search index of the conversations store (until the search issue indexes messages
 * from the event bus, search_messages uses this).
 *
 * Owns, per store handle: an inverted index from term to postings (document number × field mask:
 * content 1, summary 2, tags 4) and, per document, what the filters need (project, session, kind,
 * tier, importance, tags, timestamp). It is not durable: it is built from the store on first use
 * and after a restart.
 *
 * Freshness. Every change the store applies is numbered in its changelog (ConversationKeys.ts).
 * Before each search, inside the same read transaction, the index re-reads the messages named by
 * changelog entries it has not seen, so a search after an acknowledged write sees it. If it fell
 * further behind than the changelog reaches, or the generation (import) or epoch (rebuild_index)
 * changed, it rebuilds from the live messages. Sync and search are one synchronous call, so two
 * searches never interleave.
 *
 * Updates are append-only: a changed message gets a new document number and its old postings are
 * skipped as dead until a compaction renumbers everything (when dead postings outnumber live ones).
 */
import { rangeAfter, type StoreView } from "../stores/checkpoint/Checkpoint.ts"
import {
  allHistory,
  type ChangeRecord,
  changelogEntriesMax,
  changesAfter,
  parseHistoryKey,
} from "./ConversationKeys.ts"
import { currentGen } from "./Generations.ts"
import { readStats, readStored } from "./MessageState.ts"
import { type Message, memoryKinds, memoryTiers } from "./Model.ts"
import { insertRanked, partOf, type Ranked, round4 } from "./Ranking.ts"
import { distinctTermsOf, termsOf } from "./Terms.ts"

const contentField = 1
const summaryField = 2
const tagsField = 4
/** Postings hold `document << fieldBits | mask`, so documents are numbered below 2^28. */
const fieldBits = 3
const fieldMask = 7

/** What the index keeps per document besides its postings. */
export interface DocumentMeta {
  readonly id: string
  /** `project \0 id`, the key of `docByKey`. */
  readonly key: string
  readonly project: number
  readonly session: number
  readonly kind: number
  readonly tier: number
  readonly importance: number
  readonly timestamp: number
  readonly tags: ReadonlyArray<number>
  readonly terms: number
  alive: boolean
}

/** Index sizes, for health. */
export interface IndexStats {
  readonly documents: number
  readonly terms: number
  readonly postings: number
  readonly rebuilds: number
  readonly compactions: number
  /** A rough estimate of the heap the index holds. */
  readonly bytesEstimate: number
}

/** What a search looks for. */
export interface IndexQuery {
  readonly project: string
  readonly query: string
  readonly sessionId?: string
  readonly kinds?: ReadonlyArray<string>
  readonly tiers?: ReadonlyArray<string>
  readonly tags?: ReadonlyArray<string>
  readonly minImportance: number
  readonly limit: number
}

/** One ranked match. */
export interface IndexHit {
  readonly id: string
  readonly score: number
  readonly breakdown: { readonly content: number; readonly summary: number; readonly tags: number }
  readonly matchedFields: ReadonlyArray<"content" | "summary" | "tags">
}

/** Distinct query terms that count, at most (the rest are ignored). */
export const queryTermsMax = 32
/** Dead postings are dropped once they outnumber live ones and are at least this many. */
export const deadPostingsCompactMin = 100_000

/** One term's postings: a growable Int32Array (no per-element work for the garbage collector). */
class PostingList {
  data = new Int32Array(4)
  length = 0
  push(posting: number): void {
    if (this.length === this.data.length) {
      const grown = new Int32Array(this.data.length * 2)
      grown.set(this.data)
      this.data = grown
    }
    this.data[this.length++] = posting
  }
}

/** Interns strings as small numbers. */
class Interner {
  private readonly ids = new Map<string, number>()
  id(text: string): number {
    let id = this.ids.get(text)
    if (id === undefined) {
      id = this.ids.size
      this.ids.set(text, id)
    }
    return id
  }
  find(text: string): number | undefined {
    return this.ids.get(text)
  }
  get size(): number {
    return this.ids.size
  }
}

/** The search index of one conversations store. */
export class ConversationIndex {
  private gen = -1
  private epoch = -1
  private changes = 0
  private rebuilds = 0
  /** A rebuild under way (`rebuildStep`): of which generation and epoch, from which changelog position, read up to which history key. */
  private building: { gen: number; epoch: number; changes: number; readTo: string | undefined } | undefined
  private docs: Array<DocumentMeta> = []
  private docByKey = new Map<string, number>()
  private termIds = new Interner()
  private postings: Array<PostingList> = []
  private livePostings = 0
  private totalPostings = 0
  private liveDocs = 0
  private projects = new Interner()
  private sessions = new Interner()
  private tagIds = new Interner()
  // Scratch space of one search, indexed by document; every touched slot is reset afterwards.
  private verdicts = new Int8Array(0)
  private contentBits = new Uint32Array(0)
  private summaryBits = new Uint32Array(0)
  private tagsBits = new Uint32Array(0)
  private compactions = 0
  // Scratch space of `add`, indexed by term.
  private termMark: Array<number> = []
  private termFields: Array<number> = []
  private termScratch: Array<number> = []
  private adds = 0

  constructor(private readonly compactMin: number = deadPostingsCompactMin) {}

  /** Brings the index up to date with `view` (see the module comment). */
  sync(view: StoreView): void {
    // A rebuild under way, or one needed, done at once (search_messages has done it in slices first).
    while (!this.rebuildStep(view, Number.POSITIVE_INFINITY));
    const gen = currentGen(view)
    const stats = readStats(view, gen)
    if (stats.changes === this.changes) return
    for (const { value } of view.getRange(changesAfter(gen, this.changes))) {
      const change = value as ChangeRecord
      this.refresh(view, change.project, change.message_id)
    }
    this.changes = stats.changes
    this.compactIfWasteful()
  }

  /** Whether `sync` would rebuild the index rather than catch up from the changelog. */
  private outdated(gen: number, stats: { readonly epoch: number; readonly changes: number }): boolean {
    return gen !== this.gen || stats.epoch !== this.epoch || stats.changes - this.changes > changelogEntriesMax
  }

  /** Live messages indexed. */
  get documents(): number {
    return this.liveDocs
  }

  /** Makes the next `rebuildStep` start a rebuild, needed or not (rebuild_index). */
  startRebuild(): void {
    this.building = undefined
    this.gen = -1
  }

  /**
   * Rebuilds the index, when `sync` would, a slice at a time: reads the live messages of `view`
   * after the last one read, for about `sliceMs`; true once there is nothing to rebuild (`sync`
   * then catches up from the changelog). Each slice may see a later state of the store: the
   * rebuild counts as of the changelog's position when it began, so `sync` re-reads every message
   * changed since, whether a slice read it before or after the change (re-reading replaces). A new
   * generation or epoch meanwhile starts it over.
   */
  rebuildStep(view: StoreView, sliceMs: number): boolean {
    const gen = currentGen(view)
    const stats = readStats(view, gen)
    if (this.building === undefined || this.building.gen !== gen || this.building.epoch !== stats.epoch) {
      if (this.building === undefined && !this.outdated(gen, stats)) return true
      this.reset()
      this.building = { gen, epoch: stats.epoch, changes: stats.changes, readTo: undefined }
    }
    const building = this.building
    const startedAt = performance.now()
    for (const { key } of view.getRange(rangeAfter(allHistory(gen), building.readTo))) {
      const { project, id } = parseHistoryKey(gen, key)
      const stored = readStored(view, gen, project, id)
      if (stored !== undefined && stored.deleted_at === undefined) this.add(project, stored.message)
      building.readTo = key
      if (performance.now() - startedAt >= sliceMs) return false
    }
    this.gen = gen
    this.epoch = building.epoch
    this.changes = building.changes
    this.building = undefined
    this.rebuilds++
    // More changes meanwhile than the changelog keeps: once more.
    return !this.outdated(gen, stats)
  }

  /** Rebuilds the index from the live messages of `view` at once; returns how many it indexed. */
  rebuild(view: StoreView): number {
    this.startRebuild()
    while (!this.rebuildStep(view, Number.POSITIVE_INFINITY));
    return this.liveDocs
  }

  private reset(): void {
    this.docs = []
    this.docByKey = new Map()
    this.termIds = new Interner()
    this.postings = []
    this.livePostings = 0
    this.totalPostings = 0
    this.liveDocs = 0
    this.projects = new Interner()
    this.sessions = new Interner()
    this.tagIds = new Interner()
    this.termMark = []
    this.termFields = []
  }

  private refresh(view: StoreView, project: string, id: string): void {
    const key = `${project}\u0000${id}`
    const previous = this.docByKey.get(key)
    if (previous !== undefined) {
      const doc = this.docs[previous]!
      doc.alive = false
      this.liveDocs--
      this.livePostings -= doc.terms
      this.docByKey.delete(key)
    }
    const stored = readStored(view, this.gen, project, id)
    if (stored !== undefined && stored.deleted_at === undefined) this.add(project, stored.message)
  }

  private add(project: string, message: Message): void {
    const docNo = this.docs.length
    // Each distinct term of the document once, with the fields it appears in (no per-document map:
    // `termMark` remembers the last `add` that posted a term; document numbers would repeat after
    // a compaction).
    const mark = ++this.adds
    const terms = this.termScratch
    terms.length = 0
    const post = (text: string, field: number) => {
      for (const term of termsOf(text)) {
        const termId = this.termIds.id(term)
        if (this.termMark[termId] !== mark) {
          this.termMark[termId] = mark
          this.termFields[termId] = 0
          terms.push(termId)
        }
        this.termFields[termId]! |= field
      }
    }
    post(message.content, contentField)
    if (message.metadata.summary !== undefined) post(message.metadata.summary, summaryField)
    for (const tag of message.metadata.tags) post(tag, tagsField)
    const key = `${project}\u0000${message.message_id}`
    this.docs.push({
      id: message.message_id,
      key,
      project: this.projects.id(project),
      session: this.sessions.id(`${project}\u0000${message.session_id}`),
      kind: memoryKinds.indexOf(message.metadata.memory_kind),
      tier: memoryTiers.indexOf(message.metadata.memory_tier),
      importance: message.metadata.importance,
      timestamp: message.timestamp,
      tags: [...new Set(message.metadata.tags)].map((tag) => this.tagIds.id(tag)),
      terms: terms.length,
      alive: true,
    })
    this.docByKey.set(key, docNo)
    for (const termId of terms) {
      let list = this.postings[termId]
      if (list === undefined) {
        list = new PostingList()
        this.postings[termId] = list
      }
      list.push((docNo << fieldBits) | this.termFields[termId]!)
    }
    this.liveDocs++
    this.livePostings += terms.length
    this.totalPostings += terms.length
  }

  /** Renumbers live documents and drops dead postings once they outnumber live ones. */
  private compactIfWasteful(): void {
    if (this.totalPostings - this.livePostings <= Math.max(this.livePostings, this.compactMin)) return
    this.compactions++
    const renumbered = new Int32Array(this.docs.length).fill(-1)
    const docs: Array<DocumentMeta> = []
    this.docs.forEach((doc, docNo) => {
      if (!doc.alive) return
      renumbered[docNo] = docs.length
      docs.push(doc)
    })
    for (const list of this.postings) {
      let kept = 0
      for (let index = 0; index < list.length; index++) {
        const posting = list.data[index]!
        const next = renumbered[posting >>> fieldBits]!
        if (next >= 0) list.data[kept++] = (next << fieldBits) | (posting & fieldMask)
      }
      list.length = kept
    }
    this.docs = docs
    this.docByKey = new Map(docs.map((doc, docNo) => [doc.key, docNo] as const))
    this.totalPostings = this.livePostings
  }

  /** The filter of `query`, or undefined when nothing can pass it. */
  private filterOf(query: IndexQuery): ((doc: DocumentMeta) => boolean) | undefined {
    const project = this.projects.find(query.project)
    const session =
      query.sessionId === undefined ? undefined : this.sessions.find(`${query.project}\u0000${query.sessionId}`)
    const tags = query.tags?.map((tag) => this.tagIds.find(tag))
    if (project === undefined || (query.sessionId !== undefined && session === undefined)) return undefined
    if (tags?.some((tag) => tag === undefined)) return undefined
    const kinds =
      query.kinds === undefined ? undefined : new Set(query.kinds.map((kind) => memoryKinds.indexOf(kind as never)))
    const tiers =
      query.tiers === undefined ? undefined : new Set(query.tiers.map((tier) => memoryTiers.indexOf(tier as never)))
    return (doc) =>
      doc.project === project &&
      (session === undefined || doc.session === session) &&
      (kinds === undefined || kinds.has(doc.kind)) &&
      (tiers === undefined || tiers.has(doc.tier)) &&
      doc.importance >= query.minImportance &&
      (tags === undefined || tags.every((tag) => doc.tags.includes(tag!)))
  }

  private ensureScratch(): void {
    if (this.verdicts.length >= this.docs.length) return
    const size = this.docs.length * 2
    this.verdicts = new Int8Array(size)
    this.contentBits = new Uint32Array(size)
    this.summaryBits = new Uint32Array(size)
    this.tagsBits = new Uint32Array(size)
  }

  /**
   * The best `limit` matches of `query`, best first (the scoring is documented in
   * docs/tools.md, "Conversation memory"). One pass over each query term's postings counts the term's live
   * documents (its weight) and marks, per passing document, which terms each field holds.
   */
  search(query: IndexQuery): Array<IndexHit> {
    const termIds = distinctTermsOf(query.query)
      .slice(0, queryTermsMax)
      .map((term) => this.termIds.find(term))
    const accept = termIds.length === 0 ? undefined : this.filterOf(query)
    if (accept === undefined) return []
    this.ensureScratch()
    const { docs, verdicts, contentBits, summaryBits, tagsBits } = this
    const touched: Array<number> = []
    const liveCounts = termIds.map((termId, bit) => {
      if (termId === undefined) return 0
      const flag = 1 << bit
      let live = 0
      const { data, length } = this.postings[termId]!
      for (let index = 0; index < length; index++) {
        const posting = data[index]!
        const docNo = posting >>> fieldBits
        const doc = docs[docNo]!
        if (!doc.alive) continue
        live++
        let verdict = verdicts[docNo]!
        if (verdict === 0) {
          verdict = accept(doc) ? 1 : -1
          verdicts[docNo] = verdict
          touched.push(docNo)
        }
        if (verdict < 0) continue
        if (posting & contentField) contentBits[docNo]! |= flag
        if (posting & summaryField) summaryBits[docNo]! |= flag
        if (posting & tagsField) tagsBits[docNo]! |= flag
      }
      return live
    })
    // A term no message has still weighs (the most), so a partial match scores below 1.
    const weights = liveCounts.map((count) => Math.log(1 + (this.liveDocs + 1) / (count + 1)))
    const totalWeight = weights.reduce((sum, weight) => sum + weight, 0)
    const breakdownOf = (docNo: number) => ({
      content: partOf(contentBits[docNo]!, weights, totalWeight),
      summary: partOf(summaryBits[docNo]!, weights, totalWeight),
      tags: partOf(tagsBits[docNo]!, weights, totalWeight),
    })
    const best: Array<Ranked<DocumentMeta>> = []
    for (const docNo of touched) {
      if (verdicts[docNo]! < 0) continue
      const score = round4(
        partOf(contentBits[docNo]!, weights, totalWeight) +
          partOf(summaryBits[docNo]!, weights, totalWeight) +
          partOf(tagsBits[docNo]!, weights, totalWeight),
      )
      const doc = docs[docNo]!
      const last = best[query.limit - 1]
      // Most candidates lose to the current last place: decide that without allocating.
      if (last !== undefined && (score < last.score || (score === last.score && doc.importance < last.doc.importance)))
        continue
      insertRanked(best, { docNo, doc, score }, query.limit)
    }
    const hits = best.map(({ docNo, doc, score }): IndexHit => {
      const breakdown = breakdownOf(docNo)
      const matchedFields = (["content", "summary", "tags"] as const).filter((field) => breakdown[field] > 0)
      return { id: doc.id, score, breakdown, matchedFields }
    })
    for (const docNo of touched) {
      verdicts[docNo] = 0
      contentBits[docNo] = 0
      summaryBits[docNo] = 0
      tagsBits[docNo] = 0
    }
    return hits
  }

  /** Sizes, for health. */
  stats(): IndexStats {
    // Posting capacity at 4 bytes; per term ~ a list, a map entry and the term string; per document ~ 200 bytes.
    const capacity = this.postings.reduce((sum, list) => sum + list.data.length, 0)
    const bytesEstimate = capacity * 4 + this.termIds.size * 160 + this.docs.length * 200
    return {
      documents: this.liveDocs,
      terms: this.termIds.size,
      postings: this.livePostings,
      rebuilds: this.rebuilds,
      compactions: this.compactions,
      bytesEstimate,
    }
  }
}

const indexes = new WeakMap<object, ConversationIndex>()

/**
 * The index of a store handle, created on first use. It is attached to the handle (not a layer)
 * because the engine's layers and the MCP session's services are shared with other stores; it is
 * collected with the handle.
 */
export const indexOf = (store: object): ConversationIndex => {
  let index = indexes.get(store)
  if (index === undefined) {
    index = new ConversationIndex()
    indexes.set(store, index)
  }
  return index
}
