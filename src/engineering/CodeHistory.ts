/**
 * The `engineering` store: a project's code history and working environment — code changes,
 * error fixes and tech debt (each bound to the Git context it was logged in), snippets, PR
 * checklist items, pinned files, environments (with a fingerprint whose hash shows drift) and
 * milestones (including the retrospectives that old session summaries are archived into).
 */
import { createHash } from "node:crypto"
import { Schema } from "effect"
import {
  Code,
  EpochMillis,
  FilePath,
  Files,
  IsoDate,
  NonEmptyText,
  RecordId,
  RecordIds,
  StringMap,
  Tags,
  Text,
  Title,
} from "./Fields.ts"
import { GitInfo } from "./GitContext.ts"
import { defineKind, makeRecordStore } from "./RecordStore.ts"

/** Where a record was logged: the Git context, or why there is none. */
const gitFields = {
  git: Schema.optionalKey(GitInfo),
  gitUnavailable: Schema.optionalKey(Text),
}
const gitTexts = (data: { readonly git?: GitInfo }) => [data.git?.branch, data.git?.commit, data.git?.commitMessage]

export const changeTypes = ["feature", "fix", "refactor", "perf", "test", "docs", "build", "chore", "other"] as const

export const CodeChangeData = Schema.Struct({
  summary: NonEmptyText,
  changeType: Schema.optionalKey(Schema.Literals(changeTypes)),
  files: Schema.optionalKey(Files),
  taskId: Schema.optionalKey(RecordId),
  ...gitFields,
})
export type CodeChangeData = typeof CodeChangeData.Type

export const codeChangeKind = defineKind<CodeChangeData>({
  name: "code_change",
  data: CodeChangeData,
  title: (change) => change.summary.split("\n", 1)[0]!.slice(0, 120),
  text: (change) => [change.summary, ...(change.files ?? []), ...gitTexts(change)],
})

export const ErrorFixData = Schema.Struct({
  errorSignature: NonEmptyText,
  fix: NonEmptyText,
  rootCause: Schema.optionalKey(Text),
  files: Schema.optionalKey(Files),
  ...gitFields,
})
export type ErrorFixData = typeof ErrorFixData.Type

export const errorFixKind = defineKind<ErrorFixData>({
  name: "error_fix",
  data: ErrorFixData,
  title: (fix) => fix.errorSignature.split("\n", 1)[0]!.slice(0, 120),
  text: (fix) => [fix.errorSignature, fix.fix, fix.rootCause, ...(fix.files ?? []), ...gitTexts(fix)],
})

export const techDebtSeverities = ["low", "medium", "high", "critical"] as const

export const TechDebtData = Schema.Struct({
  description: NonEmptyText,
  severity: Schema.Literals(techDebtSeverities),
  location: FilePath,
  ...gitFields,
})
export type TechDebtData = typeof TechDebtData.Type

export const techDebtKind = defineKind<TechDebtData>({
  name: "tech_debt",
  data: TechDebtData,
  title: (debt) => `[${debt.severity}] ${debt.location}: ${debt.description.split("\n", 1)[0]!.slice(0, 100)}`,
  namedBy: (debt) => debt.location,
  text: (debt) => [debt.description, debt.location, ...gitTexts(debt)],
})

export const SnippetData = Schema.Struct({
  title: Title,
  code: Code,
  language: Schema.optionalKey(Title),
  description: Schema.optionalKey(Text),
  tags: Schema.optionalKey(Tags),
})
export type SnippetData = typeof SnippetData.Type

export const snippetKind = defineKind<SnippetData>({
  name: "snippet",
  data: SnippetData,
  title: (snippet) => snippet.title,
  namedBy: (snippet) => snippet.title,
  text: (snippet) => [snippet.title, snippet.description, snippet.language, snippet.code, ...(snippet.tags ?? [])],
})

export const PrChecklistItemData = Schema.Struct({
  pr: Title,
  text: NonEmptyText,
  checked: Schema.Boolean,
  checkedBy: Schema.optionalKey(Title),
  checkedAt: Schema.optionalKey(EpochMillis),
})
export type PrChecklistItemData = typeof PrChecklistItemData.Type

export const prChecklistItemKind = defineKind<PrChecklistItemData>({
  name: "pr_checklist_item",
  data: PrChecklistItemData,
  title: (item) => `${item.checked ? "[x]" : "[ ]"} ${item.pr}: ${item.text.split("\n", 1)[0]!.slice(0, 100)}`,
  namedBy: (item) => item.pr,
  text: (item) => [item.pr, item.text],
  normalize: (item, previous, now) => {
    if (!item.checked) {
      const { checkedAt: _, checkedBy: __, ...rest } = item
      return rest
    }
    return previous?.checked === true ? item : { ...item, checkedAt: now }
  },
})

export const PinnedFileData = Schema.Struct({
  path: FilePath,
  note: Schema.optionalKey(Text),
})
export type PinnedFileData = typeof PinnedFileData.Type

export const pinnedFileKind = defineKind<PinnedFileData>({
  name: "pinned_file",
  data: PinnedFileData,
  uniqueBy: (file) => file.path,
  title: (file) => file.path,
  namedBy: (file) => file.path,
  text: (file) => [file.path, file.note],
})

export const EnvironmentData = Schema.Struct({
  name: Title,
  environmentType: Schema.optionalKey(Title),
  url: Schema.optionalKey(Text),
  description: Schema.optionalKey(Text),
  fingerprint: Schema.optionalKey(StringMap),
  fingerprintHash: Schema.optionalKey(Schema.String),
})
export type EnvironmentData = typeof EnvironmentData.Type

/** A stable hash of a fingerprint: the same entries in any order give the same hash. */
export const fingerprintHashOf = (fingerprint: { readonly [key: string]: string }): string =>
  createHash("sha256")
    .update(JSON.stringify(Object.entries(fingerprint).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))))
    .digest("hex")
    .slice(0, 16)

export const environmentKind = defineKind<EnvironmentData>({
  name: "environment",
  data: EnvironmentData,
  uniqueBy: (environment) => environment.name,
  title: (environment) => environment.name,
  namedBy: (environment) => environment.name,
  text: (environment) => [
    environment.name,
    environment.environmentType,
    environment.url,
    environment.description,
    ...Object.entries(environment.fingerprint ?? {}).map(([key, value]) => `${key}=${value}`),
  ],
  normalize: (environment) => {
    const { fingerprintHash: _, ...rest } = environment
    return environment.fingerprint === undefined
      ? rest
      : { ...rest, fingerprintHash: fingerprintHashOf(environment.fingerprint) }
  },
})

export const MilestoneData = Schema.Struct({
  title: Title,
  description: Schema.optionalKey(Text),
  date: Schema.optionalKey(IsoDate),
  retrospective: Schema.optionalKey(Text),
  summaries: Schema.optionalKey(RecordIds),
})
export type MilestoneData = typeof MilestoneData.Type

export const milestoneKind = defineKind<MilestoneData>({
  name: "milestone",
  data: MilestoneData,
  title: (milestone) => milestone.title,
  namedBy: (milestone) => milestone.title,
  text: (milestone) => [milestone.title, milestone.description, milestone.retrospective],
})

/** Every kind of the engineering store, by the name list tools accept. */
export const engineeringKinds = [
  codeChangeKind,
  errorFixKind,
  techDebtKind,
  snippetKind,
  prChecklistItemKind,
  pinnedFileKind,
  environmentKind,
  milestoneKind,
] as const

export const engineeringStore = makeRecordStore("engineering", engineeringKinds)
