/**
 * The searchable-documents contract: how a store makes its records findable, with no search code
 * of its own and no store code in the indexer.
 *
 * A store module exports a `SearchSource`: a pure function from one committed event (and the
 * store's current view) to the documents of the groups that event touched, and a scan of every
 * group for rebuilds. The indexer (Indexer.ts) calls them; everything else — full-text and vector
 * indexes, persistence, ranking, the mem-* tools — is shared.
 *
 * Rules a source keeps (docs/search.md explains them with examples):
 * - Documents are read from the view, not from the event: the view may already be newer than
 *   the event, and the later events will be handled too, so handling is order-independent and
 *   idempotent (the same rule GraphSearch.ts follows).
 * - A group is the unit of replacement: `changes` returns, per touched group, the complete list
 *   of that group's documents now (empty when the group is gone). The indexer removes the
 *   group's other documents. A graph entity is one group (the entity and its observations); a
 *   message or a task is a group of one.
 * - `"resync"` asks the indexer to rescan the whole store (say an import replaced everything).
 * - Document ids are unique across all stores (ULIDs are; otherwise prefix with a short tag).
 */
import type { StoreView } from "../../stores/checkpoint/Checkpoint.ts"
import type { AnyStoreDefinition } from "../../stores/StoreDefinition.ts"

/** One searchable record. */
export interface SearchDocument {
  /** Unique across stores; what mem-search shows and mem-details/mem-timeline take. */
  readonly id: string
  /** The store it lives in (the store definition's name). */
  readonly store: string
  readonly project: string
  /** What it is inside the store: "entity", "observation", "message", "task", "adr", ... */
  readonly kind: string
  /** A short title or first line; weighted above `text` by full-text ranking. */
  readonly title: string
  /** The body; searched and embedded together with the title. */
  readonly text: string
  /** A conversation/session id, when the record belongs to one (mem-search's sessionId filter). */
  readonly session?: string | undefined
  /** When it happened (ms since the epoch): timeline order and recency. */
  readonly at: number
  /** 0..1; default 0.5. Pinned, critical or accepted records rank a little higher. */
  readonly importance?: number | undefined
  /** Small extra fields shown by mem-details (tags, status, file paths, ...). */
  readonly fields?: Readonly<Record<string, string | number | boolean>> | undefined
}

/** The documents a group has now; an empty list removes the group. */
export interface GroupDocuments {
  /** Unique within the store, stable across restarts (e.g. the record's key). */
  readonly group: string
  readonly documents: ReadonlyArray<SearchDocument>
}

/** What one event changed. */
export type DocumentChanges = ReadonlyArray<GroupDocuments> | "resync"

/** How a store plugs into search. */
export interface SearchSource<Event = unknown> {
  /** The store's definition (its name is the one on the event bus and in `SearchDocument.store`). */
  readonly definition: AnyStoreDefinition
  /**
   * The groups `event` touched, with their documents as the view holds them now. `given` holds the
   * groups already returned for earlier events from the same view (one read of a list of events):
   * a source may skip those, their documents would be the same, and adds the ones it returns. A
   * merge of 10,000 entities is 100 events that each touch the target: without it, the target's
   * 10,000 observations were read and indexed 100 times.
   */
  readonly changes: (event: Event, view: StoreView, given: Set<string>) => DocumentChanges
  /** Every group of the store (rebuilds after a restart or a dropped event). */
  readonly scan: (view: StoreView) => Iterable<GroupDocuments>
}

/** A source of any event type, for registries. */
// biome-ignore lint/suspicious/noExplicitAny: a heterogeneous registry has to erase the event type
export type AnySearchSource = SearchSource<any>

/** Default importance of a document that names none. */
export const defaultImportance = 0.5

/** Two 32-bit FNV-1a variants of `text` (different offsets), as 14 base-36 characters: short ids, content hashes. */
export const hashText = (text: string): string => hashJoined([text])

/**
 * `hashText` of `parts` joined by U+0000, without building the joined string: document ids are
 * hashes of a project, a name and a text, made for every document of every write, and the joined
 * string (a copy of all three) was one of the main thread's largest allocations a write.
 */
export const hashJoined = (parts: ReadonlyArray<string>): string => {
  let a = 0x811c9dc5
  let b = 0x01000193 ^ 0x5bd1e995
  for (let part = 0; part < parts.length; part++) {
    if (part > 0) {
      a = Math.imul(a, 0x01000193) // a ^ 0, the separator
      b = Math.imul(b, 0x01000193) ^ (b >>> 15)
    }
    const text = parts[part]!
    for (let i = 0; i < text.length; i++) {
      const code = text.charCodeAt(i)
      a = Math.imul(a ^ code, 0x01000193)
      b = Math.imul(b ^ code, 0x01000193) ^ (b >>> 15)
    }
  }
  return hashDigits(a, b)
}

/** Base-36 digits as character codes: `0-9` then `a-z`. */
const base36Code = (digit: number) => (digit < 10 ? 48 + digit : 87 + digit)

/** The 14 digit codes `hashDigits` writes before making them a string (one thread's, reused). */
const digitCodes = new Uint8Array(14)

/**
 * `(a >>> 0).toString(36).padStart(7, "0") + (b >>> 0).toString(36).padStart(7, "0")`, the same
 * 14 characters (36^7 > 2^32), made without `toString(36)`: V8 formats a number above 2^31 in its
 * runtime, with a floating-point remainder per digit (1.5 % of each thread's time while writing).
 * The string is the one thing allocated: the codes go to a reused array and are passed one by one
 * (an array of them and a spread into `fromCharCode` were about 200 bytes a hash, called a few
 * times for every document written: 7 % of what the search thread allocated in a sequential write).
 */
export const hashDigits = (a: number, b: number): string => {
  let high = a >>> 0
  let low = b >>> 0
  const codes = digitCodes
  // The remainder as `n - 36q`: `%` of a number above 2^31 is a call to the C library's fmod.
  for (let at = 6; at >= 0; at--) {
    const highRest = Math.floor(high / 36)
    codes[at] = base36Code(high - highRest * 36)
    high = highRest
    const lowRest = Math.floor(low / 36)
    codes[at + 7] = base36Code(low - lowRest * 36)
    low = lowRest
  }
  return String.fromCharCode(
    codes[0]!,
    codes[1]!,
    codes[2]!,
    codes[3]!,
    codes[4]!,
    codes[5]!,
    codes[6]!,
    codes[7]!,
    codes[8]!,
    codes[9]!,
    codes[10]!,
    codes[11]!,
    codes[12]!,
    codes[13]!,
  )
}

/** What changes a document's embedding. */
export const embeddingText = (document: Pick<SearchDocument, "title" | "text">): string =>
  document.text === "" ? document.title : `${document.title}\n${document.text}`
