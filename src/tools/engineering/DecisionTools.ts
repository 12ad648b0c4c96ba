/**
 * The ADR tools (toolset `decisions`): record_adr, update_adr, list_adrs, on the `adrs` store.
 */
import { Clock, Effect, Schema } from "effect"
import { monotonicFactory } from "ulid"
import { type AdrData, adrKind, adrLabel, adrStatuses, adrsStore } from "../../engineering/Adrs.ts"
import { nonEmptyText, RecordId, text, title } from "../../engineering/Fields.ts"
import { listLimitDefault, listRecords, presentRecord } from "../../engineering/RecordQueries.ts"
import { dataOf, type RecordOp, type StoredRecord } from "../../engineering/RecordStore.ts"
import {
  compact,
  cursorArg,
  described as d,
  engineeringTool,
  expectedRevisionArg,
  idArg,
  invalidArgs,
  limitArg,
  projectArg,
  projectOf,
  queryArg,
  readStore,
  sendOps,
  tagsArg,
} from "../../engineering/ToolSupport.ts"

const optional = Schema.optionalKey

/**
 * ADR ids are made here, not by the store (a superseding ADR's update names the new id in the same
 * step); monotonic, so ADRs recorded one after another within a millisecond still list in creation
 * (and so number) order.
 */
const nextAdrId = monotonicFactory()

const presentAdr = (record: StoredRecord | undefined) =>
  record === undefined ? null : { label: adrLabel(record.number), ...presentRecord(record) }

/** The ADR tools. */
export const decisionTools = [
  engineeringTool(
    "decisions",
    {
      name: "record_adr",
      title: "Record ADR",
      description:
        "Record an architecture decision (context, decision, consequences); numbered ADR-0001, ... per project. With supersedes, the older ADR becomes superseded in the same step.",
    },
    Schema.Struct({
      title: title("The decision in a few words"),
      context: nonEmptyText("The forces and constraints at play"),
      decision: nonEmptyText("What was decided"),
      consequences: optional(text("What follows, good and bad")),
      status: optional(d(Schema.Literals(adrStatuses), "Default proposed")),
      supersedes: optional(d(RecordId, "Id of the ADR this one replaces")),
      tags: optional(tagsArg),
      project: projectArg,
    }),
    (args, caller) =>
      Effect.gen(function* () {
        const id = nextAdrId(yield* Clock.currentTimeMillis)
        const data: AdrData = compact({
          title: args.title,
          status: args.status ?? "proposed",
          context: args.context,
          decision: args.decision,
          consequences: args.consequences,
          supersedes: args.supersedes,
          tags: args.tags,
        })
        const ops: Array<RecordOp> = [{ _tag: "Create", kind: adrKind.name, id, data }]
        if (args.supersedes !== undefined)
          ops.push({
            _tag: "Update",
            kind: adrKind.name,
            id: args.supersedes,
            patch: { status: "superseded", supersededBy: id },
          })
        const [adr, superseded] = yield* sendOps(adrsStore, caller, "record_adr", projectOf(args, caller), ops)
        return {
          structured: {
            adr: presentAdr(adr),
            ...(superseded !== undefined ? { superseded: presentAdr(superseded) } : {}),
          },
        }
      }),
  ),
  engineeringTool(
    "decisions",
    {
      name: "update_adr",
      title: "Update ADR",
      description:
        "Change an ADR's status (e.g. proposed → accepted, or deprecated) or its text. Only the fields given change.",
    },
    Schema.Struct({
      id: idArg,
      expected_revision: expectedRevisionArg,
      status: optional(d(Schema.Literals(adrStatuses), "New status")),
      title: optional(title("New title")),
      context: optional(nonEmptyText("New context")),
      decision: optional(nonEmptyText("New decision")),
      consequences: optional(text("New consequences")),
      tags: optional(tagsArg),
      project: projectArg,
    }),
    (args, caller) => {
      const { id, expected_revision, project: _, ...fields } = args
      if (Object.values(fields).every((value) => value === undefined))
        return Effect.fail(invalidArgs("nothing to update: give at least one field"))
      return sendOps(adrsStore, caller, "update_adr", projectOf(args, caller), [
        { _tag: "Update", kind: adrKind.name, id, patch: fields, ...compact({ expectedRevision: expected_revision }) },
      ]).pipe(Effect.map(([adr]) => ({ structured: { adr: presentAdr(adr) } })))
    },
  ),
  engineeringTool(
    "decisions",
    {
      name: "list_adrs",
      title: "List ADRs",
      description:
        "List the project's architecture decisions in number order, filtered by status or text. Check before deciding again.",
      readOnly: true,
    },
    Schema.Struct({
      status: optional(d(Schema.Literals(adrStatuses), "Only this status")),
      query: queryArg,
      limit: limitArg,
      cursor: cursorArg,
      project: projectArg,
    }),
    (args, caller) =>
      readStore(adrsStore, (view) =>
        listRecords(view, {
          project: projectOf(args, caller),
          kind: adrKind,
          newestFirst: false,
          limit: args.limit ?? listLimitDefault,
          cursor: args.cursor,
          query: args.query,
          where: (record) => args.status === undefined || dataOf(adrKind, record).status === args.status,
        }),
      ).pipe(
        Effect.map((result) => ({
          structured: {
            adrs: result.records.map(presentAdr),
            ...(result.nextCursor !== undefined ? { nextCursor: result.nextCursor } : {}),
          },
        })),
      ),
  ),
]
