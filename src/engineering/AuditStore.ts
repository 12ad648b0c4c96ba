/**
 * The `audit` store: the append-only ledger of every mutation of every other store — when, who,
 * through which tool, in which project, and what changed (a one-line summary). Entries are
 * appended by the audit ledger (AuditLedger.ts) from the event bus and are never changed.
 *
 * Each entry names its source (store, sequence number); a source already in the ledger is not
 * appended again, so re-published events (a store replaying its WAL after a crash) are audited
 * once. Sequence numbers are gap-free per store: when a source jumps ahead of the last one the
 * ledger saw, the events between were lost to the ledger (the bus dropped them for a slow
 * subscriber, or the process died before they were appended), and a `gap` entry says so.
 *
 * In a shared memory each daemon audits the events it decided (as the holder of the store's writer
 * lease), so a store's sequence numbers reach the ledger from several daemons, in no fixed order
 * between them. Such an entry also names its origin (the daemon) and its number among that
 * daemon's events in the store (src/stores/OriginCounts.ts), and the gaps are found per origin:
 * a jump in one daemon's numbers is what that daemon decided and did not audit.
 *
 * Key layout (U+001F separators, shown as `/`, for the reason RecordKeys.ts gives; `seq` is the
 * ledger's own order, zero-padded base 36; `~seq` counts down, so a forward range read is newest
 * first — the kernel's reverse range reads are not reliable yet, see
 * test/engineering/KernelReverseRange.test.ts):
 *
 *   e / ~seq                   → AuditEntry
 *   p / project / ~seq         → seq            (per-project, newest first; gap entries are project "*")
 *   s / store / sourceSeq      → seq            (what is already audited)
 *   c / store                  → last sourceSeq seen (entries without an origin)
 *   o / store / origin         → last originSeq seen from that origin
 *   n                          → next seq
 */
import { Result, Schema } from "effect"
import type { KeyRange, StoreView, StoreWriter } from "../stores/checkpoint/Checkpoint.ts"
import { decodeProblemOf, type StateSchema, unknownKey } from "../stores/StateSchema.ts"
import type { StoreDefinition } from "../stores/StoreDefinition.ts"

/** Most entries one append command carries. */
export const auditAppendEntriesMax = 1_000
/** Longest summary kept, in UTF-16 code units. */
export const auditSummaryCharsMax = 500
/** The action of the entry recorded when an MCP session starts (who connected, over what). */
export const sessionAction = "session_start"
/** The project of ledger-wide entries (gaps); `project: "*"` queries every project. */
export const allProjectsMarker = "*"

export const AuditEntryInput = Schema.Struct({
  store: Schema.String,
  sourceSeq: Schema.Int,
  at: Schema.Number,
  project: Schema.String,
  who: Schema.String,
  tool: Schema.String,
  action: Schema.String,
  kind: Schema.optionalKey(Schema.String),
  recordId: Schema.optionalKey(Schema.String),
  summary: Schema.String,
  /** In a shared memory: the daemon that decided the event, and its number among that daemon's events. */
  origin: Schema.optionalKey(Schema.String),
  originSeq: Schema.optionalKey(Schema.Int),
})
export type AuditEntryInput = typeof AuditEntryInput.Type

export const AuditEntry = Schema.Struct({ seq: Schema.Int, ...AuditEntryInput.fields })
export type AuditEntry = typeof AuditEntry.Type

export const AuditCommand = Schema.TaggedStruct("Append", {
  entries: Schema.Array(AuditEntryInput).check(Schema.isMaxLength(auditAppendEntriesMax)),
})
export type AuditCommand = typeof AuditCommand.Type

export const AuditEvent = Schema.TaggedStruct("Appended", { entries: Schema.Array(AuditEntry) })
export type AuditEvent = typeof AuditEvent.Type

/** How many entries an append added (sources already audited are skipped). */
export interface AuditReply {
  readonly appended: number
}

const sep = "\u001f"
const end = " "
const seqWidth = 11
const encodeSeq = (seq: number): string => seq.toString(36).padStart(seqWidth, "0")
const encodeDescending = (seq: number): string => encodeSeq(Number.MAX_SAFE_INTEGER - seq)

const entryKey = (seq: number) => `e${sep}${encodeDescending(seq)}`
const projectEntryKey = (project: string, seq: number) => `p${sep}${project}${sep}${encodeDescending(seq)}`
const sourceKey = (store: string, sourceSeq: number) => `s${sep}${store}${sep}${encodeSeq(sourceSeq)}`
const cursorKey = (store: string) => `c${sep}${store}`
const originCursorKey = (store: string, origin: string) => `o${sep}${store}${sep}${origin}`
const nextSeqKey = "n"

/** Every entry, newest first. */
export const allEntries: KeyRange = { start: `e${sep}`, end: `e${end}` }
/** The entries of one project, newest first. */
export const projectEntries = (project: string): KeyRange => ({
  start: `p${sep}${project}${sep}`,
  end: `p${sep}${project}${end}`,
})
/** The entry with ledger sequence `seq`. */
export const getEntry = (view: StoreView, seq: number): AuditEntry | undefined =>
  view.get(entryKey(seq)) as AuditEntry | undefined
/** Where the entries older than `seq` start in a range of ledger keys with `prefix`. */
export const olderThan = (prefix: string, seq: number): string => `${prefix}${encodeDescending(seq - 1)}`

const decide = (command: AuditCommand, state: StoreView, context: { readonly now: number }) => {
  let next = (state.get(nextSeqKey) as number | undefined) ?? 1
  const seen = new Set<string>()
  const cursors = new Map<string, number | undefined>()
  const entries: Array<AuditEntry> = []
  for (const input of command.entries) {
    // A session opening is not an event of a store: no source to de-duplicate, no gap to find.
    if (input.action === sessionAction) {
      entries.push({ seq: next++, ...input, summary: input.summary.slice(0, auditSummaryCharsMax) })
      continue
    }
    const source = sourceKey(input.store, input.sourceSeq)
    if (seen.has(source) || state.get(source) !== undefined) continue
    seen.add(source)
    if (input.origin !== undefined && input.originSeq !== undefined) {
      const cursor = originCursorKey(input.store, input.origin)
      const last = cursors.has(cursor) ? cursors.get(cursor) : (state.get(cursor) as number | undefined)
      if (last !== undefined && input.originSeq > last + 1) {
        entries.push({
          seq: next++,
          store: input.store,
          sourceSeq: input.sourceSeq,
          at: context.now,
          project: allProjectsMarker,
          who: "mnemos",
          tool: "audit",
          action: "gap",
          summary: `${input.originSeq - last - 1} event(s) of store "${input.store}" decided by daemon ${input.origin} (its events ${last + 1}..${input.originSeq - 1}) were not audited: the ledger fell behind or that daemon stopped before appending them`,
          origin: input.origin,
          originSeq: last + 1,
        })
      }
      if (last === undefined || input.originSeq > last) cursors.set(cursor, input.originSeq)
      entries.push({ seq: next++, ...input, summary: input.summary.slice(0, auditSummaryCharsMax) })
      continue
    }
    const last = cursors.has(input.store)
      ? cursors.get(input.store)
      : (state.get(cursorKey(input.store)) as number | undefined)
    if (last !== undefined && input.sourceSeq > last + 1) {
      const missing = input.sourceSeq - last - 1
      entries.push({
        seq: next++,
        store: input.store,
        sourceSeq: last + 1,
        at: context.now,
        project: allProjectsMarker,
        who: "mnemos",
        tool: "audit",
        action: "gap",
        summary: `${missing} event(s) of store "${input.store}" (seq ${last + 1}..${input.sourceSeq - 1}) were not audited: the ledger fell behind or the process stopped before appending them`,
      })
    }
    if (last === undefined || input.sourceSeq > last) cursors.set(input.store, input.sourceSeq)
    entries.push({ seq: next++, ...input, summary: input.summary.slice(0, auditSummaryCharsMax) })
  }
  return Result.succeed({
    events: entries.length > 0 ? [{ _tag: "Appended" as const, entries }] : [],
    reply: { appended: entries.length },
  })
}

const apply = (event: AuditEvent, state: StoreWriter): void => {
  let next = (state.get(nextSeqKey) as number | undefined) ?? 1
  for (const entry of event.entries) {
    state.put(entryKey(entry.seq), entry)
    state.put(projectEntryKey(entry.project, entry.seq), entry.seq)
    if (entry.action !== "gap" && entry.action !== sessionAction) {
      state.put(sourceKey(entry.store, entry.sourceSeq), entry.seq)
      const key =
        entry.origin !== undefined && entry.originSeq !== undefined
          ? originCursorKey(entry.store, entry.origin)
          : cursorKey(entry.store)
      const at = entry.origin !== undefined && entry.originSeq !== undefined ? entry.originSeq : entry.sourceSeq
      const cursor = state.get(key) as number | undefined
      if (cursor === undefined || at > cursor) state.put(key, at)
    }
    next = Math.max(next, entry.seq + 1)
  }
  state.put(nextSeqKey, next)
}

/**
 * The record kinds whose title is their body (they declare no `namedBy`): entries about them name
 * them by kind and id only. Earlier versions quoted the title; a compaction drops that quote.
 */
export const unnamedRecordKinds: ReadonlySet<string> = new Set([
  "sticky_note",
  "session_summary",
  "code_change",
  "error_fix",
])

/** An entry as a compaction keeps it: an old entry's quote of an unnamed record's body is dropped. */
export const compactAuditValue = (key: string, value: unknown): unknown => {
  if (!key.startsWith(`e${sep}`)) return value
  const entry = value as AuditEntry
  if (entry.kind === undefined || !unnamedRecordKinds.has(entry.kind)) return value
  const prefix = `${entry.action} ${entry.kind.replaceAll("_", " ")} `
  if (!entry.summary.startsWith(prefix)) return value
  const quote = entry.summary.indexOf(": ", prefix.length)
  return quote === -1 ? value : { ...entry, summary: entry.summary.slice(0, quote) }
}

/** The audit store's definition. */
export const auditStore: StoreDefinition<AuditCommand, AuditEvent, AuditReply, never> = {
  name: "audit",
  commandSchema: AuditCommand,
  eventSchema: AuditEvent,
  decide,
  apply,
  compactValue: compactAuditValue,
}

const auditEntryProblem = decodeProblemOf(AuditEntry)
const seqProblem = decodeProblemOf(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)))

/** What the audit store's state holds under each key (the layout above), as an archive import checks it. */
export const auditState: StateSchema = {
  problem: (key, value) => {
    const parts = key.split(sep)
    switch (`${parts[0]}/${parts.length}`) {
      case "e/2":
        return (
          auditEntryProblem(value) ??
          (entryKey((value as AuditEntry).seq) === key ? undefined : "its seq does not match its key")
        )
      case "p/3":
        return (
          seqProblem(value) ??
          (projectEntryKey(parts[1]!, value as number) === key ? undefined : "the seq does not match its key")
        )
      case "s/3":
      case "o/3":
      case "c/2":
      case "n/1":
        return seqProblem(value)
    }
    return unknownKey
  },
}
