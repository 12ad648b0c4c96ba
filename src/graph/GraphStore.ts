/**
 * The `graph` store: entities, relations and observations, per project, on the store kernel.
 *
 * Semantics follow the official memory server (see OfficialSemantics.ts) with one deliberate
 * difference: a name is unique per project. The official server, given the same new name twice
 * in one create_entities call, stores two entities with one name; mnemos keeps the first and
 * skips the second, exactly as it skips a name that already existed. Likewise a relation or an
 * observation repeated inside one call is stored once.
 *
 * Events carry everything `decide` chose (creation times, order numbers), so `apply` is
 * deterministic. `apply` of `EntitiesDeleted` and `EntitiesMerged` scans the relation indexes to
 * cascade; every key it touches is derived from the event and the state, never from the clock.
 */
import { Result, Schema } from "effect"
import type { StoreView, StoreWriter } from "../stores/checkpoint/Checkpoint.ts"
import type { Decision, StoreDefinition } from "../stores/StoreDefinition.ts"
import {
  countersKey,
  emptyCounters,
  entityKey,
  entityOrderKey,
  type GraphEntityRecord,
  type GraphRelationRecord,
  incomingKey,
  isStorableName,
  type ProjectCounters,
  projectKey,
  relationKey,
  relationOrderKey,
  relationsFrom,
  relationsTo,
} from "./GraphKeys.ts"
import type { AddedObservations, Entity, Relation } from "./Model.ts"
import { EntityNotFound, entityNotFound } from "./OfficialSemantics.ts"

const RelationTriple = Schema.Struct({ from: Schema.String, to: Schema.String, relationType: Schema.String })
const EntityInput = Schema.Struct({
  name: Schema.String,
  entityType: Schema.String,
  observations: Schema.Array(Schema.String),
})

/**
 * Who asked for a change (the MCP client's identity, `ToolCaller.client`): optional on every
 * command, copied by `decide` onto the events it makes, read by the audit ledger. Events written
 * before it existed, and writes that come from no client (imports), have none.
 */
const author = { by: Schema.optional(Schema.String) }

/** Commands of the graph store; each names its project. */
export const GraphCommand = Schema.Union([
  Schema.TaggedStruct("CreateEntities", { project: Schema.String, ...author, entities: Schema.Array(EntityInput) }),
  Schema.TaggedStruct("CreateRelations", {
    project: Schema.String,
    ...author,
    relations: Schema.Array(RelationTriple),
  }),
  Schema.TaggedStruct("AddObservations", {
    project: Schema.String,
    ...author,
    observations: Schema.Array(Schema.Struct({ entityName: Schema.String, contents: Schema.Array(Schema.String) })),
  }),
  Schema.TaggedStruct("DeleteEntities", {
    project: Schema.String,
    ...author,
    entityNames: Schema.Array(Schema.String),
  }),
  Schema.TaggedStruct("DeleteObservations", {
    project: Schema.String,
    ...author,
    deletions: Schema.Array(Schema.Struct({ entityName: Schema.String, observations: Schema.Array(Schema.String) })),
  }),
  Schema.TaggedStruct("DeleteRelations", {
    project: Schema.String,
    ...author,
    relations: Schema.Array(RelationTriple),
  }),
  Schema.TaggedStruct("MergeEntities", {
    project: Schema.String,
    ...author,
    target: Schema.String,
    sources: Schema.Array(Schema.String),
  }),
])
export type GraphCommand = typeof GraphCommand.Type

const NewEntity = Schema.Struct({ ...EntityInput.fields, order: Schema.Number })
const NewRelation = Schema.Struct({ ...RelationTriple.fields, order: Schema.Number })

/** Events of the graph store, as written to its WAL. */
export const GraphEvent = Schema.Union([
  Schema.TaggedStruct("EntitiesCreated", {
    project: Schema.String,
    ...author,
    at: Schema.Number,
    entities: Schema.Array(NewEntity),
  }),
  Schema.TaggedStruct("RelationsCreated", {
    project: Schema.String,
    ...author,
    at: Schema.Number,
    relations: Schema.Array(NewRelation),
  }),
  Schema.TaggedStruct("ObservationsAdded", {
    project: Schema.String,
    ...author,
    at: Schema.Number,
    additions: Schema.Array(Schema.Struct({ entityName: Schema.String, texts: Schema.Array(Schema.String) })),
  }),
  Schema.TaggedStruct("EntitiesDeleted", { project: Schema.String, ...author, names: Schema.Array(Schema.String) }),
  Schema.TaggedStruct("ObservationsDeleted", {
    project: Schema.String,
    ...author,
    at: Schema.Number,
    deletions: Schema.Array(Schema.Struct({ entityName: Schema.String, texts: Schema.Array(Schema.String) })),
  }),
  Schema.TaggedStruct("RelationsDeleted", {
    project: Schema.String,
    ...author,
    relations: Schema.Array(RelationTriple),
  }),
  Schema.TaggedStruct("EntitiesMerged", {
    project: Schema.String,
    ...author,
    at: Schema.Number,
    target: Schema.String,
    sources: Schema.Array(Schema.String),
  }),
])
export type GraphEvent = typeof GraphEvent.Type

/** A graph command the domain refuses. */
export class GraphRejected extends Schema.TaggedError<GraphRejected>()("GraphRejected", {
  reason: Schema.Literals(["NotFound", "Invalid"]),
  message: Schema.String,
}) {}

/** What a merge did. */
export interface MergeReport {
  readonly target: string
  readonly merged: ReadonlyArray<string>
  readonly observationsMoved: number
  /** Relations that had a merged entity at one end and now point at the target. */
  readonly relationsRewired: number
}

/** Replies, by command. */
export type GraphReply =
  | ReadonlyArray<Entity>
  | ReadonlyArray<Relation>
  | ReadonlyArray<AddedObservations>
  | MergeReport
  | { readonly deleted: true }

export type GraphFailure = GraphRejected | EntityNotFound

const readEntity = (state: StoreView, project: string, name: string) =>
  state.get(entityKey(project, name)) as GraphEntityRecord | undefined
const readCounters = (state: StoreView, project: string) =>
  (state.get(countersKey(project)) as ProjectCounters | undefined) ?? emptyCounters

const isUnstorableName = (name: string) => !isStorableName(name)

const unstorable = (names: ReadonlyArray<string>) => {
  const bad = names.find(isUnstorableName)
  return bad === undefined
    ? undefined
    : new GraphRejected({
        reason: "Invalid",
        message: `names, types and projects may not contain the NUL character (U+0000): ${JSON.stringify(bad)}`,
      })
}

/**
 * The most entities one `EntitiesDeleted` or `EntitiesMerged` event names. A call at the limits
 * (10,000 names) becomes several events of one batch, one durable write, all or nothing as before;
 * the actor lets other work run between them (StoreKernel `prepare`), so a cascade over 40,000
 * relations never holds the daemon's thread for its whole cost.
 */
export const cascadeNamesPerEventMax = 100

const chunksOf = (names: ReadonlyArray<string>): Array<ReadonlyArray<string>> => {
  const chunks: Array<ReadonlyArray<string>> = []
  for (let start = 0; start < names.length; start += cascadeNamesPerEventMax)
    chunks.push(names.slice(start, start + cascadeNamesPerEventMax))
  return chunks
}

const ok = <R>(events: ReadonlyArray<GraphEvent>, reply: R): Result.Result<Decision<GraphEvent, R>, GraphFailure> =>
  Result.succeed({ events, reply })

const decide = (command: GraphCommand, state: StoreView, context: { readonly now: number }) => {
  const { project } = command
  const at = context.now
  switch (command._tag) {
    case "CreateEntities": {
      // Loops: no closure made per call on the busiest tool (docs/benchmarks.md, "Closures made for each call").
      const names = [project]
      for (const entity of command.entities) names.push(entity.name)
      const invalid = unstorable(names)
      if (invalid) return Result.fail(invalid)
      const seen = new Set<string>()
      let order = readCounters(state, project).nextEntityOrder
      const entities = []
      const reply = []
      for (const entity of command.entities) {
        if (seen.has(entity.name) || readEntity(state, project, entity.name) !== undefined) continue
        seen.add(entity.name)
        const observations = [...new Set(entity.observations)]
        entities.push({ ...entity, observations, order: order++ })
        reply.push({ name: entity.name, entityType: entity.entityType, observations })
      }
      if (entities.length === 0) return ok([], [])
      return ok([{ _tag: "EntitiesCreated", project, at, entities }], reply)
    }
    case "CreateRelations": {
      const invalid = unstorable([
        project,
        ...command.relations.flatMap((relation) => [relation.from, relation.to, relation.relationType]),
      ])
      if (invalid) return Result.fail(invalid)
      const seen = new Set<string>()
      const created = command.relations.filter((relation) => {
        const key = relationKey(project, relation.from, relation.to, relation.relationType)
        if (seen.has(key) || state.get(key) !== undefined) return false
        seen.add(key)
        return true
      })
      if (created.length === 0) return ok([], [])
      let order = readCounters(state, project).nextRelationOrder
      const relations = created.map((relation) => ({ ...relation, order: order++ }))
      const reply = relations.map(({ from, to, relationType }) => ({ from, to, relationType }))
      return ok([{ _tag: "RelationsCreated", project, at, relations }], reply)
    }
    case "AddObservations": {
      const present = new Map<string, Set<string>>()
      const additions: Array<{ entityName: string; texts: Array<string> }> = []
      for (const item of command.observations) {
        let texts = present.get(item.entityName)
        if (texts === undefined) {
          const entity = readEntity(state, project, item.entityName)
          if (entity === undefined) return Result.fail(entityNotFound(item.entityName))
          texts = new Set(entity.observations.map((observation) => observation.text))
          present.set(item.entityName, texts)
        }
        const fresh: Array<string> = []
        for (const content of item.contents) {
          if (texts.has(content)) continue
          texts.add(content)
          fresh.push(content)
        }
        additions.push({ entityName: item.entityName, texts: fresh })
      }
      const reply = additions.map((addition) => ({
        entityName: addition.entityName,
        addedObservations: addition.texts,
      }))
      const events: Array<GraphEvent> = additions.some((addition) => addition.texts.length > 0)
        ? [
            {
              _tag: "ObservationsAdded",
              project,
              at,
              additions: additions.filter((addition) => addition.texts.length > 0),
            },
          ]
        : []
      return ok(events, reply)
    }
    case "DeleteEntities": {
      const names = [...new Set(command.entityNames)].filter((name) => isStorableName(name))
      const touches = names.some(
        (name) =>
          readEntity(state, project, name) !== undefined ||
          state.count({ ...relationsFrom(project, name), limit: 1 }) > 0 ||
          state.count({ ...relationsTo(project, name), limit: 1 }) > 0,
      )
      const events = chunksOf(names).map((chunk): GraphEvent => ({ _tag: "EntitiesDeleted", project, names: chunk }))
      return ok(touches ? events : [], { deleted: true } as const)
    }
    case "DeleteObservations": {
      const deletions = command.deletions.filter((item) => {
        const entity = readEntity(state, project, item.entityName)
        if (entity === undefined) return false
        const doomed = new Set(item.observations)
        return entity.observations.some((observation) => doomed.has(observation.text))
      })
      const events: Array<GraphEvent> =
        deletions.length > 0
          ? [
              {
                _tag: "ObservationsDeleted",
                project,
                at,
                deletions: deletions.map((item) => ({ entityName: item.entityName, texts: item.observations })),
              },
            ]
          : []
      return ok(events, { deleted: true } as const)
    }
    case "DeleteRelations": {
      const relations = command.relations.filter(
        (relation) =>
          isStorableName(relation.from) &&
          state.get(relationKey(project, relation.from, relation.to, relation.relationType)) !== undefined,
      )
      return ok(relations.length > 0 ? [{ _tag: "RelationsDeleted", project, relations }] : [], {
        deleted: true,
      } as const)
    }
    case "MergeEntities": {
      const target = readEntity(state, project, command.target)
      if (target === undefined)
        return Result.fail(
          new GraphRejected({ reason: "NotFound", message: `Entity with name ${command.target} not found` }),
        )
      const sources = [...new Set(command.sources)].filter((name) => name !== command.target)
      const missing = sources.find((name) => readEntity(state, project, name) === undefined)
      if (missing !== undefined)
        return Result.fail(new GraphRejected({ reason: "NotFound", message: `Entity with name ${missing} not found` }))
      const known = new Set(target.observations.map((observation) => observation.text))
      let observationsMoved = 0
      let relationsRewired = 0
      for (const name of sources) {
        for (const observation of readEntity(state, project, name)!.observations) {
          if (!known.has(observation.text)) {
            known.add(observation.text)
            observationsMoved++
          }
        }
        relationsRewired += state.count(relationsFrom(project, name)) + state.count(relationsTo(project, name))
      }
      const report: MergeReport = { target: command.target, merged: sources, observationsMoved, relationsRewired }
      const events = chunksOf(sources).map(
        (chunk): GraphEvent => ({ _tag: "EntitiesMerged", project, at, target: command.target, sources: chunk }),
      )
      return ok(events, report)
    }
  }
}

const putEntity = (state: StoreWriter, entity: GraphEntityRecord) =>
  state.put(entityKey(entity.project, entity.name), entity)

const bumpCounters = (state: StoreWriter, project: string, change: Partial<Record<keyof ProjectCounters, number>>) => {
  const counters = readCounters(state, project)
  state.put(countersKey(project), {
    nextEntityOrder: Math.max(counters.nextEntityOrder, change.nextEntityOrder ?? 0),
    nextRelationOrder: Math.max(counters.nextRelationOrder, change.nextRelationOrder ?? 0),
    entities: counters.entities + (change.entities ?? 0),
    relations: counters.relations + (change.relations ?? 0),
  } satisfies ProjectCounters)
  state.put(projectKey(project), 1)
}

const addRelation = (state: StoreWriter, relation: GraphRelationRecord): boolean => {
  const key = relationKey(relation.project, relation.from, relation.to, relation.relationType)
  if (state.get(key) !== undefined) return false
  state.put(key, relation)
  state.put(incomingKey(relation.project, relation.from, relation.to, relation.relationType), key)
  state.put(relationOrderKey(relation.project, relation.order), key)
  return true
}

/** Removes a relation read from `state` (its record, under `key`) with its two index entries. */
const removeRelationRecord = (state: StoreWriter, key: string, relation: GraphRelationRecord): void => {
  state.remove(key)
  state.remove(incomingKey(relation.project, relation.from, relation.to, relation.relationType))
  state.remove(relationOrderKey(relation.project, relation.order))
}

const removeRelation = (state: StoreWriter, key: string): GraphRelationRecord | undefined => {
  const relation = state.get(key) as GraphRelationRecord | undefined
  if (relation !== undefined) removeRelationRecord(state, key, relation)
  return relation
}

/**
 * Removes every relation with `name` at either end and gives them back, in the order the cascade
 * has always taken them (it numbers a merge's rewired relations): outgoing in key order, then
 * incoming in incoming-key order, a self-relation once (as outgoing). Costs what it removes: an
 * outgoing relation's record comes with its range entry, an incoming one is read once by the key its
 * index entry holds.
 */
const removeRelationsTouching = (state: StoreWriter, project: string, name: string): Array<GraphRelationRecord> => {
  const outgoing = relationsFrom(project, name)
  // Both ranges are read whole before anything in them is removed.
  const fromEntries = Array.from(state.getRange(outgoing))
  const toEntries = Array.from(state.getRange(relationsTo(project, name)))
  const removed: Array<GraphRelationRecord> = []
  for (const { key, value } of fromEntries) {
    const relation = value as GraphRelationRecord
    removeRelationRecord(state, key, relation)
    removed.push(relation)
  }
  for (const { value } of toEntries) {
    const key = value as string
    // A self-relation is outgoing too, and already removed.
    if (key.startsWith(outgoing.start)) continue
    const relation = removeRelation(state, key)
    if (relation !== undefined) removed.push(relation)
  }
  return removed
}

const apply = (event: GraphEvent, state: StoreWriter): void => {
  const { project } = event
  switch (event._tag) {
    case "EntitiesCreated": {
      for (const entity of event.entities) {
        const observations = entity.observations.map((text) => ({ text, createdAt: event.at }))
        putEntity(state, {
          project,
          name: entity.name,
          entityType: entity.entityType,
          observations,
          createdAt: event.at,
          updatedAt: event.at,
          order: entity.order,
        })
        state.put(entityOrderKey(project, entity.order), entity.name)
      }
      const last = event.entities[event.entities.length - 1]!
      bumpCounters(state, project, { nextEntityOrder: last.order + 1, entities: event.entities.length })
      return
    }
    case "RelationsCreated": {
      let added = 0
      for (const relation of event.relations)
        if (addRelation(state, { project, ...relation, createdAt: event.at })) added++
      bumpCounters(state, project, {
        nextRelationOrder: event.relations[event.relations.length - 1]!.order + 1,
        relations: added,
      })
      return
    }
    case "ObservationsAdded": {
      for (const addition of event.additions) {
        const entity = readEntity(state, project, addition.entityName)
        if (entity === undefined) continue
        const observations = [...entity.observations, ...addition.texts.map((text) => ({ text, createdAt: event.at }))]
        putEntity(state, { ...entity, observations, updatedAt: event.at })
      }
      return
    }
    case "ObservationsDeleted": {
      for (const deletion of event.deletions) {
        const entity = readEntity(state, project, deletion.entityName)
        if (entity === undefined) continue
        const doomed = new Set(deletion.texts)
        putEntity(state, {
          ...entity,
          observations: entity.observations.filter((observation) => !doomed.has(observation.text)),
          updatedAt: event.at,
        })
      }
      return
    }
    case "RelationsDeleted": {
      let removed = 0
      for (const relation of event.relations) {
        if (removeRelation(state, relationKey(project, relation.from, relation.to, relation.relationType))) removed++
      }
      bumpCounters(state, project, { relations: -removed })
      return
    }
    case "EntitiesDeleted": {
      let entities = 0
      let relations = 0
      for (const name of event.names) {
        relations += removeRelationsTouching(state, project, name).length
        const entity = readEntity(state, project, name)
        if (entity === undefined) continue
        state.remove(entityKey(project, name))
        state.remove(entityOrderKey(project, entity.order))
        entities++
      }
      bumpCounters(state, project, { entities: -entities, relations: -relations })
      return
    }
    case "EntitiesMerged": {
      const found = readEntity(state, project, event.target)
      if (found === undefined) return
      // One set and one array for the whole merge: copying the target per source made a merge of
      // n sources cost n² (37 s at 10,000).
      const observations = [...found.observations]
      const known = new Set<string>(observations.map((observation) => observation.text))
      let merged = false
      let entities = 0
      let relations = 0
      let nextOrder = readCounters(state, project).nextRelationOrder
      for (const name of event.sources) {
        const source = readEntity(state, project, name)
        if (source === undefined) continue
        merged = true
        for (const observation of source.observations) {
          if (known.has(observation.text)) continue
          known.add(observation.text)
          observations.push(observation)
        }
        for (const relation of removeRelationsTouching(state, project, name)) {
          relations--
          const from = relation.from === name ? event.target : relation.from
          const to = relation.to === name ? event.target : relation.to
          // A relation between two merged entities would point at itself: it is dropped.
          if (from === to && relation.from !== relation.to) continue
          if (addRelation(state, { ...relation, from, to, order: nextOrder++ })) relations++
        }
        state.remove(entityKey(project, name))
        state.remove(entityOrderKey(project, source.order))
        entities--
      }
      // Unchanged (no source left) as before: the target is rewritten only when something merged.
      if (merged) putEntity(state, { ...found, observations, updatedAt: event.at })
      bumpCounters(state, project, { entities, relations, nextRelationOrder: nextOrder })
      return
    }
  }
}

/** `decide`, with the command's author copied onto every event. */
const decideAuthored: StoreDefinition<GraphCommand, GraphEvent, GraphReply, GraphFailure>["decide"] = (
  command,
  state,
  context,
) => {
  const outcome: Result.Result<Decision<GraphEvent, GraphReply>, GraphFailure> = decide(command, state, context)
  const by = command.by
  if (by === undefined || Result.isFailure(outcome)) return outcome
  return ok(
    outcome.success.events.map((event) => ({ ...event, by })),
    outcome.success.reply,
  )
}

/** The graph store's definition. */
export const graphStore: StoreDefinition<GraphCommand, GraphEvent, GraphReply, GraphFailure> = {
  name: "graph",
  commandSchema: GraphCommand,
  eventSchema: GraphEvent,
  failureSchema: Schema.Union([GraphRejected, EntityNotFound]),
  decide: decideAuthored,
  apply,
}

/** The entity names an event touched. */
export const touchedEntities = (event: GraphEvent): ReadonlyArray<string> => {
  switch (event._tag) {
    case "EntitiesCreated":
      return event.entities.map((entity) => entity.name)
    case "ObservationsAdded":
      return event.additions.map((addition) => addition.entityName)
    case "ObservationsDeleted":
      return event.deletions.map((deletion) => deletion.entityName)
    case "EntitiesDeleted":
      return event.names
    case "EntitiesMerged":
      return [event.target, ...event.sources]
    case "RelationsCreated":
    case "RelationsDeleted":
      return []
  }
}
