/**
 * The knowledge-graph domain as Effect Schemas.
 *
 * Two families live here:
 *
 * - The official shapes (`Entity`, `Relation`, `KnowledgeGraph`, and the add/delete observation
 *   items) exactly as `@modelcontextprotocol/server-memory` accepts and returns them. Field order
 *   matters: the official server always emits `{name, entityType, observations}` and
 *   `{from, to, relationType}`, and our pretty-printed JSON text must match byte for byte.
 * - mnemos's stored forms, which add per-observation creation time, entity timestamps and the
 *   project an entity or relation belongs to. `toOfficialEntity`/`toOfficialRelation` project
 *   them back to the official shapes.
 *
 * The official server has no size limits. mnemos keeps data durable and fast, so it bounds what
 * one call may write; the limits below are generous (well above anything an agent writes by
 * hand) but finite, and the `Bounded*` schemas enforce them on tool input. Stored and official
 * schemas deliberately do not re-check them, so data written under older limits still decodes.
 */
import { Schema } from "effect"
import { isMaxUtf8Bytes } from "../schema/TextChecks.ts"

// ---------------------------------------------------------------------------------------------
// Limits. Byte limits count UTF-8 bytes of the string as received.
// ---------------------------------------------------------------------------------------------

/** Max UTF-8 bytes of an entity name (also of a relation's `from`/`to`): 4 KiB. */
export const entityNameBytesMax = 4 * 1024
/** Max UTF-8 bytes of an entity type: 1 KiB. */
export const entityTypeBytesMax = 1024
/** Max UTF-8 bytes of a relation type: 1 KiB. */
export const relationTypeBytesMax = 1024
/** Max UTF-8 bytes of one observation: 64 KiB (room for a code snippet or a long note). */
export const observationBytesMax = 64 * 1024
/** Max observations one entity may hold: 10,000. */
export const observationsPerEntityMax = 10_000
/** Max items (entities, relations, names, observation groups) in one tool call: 10,000. */
export const batchItemsMax = 10_000
/** Max UTF-8 bytes of a search_nodes query: 4 KiB. */
export const searchQueryBytesMax = 4 * 1024
/** Max UTF-8 bytes of a project name: 256 bytes. */
export const projectNameBytesMax = 256

/** The project an entity or relation belongs to when the caller names none. */
export const defaultProjectName = "default"

export { isMaxUtf8Bytes, utf8ByteLength } from "../schema/TextChecks.ts"

// ---------------------------------------------------------------------------------------------
// Official shapes
// ---------------------------------------------------------------------------------------------

/** An entity as the official server stores and returns it. */
export const Entity = Schema.Struct({
  name: Schema.String,
  entityType: Schema.String,
  observations: Schema.Array(Schema.String),
})
export type Entity = typeof Entity.Type

/** A directed relation; its endpoints need not name existing entities. */
export const Relation = Schema.Struct({
  from: Schema.String,
  to: Schema.String,
  relationType: Schema.String,
})
export type Relation = typeof Relation.Type

/** The whole graph, or a subgraph returned by read_graph, search_nodes and open_nodes. */
export const KnowledgeGraph = Schema.Struct({
  entities: Schema.Array(Entity),
  relations: Schema.Array(Relation),
})
export type KnowledgeGraph = typeof KnowledgeGraph.Type

/** One item of add_observations input. */
export const ObservationAddition = Schema.Struct({
  entityName: Schema.String,
  contents: Schema.Array(Schema.String),
})
export type ObservationAddition = typeof ObservationAddition.Type

/** One item of add_observations output: only the observations that were new. */
export const AddedObservations = Schema.Struct({
  entityName: Schema.String,
  addedObservations: Schema.Array(Schema.String),
})
export type AddedObservations = typeof AddedObservations.Type

/** One item of delete_observations input. */
export const ObservationDeletion = Schema.Struct({
  entityName: Schema.String,
  observations: Schema.Array(Schema.String),
})
export type ObservationDeletion = typeof ObservationDeletion.Type

/** The empty graph. */
export const emptyGraph: KnowledgeGraph = { entities: [], relations: [] }

// ---------------------------------------------------------------------------------------------
// Bounded input shapes (official shape plus mnemos's limits)
// ---------------------------------------------------------------------------------------------

/** An entity name within `entityNameBytesMax`. */
export const EntityName = Schema.String.check(isMaxUtf8Bytes(entityNameBytesMax))
/** An entity type within `entityTypeBytesMax`. */
export const EntityType = Schema.String.check(isMaxUtf8Bytes(entityTypeBytesMax))
/** A relation type within `relationTypeBytesMax`. */
export const RelationType = Schema.String.check(isMaxUtf8Bytes(relationTypeBytesMax))
/** An observation within `observationBytesMax`. */
export const ObservationText = Schema.String.check(isMaxUtf8Bytes(observationBytesMax))
/** A project name: 1 to `projectNameBytesMax` bytes. */
export const ProjectName = Schema.String.check(Schema.isMinLength(1), isMaxUtf8Bytes(projectNameBytesMax))
/** A search query within `searchQueryBytesMax`. */
export const SearchQuery = Schema.String.check(isMaxUtf8Bytes(searchQueryBytesMax))

/** `Entity` with every field inside mnemos's limits. */
export const BoundedEntity = Schema.Struct({
  name: EntityName,
  entityType: EntityType,
  observations: Schema.Array(ObservationText).check(Schema.isMaxLength(observationsPerEntityMax)),
})

/** `Relation` with every field inside mnemos's limits. */
export const BoundedRelation = Schema.Struct({
  from: EntityName,
  to: EntityName,
  relationType: RelationType,
})

/** `ObservationAddition` with every field inside mnemos's limits. */
export const BoundedObservationAddition = Schema.Struct({
  entityName: EntityName,
  contents: Schema.Array(ObservationText).check(Schema.isMaxLength(observationsPerEntityMax)),
})

// ---------------------------------------------------------------------------------------------
// Stored forms
// ---------------------------------------------------------------------------------------------

/** Milliseconds since the Unix epoch, a non-negative safe integer. */
export const EpochMillis = Schema.Natural
export type EpochMillis = typeof EpochMillis.Type

/** An observation as mnemos stores it: its text and when it was added. */
export const StoredObservation = Schema.Struct({
  text: Schema.String,
  createdAt: EpochMillis,
})
export type StoredObservation = typeof StoredObservation.Type

/** An entity as mnemos stores it. `updatedAt` moves whenever its observations change. */
export const StoredEntity = Schema.Struct({
  project: Schema.String,
  name: Schema.String,
  entityType: Schema.String,
  observations: Schema.Array(StoredObservation),
  createdAt: EpochMillis,
  updatedAt: EpochMillis,
})
export type StoredEntity = typeof StoredEntity.Type

/** A relation as mnemos stores it. */
export const StoredRelation = Schema.Struct({
  project: Schema.String,
  from: Schema.String,
  to: Schema.String,
  relationType: Schema.String,
  createdAt: EpochMillis,
})
export type StoredRelation = typeof StoredRelation.Type

/** The official view of a stored entity, fields in the official order. */
export const toOfficialEntity = (stored: StoredEntity): Entity => ({
  name: stored.name,
  entityType: stored.entityType,
  observations: stored.observations.map((observation) => observation.text),
})

/** The official view of a stored relation, fields in the official order. */
export const toOfficialRelation = (stored: StoredRelation): Relation => ({
  from: stored.from,
  to: stored.to,
  relationType: stored.relationType,
})

/** A stored entity made from an official one; every observation gets `now` as creation time. */
export const toStoredEntity = (entity: Entity, project: string, now: EpochMillis): StoredEntity => ({
  project,
  name: entity.name,
  entityType: entity.entityType,
  observations: entity.observations.map((text) => ({ text, createdAt: now })),
  createdAt: now,
  updatedAt: now,
})

/** A stored relation made from an official one. */
export const toStoredRelation = (relation: Relation, project: string, now: EpochMillis): StoredRelation => ({
  project,
  from: relation.from,
  to: relation.to,
  relationType: relation.relationType,
  createdAt: now,
})

/** The key under which two relations are the same relation (official: all three fields equal). */
export const relationKey = (relation: Relation): string =>
  JSON.stringify([relation.from, relation.to, relation.relationType])
