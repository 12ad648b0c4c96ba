/**
 * The note tools (toolset `context`): sticky notes, session summaries and their archiving,
 * handoffs, on the `notes` store (workspaces and pins are in WorkspaceTools.ts).
 */
import { Clock, Effect, Schema } from "effect"
import { engineeringStore, milestoneKind } from "../../engineering/CodeHistory.ts"
import { nonEmptyText, RecordId, RecordIds, Text, text, title } from "../../engineering/Fields.ts"
import {
  handoffKind,
  handoffStatuses,
  isExpired,
  notesStore,
  sessionSummaryKind,
  stickyNoteKind,
  stickyNoteTtlSecondsMax,
} from "../../engineering/Notes.ts"
import { getRecord, listLimitDefault, listRecords } from "../../engineering/RecordQueries.ts"
import { dataOf } from "../../engineering/RecordStore.ts"
import {
  compact,
  conflict,
  cursorArg,
  described as d,
  engineeringTool,
  expectedRevisionArg,
  filesArg,
  idArg,
  limitArg,
  notFound,
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

const millisPerSecond = 1000
const millisPerDay = 24 * 60 * 60 * 1000

/** The note tools. */
export const noteTools = [
  engineeringTool(
    "context",
    {
      name: "add_sticky_note",
      title: "Add Sticky Note",
      description:
        "Leave a short note for yourself or other agents in this project. With ttl_seconds it expires on its own and leaves lists and search.",
    },
    Schema.Struct({
      text: nonEmptyText("The note"),
      ttl_seconds: optional(
        Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: stickyNoteTtlSecondsMax })).annotate({
          description: "Expire after this many seconds",
        }),
      ),
      tags: optional(tagsArg),
      color: optional(title("A color name, for people")),
      project: projectArg,
    }),
    (args, caller) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const expiresAt = args.ttl_seconds === undefined ? undefined : now + args.ttl_seconds * millisPerSecond
        const [note] = yield* sendOps(notesStore, caller, "add_sticky_note", projectOf(args, caller), [
          {
            _tag: "Create",
            kind: stickyNoteKind.name,
            data: compact({ text: args.text, tags: args.tags, color: args.color, expiresAt }),
          },
        ])
        return one("note", note)
      }),
  ),
  engineeringTool(
    "context",
    {
      name: "list_sticky_notes",
      title: "List Sticky Notes",
      description: "The project's live sticky notes, newest first (expired and removed notes are left out).",
      readOnly: true,
    },
    Schema.Struct({
      tag: optional(title("Only notes with this tag")),
      query: queryArg,
      limit: limitArg,
      cursor: cursorArg,
      project: projectArg,
    }),
    (args, caller) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const result = yield* readStore(notesStore, (view) =>
          listRecords(view, {
            project: projectOf(args, caller),
            kind: stickyNoteKind,
            newestFirst: true,
            limit: args.limit ?? listLimitDefault,
            cursor: args.cursor,
            query: args.query,
            where: (record) =>
              !isExpired(record, now) &&
              (args.tag === undefined || (dataOf(stickyNoteKind, record).tags ?? []).includes(args.tag)),
          }),
        )
        return page(result.records, result.nextCursor, "notes")
      }),
  ),
  engineeringTool(
    "context",
    {
      name: "remove_sticky_note",
      title: "Remove Sticky Note",
      description: "Remove a sticky note.",
      destructive: true,
    },
    Schema.Struct({ id: idArg, expected_revision: expectedRevisionArg, project: projectArg }),
    (args, caller) =>
      sendOps(notesStore, caller, "remove_sticky_note", projectOf(args, caller), [
        {
          _tag: "Delete",
          kind: stickyNoteKind.name,
          id: args.id,
          ...compact({ expectedRevision: args.expected_revision }),
        },
      ]).pipe(Effect.map(([note]) => one("removed", note))),
  ),
  engineeringTool(
    "context",
    {
      name: "add_session_summary",
      title: "Add Session Summary",
      description:
        "Record what this work session did, learned and left open, so the next session (or agent) can pick up. Call it before ending a session.",
    },
    Schema.Struct({
      summary: nonEmptyText("What the session did and learned"),
      highlights: optional(d(Schema.Array(Text).check(Schema.isMaxLength(100)), "Key points")),
      next_steps: optional(d(Schema.Array(Text).check(Schema.isMaxLength(100)), "What is left to do")),
      files: optional(filesArg),
      session_id: optional(title("Your session id, if any")),
      agent: optional(title("Default: the MCP client")),
      project: projectArg,
    }),
    (args, caller) =>
      sendOps(notesStore, caller, "add_session_summary", projectOf(args, caller), [
        {
          _tag: "Create",
          kind: sessionSummaryKind.name,
          data: compact({
            summary: args.summary,
            highlights: args.highlights,
            nextSteps: args.next_steps,
            files: args.files,
            sessionId: args.session_id,
            agent: args.agent ?? caller.client,
          }),
        },
      ]).pipe(Effect.map(([summary]) => one("summary", summary))),
  ),
  engineeringTool(
    "context",
    {
      name: "list_session_summaries",
      title: "List Session Summaries",
      description:
        "Past session summaries, newest first. Archived ones (folded into a milestone) are left out unless asked.",
      readOnly: true,
    },
    Schema.Struct({
      older_than_days: optional(
        d(Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 36_500 })), "Only summaries at least this old"),
      ),
      include_archived: optional(d(Schema.Boolean, "Also those folded into a milestone")),
      query: queryArg,
      limit: limitArg,
      cursor: cursorArg,
      project: projectArg,
    }),
    (args, caller) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const before = args.older_than_days === undefined ? undefined : now - args.older_than_days * millisPerDay
        const result = yield* readStore(notesStore, (view) =>
          listRecords(view, {
            project: projectOf(args, caller),
            kind: sessionSummaryKind,
            newestFirst: true,
            limit: args.limit ?? listLimitDefault,
            cursor: args.cursor,
            query: args.query,
            where: (record) =>
              (args.include_archived === true || dataOf(sessionSummaryKind, record).archivedInto === undefined) &&
              (before === undefined || record.createdAt <= before),
          }),
        )
        return page(result.records, result.nextCursor, "summaries")
      }),
  ),
  engineeringTool(
    "context",
    {
      name: "archive_session_summaries",
      title: "Archive Session Summaries",
      description:
        "Mark session summaries as folded into a milestone retrospective (see the archive_routine prompt); they leave list_session_summaries.",
    },
    Schema.Struct({
      ids: d(RecordIds.check(Schema.isMinLength(1)), "Session summary ids"),
      milestone_id: d(RecordId, "The add_milestone record holding the retrospective"),
      project: projectArg,
    }),
    (args, caller) =>
      Effect.gen(function* () {
        const project = projectOf(args, caller)
        const milestone = yield* readStore(engineeringStore, (view) =>
          getRecord(view, project, milestoneKind, args.milestone_id),
        )
        if (milestone === undefined)
          return yield* Effect.fail(notFound(`no milestone ${args.milestone_id} in project ${project}`))
        const archived = yield* sendOps(
          notesStore,
          caller,
          "archive_session_summaries",
          project,
          [...new Set(args.ids)].map((id) => ({
            _tag: "Update",
            kind: sessionSummaryKind.name,
            id,
            patch: { archivedInto: args.milestone_id },
          })),
        )
        return { structured: { archived: archived.map((record) => record.id), milestoneId: args.milestone_id } }
      }),
  ),
  engineeringTool(
    "context",
    {
      name: "add_handoff",
      title: "Add Handoff",
      description:
        "Hand work over to another agent: what was done, what is open, where to look. The receiver finds it with list_handoffs and acknowledges it.",
    },
    Schema.Struct({
      to_agent: title("Who takes over"),
      summary: nonEmptyText("What was done and what is open"),
      context: optional(text("Where to look, what to watch out for")),
      open_tasks: optional(d(RecordIds, "Ids of tasks to carry on")),
      files: optional(filesArg),
      from_agent: optional(title("Default: the MCP client")),
      project: projectArg,
    }),
    (args, caller) =>
      sendOps(notesStore, caller, "add_handoff", projectOf(args, caller), [
        {
          _tag: "Create",
          kind: handoffKind.name,
          data: compact({
            fromAgent: args.from_agent ?? caller.client,
            toAgent: args.to_agent,
            summary: args.summary,
            context: args.context,
            openTasks: args.open_tasks,
            files: args.files,
            status: "open",
          }),
        },
      ]).pipe(Effect.map(([handoff]) => one("handoff", handoff))),
  ),
  engineeringTool(
    "context",
    {
      name: "acknowledge_handoff",
      title: "Acknowledge Handoff",
      description: "Confirm you have taken over a handoff. Fails with CONFLICT if it was already acknowledged.",
    },
    Schema.Struct({
      id: idArg,
      note: optional(text("A reply to the sender")),
      expected_revision: expectedRevisionArg,
      project: projectArg,
    }),
    (args, caller) =>
      Effect.gen(function* () {
        const project = projectOf(args, caller)
        const handoff = yield* readStore(notesStore, (view) => getRecord(view, project, handoffKind, args.id))
        if (handoff === undefined) return yield* Effect.fail(notFound(`no handoff ${args.id} in project ${project}`))
        const data = dataOf(handoffKind, handoff)
        if (data.status === "acknowledged")
          return yield* Effect.fail(
            conflict(`handoff ${args.id} was already acknowledged by ${data.acknowledgedBy ?? "someone"}`),
          )
        const [updated] = yield* sendOps(notesStore, caller, "acknowledge_handoff", project, [
          {
            _tag: "Update",
            kind: handoffKind.name,
            id: args.id,
            expectedRevision: args.expected_revision ?? handoff.revision,
            patch: compact({ status: "acknowledged", acknowledgedBy: caller.client, acknowledgementNote: args.note }),
          },
        ])
        return one("handoff", updated)
      }),
  ),
  engineeringTool(
    "context",
    {
      name: "list_handoffs",
      title: "List Handoffs",
      description: "Handoff memos, newest first. At the start of a session, look for open ones addressed to you.",
      readOnly: true,
    },
    Schema.Struct({
      status: optional(d(Schema.Literals(handoffStatuses), "Only this status")),
      to_agent: optional(title("Only handoffs to this agent")),
      from_agent: optional(title("Only handoffs from this agent")),
      limit: limitArg,
      cursor: cursorArg,
      project: projectArg,
    }),
    (args, caller) =>
      readStore(notesStore, (view) =>
        listRecords(view, {
          project: projectOf(args, caller),
          kind: handoffKind,
          newestFirst: true,
          limit: args.limit ?? listLimitDefault,
          cursor: args.cursor,
          where: (record) => {
            const handoff = dataOf(handoffKind, record)
            return (
              (args.status === undefined || handoff.status === args.status) &&
              (args.to_agent === undefined || handoff.toAgent === args.to_agent) &&
              (args.from_agent === undefined || handoff.fromAgent === args.from_agent)
            )
          },
        }),
      ).pipe(Effect.map((result) => page(result.records, result.nextCursor, "handoffs"))),
  ),
]
