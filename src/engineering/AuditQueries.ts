/**
 * Reading the audit ledger: newest entries first, filtered by project, store, tool, who, record
 * and time, in bounded pages. Like record lists, one page scans at most `auditScanEntriesMax`
 * entries and then returns a cursor, however selective the filters are.
 */
import type { StoreView } from "../stores/checkpoint/Checkpoint.ts"
import { type AuditEntry, allEntries, allProjectsMarker, getEntry, olderThan, projectEntries } from "./AuditStore.ts"

/** Most entries one query returns. */
export const auditLimitMax = 500
/** Entries a query returns when the caller names no limit. */
export const auditLimitDefault = 50
/** Most entries one query looks at; past it the page ends with a cursor. */
export const auditScanEntriesMax = 20_000

/** What to look for; every field narrows the result. */
export interface AuditFilter {
  /** One project, or "*" for every project (and ledger-wide entries such as gaps). */
  readonly project: string
  readonly store?: string | undefined
  readonly tool?: string | undefined
  readonly who?: string | undefined
  readonly recordId?: string | undefined
  /** Epoch milliseconds, inclusive. */
  readonly since?: number | undefined
  /** Epoch milliseconds, exclusive. */
  readonly until?: number | undefined
  readonly limit: number
  /** The `nextCursor` of the previous page: entries older than it. */
  readonly cursor?: number | undefined
}

/** One page of entries, newest first. */
export interface AuditPage {
  readonly entries: ReadonlyArray<AuditEntry>
  readonly nextCursor?: number
}

const matches = (entry: AuditEntry, filter: AuditFilter): boolean =>
  (filter.store === undefined || entry.store === filter.store) &&
  (filter.tool === undefined || entry.tool === filter.tool) &&
  (filter.who === undefined || entry.who.includes(filter.who)) &&
  (filter.recordId === undefined || entry.recordId === filter.recordId) &&
  (filter.since === undefined || entry.at >= filter.since) &&
  (filter.until === undefined || entry.at < filter.until)

/** Queries the ledger. */
export const queryAudit = (view: StoreView, filter: AuditFilter): AuditPage => {
  const everywhere = filter.project === allProjectsMarker
  const range = everywhere ? allEntries : projectEntries(filter.project)
  const start = filter.cursor === undefined ? range.start : olderThan(range.start, filter.cursor)
  const entries: Array<AuditEntry> = []
  let scanned = 0
  let lastSeq: number | undefined
  for (const { value } of view.getRange({ start, end: range.end })) {
    if (scanned >= auditScanEntriesMax || entries.length >= filter.limit) return { entries, nextCursor: lastSeq! }
    scanned++
    const entry = everywhere ? (value as AuditEntry) : getEntry(view, value as number)
    if (entry === undefined) continue
    lastSeq = entry.seq
    if (matches(entry, filter)) entries.push(entry)
  }
  return { entries }
}
