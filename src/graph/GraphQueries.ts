/**
 * Reads of the graph store: pure functions of a store view (an LMDB read transaction plus the
 * acknowledged changes not yet in LMDB). Results use the official shapes and the official order
 * (creation order), so their pretty-printed JSON matches the official server's text.
 */
import type { StoreView } from "../stores/checkpoint/Checkpoint.ts"
import {
  allProjects,
  countersKey,
  emptyCounters,
  entitiesByName,
  entityKey,
  type GraphEntityRecord,
  type GraphRelationRecord,
  type ProjectCounters,
  projectOfKey,
  relationKeyOfIncoming,
  relationsByEnds,
  relationsFrom,
  relationsTo,
} from "./GraphKeys.ts"
import type { Entity, KnowledgeGraph, Relation } from "./Model.ts"

/** The official view of a stored entity. */
export const officialEntity = (entity: GraphEntityRecord): Entity => ({
  name: entity.name,
  entityType: entity.entityType,
  observations: entity.observations.map((observation) => observation.text),
})

/** The official view of a stored relation. */
export const officialRelation = (relation: GraphRelationRecord): Relation => ({
  from: relation.from,
  to: relation.to,
  relationType: relation.relationType,
})

/** One entity, or undefined. */
export const getEntity = (view: StoreView, project: string, name: string): GraphEntityRecord | undefined =>
  view.get(entityKey(project, name)) as GraphEntityRecord | undefined

const byOrder = (a: { readonly order: number }, b: { readonly order: number }) => a.order - b.order

/**
 * Every entity of a project, in creation order: one scan of the entities (in name order), sorted by
 * the order each record holds. Walking the order index instead costs a lookup per entity (its key
 * encoded, the tree descended): at 100,000 entities about 250 ms of `read_graph`'s 2.2 s by self
 * time in a profile; read in one scan the call took 2.06–2.11 s against 2.12–2.23.
 */
export const entitiesOf = (view: StoreView, project: string): Array<GraphEntityRecord> => {
  const out: Array<GraphEntityRecord> = []
  for (const { value } of view.getRange(entitiesByName(project))) out.push(value as GraphEntityRecord)
  return out.sort(byOrder)
}

/** Every relation of a project, in creation order (one scan, as `entitiesOf`). */
export const relationsOf = (view: StoreView, project: string): Array<GraphRelationRecord> => {
  const out: Array<GraphRelationRecord> = []
  for (const { value } of view.getRange(relationsByEnds(project))) out.push(value as GraphRelationRecord)
  return out.sort(byOrder)
}

/** Relations with at least one end in `names`, in creation order (the official rule). */
export const relationsTouching = (
  view: StoreView,
  project: string,
  names: Iterable<string>,
): Array<GraphRelationRecord> => {
  const found = new Map<string, GraphRelationRecord>()
  for (const name of names) {
    for (const { key, value } of view.getRange(relationsFrom(project, name)))
      found.set(key, value as GraphRelationRecord)
    for (const { key } of view.getRange(relationsTo(project, name))) {
      const relationKey = relationKeyOfIncoming(key)
      if (!found.has(relationKey)) {
        const relation = view.get(relationKey) as GraphRelationRecord | undefined
        if (relation !== undefined) found.set(relationKey, relation)
      }
    }
  }
  return [...found.values()].sort((a, b) => a.order - b.order)
}

/** read_graph. */
export const readGraph = (view: StoreView, project: string): KnowledgeGraph => ({
  entities: entitiesOf(view, project).map(officialEntity),
  relations: relationsOf(view, project).map(officialRelation),
})

/** The subgraph of the given entities: them (in creation order) and the relations touching them. */
export const subgraphOf = (
  view: StoreView,
  project: string,
  entities: ReadonlyArray<GraphEntityRecord>,
): KnowledgeGraph => {
  const sorted = [...entities].sort((a, b) => a.order - b.order)
  return {
    entities: sorted.map(officialEntity),
    relations: relationsTouching(
      view,
      project,
      sorted.map((entity) => entity.name),
    ).map(officialRelation),
  }
}

/** open_nodes: the named entities that exist, and relations touching any of them. */
export const openNodes = (view: StoreView, project: string, names: ReadonlyArray<string>): KnowledgeGraph => {
  const found = new Map<string, GraphEntityRecord>()
  for (const name of names) {
    const entity = getEntity(view, project, name)
    if (entity !== undefined) found.set(name, entity)
  }
  return subgraphOf(view, project, [...found.values()])
}

/** The official search_nodes rule for one stored entity. */
export const entityMatches = (entity: GraphEntityRecord, query: string): boolean => {
  const needle = query.toLowerCase()
  return (
    entity.name.toLowerCase().includes(needle) ||
    entity.entityType.toLowerCase().includes(needle) ||
    entity.observations.some((observation) => observation.text.toLowerCase().includes(needle))
  )
}

/** search_nodes by a scan of every entity (the reference, and the path while the index is cold). */
export const searchNodesByScan = (view: StoreView, project: string, query: string): KnowledgeGraph => {
  const matches: Array<GraphEntityRecord> = []
  for (const { value } of view.getRange(entitiesByName(project))) {
    const entity = value as GraphEntityRecord
    if (entityMatches(entity, query)) matches.push(entity)
  }
  return subgraphOf(view, project, matches)
}

/** A project's counters (entity and relation counts). */
export const countersOf = (view: StoreView, project: string): ProjectCounters =>
  (view.get(countersKey(project)) as ProjectCounters | undefined) ?? emptyCounters

/** Every project that has ever held graph data. */
export const projectsOf = (view: StoreView): Array<string> =>
  [...view.getRange(allProjects)].map((entry) => projectOfKey(entry.key))
