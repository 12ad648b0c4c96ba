/**
 * What an MCP tool is in mnemos: a definition (what `tools/list` shows), a Schema that decodes
 * its arguments (the only shape the handler sees), and a handler that runs against the engine.
 *
 * Handlers return a `ToolOutput`: the structured result and, optionally, the text content (by
 * default the pretty-printed JSON of the result, as the official memory server answers).
 * Failures are `ToolError` values with a code from the conversation-memory seed's set; the
 * session turns them into `isError` results. Nothing a client sends can crash the server.
 */
import type { GetPromptResult } from "@modelcontextprotocol/sdk/types.js"
import { type Effect, Schema } from "effect"
import type { Router } from "../actors/Router.ts"
import type { AuditLedger } from "../engineering/AuditLedger.ts"
import type { GraphSearch } from "../graph/GraphSearch.ts"
import type { SearchIndexer } from "../search/Indexer.ts"
import type { EventBus } from "../stores/EventBus.ts"
import type { StoreError } from "../stores/StoreError.ts"
import type { JsonObject } from "./officialToolDefinitions.ts"

/** The error codes tools answer with (seed 001). */
export const ToolErrorCode = Schema.Literals([
  "VALIDATION_ERROR",
  "NOT_FOUND",
  "CONFLICT",
  "BUSY",
  "IO_ERROR",
  "CORRUPT_STORE",
  "INTERNAL_ERROR",
])
export type ToolErrorCode = typeof ToolErrorCode.Type

/** A tool failure the caller sees as an `isError` result. */
export class ToolError extends Schema.TaggedError<ToolError>()("ToolError", {
  code: ToolErrorCode,
  message: Schema.String,
}) {}

/** A store that could not serve a call, as the tool error the caller sees (the message says why). */
export const storeToolError = (error: StoreError): ToolError =>
  new ToolError({
    code:
      error.reason === "Corrupt"
        ? "CORRUPT_STORE"
        : error.reason === "WriteFailed" || error.reason === "DiskFull"
          ? "IO_ERROR"
          : error.reason === "ReplyWithheld"
            ? "CONFLICT"
            : error.reason === "TooLarge"
              ? "VALIDATION_ERROR"
              : "BUSY",
    message: error.message,
  })

/** MCP tool annotations. */
export interface ToolAnnotations {
  readonly title?: string
  readonly readOnlyHint?: boolean
  readonly destructiveHint?: boolean
  readonly idempotentHint?: boolean
  readonly openWorldHint?: boolean
}

/** One `tools/list` entry. */
export interface ToolDefinition {
  readonly name: string
  readonly title?: string
  readonly description: string
  readonly inputSchema: JsonObject
  readonly outputSchema?: JsonObject
  readonly annotations?: ToolAnnotations
  readonly execution?: { readonly taskSupport: "forbidden" }
}

/** A tool's answer. */
export interface ToolOutput {
  readonly structured: Record<string, unknown>
  /** The text content; defaults to `JSON.stringify(structured, null, 2)`. */
  readonly text?: string
  /** Image content after the text (MCP `type: "image"`), e.g. what `clipboard_read` found. */
  readonly images?: ReadonlyArray<{ readonly data: string; readonly mimeType: string }>
}

/** Who is calling, and in which project. */
export interface ToolCaller {
  /** The project of this connection: from the client's roots, else "default". */
  readonly project: string
  /** The local directory of the client's first root, when it offers a `file:` root (for git context). */
  readonly rootDir?: string
  /** The client's identity, for audit (clientInfo name/version and transport). */
  readonly client: string
  /**
   * Set when the connection has a stable identity across reconnects (the `mnemos mcp` shim):
   * the store applies a write with this key at most once, however often the call is retried.
   */
  readonly idempotencyKey?: string
}

/** A tool: definition, argument decoder and handler. `R` is what the handler needs from the engine. */
export interface Tool<Args, R> {
  readonly definition: ToolDefinition
  readonly toolset: string
  /**
   * How failures read: "plain" is the message alone (the official memory server's tools),
   * "envelope" is the seed's JSON `{"status":"ERROR","error":{"code","message"}}`.
   */
  readonly errorFormat: "plain" | "envelope"
  readonly args: Schema.Codec<Args, unknown>
  readonly run: (args: Args, caller: ToolCaller) => Effect.Effect<ToolOutput, ToolError, R>
  /**
   * The answer grows with the store (`read_graph`: the whole graph's objects and text while it is
   * made): daemon-wide, only a few such answers are made at once (McpSession.ts
   * `storeSizedAnswersMax`); the others wait their turn.
   */
  readonly answerScalesWithStore?: boolean
}

/** Makes a tool, keeping its argument type. */
export const makeTool = <Args, R>(tool: Tool<Args, R>): Tool<Args, R> => tool

/** A JSON Schema for tool arguments, generated from their Effect Schema. */
export const inputSchemaOf = (schema: Schema.Top): JsonObject => {
  const generated = Schema.toJsonSchemaDocument(schema).schema as JsonObject
  // MCP requires an object schema; an empty Struct comes out as "anything but null".
  const objectSchema = generated.type === "object" ? generated : { type: "object", properties: {} }
  return { $schema: "https://json-schema.org/draft/2020-12/schema", ...objectSchema }
}

/**
 * `definition` with an `inputSchema` that `generate` makes when it is first read (by the first
 * `tools/list`), not when the tool's module loads: generating every tool's JSON Schema was about
 * 17 ms of each start before its first answer (docs/benchmarks.md, footprint).
 */
export const withInputSchema = <D extends Omit<ToolDefinition, "inputSchema">>(
  definition: D,
  generate: () => JsonObject,
): D & ToolDefinition => {
  let generated: JsonObject | undefined
  return Object.defineProperty({ ...definition }, "inputSchema", {
    enumerable: true,
    get: () => (generated ??= generate()),
  }) as D & ToolDefinition
}

/** What a tool says of itself beside its arguments: its name, its texts, and what it does to data. */
export interface ToolDescription {
  readonly name: string
  readonly title: string
  readonly description: string
  /** Only reads (and so is idempotent). */
  readonly readOnly: boolean
  readonly destructive?: boolean
  /** Reaches outside the memory (an editor, the file system). */
  readonly openWorld?: boolean
}

/** A tool's definition from its description, with its hints; its input schema generated from `args` at the first read. */
export const describedDefinition = (description: ToolDescription, args: Schema.Top): ToolDefinition =>
  withInputSchema(
    {
      name: description.name,
      title: description.title,
      description: description.description,
      annotations: {
        readOnlyHint: description.readOnly,
        destructiveHint: description.destructive ?? false,
        idempotentHint: description.readOnly,
        openWorldHint: description.openWorld ?? false,
      },
    },
    () => inputSchemaOf(args),
  )

/** What tool handlers may use. */
export type SessionServices = Router | GraphSearch | EventBus | AuditLedger | SearchIndexer

/** An MCP prompt: what `prompts/list` shows, and how `prompts/get` fills it from the engine. */
export interface McpPrompt {
  /** Offered only in sessions that have a tool of this toolset. */
  readonly toolset: string
  readonly definition: {
    readonly name: string
    readonly title?: string
    readonly description: string
    readonly arguments: ReadonlyArray<{
      readonly name: string
      readonly description: string
      readonly required: boolean
    }>
  }
  readonly get: (
    args: Readonly<Record<string, string>>,
    caller: ToolCaller,
  ) => Effect.Effect<GetPromptResult, ToolError, SessionServices>
}
