/**
 * How the engineering records are found by search (omni_search, mem-search): one `SearchSource`
 * (search/SearchDocument.ts) per record store — tasks, ADRs, notes and code history. Gates and
 * the audit ledger are state and history, not knowledge, and are not indexed.
 *
 * Every live record is a group of one document: title from its kind, text from the kind's
 * searchable texts, `at` its creation time, importance from what it says (an urgent task, an
 * accepted ADR, critical tech debt rank a little higher; superseded ADRs lower), and its short
 * scalar fields for mem-details. A deleted record — removed, unpinned, or expired and swept
 * (RecordExpiry.ts) — has no documents, so it leaves search with the event that deleted it.
 */

import type { GroupDocuments, SearchDocument, SearchSource } from "../search/index/SearchDocument.ts"
import type { StoreView } from "../stores/checkpoint/Checkpoint.ts"
import { adrsStore } from "./Adrs.ts"
import { engineeringStore } from "./CodeHistory.ts"
import { notesStore } from "./Notes.ts"
import { allRecords, recordKey } from "./RecordKeys.ts"
import type { RecordEvent, RecordStoreDefinition, StoredRecord } from "./RecordStore.ts"
import { tasksStore } from "./Tasks.ts"

/** Longest scalar field copied into a document's `fields`. */
const fieldCharsMax = 200
const defaultImportance = 0.5

/** How much a record matters, from what it says (0..1). */
const importanceOf = (record: StoredRecord): number => {
  const data = record.data as Record<string, unknown>
  if (data.priority === "urgent" || data.severity === "critical") return 0.8
  if (data.priority === "high" || data.severity === "high" || data.status === "accepted") return 0.65
  if (data.status === "superseded" || data.status === "deprecated" || data.status === "done") return 0.35
  return defaultImportance
}

const fieldsOf = (record: StoredRecord): Record<string, string | number | boolean> => {
  const fields: Record<string, string | number | boolean> = { revision: record.revision }
  if (record.number !== undefined) fields.number = record.number
  for (const [name, value] of Object.entries(record.data)) {
    if (typeof value === "number" || typeof value === "boolean") fields[name] = value
    else if (typeof value === "string" && value.length <= fieldCharsMax) fields[name] = value
  }
  return fields
}

/** A record's group: its id (ULIDs are unique across stores and projects). */
const groupOf = (record: { readonly id: string }) => record.id

/** The search source of a record store. */
export const recordSearchSource = (definition: RecordStoreDefinition): SearchSource<RecordEvent> => {
  const kinds = new Map(definition.kinds.map((kind) => [kind.name, kind]))
  const documentsOf = (record: StoredRecord | undefined): ReadonlyArray<SearchDocument> => {
    const kind = record === undefined ? undefined : kinds.get(record.kind)
    if (record === undefined || kind === undefined || record.deletedAt !== undefined) return []
    const title = kind.title(record.data)
    const texts = kind.text(record.data).filter((text): text is string => text !== undefined && text !== title)
    return [
      {
        id: record.id,
        store: definition.name,
        project: record.project,
        kind: record.kind,
        title,
        text: texts.join("\n"),
        at: record.createdAt,
        importance: importanceOf(record),
        fields: fieldsOf(record),
      },
    ]
  }
  return {
    definition,
    changes: (event: RecordEvent, view: StoreView): ReadonlyArray<GroupDocuments> => {
      const { project, kind, id } = event.record
      const record = view.get(recordKey(project, kind, id)) as StoredRecord | undefined
      return [{ group: groupOf(event.record), documents: documentsOf(record) }]
    },
    scan: function* (view: StoreView): Iterable<GroupDocuments> {
      for (const { value } of view.getRange(allRecords)) {
        const record = value as StoredRecord
        yield { group: groupOf(record), documents: documentsOf(record) }
      }
    },
  }
}

/** The search sources of the engineering record stores. */
export const engineeringSearchSources: ReadonlyArray<SearchSource<RecordEvent>> = [
  tasksStore,
  adrsStore,
  notesStore,
  engineeringStore,
].map(recordSearchSource)
