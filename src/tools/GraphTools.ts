/**
 * The knowledge-graph tools: the official memory server's nine, identical from the outside, and
 * mnemos's additions (merge, bounded reads for big graphs, observation history).
 *
 * The official tools act in the caller's project (from the client's MCP roots, else "default")
 * because their schemas have no project argument; the new tools also take an explicit `project`.
 */
import { Effect, Schema } from "effect"
import { Router } from "../actors/Router.ts"
import { openNodes, readGraph } from "../graph/GraphQueries.ts"
import { entityDetails, graphNeighbors, graphSummary, neighborsLimitMax, summaryNamesMax } from "../graph/GraphReads.ts"
import { GraphSearch } from "../graph/GraphSearch.ts"
import { type GraphCommand, type GraphFailure, graphStore } from "../graph/GraphStore.ts"
import {
  BoundedEntity,
  BoundedObservationAddition,
  BoundedRelation,
  batchItemsMax,
  EntityName,
  entityNameBytesMax,
  isMaxUtf8Bytes,
  ObservationText,
  projectNameBytesMax,
  SearchQuery,
} from "../graph/Model.ts"
import type { StoreView } from "../stores/checkpoint/Checkpoint.ts"
import { StoreError } from "../stores/StoreError.ts"
import { type OfficialToolName, officialDeletionMessages, officialToolDefinition } from "./officialToolDefinitions.ts"
import {
  describedDefinition,
  makeTool,
  storeToolError,
  type Tool,
  type ToolCaller,
  type ToolDescription,
  ToolError,
  type ToolOutput,
} from "./Tool.ts"

const items = <S extends Schema.Top>(schema: S) => Schema.Array(schema).check(Schema.isMaxLength(batchItemsMax))

/** Maps store and domain failures to tool errors. */
export const toToolError = (error: GraphFailure | StoreError): ToolError => {
  if (error instanceof StoreError) {
    return storeToolError(error)
  }
  if (error._tag === "EntityNotFound") return new ToolError({ code: "NOT_FOUND", message: error.message })
  return new ToolError({ code: error.reason === "NotFound" ? "NOT_FOUND" : "VALIDATION_ERROR", message: error.message })
}

const official = <Args>(
  name: OfficialToolName,
  args: Schema.Codec<Args, unknown>,
  run: (args: Args, caller: ToolCaller) => Effect.Effect<ToolOutput, ToolError, Router | GraphSearch>,
  options: Pick<Tool<Args, Router | GraphSearch>, "answerScalesWithStore"> = {},
): Tool<Args, Router | GraphSearch> =>
  makeTool({ definition: officialToolDefinition(name), toolset: "graph", errorFormat: "plain", args, run, ...options })

const send = (command: GraphCommand, caller: ToolCaller) =>
  Effect.gen(function* () {
    const router = yield* Router
    return yield* router
      .store(graphStore)
      .send({ ...command, by: caller.client }, { idempotencyKey: caller.idempotencyKey })
  }).pipe(Effect.mapError(toToolError))

const read = <A>(query: (view: StoreView) => A) =>
  Effect.gen(function* () {
    const router = yield* Router
    return yield* router.store(graphStore).read(query)
  }).pipe(Effect.mapError(toToolError))

const deleted = (name: keyof typeof officialDeletionMessages): ToolOutput => ({
  structured: { success: true, message: officialDeletionMessages[name] },
  text: officialDeletionMessages[name],
})

const officialTools = [
  official("create_entities", Schema.Struct({ entities: items(BoundedEntity) }), ({ entities }, caller) =>
    send({ _tag: "CreateEntities", project: caller.project, entities }, caller).pipe(
      Effect.map((created) => ({ structured: { entities: created }, text: JSON.stringify(created, null, 2) })),
    ),
  ),
  official("create_relations", Schema.Struct({ relations: items(BoundedRelation) }), ({ relations }, caller) =>
    send({ _tag: "CreateRelations", project: caller.project, relations }, caller).pipe(
      Effect.map((created) => ({ structured: { relations: created }, text: JSON.stringify(created, null, 2) })),
    ),
  ),
  official(
    "add_observations",
    Schema.Struct({ observations: items(BoundedObservationAddition) }),
    ({ observations }, caller) =>
      send({ _tag: "AddObservations", project: caller.project, observations }, caller).pipe(
        Effect.map((results) => ({ structured: { results }, text: JSON.stringify(results, null, 2) })),
      ),
  ),
  official("delete_entities", Schema.Struct({ entityNames: items(EntityName) }), ({ entityNames }, caller) =>
    send({ _tag: "DeleteEntities", project: caller.project, entityNames }, caller).pipe(
      Effect.as(deleted("delete_entities")),
    ),
  ),
  official(
    "delete_observations",
    Schema.Struct({
      deletions: items(Schema.Struct({ entityName: EntityName, observations: items(ObservationText) })),
    }),
    ({ deletions }, caller) =>
      send({ _tag: "DeleteObservations", project: caller.project, deletions }, caller).pipe(
        Effect.as(deleted("delete_observations")),
      ),
  ),
  official("delete_relations", Schema.Struct({ relations: items(BoundedRelation) }), ({ relations }, caller) =>
    send({ _tag: "DeleteRelations", project: caller.project, relations }, caller).pipe(
      Effect.as(deleted("delete_relations")),
    ),
  ),
  official(
    "read_graph",
    Schema.Struct({}),
    (_, caller) =>
      read((view) => readGraph(view, caller.project)).pipe(Effect.map((result) => ({ structured: { ...result } }))),
    { answerScalesWithStore: true },
  ),
  official("search_nodes", Schema.Struct({ query: SearchQuery }), ({ query }, caller) =>
    Effect.gen(function* () {
      const search = yield* GraphSearch
      return yield* search.searchNodes(caller.project, query)
    }).pipe(
      Effect.mapError(toToolError),
      Effect.map((result) => ({ structured: { ...result } })),
    ),
  ),
  official("open_nodes", Schema.Struct({ names: items(EntityName) }), ({ names }, caller) =>
    read((view) => openNodes(view, caller.project, names)).pipe(
      Effect.map((result) => ({ structured: { ...result } })),
    ),
  ),
]

/** An entity name with a description (annotations must come before custom checks to reach the JSON Schema). */
const describedName = (description: string) =>
  Schema.String.annotate({ description }).check(isMaxUtf8Bytes(entityNameBytesMax))

const projectArg = Schema.optionalKey(
  Schema.String.annotate({
    description: 'Project to act in; defaults to the connection\'s project (from its MCP roots, else "default")',
  }).check(Schema.isMinLength(1), isMaxUtf8Bytes(projectNameBytesMax)),
)
const projectOf = (args: { readonly project?: string | undefined }, caller: ToolCaller) =>
  args.project ?? caller.project

const MergeArgs = Schema.Struct({
  target: describedName("The entity that survives the merge"),
  sources: items(EntityName).annotate({ description: "Entities merged into the target and then deleted" }),
  project: projectArg,
})
const SummaryArgs = Schema.Struct({
  project: projectArg,
  namesLimit: Schema.optionalKey(
    Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: summaryNamesMax })).annotate({
      description: `How many entity names to list, in creation order (default 200, at most ${summaryNamesMax})`,
    }),
  ),
})
const NeighborsArgs = Schema.Struct({
  names: items(EntityName).annotate({ description: "Entities to start from" }),
  depth: Schema.optionalKey(
    Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 3 })).annotate({
      description: "How many hops to follow (1-3, default 1)",
    }),
  ),
  direction: Schema.optionalKey(
    Schema.Literals(["out", "in", "both"]).annotate({
      description: "Follow relations leaving (out), arriving (in) or both (default)",
    }),
  ),
  relationTypes: Schema.optionalKey(
    items(Schema.String).annotate({ description: "Only follow relations of these types" }),
  ),
  limit: Schema.optionalKey(
    Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: neighborsLimitMax })).annotate({
      description: `Entities per page (default 100, at most ${neighborsLimitMax})`,
    }),
  ),
  cursor: Schema.optionalKey(Schema.String.annotate({ description: "nextCursor of the previous page" })),
  project: projectArg,
})
const DetailsArgs = Schema.Struct({
  names: items(EntityName).annotate({ description: "Entities to show" }),
  project: projectArg,
})

const extended = <Args>(
  definition: ToolDescription,
  args: Schema.Codec<Args, unknown> & Schema.Top,
  run: Tool<Args, Router | GraphSearch>["run"],
): Tool<Args, Router | GraphSearch> =>
  makeTool({ definition: describedDefinition(definition, args), toolset: "graph", errorFormat: "envelope", args, run })

const extendedTools = [
  extended(
    {
      name: "merge_entities",
      title: "Merge Entities",
      description:
        "Merge duplicate entities into one. The target survives; each source's observations move to it (duplicates dropped) and every relation touching a source is rewired to the target (duplicates and self-loops dropped); the sources are then deleted.",
      readOnly: false,
      destructive: true,
    },
    MergeArgs,
    (args, caller) =>
      send(
        {
          _tag: "MergeEntities",
          project: projectOf(args, caller),
          target: args.target,
          sources: args.sources,
        },
        caller,
      ).pipe(Effect.map((report) => ({ structured: { ...report } }))),
  ),
  extended(
    {
      name: "read_graph_summary",
      title: "Read Graph Summary",
      description:
        "A bounded overview of a big graph: entity and relation counts, counts per entity type and relation type, and the first entity names in creation order. Use it instead of read_graph when the graph may be large.",
      readOnly: true,
    },
    SummaryArgs,
    (args, caller) =>
      read((view) => graphSummary(view, projectOf(args, caller), args.namesLimit ?? 200)).pipe(
        Effect.map((summary) => ({ structured: { ...summary } })),
      ),
  ),
  extended(
    {
      name: "graph_neighbors",
      title: "Graph Neighbors",
      description:
        "Entities reachable from the given ones within n hops (1-3), with the relations between them, in pages. Each entity carries its hop distance. Use nextCursor to read the next page.",
      readOnly: true,
    },
    NeighborsArgs,
    (args, caller) =>
      read((view) => graphNeighbors(view, projectOf(args, caller), args)).pipe(
        Effect.flatMap((result) =>
          result._tag === "BadCursor"
            ? Effect.fail(new ToolError({ code: "VALIDATION_ERROR", message: result.message }))
            : Effect.succeed({ structured: { ...result.page } }),
        ),
      ),
  ),
  extended(
    {
      name: "get_entity_details",
      title: "Get Entity Details",
      description:
        "Entities with their history: when each entity was created and last changed, and when each observation was added (ISO 8601), plus the relations touching them.",
      readOnly: true,
    },
    DetailsArgs,
    (args, caller) =>
      read((view) => entityDetails(view, projectOf(args, caller), args.names)).pipe(
        Effect.map((details) => ({ structured: { ...details } })),
      ),
  ),
]

/** Every graph tool, official ones first in the official order. */
export const graphTools: ReadonlyArray<Tool<never, Router | GraphSearch>> = [
  ...officialTools,
  ...extendedTools,
] as never
