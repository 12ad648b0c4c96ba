/**
 * The code-history tools (toolset `engineering`): code changes, error fixes and tech debt bound
 * to their Git context, snippets, PR checklists, environments, milestones, and one list tool for
 * all of them, on the `engineering` store.
 */
import { Effect, Schema } from "effect"
import {
  changeTypes,
  codeChangeKind,
  type EnvironmentData,
  engineeringKinds,
  engineeringStore,
  environmentKind,
  errorFixKind,
  milestoneKind,
  prChecklistItemKind,
  snippetKind,
  techDebtKind,
  techDebtSeverities,
} from "../../engineering/CodeHistory.ts"
import {
  code,
  filePath,
  isoDate,
  mapEntriesMax,
  mapEntry,
  mapOfEntries,
  nonEmptyText,
  RecordId,
  RecordIds,
  text,
  title,
} from "../../engineering/Fields.ts"
import { getByUnique, listLimitDefault, listRecords } from "../../engineering/RecordQueries.ts"
import type { StoredRecord } from "../../engineering/RecordStore.ts"
import {
  compact,
  cursorArg,
  cwdArg,
  described as d,
  engineeringTool,
  expectedRevisionArg,
  filesArg,
  gitFieldsOf,
  idArg,
  invalidArgs,
  limitArg,
  one,
  page,
  projectArg,
  projectOf,
  queryArg,
  readStore,
  sendOps,
  tagsArg,
} from "../../engineering/ToolSupport.ts"

const optional = Schema.optionalKey

const gitNote = "Branch, commit and commit message are recorded from the repository by themselves."

const engineeringListKinds = engineeringKinds.map((kind) => kind.name) as unknown as readonly [string, ...Array<string>]

/** The code-history tools. */
export const codeHistoryTools = [
  engineeringTool(
    "engineering",
    {
      name: "log_code_change",
      title: "Log Code Change",
      description: `Record a code change you made: what and why, files touched, the task it serves. ${gitNote}`,
    },
    Schema.Struct({
      summary: nonEmptyText("What changed and why"),
      change_type: optional(d(Schema.Literals(changeTypes), "Kind of change")),
      files: optional(filesArg),
      task_id: optional(d(RecordId, "The task it serves")),
      cwd: cwdArg,
      project: projectArg,
    }),
    (args, caller) =>
      Effect.gen(function* () {
        const git = yield* gitFieldsOf(args.cwd, caller)
        const [change] = yield* sendOps(engineeringStore, caller, "log_code_change", projectOf(args, caller), [
          {
            _tag: "Create",
            kind: codeChangeKind.name,
            data: compact({
              summary: args.summary,
              changeType: args.change_type,
              files: args.files,
              taskId: args.task_id,
              ...git,
            }),
          },
        ])
        return one("change", change)
      }),
  ),
  engineeringTool(
    "engineering",
    {
      name: "log_error_fix",
      title: "Log Error Fix",
      description: `Record how an error was fixed: its signature (message or stack head), the fix, the root cause, the files. Search these before debugging a familiar error. ${gitNote}`,
    },
    Schema.Struct({
      error_signature: nonEmptyText("The error message or stack head"),
      fix: nonEmptyText("What fixed it"),
      root_cause: optional(text("Why it happened")),
      files: optional(filesArg),
      cwd: cwdArg,
      project: projectArg,
    }),
    (args, caller) =>
      Effect.gen(function* () {
        const git = yield* gitFieldsOf(args.cwd, caller)
        const [fix] = yield* sendOps(engineeringStore, caller, "log_error_fix", projectOf(args, caller), [
          {
            _tag: "Create",
            kind: errorFixKind.name,
            data: compact({
              errorSignature: args.error_signature,
              fix: args.fix,
              rootCause: args.root_cause,
              files: args.files,
              ...git,
            }),
          },
        ])
        return one("errorFix", fix)
      }),
  ),
  engineeringTool(
    "engineering",
    {
      name: "log_tech_debt",
      title: "Log Tech Debt",
      description: `Record tech debt you noticed but did not fix: what, how severe, where (file or file:line). ${gitNote}`,
    },
    Schema.Struct({
      description: nonEmptyText("What is wrong and what it costs"),
      severity: d(Schema.Literals(techDebtSeverities), "How bad"),
      location: filePath("File or file:line"),
      cwd: cwdArg,
      project: projectArg,
    }),
    (args, caller) =>
      Effect.gen(function* () {
        const git = yield* gitFieldsOf(args.cwd, caller)
        const [debt] = yield* sendOps(engineeringStore, caller, "log_tech_debt", projectOf(args, caller), [
          {
            _tag: "Create",
            kind: techDebtKind.name,
            data: { description: args.description, severity: args.severity, location: args.location, ...git },
          },
        ])
        return one("techDebt", debt)
      }),
  ),
  engineeringTool(
    "engineering",
    {
      name: "add_snippet",
      title: "Add Snippet",
      description: "Save a reusable code snippet with a title and language.",
    },
    Schema.Struct({
      title: title("What it does"),
      code: code("The code"),
      language: optional(title("e.g. ts, sql, bash")),
      description: optional(text("When to use it")),
      tags: optional(tagsArg),
      project: projectArg,
    }),
    (args, caller) =>
      sendOps(engineeringStore, caller, "add_snippet", projectOf(args, caller), [
        {
          _tag: "Create",
          kind: snippetKind.name,
          data: compact({
            title: args.title,
            code: args.code,
            language: args.language,
            description: args.description,
            tags: args.tags,
          }),
        },
      ]).pipe(Effect.map(([snippet]) => one("snippet", snippet))),
  ),
  engineeringTool(
    "engineering",
    {
      name: "add_pr_checklist_item",
      title: "Add PR Checklist Item",
      description: "Add an item to a pull request's checklist (things to verify before merging).",
    },
    Schema.Struct({
      pr: title("The PR: number, URL or branch"),
      text: nonEmptyText("What to verify"),
      checked: optional(d(Schema.Boolean, "Already done (default false)")),
      project: projectArg,
    }),
    (args, caller) =>
      sendOps(engineeringStore, caller, "add_pr_checklist_item", projectOf(args, caller), [
        {
          _tag: "Create",
          kind: prChecklistItemKind.name,
          data: compact({
            pr: args.pr,
            text: args.text,
            checked: args.checked ?? false,
            checkedBy: args.checked === true ? caller.client : undefined,
          }),
        },
      ]).pipe(Effect.map(([item]) => one("item", item))),
  ),
  engineeringTool(
    "engineering",
    {
      name: "update_pr_checklist_item",
      title: "Update PR Checklist Item",
      description: "Check or uncheck a PR checklist item, or reword it.",
    },
    Schema.Struct({
      id: idArg,
      checked: optional(d(Schema.Boolean, "Done or not")),
      text: optional(nonEmptyText("New wording")),
      expected_revision: expectedRevisionArg,
      project: projectArg,
    }),
    (args, caller) => {
      if (args.checked === undefined && args.text === undefined)
        return Effect.fail(invalidArgs("nothing to update: give checked or text"))
      return sendOps(engineeringStore, caller, "update_pr_checklist_item", projectOf(args, caller), [
        {
          _tag: "Update",
          kind: prChecklistItemKind.name,
          id: args.id,
          patch: compact({
            checked: args.checked,
            text: args.text,
            checkedBy: args.checked === true ? caller.client : undefined,
          }),
          ...compact({ expectedRevision: args.expected_revision }),
        },
      ]).pipe(Effect.map(([item]) => one("item", item)))
    },
  ),
  engineeringTool(
    "engineering",
    {
      name: "register_environment",
      title: "Register Environment",
      description:
        "Register or update an environment (dev, CI, staging, ...) by name, with a fingerprint (tool versions, OS, ...). The answer says whether the fingerprint changed since last time.",
      idempotent: true,
    },
    Schema.Struct({
      name: title("The environment's name"),
      environment_type: optional(title("e.g. dev, ci, staging, production")),
      url: optional(text("Where it runs")),
      description: optional(text("What it is")),
      fingerprint: optional(
        d(
          Schema.Array(mapEntry("name=value")).check(Schema.isMaxLength(mapEntriesMax)),
          'e.g. ["node=20.11", "os=linux"]',
        ),
      ),
      project: projectArg,
    }),
    (args, caller) =>
      Effect.gen(function* () {
        const project = projectOf(args, caller)
        const previous = yield* readStore(engineeringStore, (view) =>
          getByUnique(view, project, environmentKind, args.name),
        )
        const [environment] = yield* sendOps(engineeringStore, caller, "register_environment", project, [
          {
            _tag: "Upsert",
            kind: environmentKind.name,
            data: compact({
              name: args.name,
              environmentType: args.environment_type,
              url: args.url,
              description: args.description,
              fingerprint: args.fingerprint === undefined ? undefined : mapOfEntries(args.fingerprint),
            }),
          },
        ])
        const hashOf = (record: StoredRecord | undefined) =>
          record === undefined ? undefined : (record.data as EnvironmentData).fingerprintHash
        return one("environment", environment, {
          fingerprintChanged: previous === undefined ? null : hashOf(previous) !== hashOf(environment),
        })
      }),
  ),
  engineeringTool(
    "engineering",
    {
      name: "add_milestone",
      title: "Add Milestone",
      description:
        "Record a milestone reached, optionally with a retrospective (what went well, what did not, what was learned).",
    },
    Schema.Struct({
      title: title("The milestone"),
      description: optional(text("What was reached")),
      date: optional(isoDate("When, ISO 8601")),
      retrospective: optional(text("What went well, what did not, what was learned")),
      summary_ids: optional(d(RecordIds, "Session summaries this milestone covers")),
      project: projectArg,
    }),
    (args, caller) =>
      sendOps(engineeringStore, caller, "add_milestone", projectOf(args, caller), [
        {
          _tag: "Create",
          kind: milestoneKind.name,
          data: compact({
            title: args.title,
            description: args.description,
            date: args.date,
            retrospective: args.retrospective,
            summaries: args.summary_ids,
          }),
        },
      ]).pipe(Effect.map(([milestone]) => one("milestone", milestone))),
  ),
  engineeringTool(
    "engineering",
    {
      name: "list_engineering_records",
      title: "List Engineering Records",
      description:
        "List one kind of engineering record, newest first: code_change, error_fix, tech_debt, snippet, pr_checklist_item, pinned_file, environment or milestone. Use query to search.",
      readOnly: true,
    },
    Schema.Struct({
      kind: d(Schema.Literals(engineeringListKinds), "Which records"),
      query: queryArg,
      limit: limitArg,
      cursor: cursorArg,
      project: projectArg,
    }),
    (args, caller) =>
      readStore(engineeringStore, (view) =>
        listRecords(view, {
          project: projectOf(args, caller),
          kind: engineeringKinds.find((kind) => kind.name === args.kind)!,
          newestFirst: true,
          limit: args.limit ?? listLimitDefault,
          cursor: args.cursor,
          query: args.query,
        }),
      ).pipe(Effect.map((result) => page(result.records, result.nextCursor, "records"))),
  ),
]
