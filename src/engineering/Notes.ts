/**
 * The `notes` store: what agents leave for each other and for later — sticky notes (optionally
 * expiring), session summaries, handoff memos between agents, and context workspaces (a named
 * set of pinned files, notes and open tasks that can be saved and restored).
 *
 * A sticky note with `expiresAt` is live until that instant and then leaves every list on its
 * own: reads compare with the clock, so a list is exact at any instant, across restarts. The
 * expiry sweeper (RecordExpiry.ts) then deletes it logically, which takes it out of search and
 * records the expiry in the audit ledger.
 */
import { Schema } from "effect"
import { EpochMillis, FilePath, Files, NonEmptyText, RecordId, RecordIds, Tags, Text, Title } from "./Fields.ts"
import { defineKind, makeRecordStore, type StoredRecord } from "./RecordStore.ts"

/** Longest time-to-live of a sticky note: one year. */
export const stickyNoteTtlSecondsMax = 365 * 24 * 60 * 60

export const StickyNoteData = Schema.Struct({
  text: NonEmptyText,
  tags: Schema.optionalKey(Tags),
  color: Schema.optionalKey(Title),
  expiresAt: Schema.optionalKey(EpochMillis),
})
export type StickyNoteData = typeof StickyNoteData.Type

export const stickyNoteKind = defineKind<StickyNoteData>({
  name: "sticky_note",
  data: StickyNoteData,
  title: (note) => note.text.split("\n", 1)[0]!.slice(0, 120),
  text: (note) => [note.text, ...(note.tags ?? [])],
  expiresAt: (note) => note.expiresAt,
})

/** True once a note's time-to-live has run out. */
export const isExpired = (record: StoredRecord, now: number): boolean => {
  const expiresAt = (record.data as StickyNoteData).expiresAt
  return expiresAt !== undefined && expiresAt <= now
}

export const SessionSummaryData = Schema.Struct({
  summary: NonEmptyText,
  sessionId: Schema.optionalKey(Title),
  agent: Schema.optionalKey(Title),
  highlights: Schema.optionalKey(Schema.Array(Text).check(Schema.isMaxLength(100))),
  nextSteps: Schema.optionalKey(Schema.Array(Text).check(Schema.isMaxLength(100))),
  files: Schema.optionalKey(Files),
  archivedInto: Schema.optionalKey(RecordId),
  archivedAt: Schema.optionalKey(EpochMillis),
})
export type SessionSummaryData = typeof SessionSummaryData.Type

export const sessionSummaryKind = defineKind<SessionSummaryData>({
  name: "session_summary",
  data: SessionSummaryData,
  title: (summary) => summary.summary.split("\n", 1)[0]!.slice(0, 120),
  text: (summary) => [summary.summary, ...(summary.highlights ?? []), ...(summary.nextSteps ?? [])],
  normalize: (summary, previous, now) =>
    summary.archivedInto !== undefined && previous?.archivedInto === undefined
      ? { ...summary, archivedAt: now }
      : summary,
})

export const handoffStatuses = ["open", "acknowledged"] as const
export const HandoffStatus = Schema.Literals(handoffStatuses)

export const HandoffData = Schema.Struct({
  fromAgent: Title,
  toAgent: Title,
  summary: NonEmptyText,
  context: Schema.optionalKey(Text),
  openTasks: Schema.optionalKey(RecordIds),
  files: Schema.optionalKey(Files),
  status: HandoffStatus,
  acknowledgedBy: Schema.optionalKey(Title),
  acknowledgedAt: Schema.optionalKey(EpochMillis),
  acknowledgementNote: Schema.optionalKey(Text),
})
export type HandoffData = typeof HandoffData.Type

export const handoffKind = defineKind<HandoffData>({
  name: "handoff",
  data: HandoffData,
  title: (handoff) => `${handoff.fromAgent} → ${handoff.toAgent}: ${handoff.summary.split("\n", 1)[0]!.slice(0, 100)}`,
  namedBy: (handoff) => `${handoff.fromAgent} → ${handoff.toAgent}`,
  text: (handoff) => [handoff.summary, handoff.context, handoff.fromAgent, handoff.toAgent],
  normalize: (handoff, previous, now) =>
    handoff.status === "acknowledged" && previous?.status !== "acknowledged"
      ? { ...handoff, acknowledgedAt: now }
      : handoff,
})

export const PinnedFileRef = Schema.Struct({ path: FilePath, note: Schema.optionalKey(Text) })

export const WorkspaceData = Schema.Struct({
  name: Title,
  description: Schema.optionalKey(Text),
  pinnedFiles: Schema.Array(PinnedFileRef).check(Schema.isMaxLength(1_000)),
  notes: RecordIds,
  tasks: RecordIds,
})
export type WorkspaceData = typeof WorkspaceData.Type

export const workspaceKind = defineKind<WorkspaceData>({
  name: "workspace",
  data: WorkspaceData,
  uniqueBy: (workspace) => workspace.name,
  title: (workspace) => workspace.name,
  namedBy: (workspace) => workspace.name,
  text: (workspace) => [workspace.name, workspace.description, ...workspace.pinnedFiles.map((file) => file.path)],
})

export const notesStore = makeRecordStore("notes", [stickyNoteKind, sessionSummaryKind, handoffKind, workspaceKind])
