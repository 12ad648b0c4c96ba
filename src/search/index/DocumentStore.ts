/**
 * Where the search index keeps its documents whole: the index itself holds only what ranking and
 * filters read (DocumentTable.ts), and reads a document from here when a result, a timeline or a
 * re-ranking needs its text, title or fields.
 *
 * Search's persistence is the store (SearchPersistence.ts: its LMDB, which a write reaches only
 * once committed, so it answers its own uncommitted writes from memory); `makeMemoryDocumentStore`
 * is the in-memory twin, for an index without persistence (tests, benches).
 *
 * Documents are keyed by store, group and id (the persisted key: a scan yields whole groups).
 */
import type { SearchDocument } from "./SearchDocument.ts"

/** Documents kept whole, by store, group and id. */
export interface DocumentStore {
  /** The document last put under `store`/`group`/`id` (a put is seen at once, committed or not). */
  readonly document: (store: string, group: string, id: string) => SearchDocument | undefined
  /** True when what is kept under `document`'s key is `document`, field for field (as JSON). */
  readonly holds: (group: string, document: SearchDocument) => boolean
  readonly putDocument: (group: string, document: SearchDocument) => void
  readonly removeDocument: (store: string, group: string, id: string) => void
}

const sep = "\u0000"
/** A group's key: `store \0 group` (a group may hold the separator, a store's name does not). */
export const groupKey = (store: string, group: string) => `${store}${sep}${group}`
/** The key of document `id` of the group whose key is `key`: `store \0 group \0 id`. */
export const keyInGroup = (key: string, id: string) => `${key}${sep}${id}`
/** A document's key: `store \0 group \0 id`. */
export const documentKey = (store: string, group: string, id: string) => keyInGroup(groupKey(store, group), id)

/** The in-memory twin: documents in a map by key (the objects as put). */
export const makeMemoryDocumentStore = (
  documents: Map<string, SearchDocument> = new Map(),
): DocumentStore & { readonly documents: Map<string, SearchDocument> } => ({
  documents,
  document: (store, group, id) => documents.get(documentKey(store, group, id)),
  holds: (group, document) => {
    const kept = documents.get(documentKey(document.store, group, document.id))
    return kept !== undefined && JSON.stringify(kept) === JSON.stringify(document)
  },
  putDocument: (group, document) => void documents.set(documentKey(document.store, group, document.id), document),
  removeDocument: (store, group, id) => void documents.delete(documentKey(store, group, id)),
})
