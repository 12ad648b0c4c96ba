/**
 * Reads of a record store: one record by id or unique key, bounded pages of one kind with
 * filters, and the JSON shape callers see. Pure functions of a `StoreView`.
 *
 * A page scans at most `listScanRecordsMax` records, however selective the filters are; when it
 * stops early it returns a cursor, so every call is bounded and nothing is silently skipped.
 */
import type { StoreView } from "../stores/checkpoint/Checkpoint.ts"
import {
  recordKey,
  recordsAfter,
  recordsNewestFirst,
  recordsOfKind,
  recordsOlderThan,
  uniqueKey,
} from "./RecordKeys.ts"
import type { AnyRecordKind, StoredRecord } from "./RecordStore.ts"

/** Most records one list returns. */
export const listLimitMax = 500
/** Records a list returns when the caller names no limit. */
export const listLimitDefault = 50
/** Most records one list call looks at; past it the page ends with a cursor. */
export const listScanRecordsMax = 20_000

/** A live (not deleted) record by id. */
export const getRecord = (
  view: StoreView,
  project: string,
  kind: AnyRecordKind,
  id: string,
): StoredRecord | undefined => {
  const record = view.get(recordKey(project, kind.name, id)) as StoredRecord | undefined
  return record?.deletedAt === undefined ? record : undefined
}

/** The live record holding `unique` (a gate's action, a workspace's name, a pinned path). */
export const getByUnique = (
  view: StoreView,
  project: string,
  kind: AnyRecordKind,
  unique: string,
): StoredRecord | undefined => {
  const id = view.get(uniqueKey(project, kind.name, unique)) as string | undefined
  return id === undefined ? undefined : getRecord(view, project, kind, id)
}

/** True when any of the record's texts contains `query`, ignoring case. */
export const matchesQuery = (kind: AnyRecordKind, record: StoredRecord, query: string): boolean => {
  const needle = query.toLowerCase()
  return kind.text(record.data).some((text) => text?.toLowerCase().includes(needle))
}

/** What to list. */
export interface ListQuery {
  readonly project: string
  readonly kind: AnyRecordKind
  readonly newestFirst: boolean
  readonly limit: number
  /** The `nextCursor` of the previous page. */
  readonly cursor?: string | undefined
  readonly includeDeleted?: boolean
  /** Case-insensitive substring over the kind's texts. */
  readonly query?: string | undefined
  readonly where?: (record: StoredRecord) => boolean
}

/** One page of records. */
export interface RecordPage {
  readonly records: ReadonlyArray<StoredRecord>
  /** Present while more records may match: pass it as `cursor` to continue. */
  readonly nextCursor?: string
}

/** Lists records of one kind, filtered, in creation order (or newest first). */
export const listRecords = (view: StoreView, query: ListQuery): RecordPage => {
  const { project, kind } = query
  const range = query.newestFirst
    ? query.cursor === undefined
      ? recordsNewestFirst(project, kind.name)
      : recordsOlderThan(project, kind.name, query.cursor)
    : query.cursor === undefined
      ? recordsOfKind(project, kind.name)
      : recordsAfter(project, kind.name, query.cursor)
  const records: Array<StoredRecord> = []
  let scanned = 0
  let lastId: string | undefined
  for (const { value } of view.getRange(range)) {
    const record = (
      query.newestFirst ? view.get(recordKey(project, kind.name, value as string)) : value
    ) as StoredRecord
    if (scanned >= listScanRecordsMax || records.length >= query.limit) return { records, nextCursor: lastId! }
    scanned++
    lastId = record.id
    if (record.deletedAt !== undefined && query.includeDeleted !== true) continue
    if (query.query !== undefined && query.query !== "" && !matchesQuery(kind, record, query.query)) continue
    if (query.where !== undefined && !query.where(record)) continue
    records.push(record)
  }
  return { records }
}

const isoOf = (millis: number): string => new Date(millis).toISOString()

/**
 * A record as callers see it: id (and number), the kind's fields, then the bookkeeping. Times
 * are ISO 8601; data fields named `...At` holding epoch milliseconds are shown as ISO too.
 */
export const presentRecord = (record: StoredRecord): Record<string, unknown> => {
  const data: Record<string, unknown> = {}
  for (const [field, value] of Object.entries(record.data))
    data[field] = field.endsWith("At") && typeof value === "number" ? isoOf(value) : value
  return {
    id: record.id,
    ...(record.number !== undefined ? { number: record.number } : {}),
    ...data,
    project: record.project,
    revision: record.revision,
    createdAt: isoOf(record.createdAt),
    updatedAt: isoOf(record.updatedAt),
    createdBy: record.createdBy,
    updatedBy: record.updatedBy,
    ...(record.deletedAt !== undefined ? { deletedAt: isoOf(record.deletedAt), deletedBy: record.deletedBy } : {}),
  }
}
