/**
 * The params of each MCP request a session answers, as Schemas, and how a request whose params do
 * not fit is refused: -32602 (Invalid params) with a message naming each bad field
 * (`params.name: Expected string`). The MCP SDK's server parsed a request with its handler's Zod
 * schema inside the handler, and a failure there became -32603 (Internal error) carrying the
 * validator's JSON dump — a client's mistake reported as the server's.
 *
 * Each schema checks what the handler reads, as the SDK's schemas of the same methods do (the
 * MCP specification's types); members it does not name are the client's business and pass. The
 * handler gets the params as they arrived, not a decoded copy: a tool's arguments are decoded once,
 * by the tool's own Schema (McpSession.ts).
 */
import { Result, Schema, SchemaIssue } from "effect"

/** A method's params schema: any object the method can take. */
export type ParamsSchema = Schema.Decoder<unknown>

const textRecord = Schema.Record(Schema.String, Schema.String)
const anyRecord = Schema.Record(Schema.String, Schema.Unknown)

/** `initialize`: the client's protocol version, capabilities and name. */
export const InitializeParams = Schema.Struct({
  protocolVersion: Schema.String,
  capabilities: anyRecord,
  clientInfo: Schema.Struct({ name: Schema.String, version: Schema.String }),
})

/** A list request (`tools/list`, `resources/list`, `prompts/list`): an optional cursor. */
export const ListParams = Schema.Struct({ cursor: Schema.optional(Schema.String) })

/** `tools/call`: the tool's name and its arguments (an object, decoded by the tool's own Schema). */
export const CallToolParams = Schema.Struct({ name: Schema.String, arguments: Schema.optional(anyRecord) })

/** `resources/read`, `resources/subscribe`, `resources/unsubscribe`: the resource's URI. */
export const UriParams = Schema.Struct({ uri: Schema.String })

/** `prompts/get`: the prompt's name and its arguments (strings, as MCP's prompt arguments are). */
export const GetPromptParams = Schema.Struct({ name: Schema.String, arguments: Schema.optional(textRecord) })

/** Nothing read (`ping`). */
export const AnyParams = anyRecord

interface Issue {
  readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined
  readonly message: string
}

const segment = (part: PropertyKey | { readonly key: PropertyKey }): string =>
  String(typeof part === "object" ? part.key : part)

/** The issues as one line: `params.name: Expected string; ...`. */
export const describeIssues = (issues: ReadonlyArray<Issue>): string =>
  issues.map((issue) => `${["params", ...(issue.path ?? [])].map(segment).join(".")}: ${issue.message}`).join("; ")

const formatIssues = SchemaIssue.makeFormatterStandardSchemaV1()

/** Why a request's params do not fit its method, as one line; undefined when they fit. */
export type ParamsCheck = (params: unknown) => string | undefined

/** The check of `schema`, its decoder made once (a check runs for every request). */
export const paramsCheck = (schema: ParamsSchema): ParamsCheck => {
  const decode = Schema.decodeUnknownResult(schema)
  return (params) => {
    const decoded = decode(params, { errors: "all" })
    return Result.isSuccess(decoded) ? undefined : describeIssues(formatIssues(decoded.failure.issue).issues)
  }
}
