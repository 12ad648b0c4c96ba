/**
 * Moving a whole graph in and out of the graph store in the official memory.jsonl shape.
 *
 * Import validates everything first (mnemos's limits, no U+0000 in names) and imports nothing if
 * anything is wrong; then it creates entities and relations in chunks, with the official
 * skip-existing semantics, so importing the same file twice changes nothing the second time. A
 * crash during the import leaves a prefix of it, and re-running the import completes it.
 */
import { Effect, Result, Schema } from "effect"
import { Router } from "../actors/Router.ts"
import { isStorableName } from "./GraphKeys.ts"
import { readGraph } from "./GraphQueries.ts"
import { graphStore } from "./GraphStore.ts"
import { BoundedEntity, BoundedRelation, type Entity, type KnowledgeGraph, type Relation } from "./Model.ts"

/** Entities or relations per import command. */
export const importChunkItems = 500

/** The import refused the graph; nothing was written. */
export class GraphImportInvalid extends Schema.TaggedError<GraphImportInvalid>()("GraphImportInvalid", {
  message: Schema.String,
}) {}

/** What an import did. */
export interface GraphImportReport {
  readonly project: string
  readonly entitiesCreated: number
  readonly entitiesSkipped: number
  readonly relationsCreated: number
  readonly relationsSkipped: number
}

/** Checks one entity (the `index`-th, 0-based) against mnemos's limits. */
const validateEntity = (entity: Entity, index: number): GraphImportInvalid | undefined => {
  const decoded = decodeEntity(entity)
  if (Result.isFailure(decoded))
    return new GraphImportInvalid({
      message: `entity ${index + 1} (${JSON.stringify(entity.name.slice(0, 80))}): ${decoded.failure.message}`,
    })
  if (!isStorableName(entity.name))
    return new GraphImportInvalid({ message: `entity ${index + 1}: names may not contain U+0000` })
  return undefined
}

/** Checks one relation (the `index`-th, 0-based) against mnemos's limits. */
const validateRelation = (relation: Relation, index: number): GraphImportInvalid | undefined => {
  const decoded = decodeRelation(relation)
  if (Result.isFailure(decoded))
    return new GraphImportInvalid({ message: `relation ${index + 1}: ${decoded.failure.message}` })
  if (![relation.from, relation.to, relation.relationType].every(isStorableName))
    return new GraphImportInvalid({ message: `relation ${index + 1}: names and types may not contain U+0000` })
  return undefined
}

const decodeEntity = Schema.decodeUnknownResult(BoundedEntity)
const decodeRelation = Schema.decodeUnknownResult(BoundedRelation)

/** One entity or relation of a graph read item by item. */
export type GraphItem =
  | { readonly _tag: "Entity"; readonly entity: Entity }
  | { readonly _tag: "Relation"; readonly relation: Relation }

/**
 * A graph that can be read more than once, item by item, each read from the start (a file): a
 * failed read ends the import with its error.
 */
export type GraphReader<E> = () => Iterable<Result.Result<GraphItem | undefined, E>>

/** Creates, in chunks of `importChunkItems`, what `pick` takes from `read()`; how many were created. */
const createInChunks = <E, A, F, R>(
  read: GraphReader<E>,
  pick: (item: GraphItem) => A | undefined,
  create: (chunk: ReadonlyArray<A>) => Effect.Effect<number, F, R>,
) =>
  Effect.gen(function* () {
    let created = 0
    let chunk: Array<A> = []
    for (const decoded of read()) {
      if (Result.isFailure(decoded)) return yield* Effect.fail(decoded.failure)
      const value = decoded.success === undefined ? undefined : pick(decoded.success)
      if (value === undefined) continue
      chunk.push(value)
      if (chunk.length >= importChunkItems) {
        created += yield* create(chunk)
        chunk = []
      }
    }
    if (chunk.length > 0) created += yield* create(chunk)
    return created
  })

/**
 * Imports the graph `read` yields into `project`, holding at most `importChunkItems` of it at a
 * time: a first read checks every item (nothing is written if one is refused), a second imports
 * the entities, a third the relations (so a relation may name an entity further down the file).
 */
export const importGraphFrom = <E>(read: GraphReader<E>, project: string) =>
  Effect.gen(function* () {
    let entities = 0
    let relations = 0
    for (const decoded of read()) {
      if (Result.isFailure(decoded)) return yield* Effect.fail(decoded.failure)
      const item = decoded.success
      const invalid =
        item?._tag === "Entity"
          ? validateEntity(item.entity, entities++)
          : item?._tag === "Relation"
            ? validateRelation(item.relation, relations++)
            : undefined
      if (invalid !== undefined) return yield* invalid
    }
    const store = (yield* Router).store(graphStore)
    const entitiesCreated = yield* createInChunks(
      read,
      (item) => (item._tag === "Entity" ? item.entity : undefined),
      (chunk) =>
        Effect.map(
          store.send({ _tag: "CreateEntities", project, entities: chunk }),
          (created) => (created as ReadonlyArray<Entity>).length,
        ),
    )
    const relationsCreated = yield* createInChunks(
      read,
      (item) => (item._tag === "Relation" ? item.relation : undefined),
      (chunk) =>
        Effect.map(
          store.send({ _tag: "CreateRelations", project, relations: chunk }),
          (created) => (created as ReadonlyArray<Relation>).length,
        ),
    )
    return {
      project,
      entitiesCreated,
      entitiesSkipped: entities - entitiesCreated,
      relationsCreated,
      relationsSkipped: relations - relationsCreated,
    } satisfies GraphImportReport
  })

/** Imports a graph into `project`. */
export const importGraph = (graph: KnowledgeGraph, project: string) =>
  importGraphFrom<never>(function* () {
    for (const entity of graph.entities) yield Result.succeed({ _tag: "Entity", entity } as const)
    for (const relation of graph.relations) yield Result.succeed({ _tag: "Relation", relation } as const)
  }, project)

/** The whole graph of `project`, in creation order. */
export const exportGraph = (project: string) =>
  Effect.gen(function* () {
    const store = (yield* Router).store(graphStore)
    return yield* store.read((view) => readGraph(view, project))
  })
