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

const validate = (graph: KnowledgeGraph): GraphImportInvalid | undefined => {
  const decodeEntity = Schema.decodeUnknownResult(BoundedEntity)
  const decodeRelation = Schema.decodeUnknownResult(BoundedRelation)
  for (const [index, entity] of graph.entities.entries()) {
    const decoded = decodeEntity(entity)
    if (Result.isFailure(decoded))
      return new GraphImportInvalid({
        message: `entity ${index + 1} (${JSON.stringify(entity.name.slice(0, 80))}): ${decoded.failure.message}`,
      })
    if (!isStorableName(entity.name))
      return new GraphImportInvalid({ message: `entity ${index + 1}: names may not contain U+0000` })
  }
  for (const [index, relation] of graph.relations.entries()) {
    const decoded = decodeRelation(relation)
    if (Result.isFailure(decoded))
      return new GraphImportInvalid({ message: `relation ${index + 1}: ${decoded.failure.message}` })
    if (![relation.from, relation.to, relation.relationType].every(isStorableName)) {
      return new GraphImportInvalid({ message: `relation ${index + 1}: names and types may not contain U+0000` })
    }
  }
  return undefined
}

const chunks = <A>(items: ReadonlyArray<A>): Array<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let start = 0; start < items.length; start += importChunkItems)
    out.push(items.slice(start, start + importChunkItems))
  return out
}

/** Imports a graph into `project`. */
export const importGraph = (graph: KnowledgeGraph, project: string) =>
  Effect.gen(function* () {
    const invalid = validate(graph)
    if (invalid !== undefined) return yield* invalid
    const store = (yield* Router).store(graphStore)
    let entitiesCreated = 0
    let relationsCreated = 0
    for (const entities of chunks(graph.entities)) {
      const created = (yield* store.send({ _tag: "CreateEntities", project, entities })) as ReadonlyArray<Entity>
      entitiesCreated += created.length
    }
    for (const relations of chunks(graph.relations)) {
      const created = (yield* store.send({ _tag: "CreateRelations", project, relations })) as ReadonlyArray<Relation>
      relationsCreated += created.length
    }
    return {
      project,
      entitiesCreated,
      entitiesSkipped: graph.entities.length - entitiesCreated,
      relationsCreated,
      relationsSkipped: graph.relations.length - relationsCreated,
    } satisfies GraphImportReport
  })

/** The whole graph of `project`, in creation order. */
export const exportGraph = (project: string) =>
  Effect.gen(function* () {
    const store = (yield* Router).store(graphStore)
    return yield* store.read((view) => readGraph(view, project))
  })
