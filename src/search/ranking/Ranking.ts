/**
 * Hybrid ranking: reciprocal rank fusion of the full-text and the vector list, then recency and
 * importance, then (in hybrid and semantic mode, when the model offers it) a re-ranking of the
 * best `alignmentCandidates` by soft term alignment (TermAlignment.ts). Every hit carries its
 * score breakdown, whose parts sum to its score:
 *
 *   fulltext   = (1 − λ) · w_ft  · (k + 1) / (k + rank in the full-text list)     (0 when not in it)
 *   semantic   = (1 − λ) · w_sem · (k + 1) / (k + rank in the vector list)        (0 when not in it)
 *   recency    = (1 − λ) · w_rec · 2^(−age / half-life)
 *   importance = (1 − λ) · w_imp · importance (0..1, default 0.5)
 *   alignment  = λ · alignment of the query with the record (0..1)
 *
 * λ is the mode's alignment weight, 0 when no alignment was computed. Only documents found by
 * full text or by meaning are ranked; recency, importance and alignment reorder them, they never
 * bring in a document by themselves. The normalisation (k + 1) makes a first place worth exactly
 * its weight, so a score is at most 1.
 */
import type { SearchDocument } from "../index/SearchDocument.ts"
import { defaultImportance } from "../index/SearchDocument.ts"
import type { Alignment } from "./TermAlignment.ts"

/** How a query is answered. */
export type SearchMode = "lexical" | "semantic" | "hybrid"
export const searchModes: ReadonlyArray<SearchMode> = ["lexical", "semantic", "hybrid"]

/** The RRF constant: larger flattens the difference between ranks. */
export const rrfK = 5
/** How many hits each list contributes to fusion. */
export const fusionCandidatesMax = 100
/** A vector hit below this cosine is never a match. */
export const semanticSimilarityMin = 0.2
/**
 * Only vector hits within this cosine of the query's best hit enter fusion: the static model
 * ranks the few close texts well and the long tail poorly, and a tail hit would otherwise
 * collect a rank bonus from fusion. 0.3 since the vectors are post-processed (all-but-the-top
 * spreads cosines wider than raw GloVe, where 0.1 was chosen) and alignment re-judges the tail:
 * on the tune split of the retrieval set 0.15–0.5 differ by two or three queries.
 */
export const semanticSimilarityWindow = 0.3
/** Recency half-life: a 30-day-old record gets half the recency bonus of a new one. */
export const recencyHalfLifeMs = 30 * 24 * 60 * 60 * 1000

/** Weights per mode; each row sums to 1. */
export const modeWeights: Readonly<
  Record<SearchMode, { fulltext: number; semantic: number; recency: number; importance: number }>
> = {
  lexical: { fulltext: 0.9, semantic: 0, recency: 0.05, importance: 0.05 },
  semantic: { fulltext: 0, semantic: 0.9, recency: 0.05, importance: 0.05 },
  hybrid: { fulltext: 0.45, semantic: 0.45, recency: 0.05, importance: 0.05 },
}

/**
 * Weight λ of term alignment per mode. Lexical mode stays purely lexical. Chosen on the tune split
 * of the retrieval set: the fused ranks bring the topic, alignment picks the fact.
 */
export const alignmentWeights: Readonly<Record<SearchMode, number>> = { lexical: 0, semantic: 0.85, hybrid: 0.85 }
/**
 * The fused hits re-ranked by alignment, and whose query word weights alignment learns: enough to
 * hold the records of one topic and some others (hits below them are aligned and ranked too when
 * a caller asks for more).
 */
export const alignmentCandidates = 20

/** Why a hit scored what it did. */
export interface ScoreBreakdown {
  readonly fulltext: number
  readonly semantic: number
  readonly recency: number
  readonly importance: number
  /** λ · alignment; 0 when the hit was not aligned (lexical mode, or no aligner). */
  readonly alignment: number
}

/** What fusion reads of a document: its id (ties), time (recency) and importance. */
export interface Rankable {
  readonly id: string
  readonly at: number
  readonly importance?: number | undefined
}

/** A ranked document (the index ranks its columns, `Rankable`, then reads the documents shown). */
export interface SearchHit<D extends Rankable = SearchDocument> {
  readonly document: D
  readonly score: number
  readonly score_breakdown: ScoreBreakdown
  /** 1-based places in the full-text and vector lists, when present. */
  readonly ranks: { readonly fulltext?: number; readonly semantic?: number }
  readonly bm25?: number
  readonly similarity?: number
  /** How the record aligned with the query, when it was re-ranked by alignment. */
  readonly alignment?: Alignment
}

/** Which documents a query may return. */
export interface SearchFilter {
  readonly projects?: ReadonlyArray<string> | undefined
  readonly stores?: ReadonlyArray<string> | undefined
  readonly kinds?: ReadonlyArray<string> | undefined
  readonly session?: string | undefined
  /** Inclusive bounds on `at`, ms since the epoch. */
  readonly since?: number | undefined
  readonly until?: number | undefined
  /** One of seed 000's event types (a message's role, a tool record, an insight); see `seedEventTypes`. */
  readonly eventType?: SeedEventType | undefined
}

/** Message kinds that record something learned rather than said (seed 000's insights). */
const insightMessageKinds: ReadonlySet<unknown> = new Set(["semantic", "procedure", "preference", "summary"])
/** Record types that record something learned. */
const insightRecordKinds: ReadonlySet<string> = new Set(["adr", "error_fix", "session_summary"])
const isMessage = (document: SearchDocument) => document.kind === "message"

/**
 * Seed 000's event types over mnemos's records: a user's turn, an assistant's turn, a tool call or
 * result kept in a conversation (a message with a `tool_call_id`), and what was learned. (Filters
 * are data, not functions: they cross to the search thread as structured clones.)
 */
const isRole = (document: SearchDocument, role: string) => isMessage(document) && document.fields?.role === role
const isToolRecord = (document: SearchDocument) =>
  isMessage(document) && typeof document.fields?.tool_call_id === "string"

export const seedEventTypes = {
  prompt: (document: SearchDocument) => isRole(document, "user"),
  response: (document: SearchDocument) => isRole(document, "assistant"),
  /** Seed 000's name for an assistant's turn in mem-details. */
  assistant_response: (document: SearchDocument) => isRole(document, "assistant"),
  /** A system turn (seed 001's third role). */
  system: (document: SearchDocument) => isRole(document, "system"),
  tool: isToolRecord,
  insight: (document: SearchDocument) =>
    isMessage(document) ? insightMessageKinds.has(document.fields?.memory_kind) : insightRecordKinds.has(document.kind),
} satisfies Record<string, (document: SearchDocument) => boolean>

/** A seed 000 event type. */
export type SeedEventType = keyof typeof seedEventTypes

/**
 * The type a record is shown with: a conversation turn by what it is — `tool` (a tool call or
 * result), else by its role: `prompt` (user), `response` (assistant; `assistant_response` in
 * mem-details, as seed 000 shows it there), `system` — and any other record by its record type.
 * Every type shown is also an `eventType` that finds the record.
 */
export const shownTypeOf = (document: SearchDocument, style: "index" | "details" = "index"): string => {
  if (!isMessage(document)) return document.kind
  if (isToolRecord(document)) return "tool"
  switch (document.fields?.role) {
    case "user":
      return "prompt"
    case "assistant":
      return style === "details" ? "assistant_response" : "response"
    case "system":
      return "system"
  }
  return document.kind
}

const seedEventTypeNames = Object.keys(seedEventTypes) as ReadonlyArray<SeedEventType>

/** One bit per seed 000 event type `document` is (what the index keeps instead of the fields they read). */
export const seedEventTypeMask = (document: SearchDocument): number => {
  let mask = 0
  for (let bit = 0; bit < seedEventTypeNames.length; bit++)
    if (seedEventTypes[seedEventTypeNames[bit]!](document)) mask |= 1 << bit
  return mask
}

/** The bit of `type` in `seedEventTypeMask`. */
export const seedEventTypeBit = (type: SeedEventType): number => 1 << seedEventTypeNames.indexOf(type)

/** True when `name` is one of seed 000's event types. */
export const isSeedEventType = (name: string): name is SeedEventType => Object.hasOwn(seedEventTypes, name)

/** True when `document` passes `filter`. */
export const passes = (filter: SearchFilter, document: SearchDocument): boolean =>
  (filter.projects === undefined || filter.projects.includes(document.project)) &&
  (filter.stores === undefined || filter.stores.includes(document.store)) &&
  (filter.kinds === undefined || filter.kinds.includes(document.kind)) &&
  (filter.session === undefined || document.session === filter.session) &&
  (filter.since === undefined || document.at >= filter.since) &&
  (filter.until === undefined || document.at <= filter.until) &&
  (filter.eventType === undefined || seedEventTypes[filter.eventType](document))

const rankPart = (weight: number, rank: number | undefined) =>
  rank === undefined || weight === 0 ? 0 : (weight * (rrfK + 1)) / (rrfK + rank)

/** Fuses two ranked lists (ids best first) into scored hits, best first; ties by id. */
export const fuse = <D extends Rankable>(
  mode: SearchMode,
  lexical: ReadonlyArray<{ readonly document: D; readonly bm25: number }>,
  semantic: ReadonlyArray<{ readonly document: D; readonly similarity: number }>,
  now: number,
  limit: number,
): Array<SearchHit<D>> => {
  const weights = modeWeights[mode]
  const found = new Map<
    string,
    { document: D; fulltext?: number; semantic?: number; bm25?: number; similarity?: number }
  >()
  if (weights.fulltext > 0)
    lexical.forEach((hit, index) => {
      found.set(hit.document.id, { document: hit.document, fulltext: index + 1, bm25: hit.bm25 })
    })
  if (weights.semantic > 0)
    semantic.forEach((hit, index) => {
      const entry = found.get(hit.document.id) ?? { document: hit.document }
      found.set(hit.document.id, { ...entry, semantic: index + 1, similarity: hit.similarity })
    })
  const hits = [...found.values()].map((entry): SearchHit<D> => {
    const age = Math.max(0, now - entry.document.at)
    const breakdown: ScoreBreakdown = {
      fulltext: rankPart(weights.fulltext, entry.fulltext),
      semantic: rankPart(weights.semantic, entry.semantic),
      recency: weights.recency * 0.5 ** (age / recencyHalfLifeMs),
      importance: weights.importance * Math.min(1, Math.max(0, entry.document.importance ?? defaultImportance)),
      alignment: 0,
    }
    return {
      document: entry.document,
      score: breakdown.fulltext + breakdown.semantic + breakdown.recency + breakdown.importance,
      score_breakdown: breakdown,
      ranks: {
        ...(entry.fulltext !== undefined ? { fulltext: entry.fulltext } : {}),
        ...(entry.semantic !== undefined ? { semantic: entry.semantic } : {}),
      },
      ...(entry.bm25 !== undefined ? { bm25: entry.bm25 } : {}),
      ...(entry.similarity !== undefined ? { similarity: entry.similarity } : {}),
    }
  })
  hits.sort(byScore)
  return hits.slice(0, limit)
}

/** Best score first; ties by id. */
const byScore = <D extends Rankable>(a: SearchHit<D>, b: SearchHit<D>) =>
  b.score - a.score || (a.document.id < b.document.id ? -1 : a.document.id > b.document.id ? 1 : 0)

/** Re-ranks fused `hits` with their `alignments` (same order) at weight λ = `alignmentWeights[mode]`. */
export const realign = <D extends Rankable>(
  mode: SearchMode,
  hits: ReadonlyArray<SearchHit<D>>,
  alignments: ReadonlyArray<Alignment>,
): Array<SearchHit<D>> => {
  const lambda = alignmentWeights[mode]
  const out = hits.map((hit, index): SearchHit<D> => {
    const alignment = alignments[index]!
    const fused = hit.score_breakdown
    const breakdown: ScoreBreakdown = {
      fulltext: (1 - lambda) * fused.fulltext,
      semantic: (1 - lambda) * fused.semantic,
      recency: (1 - lambda) * fused.recency,
      importance: (1 - lambda) * fused.importance,
      alignment: lambda * alignment.score,
    }
    const score =
      breakdown.fulltext + breakdown.semantic + breakdown.recency + breakdown.importance + breakdown.alignment
    return { ...hit, score, score_breakdown: breakdown, alignment }
  })
  out.sort(byScore)
  return out
}
