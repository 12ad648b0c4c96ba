/**
 * get_system_health for the conversations store, in the seed's shape, from the store kernel's
 * health (WAL, LMDB, recovery, last error), the store's counters and the search index's sizes.
 *
 * The seed's fields describe its own files; mnemos maps them onto its WAL + LMDB design (the
 * mapping is documented in docs/tools.md, "Conversation memory"). Health never fails: a store that cannot
 * be read (corrupt, restarting) reports zero counts and `DEGRADED`.
 */
import type { StoreHealth } from "../actors/StoreActor.ts"
import type { IndexStats } from "./ConversationIndex.ts"
import { emptyStats, type Stats } from "./ConversationKeys.ts"

/** The version of the conversations record and export format. */
export const conversationsFormatVersion = 1

/** Approximate bytes per stored message record besides its content and metadata (key, framing). */
const recordOverheadBytes = 192
/** Approximate bytes per history entry (key and value). */
const historyEntryBytes = 96
/** Approximate bytes per incoming-relation entry (key and value). */
const relationEntryBytes = 112

/** The seed's health object. */
export interface ConversationHealthReport {
  readonly status: "OK" | "DEGRADED"
  readonly format_version: number
  readonly log_size: number
  readonly snapshot_size: number
  readonly active_messages: number
  readonly deleted_messages: number
  readonly last_sequence: number
  readonly update_records: number
  readonly dead_bytes: number
  readonly memory_estimate: {
    readonly total_bytes: number
    readonly store_entries_bytes: number
    readonly body_bytes: number
    readonly metadata_bytes: number
    readonly search_index_bytes: number
    readonly history_index_bytes: number
    readonly relation_index_bytes: number
  }
  readonly io: {
    readonly write_bytes: number
    readonly write_calls: number
    readonly flush_calls: number
    readonly truncate_calls: number
    readonly replace_calls: number
  }
  readonly recovered_tail: boolean
  readonly snapshot_valid: boolean
  readonly last_error: string
}

/** Builds the report; `stats` is undefined when the store could not be read. */
export const healthReport = (
  store: StoreHealth,
  stats: Stats | undefined,
  index: IndexStats | undefined,
  generationsSwitched: number,
): ConversationHealthReport => {
  const counts = stats ?? emptyStats
  const storeEntries = (counts.active + counts.deleted) * recordOverheadBytes
  const body = counts.content_bytes
  const metadata = counts.metadata_bytes
  const search = index?.bytesEstimate ?? 0
  const history = counts.active * historyEntryBytes
  const relations = counts.relations * relationEntryBytes
  const lastError = store.lastError ?? (stats === undefined ? `store "${store.name}" is ${store.state}` : "")
  return {
    status: lastError === "" && store.state === "running" ? "OK" : "DEGRADED",
    format_version: conversationsFormatVersion,
    log_size: store.wal?.bytes ?? 0,
    snapshot_size: store.lmdbBytes ?? 0,
    active_messages: counts.active,
    deleted_messages: counts.deleted,
    last_sequence: (store.wal?.nextSeq ?? store.appliedSeq + 1) - 1,
    update_records: counts.updates,
    dead_bytes: counts.dead_bytes,
    memory_estimate: {
      total_bytes: storeEntries + body + metadata + search + history + relations,
      store_entries_bytes: storeEntries,
      body_bytes: body,
      metadata_bytes: metadata,
      search_index_bytes: search,
      history_index_bytes: history,
      relation_index_bytes: relations,
    },
    io: {
      write_bytes: store.wal?.bytes ?? 0,
      write_calls: store.wal?.appends ?? 0,
      flush_calls: store.wal?.fsyncs ?? 0,
      truncate_calls: store.recovery?.tornTail !== undefined ? 1 : 0,
      replace_calls: generationsSwitched,
    },
    recovered_tail: store.recovery?.tornTail !== undefined,
    snapshot_valid: store.state !== "corrupt" && store.state !== "unavailable",
    last_error: lastError,
  }
}
