/**
 * The `archive_routine` prompt (toolset `context`): the text comes from ArchiveRoutine.ts.
 */
import { Clock, Effect, Schema } from "effect"
import {
  ArchiveRoutineArgs,
  archiveAgeDaysDefault,
  archiveCandidates,
  archiveRoutineText,
  archiveSummariesMax,
} from "../../engineering/ArchiveRoutine.ts"
import { invalidArgs, toToolError } from "../../engineering/ToolSupport.ts"
import type { McpPrompt } from "../Tool.ts"

/** `archive_routine`: guides an agent to fold old session summaries into a milestone retrospective. */
export const archiveRoutinePrompt: McpPrompt = {
  toolset: "context",
  definition: {
    name: "archive_routine",
    title: "Archive Routine",
    description:
      "Compress old session summaries into one milestone retrospective (add_milestone + archive_session_summaries), keeping the memory small.",
    arguments: [
      {
        name: "older_than_days",
        description: `Archive summaries older than this (default ${archiveAgeDaysDefault})`,
        required: false,
      },
      {
        name: "max_summaries",
        description: `At most this many per run (default and max ${archiveSummariesMax})`,
        required: false,
      },
      { name: "project", description: "Default: the connection's project", required: false },
    ],
  },
  get: (raw, caller) =>
    Effect.gen(function* () {
      const args = yield* Schema.decodeUnknownEffect(ArchiveRoutineArgs)(raw).pipe(
        Effect.mapError((issue) => invalidArgs(`archive_routine: ${issue.message}`)),
      )
      const candidates = yield* archiveCandidates(
        args.project ?? caller.project,
        args.older_than_days ?? archiveAgeDaysDefault,
        args.max_summaries ?? archiveSummariesMax,
        yield* Clock.currentTimeMillis,
      ).pipe(Effect.mapError(toToolError))
      return {
        description: `Archive ${candidates.summaries.length} old session summaries of ${candidates.project}`,
        messages: [{ role: "user" as const, content: { type: "text" as const, text: archiveRoutineText(candidates) } }],
      }
    }),
}
