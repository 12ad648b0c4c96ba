/**
 * The conversation-memory tools of seed 001 — write_message, read_messages, search_messages,
 * update_message, delete_message, rebuild_index, get_system_health — with the seed's argument
 * names, limits, response JSON and error envelope.
 *
 * Results are the seed's JSON object, as compact JSON text in the TextContent and as
 * structuredContent. Failures are `{"status":"ERROR","error":{"code","message"}}` with `isError`.
 * Arguments that are JSON strings (`metadata_json`, `filters_json`, `relation_types_json`) are
 * decoded here with Schema; unknown keys inside them are refused, so a typo is never silently
 * ignored. Everything acts in the caller's project.
 */
import { Effect, Result, Schema } from "effect"
import { Router } from "../actors/Router.ts"
import { healthReport } from "../conversations/ConversationHealth.ts"
import { indexOf } from "../conversations/ConversationIndex.ts"
import { switchesKey } from "../conversations/ConversationKeys.ts"
import {
  neighborsDefault,
  neighborsMax,
  pageLimitDefault,
  pageLimitMax,
  readContext,
  readHistory,
  readSessions,
  relationDepthDefault,
  relationDepthMax,
} from "../conversations/ConversationReads.ts"
import {
  searchContextSizeMax,
  searchLimitDefault,
  searchLimitMax,
  searchMessages as searchResults,
} from "../conversations/ConversationSearch.ts"
import {
  type ConversationFailure,
  conversationStore,
  type DeleteReply,
  type PurgeReply,
  type UpdateReply,
  type WriteReply,
} from "../conversations/ConversationStore.ts"
import { cursorBytesMax, historyCursorAfter, sessionsCursorAfter } from "../conversations/Cursor.ts"
import { currentGen } from "../conversations/Generations.ts"
import {
  type ConversationStoreHandle,
  discardLeftovers,
  storeBytes,
  waitForCheckpoint,
} from "../conversations/Maintenance.ts"
import { readStats } from "../conversations/MessageState.ts"
import {
  Content,
  defaultMetadata,
  importanceMax,
  isMaxUtf8Bytes,
  jsonArgumentBytesMax,
  MemoryKind,
  MemoryTier,
  MetadataJson,
  messageJson,
  patchMetadata,
  queryBytesMax,
  RelationType,
  Role,
  SessionId,
  Tag,
  tagsCountMax,
  Ulid,
} from "../conversations/Model.ts"
import { SearchIndexer } from "../search/Indexer.ts"
import type { StoreView } from "../stores/checkpoint/Checkpoint.ts"
import { StoreError } from "../stores/StoreError.ts"
import {
  inputSchemaOf,
  makeTool,
  storeToolError,
  type Tool,
  ToolError,
  type ToolOutput,
  withInputSchema,
} from "./Tool.ts"

/** Maps store and domain failures to the seed's error codes. */
export const toConversationToolError = (error: ConversationFailure | StoreError): ToolError => {
  if (error instanceof StoreError) {
    return storeToolError(error)
  }
  if (error._tag === "GenerationRefused")
    return new ToolError({ code: error.reason === "Busy" ? "BUSY" : "VALIDATION_ERROR", message: error.message })
  const code = error.reason === "NotFound" ? "NOT_FOUND" : error.reason === "Conflict" ? "CONFLICT" : "VALIDATION_ERROR"
  return new ToolError({ code, message: error.message })
}

const invalid = (message: string) => new ToolError({ code: "VALIDATION_ERROR", message })

const storeHandle: Effect.Effect<ConversationStoreHandle, never, Router> = Effect.gen(function* () {
  return (yield* Router).store(conversationStore)
})

const read = <A>(query: (view: StoreView, store: ConversationStoreHandle) => A) =>
  Effect.gen(function* () {
    const store = yield* storeHandle
    return yield* store.read((view) => query(view, store))
  }).pipe(Effect.mapError(toConversationToolError))

/** Sends one command; the caller's idempotency key (if any) makes a retried call apply once. */
const send = <Reply>(command: Parameters<ConversationStoreHandle["send"]>[0], idempotencyKey?: string) =>
  Effect.gen(function* () {
    const store = yield* storeHandle
    return (yield* store.send(command, { idempotencyKey })) as Reply
  }).pipe(Effect.mapError(toConversationToolError))

/** The seed's answer: compact JSON text, and the same object as structured content. */
const answer = (structured: Record<string, unknown>): ToolOutput => ({ structured, text: JSON.stringify(structured) })

/** Decodes a JSON-string argument, refusing unknown keys. */
const decodeJsonArgument = <A>(name: string, schema: Schema.Codec<A, string>, text: string) => {
  const decoded = Schema.decodeUnknownResult(schema)(text, { onExcessProperty: "error" })
  return Result.isSuccess(decoded)
    ? Effect.succeed(decoded.success)
    : Effect.fail(invalid(`${name}: ${decoded.failure.message}`))
}

const JsonArgument = Schema.String.check(isMaxUtf8Bytes(jsonArgumentBytesMax))
const between = (minimum: number, maximum: number) => Schema.Int.check(Schema.isBetween({ minimum, maximum }))

const emptyObjectSchema = { type: "object", properties: {}, additionalProperties: false }

const conversationTool = <Args>(
  definition: { name: string; title: string; description: string; readOnly: boolean; destructive?: boolean },
  args: Schema.Codec<Args, unknown> & Schema.Top,
  run: Tool<Args, Router | SearchIndexer>["run"],
): Tool<Args, Router | SearchIndexer> =>
  makeTool({
    definition: withInputSchema(
      {
        name: definition.name,
        title: definition.title,
        description: definition.description,
        annotations: {
          title: definition.title,
          readOnlyHint: definition.readOnly,
          destructiveHint: definition.destructive ?? false,
          idempotentHint: definition.readOnly,
          openWorldHint: false,
        },
      },
      // An empty Struct's generated schema is "anything but null"; MCP wants an object schema.
      () =>
        Object.keys((args as { fields?: object }).fields ?? {}).length === 0 ? emptyObjectSchema : inputSchemaOf(args),
    ),
    toolset: "conversations",
    errorFormat: "envelope",
    args,
    run,
  })

// ---------------------------------------------------------------------------------------------
// write_message, update_message, delete_message

const WriteArgs = Schema.Struct({
  session_id: SessionId.annotate({ description: "Conversation session, 1-256 UTF-8 bytes" }),
  role: Role.annotate({ description: "user, assistant or system" }),
  content: Content.annotate({ description: "Message text, 1 byte to 1 MiB of UTF-8" }),
  metadata_json: Schema.optionalKey(
    JsonArgument.annotate({
      description:
        'Metadata as a JSON object string, e.g. {"tags":["project"],"memory_kind":"semantic","importance":80}. Fields: tool_call_id, tags, memory_tier, memory_kind, importance, summary, relations, source_message_ids',
    }),
  ),
})

const writeMessage = conversationTool(
  {
    name: "write_message",
    title: "Write Message",
    description:
      "Store a new conversation message durably (acknowledged after it is on disk). The server assigns message_id (ULID), timestamp, updated_at and revision 1.",
    readOnly: false,
  },
  WriteArgs,
  (args, caller) =>
    Effect.gen(function* () {
      const patch =
        args.metadata_json === undefined
          ? {}
          : yield* decodeJsonArgument("metadata_json", MetadataJson, args.metadata_json)
      const reply = yield* send<WriteReply>(
        {
          _tag: "Write",
          project: caller.project,
          created_by: caller.client,
          session_id: args.session_id,
          role: args.role,
          content: args.content,
          metadata: patchMetadata(defaultMetadata, patch),
        },
        caller.idempotencyKey,
      )
      return answer({ status: "OK", message: messageJson(reply.message) })
    }),
)

const UpdateArgs = Schema.Struct({
  message_id: Ulid.annotate({ description: "The message to update (26-character ULID)" }),
  content: Schema.optionalKey(Content.annotate({ description: "New content, at most 1 MiB" })),
  metadata_json: Schema.optionalKey(
    JsonArgument.annotate({
      description: "Metadata fields to change, as a JSON object string; absent fields are kept",
    }),
  ),
  expected_revision: Schema.optionalKey(
    Schema.Int.check(Schema.isGreaterThanOrEqualTo(1)).annotate({
      description: "Fail with CONFLICT unless the message is at this revision",
    }),
  ),
})

const updateMessage = conversationTool(
  {
    name: "update_message",
    title: "Update Message",
    description:
      "Change a message's content and/or metadata, keeping its id, session, role and timestamp. Give content or metadata_json (or both). An update to the same values changes nothing and answers changed:false. expected_revision guards against concurrent updates (CONFLICT).",
    readOnly: false,
  },
  UpdateArgs,
  (args, caller) =>
    Effect.gen(function* () {
      if (args.content === undefined && args.metadata_json === undefined)
        return yield* invalid("update_message needs content or metadata_json")
      const metadata =
        args.metadata_json === undefined
          ? undefined
          : yield* decodeJsonArgument("metadata_json", MetadataJson, args.metadata_json)
      const reply = yield* send<UpdateReply>(
        {
          _tag: "Update",
          project: caller.project,
          message_id: args.message_id,
          ...(args.content !== undefined ? { content: args.content } : {}),
          ...(metadata !== undefined ? { metadata } : {}),
          ...(args.expected_revision !== undefined ? { expected_revision: args.expected_revision } : {}),
        },
        caller.idempotencyKey,
      )
      return answer({ status: "OK", changed: reply.changed, message: messageJson(reply.message) })
    }),
)

const DeleteArgs = Schema.Struct({
  message_id: Ulid.annotate({ description: "The message to delete (canonical 26-character ULID)" }),
  session_id: Schema.optionalKey(SessionId.annotate({ description: "Only delete if the message is in this session" })),
})

const deleteMessage = conversationTool(
  {
    name: "delete_message",
    title: "Delete Message",
    description:
      'Delete a message logically: it disappears from reads and searches at once; rebuild_index removes it physically. Answers {"status":"NOT_FOUND"} (not an error) when there is no such live message or the session_id guard does not match.',
    readOnly: false,
    destructive: true,
  },
  DeleteArgs,
  (args, caller) =>
    send<DeleteReply>(
      {
        _tag: "Delete",
        project: caller.project,
        message_id: args.message_id,
        ...(args.session_id !== undefined ? { session_id: args.session_id } : {}),
      },
      caller.idempotencyKey,
    ).pipe(Effect.map((reply) => answer({ status: reply.deleted ? "OK" : "NOT_FOUND" }))),
)

// ---------------------------------------------------------------------------------------------
// read_messages

const ReadArgs = Schema.Struct({
  view: Schema.optionalKey(
    Schema.Literals(["history", "context", "sessions"]).annotate({
      description: "history (default), context or sessions",
    }),
  ),
  limit: Schema.optionalKey(between(1, pageLimitMax).annotate({ description: "Items per page, 1-1000 (default 100)" })),
  cursor: Schema.optionalKey(
    Schema.String.check(isMaxUtf8Bytes(cursorBytesMax)).annotate({
      description: "nextCursor of the previous page (opaque)",
    }),
  ),
  session_id: Schema.optionalKey(SessionId.annotate({ description: "history: the session to read (required)" })),
  message_id: Schema.optionalKey(Ulid.annotate({ description: "context: the message at the centre (required)" })),
  before: Schema.optionalKey(
    between(0, neighborsMax).annotate({ description: "context: earlier messages of the session, 0-10 (default 1)" }),
  ),
  after: Schema.optionalKey(
    between(0, neighborsMax).annotate({ description: "context: later messages of the session, 0-10 (default 1)" }),
  ),
  relation_depth: Schema.optionalKey(
    between(0, relationDepthMax).annotate({ description: "context: relation hops to follow, 0-2 (default 1)" }),
  ),
  relation_types_json: Schema.optionalKey(
    JsonArgument.annotate({
      description: 'context: JSON array of relation types to follow, e.g. ["derived_from"] (default all)',
    }),
  ),
})
type ReadArgs = typeof ReadArgs.Type

const cursorPosition = (position: Result.Result<string, string>) =>
  Result.isSuccess(position) ? Effect.succeed(position.success) : Effect.fail(invalid(position.failure))

const RelationTypesJson = Schema.fromJsonString(Schema.Array(RelationType).check(Schema.isMaxLength(16)))

const readHistoryView = (args: ReadArgs, project: string) =>
  Effect.gen(function* () {
    if (args.session_id === undefined) return yield* invalid("session_id is required for view history")
    const session = args.session_id
    const after =
      args.cursor === undefined ? undefined : yield* cursorPosition(historyCursorAfter(args.cursor, session))
    const page = yield* read((view) => readHistory(view, project, session, args.limit ?? pageLimitDefault, after))
    return answer({ ...page })
  })

const readSessionsView = (args: ReadArgs, project: string) =>
  Effect.gen(function* () {
    const after = args.cursor === undefined ? undefined : yield* cursorPosition(sessionsCursorAfter(args.cursor))
    const page = yield* read((view) => readSessions(view, project, args.limit ?? pageLimitDefault, after))
    return answer({ ...page })
  })

const readContextView = (args: ReadArgs, project: string) =>
  Effect.gen(function* () {
    if (args.message_id === undefined) return yield* invalid("message_id is required for view context")
    const id = args.message_id
    const types =
      args.relation_types_json === undefined
        ? undefined
        : yield* decodeJsonArgument("relation_types_json", RelationTypesJson, args.relation_types_json)
    const context = yield* read((view) =>
      readContext(view, project, id, {
        before: args.before ?? neighborsDefault,
        after: args.after ?? neighborsDefault,
        relationDepth: args.relation_depth ?? relationDepthDefault,
        ...(types !== undefined ? { relationTypes: types } : {}),
      }),
    )
    if (context === undefined) return yield* new ToolError({ code: "NOT_FOUND", message: `message ${id} not found` })
    return answer({ ...context })
  })

const readMessages = conversationTool(
  {
    name: "read_messages",
    title: "Read Messages",
    description:
      "Read stored messages. view history (default): a session's messages in creation order (session_id required), paged with limit and nextCursor. view context: one message (message_id) with its neighbours in the session (before/after) and its relation graph (relation_depth, relation_types_json). view sessions: the sessions with message counts per kind, paged. Answers stay within about 8 MiB.",
    readOnly: true,
  },
  ReadArgs,
  (args, caller) => {
    switch (args.view ?? "history") {
      case "history":
        return readHistoryView(args, caller.project)
      case "sessions":
        return readSessionsView(args, caller.project)
      case "context":
        return readContextView(args, caller.project)
    }
  },
)

// ---------------------------------------------------------------------------------------------
// search_messages

const SearchArgs = Schema.Struct({
  query: Schema.String.check(Schema.isMinLength(1), isMaxUtf8Bytes(queryBytesMax)).annotate({
    description: "Words to find in content, summary and tags (1-4096 UTF-8 bytes)",
  }),
  session_id: Schema.optionalKey(SessionId.annotate({ description: "Only search this session" })),
  filters_json: Schema.optionalKey(
    JsonArgument.annotate({
      description:
        'Filters as a JSON object string: {"kinds":[...],"tiers":[...],"tags":[...]}. kinds and tiers match any listed value; tags must all be present',
    }),
  ),
  min_importance: Schema.optionalKey(
    between(0, importanceMax).annotate({ description: "Minimum importance, 0-100 (default 0)" }),
  ),
  context_size: Schema.optionalKey(
    between(0, searchContextSizeMax).annotate({ description: "Messages before/after each result, 0-3 (default 0)" }),
  ),
  limit: Schema.optionalKey(between(1, searchLimitMax).annotate({ description: "Results, 1-100 (default 20)" })),
})

const FiltersJson = Schema.fromJsonString(
  Schema.Struct({
    kinds: Schema.optionalKey(Schema.Array(MemoryKind).check(Schema.isMaxLength(16))),
    tiers: Schema.optionalKey(Schema.Array(MemoryTier).check(Schema.isMaxLength(16))),
    tags: Schema.optionalKey(Schema.Array(Tag).check(Schema.isMaxLength(tagsCountMax))),
  }),
)

/**
 * How long a rebuild of search_messages' index reads before it lets the event loop run: at 100,000
 * messages a rebuild takes about 3 s, and in one piece it held every other call that long.
 */
export const indexRebuildSliceMs = 10

/** The store's search index rebuilt, if it needs to be, a slice at a time (ConversationIndex.ts `rebuildStep`). */
const indexRebuilt = Effect.gen(function* () {
  while (!(yield* read((view, store) => indexOf(store).rebuildStep(view, indexRebuildSliceMs)))) yield* Effect.yieldNow
})

const searchMessages = conversationTool(
  {
    name: "search_messages",
    title: "Search Messages",
    description:
      "Search messages by words in their content, summary and tags, best first. Each result is the message plus score, score_breakdown (per field), matched_fields, relation_count and, with context_size > 0, context_preview. Filter by session_id, filters_json (kinds, tiers, tags) and min_importance. Searching changes nothing.",
    readOnly: true,
  },
  SearchArgs,
  (args, caller) =>
    Effect.gen(function* () {
      const filters =
        args.filters_json === undefined ? {} : yield* decodeJsonArgument("filters_json", FiltersJson, args.filters_json)
      const query = {
        project: caller.project,
        query: args.query,
        ...(args.session_id !== undefined ? { sessionId: args.session_id } : {}),
        ...filters,
        minImportance: args.min_importance ?? 0,
        limit: args.limit ?? searchLimitDefault,
      }
      yield* indexRebuilt
      const results = yield* read((view, store) => searchResults(view, store, query, args.context_size ?? 0))
      return answer({ results })
    }),
)

// ---------------------------------------------------------------------------------------------
// rebuild_index, get_system_health

const rebuildIndex = conversationTool(
  {
    name: "rebuild_index",
    title: "Rebuild Index",
    description:
      "Maintenance: physically remove deleted messages — from every file of the data directory: the store's log and LMDB file and search's files are rewritten without them — discard what an interrupted import left behind, and rebuild the search index. Reports messages_indexed, records_removed, bytes_before and bytes_after.",
    readOnly: false,
  },
  Schema.Struct({}),
  () =>
    Effect.gen(function* () {
      const store = yield* storeHandle
      yield* waitForCheckpoint(store)
      const bytesBefore = storeBytes(store)
      yield* discardLeftovers(store).pipe(Effect.mapError(toConversationToolError))
      const purged = yield* send<PurgeReply>({ _tag: "PurgeTombstones" })
      // Deleted means gone: the store's files (log, LMDB) and search's are rewritten without it (in
      // a shared memory the store's stream is replaced, on every daemon; docs/scaling.md).
      yield* store.compact().pipe(Effect.mapError(toConversationToolError))
      yield* (yield* SearchIndexer).compact
      yield* waitForCheckpoint(store)
      indexOf(store).startRebuild()
      yield* indexRebuilt
      const indexed = yield* read((view) => {
        const index = indexOf(store)
        index.sync(view)
        return index.documents
      })
      return answer({
        status: "OK",
        messages_indexed: indexed,
        records_removed: purged.records_removed,
        bytes_before: bytesBefore,
        bytes_after: storeBytes(store),
      })
    }),
)

const getSystemHealth = conversationTool(
  {
    name: "get_system_health",
    title: "Get System Health",
    description:
      "Diagnostics of the conversation store: message counts, log and snapshot sizes, a memory estimate, I/O counters, recovery state and the last error. status is DEGRADED while an error is on record.",
    readOnly: true,
  },
  Schema.Struct({}),
  () =>
    Effect.gen(function* () {
      const store = yield* storeHandle
      const counts = yield* store
        .read((view) => ({
          stats: readStats(view, currentGen(view)),
          switches: (view.get(switchesKey) as number | undefined) ?? 0,
        }))
        .pipe(Effect.option)
      const known = counts._tag === "Some" ? counts.value : undefined
      return answer({ ...healthReport(store.health(), known?.stats, indexOf(store).stats(), known?.switches ?? 0) })
    }),
)

/** Every conversation tool, in the seed's order. */
export const conversationTools: ReadonlyArray<Tool<never, Router>> = [
  writeMessage,
  readMessages,
  searchMessages,
  updateMessage,
  deleteMessage,
  rebuildIndex,
  getSystemHealth,
] as never
