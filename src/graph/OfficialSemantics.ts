/**
 * The official memory server's semantics as pure functions over an in-memory graph.
 *
 * This is the reference model: mnemos's store must give the same answers, and tests compare the
 * two. Every rule below was read from `KnowledgeGraphManager` in
 * `node_modules/@modelcontextprotocol/server-memory/dist/index.js` (package version 2026.8.31,
 * server "memory-server" 0.6.3) and confirmed against the running server; the notes name the
 * method each rule comes from.
 *
 * The official graph is a list, not a map, and several rules follow from that:
 *
 * - `createEntities`: `entities.filter(e => !graph.entities.some(x => x.name === e.name))` is
 *   evaluated against the graph *before* the push, so an input name already in the graph is
 *   skipped, but two input entities with the same new name are BOTH created (the graph then
 *   holds two entities with one name) and both are returned. Observations are stored as given,
 *   duplicates included. The returned list is the created entities, in input order.
 * - `createRelations`: same shape; only exact (from, to, relationType) matches already in the
 *   graph are skipped, duplicates within one call are all created. Endpoints are not checked.
 * - `addObservations`: each item looks up the FIRST entity with that name (`find`); a missing
 *   entity throws `Entity with name ${entityName} not found` before `saveGraph`, so the whole
 *   call changes nothing. New contents are `contents.filter(c => !entity.observations.includes(c))`
 *   computed before the push: a content already on the entity is dropped, but a content repeated
 *   inside one `contents` array is added (and reported) twice. Items run in order and see earlier
 *   items' additions. Each result is `{entityName, addedObservations}` in input order; an item
 *   that adds nothing still yields a result with `addedObservations: []`.
 * - `deleteEntities`: removes every entity whose name is listed (all duplicates) and every
 *   relation with `from` or `to` listed, whether or not such an entity existed. Unknown names
 *   are ignored.
 * - `deleteObservations`: per item, the FIRST entity with that name loses every observation
 *   equal to one listed (all copies); an unknown entity is silently ignored.
 * - `deleteRelations`: removes every relation equal in all three fields to a listed one.
 * - `readGraph`: the graph as stored, entities then relations, in insertion order.
 * - `searchNodes`: an entity matches when `x.toLowerCase().includes(query.toLowerCase())` holds
 *   for its name, its entityType or any observation (so the empty query matches everything). The
 *   relations returned are those with AT LEAST ONE endpoint among the matched names
 *   (`filteredEntityNames.has(r.from) || filteredEntityNames.has(r.to)`), not both.
 * - `openNodes`: entities whose name is listed (all duplicates, graph order, not request order);
 *   relations with AT LEAST ONE endpoint among the names of entities FOUND. A requested name with
 *   no entity pulls in no relations, even dangling ones that mention it.
 *
 * Returned objects are fresh plain objects with fields in the official order, so
 * `JSON.stringify(x, null, 2)` of them matches the official text content.
 */
import { Result, Schema } from "effect"
import type {
  AddedObservations,
  Entity,
  KnowledgeGraph,
  ObservationAddition,
  ObservationDeletion,
  Relation,
} from "./Model.ts"
import { relationKey } from "./Model.ts"

/** add_observations named an entity that does not exist; `message` is the official error text. */
export class EntityNotFound extends Schema.TaggedError<EntityNotFound>()("EntityNotFound", {
  entityName: Schema.String,
  message: Schema.String,
}) {}

/** The official error for a missing entity: "Entity with name X not found". */
export const entityNotFound = (entityName: string): EntityNotFound =>
  new EntityNotFound({ entityName, message: `Entity with name ${entityName} not found` })

/** A graph after a change, with what the change returned. */
export interface Changed<A> {
  readonly graph: KnowledgeGraph
  readonly result: A
}

const copyEntity = (entity: Entity): Entity => ({
  name: entity.name,
  entityType: entity.entityType,
  observations: [...entity.observations],
})

const copyRelation = (relation: Relation): Relation => ({
  from: relation.from,
  to: relation.to,
  relationType: relation.relationType,
})

// ---------------------------------------------------------------------------------------------
// Decisions, usable by a store with its own representation
// ---------------------------------------------------------------------------------------------

/** The input entities create_entities creates, given which names already exist before the call. */
export const selectNewEntities = (
  input: ReadonlyArray<Entity>,
  nameExists: (name: string) => boolean,
): ReadonlyArray<Entity> => input.filter((entity) => !nameExists(entity.name)).map(copyEntity)

/** The input relations create_relations creates, given which relations exist before the call. */
export const selectNewRelations = (
  input: ReadonlyArray<Relation>,
  relationExists: (relation: Relation) => boolean,
): ReadonlyArray<Relation> => input.filter((relation) => !relationExists(relation)).map(copyRelation)

/**
 * What add_observations adds: per item, the contents not yet on the entity, with later items
 * seeing earlier ones. `observationsOf` gives the observations of the first entity with a name
 * (before the call), or undefined when there is none.
 */
export const planAddObservations = (
  input: ReadonlyArray<ObservationAddition>,
  observationsOf: (name: string) => ReadonlyArray<string> | undefined,
): Result.Result<ReadonlyArray<AddedObservations>, EntityNotFound> => {
  const addedSoFar = new Map<string, Array<string>>()
  const results: Array<AddedObservations> = []
  for (const item of input) {
    const existing = observationsOf(item.entityName)
    if (existing === undefined) return Result.fail(entityNotFound(item.entityName))
    const added = addedSoFar.get(item.entityName) ?? []
    const present = new Set([...existing, ...added])
    const fresh = item.contents.filter((content) => !present.has(content))
    added.push(...fresh)
    addedSoFar.set(item.entityName, added)
    results.push({ entityName: item.entityName, addedObservations: fresh })
  }
  return Result.succeed(results)
}

/** The observations left after delete_observations removes every copy of each listed one. */
export const remainingObservations = (
  observations: ReadonlyArray<string>,
  toDelete: ReadonlyArray<string>,
): ReadonlyArray<string> => {
  const doomed = new Set(toDelete)
  return observations.filter((observation) => !doomed.has(observation))
}

/** The official search_nodes match rule for one entity. */
export const entityMatchesQuery = (entity: Entity, query: string): boolean => {
  const needle = query.toLowerCase()
  return (
    entity.name.toLowerCase().includes(needle) ||
    entity.entityType.toLowerCase().includes(needle) ||
    entity.observations.some((observation) => observation.toLowerCase().includes(needle))
  )
}

/** The texts search_nodes looks in for one entity: name, type, then each observation. */
export const entitySearchTexts = (entity: Entity): ReadonlyArray<string> => [
  entity.name,
  entity.entityType,
  ...entity.observations,
]

/** Relations with at least one endpoint in `names` (the official rule for search and open). */
export const relationsTouching = (
  relations: ReadonlyArray<Relation>,
  names: ReadonlySet<string>,
): ReadonlyArray<Relation> =>
  relations.filter((relation) => names.has(relation.from) || names.has(relation.to)).map(copyRelation)

/** The subgraph returned for a set of found entities: them, plus relations touching them. */
export const subgraphAround = (
  entities: ReadonlyArray<Entity>,
  relations: ReadonlyArray<Relation>,
): KnowledgeGraph => ({
  entities: entities.map(copyEntity),
  relations: relationsTouching(relations, new Set(entities.map((entity) => entity.name))),
})

// ---------------------------------------------------------------------------------------------
// The nine operations on a whole graph
// ---------------------------------------------------------------------------------------------

/** create_entities: returns the entities created. */
export const createEntities = (graph: KnowledgeGraph, input: ReadonlyArray<Entity>): Changed<ReadonlyArray<Entity>> => {
  const existingNames = new Set(graph.entities.map((entity) => entity.name))
  const created = selectNewEntities(input, (name) => existingNames.has(name))
  return {
    graph: { entities: [...graph.entities, ...created], relations: graph.relations },
    result: created.map(copyEntity),
  }
}

/** create_relations: returns the relations created. */
export const createRelations = (
  graph: KnowledgeGraph,
  input: ReadonlyArray<Relation>,
): Changed<ReadonlyArray<Relation>> => {
  const existing = new Set(graph.relations.map(relationKey))
  const created = selectNewRelations(input, (relation) => existing.has(relationKey(relation)))
  return {
    graph: { entities: graph.entities, relations: [...graph.relations, ...created] },
    result: created.map(copyRelation),
  }
}

const firstIndexByName = (entities: ReadonlyArray<Entity>): Map<string, number> => {
  const index = new Map<string, number>()
  entities.forEach((entity, position) => {
    if (!index.has(entity.name)) index.set(entity.name, position)
  })
  return index
}

/** add_observations: fails with `EntityNotFound` (graph unchanged) if any item's entity is missing. */
export const addObservations = (
  graph: KnowledgeGraph,
  input: ReadonlyArray<ObservationAddition>,
): Result.Result<Changed<ReadonlyArray<AddedObservations>>, EntityNotFound> => {
  const positions = firstIndexByName(graph.entities)
  const planned = planAddObservations(input, (name) => {
    const position = positions.get(name)
    return position === undefined ? undefined : graph.entities[position]!.observations
  })
  return Result.map(planned, (results) => {
    const entities = [...graph.entities]
    for (const { entityName, addedObservations } of results) {
      const position = positions.get(entityName)!
      const entity = entities[position]!
      entities[position] = { ...copyEntity(entity), observations: [...entity.observations, ...addedObservations] }
    }
    return {
      graph: { entities, relations: graph.relations },
      result: results.map((item) => ({ entityName: item.entityName, addedObservations: [...item.addedObservations] })),
    }
  })
}

/** delete_entities: removes the named entities and every relation that mentions a listed name. */
export const deleteEntities = (graph: KnowledgeGraph, entityNames: ReadonlyArray<string>): KnowledgeGraph => {
  const doomed = new Set(entityNames)
  return {
    entities: graph.entities.filter((entity) => !doomed.has(entity.name)),
    relations: graph.relations.filter((relation) => !doomed.has(relation.from) && !doomed.has(relation.to)),
  }
}

/** delete_observations: unknown entities are ignored; only the first entity of a name changes. */
export const deleteObservations = (
  graph: KnowledgeGraph,
  deletions: ReadonlyArray<ObservationDeletion>,
): KnowledgeGraph => {
  const positions = firstIndexByName(graph.entities)
  const entities = [...graph.entities]
  for (const deletion of deletions) {
    const position = positions.get(deletion.entityName)
    if (position === undefined) continue
    const entity = entities[position]!
    entities[position] = {
      ...copyEntity(entity),
      observations: [...remainingObservations(entity.observations, deletion.observations)],
    }
  }
  return { entities, relations: graph.relations }
}

/** delete_relations: removes every relation equal to a listed one. */
export const deleteRelations = (graph: KnowledgeGraph, relations: ReadonlyArray<Relation>): KnowledgeGraph => {
  const doomed = new Set(relations.map(relationKey))
  return {
    entities: graph.entities,
    relations: graph.relations.filter((relation) => !doomed.has(relationKey(relation))),
  }
}

/** read_graph: the whole graph, as fresh objects. */
export const readGraph = (graph: KnowledgeGraph): KnowledgeGraph => ({
  entities: graph.entities.map(copyEntity),
  relations: graph.relations.map(copyRelation),
})

/** search_nodes: matching entities in graph order, plus relations touching any of them. */
export const searchNodes = (graph: KnowledgeGraph, query: string): KnowledgeGraph =>
  subgraphAround(
    graph.entities.filter((entity) => entityMatchesQuery(entity, query)),
    graph.relations,
  )

/** open_nodes: the named entities in graph order, plus relations touching any of them. */
export const openNodes = (graph: KnowledgeGraph, names: ReadonlyArray<string>): KnowledgeGraph => {
  const wanted = new Set(names)
  return subgraphAround(
    graph.entities.filter((entity) => wanted.has(entity.name)),
    graph.relations,
  )
}
