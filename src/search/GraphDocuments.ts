/**
 * The graph store's searchable documents (the first `SearchSource`; others follow the pattern).
 *
 * One group per entity (key: project + name) holding one `entity` document (title: the name,
 * text: the entity type) and one `observation` document per observation (title: the entity's
 * name, text: the observation). Ids are short hashes of project, name (and observation text),
 * so they are stable across restarts and rebuilds; a merged-away entity's documents disappear
 * and reappear under the target's ids.
 */
import { allProjects, entitiesByName, type GraphEntityRecord, projectOfKey } from "../graph/GraphKeys.ts"
import { getEntity } from "../graph/GraphQueries.ts"
import { type GraphEvent, graphStore, touchedEntities } from "../graph/GraphStore.ts"
import type { StoreView } from "../stores/checkpoint/Checkpoint.ts"
import { type GroupDocuments, hashJoined, type SearchDocument, type SearchSource } from "./index/SearchDocument.ts"

/** The id of an entity's document. */
export const entityDocumentId = (project: string, name: string): string => `g${hashJoined([project, name])}`
/** The id of an observation's document. */
export const observationDocumentId = (project: string, name: string, text: string): string =>
  `o${hashJoined([project, name, text])}`

const groupOf = (project: string, name: string) => `${project}\u0000${name}`

/** An entity's documents. */
export const entityDocuments = (entity: GraphEntityRecord): Array<SearchDocument> => {
  const documents: Array<SearchDocument> = [
    {
      id: entityDocumentId(entity.project, entity.name),
      store: graphStore.name,
      project: entity.project,
      kind: "entity",
      title: entity.name,
      text: entity.entityType,
      at: entity.createdAt,
      fields: { entity: entity.name, entityType: entity.entityType, observations: entity.observations.length },
    },
  ]
  // A loop: no closure made per entity (docs/benchmarks.md, "Closures made for each call").
  for (const observation of entity.observations)
    documents.push({
      id: observationDocumentId(entity.project, entity.name, observation.text),
      store: graphStore.name,
      project: entity.project,
      kind: "observation",
      title: entity.name,
      text: observation.text,
      at: observation.createdAt,
      fields: { entity: entity.name, entityType: entity.entityType },
    })
  return documents
}

const groupNow = (view: StoreView, project: string, name: string): GroupDocuments => {
  const entity = getEntity(view, project, name)
  return { group: groupOf(project, name), documents: entity === undefined ? [] : entityDocuments(entity) }
}

/** The graph store as a search source. */
export const graphSearchSource: SearchSource<GraphEvent> = {
  definition: graphStore,
  changes: (event, view, given) => {
    const groups: Array<GroupDocuments> = []
    for (const name of touchedEntities(event)) {
      const group = groupOf(event.project, name)
      if (given.has(group)) continue
      given.add(group)
      groups.push(groupNow(view, event.project, name))
    }
    return groups
  },
  scan: function* (view) {
    for (const { key } of view.getRange(allProjects)) {
      const project = projectOfKey(key)
      for (const { value } of view.getRange(entitiesByName(project))) {
        const entity = value as GraphEntityRecord
        yield { group: groupOf(entity.project, entity.name), documents: entityDocuments(entity) }
      }
    }
  },
}
