/**
 * The nine tools of the official memory server, as plain data, exactly as its `tools/list`
 * answers on the wire (server "memory-server" 0.6.3 from @modelcontextprotocol/server-memory
 * 2026.8.31, with @modelcontextprotocol/sdk 1.32.2).
 *
 * Captured from the running official server into test/fixtures/official-tools-list.json; the
 * tests check that these definitions serialize to the same JSON, key order included. The shapes
 * come from the SDK's zod-to-JSON-Schema conversion, which explains the asymmetries kept here:
 * input object schemas carry no `additionalProperties`, output object schemas carry
 * `additionalProperties: false`, and every tool has `execution: { taskSupport: "forbidden" }`.
 *
 * Also here: the fixed texts the official delete tools answer with.
 */

/** A JSON value. */
export type JsonValue = string | number | boolean | null | ReadonlyArray<JsonValue> | JsonObject
/** A JSON object. */
export interface JsonObject {
  readonly [key: string]: JsonValue
}

/** The official tool names, in `tools/list` order. */
export const officialToolNames = [
  "create_entities",
  "create_relations",
  "add_observations",
  "delete_entities",
  "delete_observations",
  "delete_relations",
  "read_graph",
  "search_nodes",
  "open_nodes",
] as const
export type OfficialToolName = (typeof officialToolNames)[number]

/** MCP tool annotations as the official server sets them (all four, always). */
export interface OfficialToolAnnotations {
  readonly readOnlyHint: boolean
  readonly destructiveHint: boolean
  readonly idempotentHint: boolean
  readonly openWorldHint: boolean
}

/** One entry of the official `tools/list` result, fields in wire order. */
export interface OfficialToolDefinition {
  readonly name: OfficialToolName
  readonly title: string
  readonly description: string
  readonly inputSchema: JsonObject
  readonly annotations: OfficialToolAnnotations
  readonly execution: { readonly taskSupport: "forbidden" }
  readonly outputSchema: JsonObject
}

const draft07 = "http://json-schema.org/draft-07/schema#"

const stringSchema = (description?: string): JsonObject =>
  description === undefined ? { type: "string" } : { type: "string", description }

const arraySchema = (items: JsonObject, description?: string): JsonObject =>
  description === undefined ? { type: "array", items } : { type: "array", items, description }

/** An object schema requiring all its properties; output schemas are closed, input ones are not. */
const objectSchema = (properties: JsonObject, closed: boolean): JsonObject =>
  closed
    ? { type: "object", properties, required: Object.keys(properties), additionalProperties: false }
    : { type: "object", properties, required: Object.keys(properties) }

const inputRoot = (properties: JsonObject): JsonObject =>
  Object.keys(properties).length === 0
    ? { $schema: draft07, type: "object", properties }
    : { $schema: draft07, type: "object", properties, required: Object.keys(properties) }

const outputRoot = (properties: JsonObject): JsonObject => ({
  $schema: draft07,
  type: "object",
  properties,
  required: Object.keys(properties),
  additionalProperties: false,
})

const entityProperties: JsonObject = {
  name: stringSchema("The name of the entity"),
  entityType: stringSchema("The type of the entity"),
  observations: arraySchema(stringSchema(), "An array of observation contents associated with the entity"),
}

const relationProperties: JsonObject = {
  from: stringSchema("The name of the entity where the relation starts"),
  to: stringSchema("The name of the entity where the relation ends"),
  relationType: stringSchema("The type of the relation"),
}

const entityIn = objectSchema(entityProperties, false)
const entityOut = objectSchema(entityProperties, true)
const relationIn = objectSchema(relationProperties, false)
const relationOut = objectSchema(relationProperties, true)

const graphOutput = outputRoot({ entities: arraySchema(entityOut), relations: arraySchema(relationOut) })
const successOutput = outputRoot({ success: { type: "boolean" }, message: stringSchema() })

const writing: OfficialToolAnnotations = {
  readOnlyHint: false,
  destructiveHint: false,
  idempotentHint: false,
  openWorldHint: false,
}
const deleting: OfficialToolAnnotations = {
  readOnlyHint: false,
  destructiveHint: true,
  idempotentHint: true,
  openWorldHint: false,
}
const reading: OfficialToolAnnotations = {
  readOnlyHint: true,
  destructiveHint: false,
  idempotentHint: true,
  openWorldHint: false,
}

const tool = (
  name: OfficialToolName,
  title: string,
  description: string,
  inputSchema: JsonObject,
  annotations: OfficialToolAnnotations,
  outputSchema: JsonObject,
): OfficialToolDefinition => ({
  name,
  title,
  description,
  inputSchema,
  annotations,
  execution: { taskSupport: "forbidden" },
  outputSchema,
})

/** The official `tools/list` result's `tools`, in order. */
export const officialToolDefinitions: ReadonlyArray<OfficialToolDefinition> = [
  tool(
    "create_entities",
    "Create Entities",
    "Create multiple new entities in the knowledge graph",
    inputRoot({ entities: arraySchema(entityIn) }),
    writing,
    outputRoot({ entities: arraySchema(entityOut) }),
  ),
  tool(
    "create_relations",
    "Create Relations",
    "Create multiple new relations between entities in the knowledge graph. Relations should be in active voice",
    inputRoot({ relations: arraySchema(relationIn) }),
    writing,
    outputRoot({ relations: arraySchema(relationOut) }),
  ),
  tool(
    "add_observations",
    "Add Observations",
    "Add new observations to existing entities in the knowledge graph",
    inputRoot({
      observations: arraySchema(
        objectSchema(
          {
            entityName: stringSchema("The name of the entity to add the observations to"),
            contents: arraySchema(stringSchema(), "An array of observation contents to add"),
          },
          false,
        ),
      ),
    }),
    writing,
    outputRoot({
      results: arraySchema(
        objectSchema({ entityName: stringSchema(), addedObservations: arraySchema(stringSchema()) }, true),
      ),
    }),
  ),
  tool(
    "delete_entities",
    "Delete Entities",
    "Delete multiple entities and their associated relations from the knowledge graph",
    inputRoot({ entityNames: arraySchema(stringSchema(), "An array of entity names to delete") }),
    deleting,
    successOutput,
  ),
  tool(
    "delete_observations",
    "Delete Observations",
    "Delete specific observations from entities in the knowledge graph",
    inputRoot({
      deletions: arraySchema(
        objectSchema(
          {
            entityName: stringSchema("The name of the entity containing the observations"),
            observations: arraySchema(stringSchema(), "An array of observations to delete"),
          },
          false,
        ),
      ),
    }),
    deleting,
    successOutput,
  ),
  tool(
    "delete_relations",
    "Delete Relations",
    "Delete multiple relations from the knowledge graph",
    inputRoot({ relations: arraySchema(relationIn, "An array of relations to delete") }),
    deleting,
    successOutput,
  ),
  tool("read_graph", "Read Graph", "Read the entire knowledge graph", inputRoot({}), reading, graphOutput),
  tool(
    "search_nodes",
    "Search Nodes",
    "Search for nodes in the knowledge graph based on a query",
    inputRoot({
      query: stringSchema("The search query to match against entity names, types, and observation content"),
    }),
    reading,
    graphOutput,
  ),
  tool(
    "open_nodes",
    "Open Nodes",
    "Open specific nodes in the knowledge graph by their names",
    inputRoot({ names: arraySchema(stringSchema(), "An array of entity names to retrieve") }),
    reading,
    graphOutput,
  ),
]

/** The official definition of one tool. */
export const officialToolDefinition = (name: OfficialToolName): OfficialToolDefinition =>
  officialToolDefinitions.find((definition) => definition.name === name)!

/**
 * The text the official delete tools answer with, both as the text content and as
 * `structuredContent: { success: true, message }`.
 */
export const officialDeletionMessages = {
  delete_entities: "Entities deleted successfully",
  delete_observations: "Observations deleted successfully",
  delete_relations: "Relations deleted successfully",
} as const satisfies Partial<Record<OfficialToolName, string>>
