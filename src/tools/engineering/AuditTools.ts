/**
 * The audit tool (toolset `audit`): query_audit over the audit ledger (AuditLedger.ts).
 */
import { Effect, Schema } from "effect"
import { AuditLedger } from "../../engineering/AuditLedger.ts"
import { auditLimitDefault, auditLimitMax } from "../../engineering/AuditQueries.ts"
import { isoDate, RecordId, title } from "../../engineering/Fields.ts"
import { described as d, engineeringTool, toToolError } from "../../engineering/ToolSupport.ts"

const optional = Schema.optionalKey

/** The audit tool. */
export const auditTools = [
  engineeringTool(
    "audit",
    {
      name: "query_audit",
      title: "Query Audit Ledger",
      description:
        'Who changed what, when and through which tool: the append-only ledger of every mutation, newest first. project "*" spans all projects.',
      readOnly: true,
    },
    Schema.Struct({
      store: optional(title("e.g. tasks, notes, graph, gates")),
      tool: optional(title("Only entries of this tool")),
      who: optional(title("Substring of the client identity")),
      record_id: optional(d(RecordId, "Only entries about this record")),
      since: optional(isoDate("From this time, ISO 8601")),
      until: optional(isoDate("Before this time, ISO 8601")),
      limit: optional(
        Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: auditLimitMax })).annotate({
          description: `Max entries (default ${auditLimitDefault})`,
        }),
      ),
      cursor: optional(Schema.Int.annotate({ description: "nextCursor of the previous page" })),
      project: optional(title('Default: the connection\'s project; "*" for all')),
    }),
    (args, caller) =>
      Effect.gen(function* () {
        const ledger = yield* AuditLedger
        const result = yield* ledger
          .query({
            project: args.project ?? caller.project,
            store: args.store,
            tool: args.tool,
            who: args.who,
            recordId: args.record_id,
            since: args.since === undefined ? undefined : Date.parse(args.since),
            until: args.until === undefined ? undefined : Date.parse(args.until),
            limit: args.limit ?? auditLimitDefault,
            cursor: args.cursor,
          })
          .pipe(Effect.mapError(toToolError))
        return {
          structured: {
            entries: result.entries.map((entry) => ({ ...entry, at: new Date(entry.at).toISOString() })),
            ...(result.nextCursor !== undefined ? { nextCursor: result.nextCursor } : {}),
          },
        }
      }),
  ),
]
