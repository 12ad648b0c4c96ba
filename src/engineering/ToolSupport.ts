/**
 * Plumbing shared by the engineering tools: common arguments (project, paging, revisions), the
 * mapping of store failures to tool error codes, sending record commands with the caller's
 * identity and idempotency key, and the Git context of a call.
 */
import { isAbsolute, resolve } from "node:path"
import { Effect, Schema } from "effect"
import { Router } from "../actors/Router.ts"
import { entityNameBytesMax, isMaxUtf8Bytes, projectNameBytesMax } from "../graph/Model.ts"
import type { StoreView } from "../stores/checkpoint/Checkpoint.ts"
import { StoreError } from "../stores/StoreError.ts"
import {
  inputSchemaOf,
  makeTool,
  storeToolError,
  type Tool,
  type ToolCaller,
  ToolError,
  type ToolOutput,
  withInputSchema,
} from "../tools/Tool.ts"
import { Files, RecordId, Tags } from "./Fields.ts"
import { type GitInfo, readGitContext } from "./GitContext.ts"
import { listLimitDefault, listLimitMax, presentRecord } from "./RecordQueries.ts"
import type { RecordOp, RecordRejected, RecordStoreDefinition, StoredRecord } from "./RecordStore.ts"

/** `project`: where the call acts. */
export const projectArg = Schema.optionalKey(
  Schema.String.annotate({ description: "Default: the connection's project" }).check(
    Schema.isMinLength(1),
    isMaxUtf8Bytes(projectNameBytesMax),
  ),
)
/** `expected_revision`: optimistic concurrency. */
export const expectedRevisionArg = Schema.optionalKey(
  Schema.Int.check(Schema.isGreaterThanOrEqualTo(1)).annotate({
    description: "Fail with CONFLICT unless the record is still at this revision",
  }),
)
/** `limit` of a list. */
export const limitArg = Schema.optionalKey(
  Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: listLimitMax })).annotate({
    description: `Max results (default ${listLimitDefault})`,
  }),
)
/** `cursor` of a list. */
export const cursorArg = Schema.optionalKey(
  Schema.String.annotate({ description: "nextCursor of the previous page" }).check(Schema.isMaxLength(64)),
)
/** `query` of a list: a substring filter. */
export const queryArg = Schema.optionalKey(
  Schema.String.check(Schema.isMaxLength(1024)).annotate({ description: "Case-insensitive text filter" }),
)
/** `cwd` of the git-bound tools. */
export const cwdArg = Schema.optionalKey(
  Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(4096)).annotate({
    description: "Directory in the repository; defaults to the client's root. Branch and commit are recorded",
  }),
)

/** The caller's project unless the arguments name one. */
export const projectOf = (args: { readonly project?: string | undefined }, caller: ToolCaller): string =>
  args.project ?? caller.project

/** Maps store and domain failures to the envelope's codes. */
export const toToolError = (error: RecordRejected | StoreError | ToolError): ToolError => {
  if (error instanceof ToolError) return error
  if (error instanceof StoreError) {
    return storeToolError(error)
  }
  const code = error.reason === "NotFound" ? "NOT_FOUND" : error.reason === "Conflict" ? "CONFLICT" : "VALIDATION_ERROR"
  return new ToolError({ code, message: error.message })
}

/** A validation failure. */
export const invalidArgs = (message: string): ToolError => new ToolError({ code: "VALIDATION_ERROR", message })
/** A state that forbids the change (already acknowledged, changed meanwhile). */
export const conflict = (message: string): ToolError => new ToolError({ code: "CONFLICT", message })
/** A missing record. */
export const notFound = (message: string): ToolError => new ToolError({ code: "NOT_FOUND", message })

/** Sends `ops` to a record store as the caller; one send per tool call (it carries the idempotency key). */
export const sendOps = (
  store: RecordStoreDefinition,
  caller: ToolCaller,
  tool: string,
  project: string,
  ops: ReadonlyArray<RecordOp>,
): Effect.Effect<ReadonlyArray<StoredRecord>, ToolError, Router> =>
  Effect.gen(function* () {
    const router = yield* Router
    const reply = yield* router
      .store(store)
      .send({ project, by: caller.client, tool, ops }, { idempotencyKey: caller.idempotencyKey })
    return reply.records
  }).pipe(Effect.mapError(toToolError))

/** Reads a record store. */
export const readStore = <A>(
  store: RecordStoreDefinition,
  query: (view: StoreView) => A,
): Effect.Effect<A, ToolError, Router> =>
  Effect.gen(function* () {
    const router = yield* Router
    return yield* router.store(store).read(query)
  }).pipe(Effect.mapError(toToolError))

/** Drops the keys whose value is undefined (stored data has no undefined fields). */
export const compact = <T extends Record<string, unknown>>(value: T): { [K in keyof T]: Exclude<T[K], undefined> } =>
  Object.fromEntries(Object.entries(value).filter(([, field]) => field !== undefined)) as never

/** The Git fields a git-bound record stores: the context, or why there is none. Never fails. */
export const gitFieldsOf = (
  cwd: string | undefined,
  caller: ToolCaller,
): Effect.Effect<{ readonly git: GitInfo } | { readonly gitUnavailable: string }> => {
  const directory =
    cwd === undefined
      ? caller.rootDir
      : isAbsolute(cwd) || caller.rootDir === undefined
        ? cwd
        : resolve(caller.rootDir, cwd)
  if (directory === undefined)
    return Effect.succeed({ gitUnavailable: "no cwd given and the client offers no file root" })
  return readGitContext(directory).pipe(
    Effect.map((git) => ({ git })),
    Effect.catch((error) => Effect.succeed({ gitUnavailable: error.message })),
  )
}

/** How an engineering tool is described. */
export interface ToolSpec {
  readonly name: string
  readonly title: string
  readonly description: string
  readonly readOnly?: boolean
  readonly destructive?: boolean
  readonly idempotent?: boolean
}

/** Makes an engineering tool: JSON error envelope, input schema from the arguments' Schema. */
export const engineeringTool = <Args, R>(
  toolset: string,
  spec: ToolSpec,
  args: Schema.Codec<Args, unknown> & Schema.Top,
  run: (args: Args, caller: ToolCaller) => Effect.Effect<ToolOutput, ToolError, R>,
): Tool<Args, R> =>
  makeTool({
    definition: withInputSchema(
      {
        name: spec.name,
        title: spec.title,
        description: spec.description,
        annotations: {
          readOnlyHint: spec.readOnly ?? false,
          destructiveHint: spec.destructive ?? false,
          idempotentHint: spec.idempotent ?? spec.readOnly ?? false,
          openWorldHint: false,
        },
      },
      () => inputSchemaOf(args),
    ),
    toolset,
    errorFormat: "envelope",
    args,
    run,
  })

/** A description on a Schema whose checks are built in (custom checks need the builders of Fields.ts). */
export const described = <S extends Schema.Top>(schema: S, description: string): S =>
  schema.annotate({ description }) as S
/** `id` of the record a tool acts on. */
export const idArg = described(RecordId, "The record's id")
/** `tags`. */
export const tagsArg = described(Tags, "Short labels")
/** `files`. */
export const filesArg = described(Files, "File paths")
/** A knowledge-graph entity name with a description. */
export const linkName = (description: string) =>
  Schema.String.annotate({ description }).check(isMaxUtf8Bytes(entityNameBytesMax))

/** A page of records as a tool answers it: `{[key]: records, nextCursor?}`. */
export const page = (
  records: ReadonlyArray<StoredRecord>,
  nextCursor: string | undefined,
  key: string,
): ToolOutput => ({
  structured: { [key]: records.map(presentRecord), ...(nextCursor !== undefined ? { nextCursor } : {}) },
})
/** One record as a tool answers it: `{[key]: record, ...extra}`. */
export const one = (
  key: string,
  record: StoredRecord | undefined,
  extra: Record<string, unknown> = {},
): ToolOutput => ({
  structured: { [key]: record === undefined ? null : presentRecord(record), ...extra },
})
