/**
 * The archive routine (decay of session summaries): the text of the `archive_routine` prompt,
 * which hands an agent the project's old, unarchived session summaries and the steps that fold
 * them into one milestone retrospective (add_milestone, then archive_session_summaries).
 */
import { Effect, Schema } from "effect"
import { Router } from "../actors/Router.ts"
import type { StoreError } from "../stores/StoreError.ts"
import { notesStore, type SessionSummaryData, sessionSummaryKind } from "./Notes.ts"
import { listRecords, listScanRecordsMax } from "./RecordQueries.ts"
import { dataOf, type StoredRecord } from "./RecordStore.ts"

/** Summaries older than this many days are offered for archiving when the caller names no age. */
export const archiveAgeDaysDefault = 14
/** Most summaries one prompt carries (the rest wait for the next run). */
export const archiveSummariesMax = 50

const millisPerDay = 24 * 60 * 60 * 1000

/** The prompt's arguments (MCP prompt arguments are strings). */
export const ArchiveRoutineArgs = Schema.Struct({
  project: Schema.optionalKey(Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(256))),
  older_than_days: Schema.optionalKey(
    Schema.FiniteFromString.check(Schema.isInt(), Schema.isBetween({ minimum: 0, maximum: 36_500 })),
  ),
  max_summaries: Schema.optionalKey(
    Schema.FiniteFromString.check(Schema.isInt(), Schema.isBetween({ minimum: 1, maximum: archiveSummariesMax })),
  ),
})
export type ArchiveRoutineArgs = typeof ArchiveRoutineArgs.Type

/** What the routine will fold: the oldest unarchived summaries created before the cut-off. */
export interface ArchiveCandidates {
  readonly project: string
  readonly olderThanDays: number
  readonly summaries: ReadonlyArray<StoredRecord>
  /** True when more summaries qualify than the prompt carries. */
  readonly more: boolean
}

/** Reads the summaries the routine should fold. */
export const archiveCandidates = (
  project: string,
  olderThanDays: number,
  summariesMax: number,
  now: number,
): Effect.Effect<ArchiveCandidates, StoreError, Router> =>
  Effect.gen(function* () {
    const store = (yield* Router).store(notesStore)
    const cutoff = now - olderThanDays * millisPerDay
    const found = yield* store.read((view) =>
      listRecords(view, {
        project,
        kind: sessionSummaryKind,
        newestFirst: false,
        limit: Math.min(summariesMax + 1, listScanRecordsMax),
        where: (record) => record.createdAt <= cutoff && dataOf(sessionSummaryKind, record).archivedInto === undefined,
      }),
    )
    return {
      project,
      olderThanDays,
      summaries: found.records.slice(0, summariesMax),
      more: found.records.length > summariesMax || found.nextCursor !== undefined,
    }
  })

const dayOf = (millis: number) => new Date(millis).toISOString().slice(0, 10)

const section = (record: StoredRecord): string => {
  const summary: SessionSummaryData = dataOf(sessionSummaryKind, record)
  const lines = [`## ${record.id} (${new Date(record.createdAt).toISOString()}, ${summary.agent ?? record.createdBy})`]
  lines.push(summary.summary)
  if (summary.highlights?.length) lines.push(`Highlights: ${summary.highlights.join("; ")}`)
  if (summary.nextSteps?.length) lines.push(`Next steps: ${summary.nextSteps.join("; ")}`)
  if (summary.files?.length) lines.push(`Files: ${summary.files.join(", ")}`)
  return lines.join("\n")
}

/** The prompt text for `candidates`. */
export const archiveRoutineText = (candidates: ArchiveCandidates): string => {
  const { project, olderThanDays, summaries } = candidates
  if (summaries.length === 0)
    return `Nothing to archive: project "${project}" has no unarchived session summaries older than ${olderThanDays} days.`
  const first = dayOf(summaries[0]!.createdAt)
  const last = dayOf(summaries[summaries.length - 1]!.createdAt)
  const ids = JSON.stringify(summaries.map((record) => record.id))
  return [
    `# Archive routine for project "${project}"`,
    "",
    `Compress old session summaries into one milestone retrospective, so later sessions read one dense record instead of many. These ${summaries.length} session summaries are older than ${olderThanDays} days and not archived yet (oldest first${candidates.more ? "; more remain for a later run" : ""}):`,
    "",
    ...summaries.map(section),
    "",
    "Do this:",
    "1. Write a retrospective of this period: outcomes delivered, decisions taken (check list_adrs and cite ADR numbers), problems met and how they were fixed, and what is still open. Keep it dense (a few hundred words), facts over narrative; keep ids, file names and error signatures verbatim.",
    `2. Call add_milestone with title "Retrospective ${first} to ${last}", retrospective set to that text, and summary_ids ${ids}.`,
    `3. Call archive_session_summaries with ids ${ids} and milestone_id set to the id add_milestone returned.`,
    "4. For every next step that is still open, make sure a task exists (list_tasks, then add_task).",
    "Archived summaries leave list_session_summaries (include_archived shows them) and stay in the audit ledger.",
  ].join("\n")
}
