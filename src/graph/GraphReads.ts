/**
 * Bounded reads for big graphs: a summary, n-hop neighbours in pages, and entities with their
 * history (creation and observation times). Every result has a size limit; pages are cut by an
 * opaque cursor that names the query it belongs to, so a cursor cannot be replayed against
 * another query.
 */
import { createHash } from "node:crypto"
import type { StoreView } from "../stores/checkpoint/Checkpoint.ts"
import {
  entitiesByName,
  entitiesInOrder,
  type GraphEntityRecord,
  type GraphRelationRecord,
  relationsByEnds,
} from "./GraphKeys.ts"
import { getEntity, officialEntity, officialRelation, relationsTouching } from "./GraphQueries.ts"
import type { Entity, Relation } from "./Model.ts"

/** At most this many names in a summary. */
export const summaryNamesMax = 5000
/** At most this many entities per neighbours page. */
export const neighborsLimitMax = 1000
/** A neighbourhood walk stops after reaching this many entities. */
export const neighborsReachMax = 20_000

/** read_graph_summary's answer. */
export interface GraphSummary {
  readonly project: string
  readonly entityCount: number
  readonly relationCount: number
  readonly entityTypes: Record<string, number>
  readonly relationTypes: Record<string, number>
  readonly names: ReadonlyArray<string>
  readonly namesTruncated: boolean
}

/**
 * Counts and the first `namesLimit` names of a project: each kind in one scan (as `entitiesOf`: no
 * lookup a record), the names from the creation-order index, whose values they are.
 */
export const graphSummary = (view: StoreView, project: string, namesLimit: number): GraphSummary => {
  const entityTypes: Record<string, number> = {}
  const relationTypes: Record<string, number> = {}
  let entityCount = 0
  let relationCount = 0
  for (const { value } of view.getRange(entitiesByName(project))) {
    const { entityType } = value as GraphEntityRecord
    entityCount++
    entityTypes[entityType] = (entityTypes[entityType] ?? 0) + 1
  }
  for (const { value } of view.getRange(relationsByEnds(project))) {
    const { relationType } = value as GraphRelationRecord
    relationCount++
    relationTypes[relationType] = (relationTypes[relationType] ?? 0) + 1
  }
  const names: Array<string> = []
  if (namesLimit > 0)
    for (const { value } of view.getRange({ ...entitiesInOrder(project), limit: namesLimit }))
      names.push(value as string)
  return {
    project,
    entityCount,
    relationCount,
    entityTypes,
    relationTypes,
    names,
    namesTruncated: entityCount > names.length,
  }
}

/** graph_neighbors arguments. */
export interface NeighborsQuery {
  readonly names: ReadonlyArray<string>
  readonly depth?: number
  readonly direction?: "out" | "in" | "both"
  readonly relationTypes?: ReadonlyArray<string>
  readonly limit?: number
  readonly cursor?: string
}

/** One page of graph_neighbors. */
export interface NeighborsPage {
  readonly entities: ReadonlyArray<Entity & { readonly depth: number }>
  readonly relations: ReadonlyArray<Relation>
  readonly total: number
  readonly truncated: boolean
  readonly nextCursor?: string
}

const queryDigest = (project: string, query: NeighborsQuery): string =>
  createHash("sha256")
    .update(
      JSON.stringify([project, query.names, query.depth ?? 1, query.direction ?? "both", query.relationTypes ?? null]),
    )
    .digest("base64url")
    .slice(0, 16)

const encodeCursor = (digest: string, offset: number) =>
  Buffer.from(JSON.stringify({ q: digest, o: offset })).toString("base64url")

const decodeCursor = (cursor: string, digest: string): number | undefined => {
  try {
    const parsed = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")) as { q?: unknown; o?: unknown }
    return parsed.q === digest && Number.isSafeInteger(parsed.o) && (parsed.o as number) >= 0
      ? (parsed.o as number)
      : undefined
  } catch {
    return undefined
  }
}

/** Breadth-first neighbours, paged; the starting entities are at depth 0. */
export const graphNeighbors = (
  view: StoreView,
  project: string,
  query: NeighborsQuery,
):
  | { readonly _tag: "Page"; readonly page: NeighborsPage }
  | { readonly _tag: "BadCursor"; readonly message: string } => {
  const digest = queryDigest(project, query)
  const offset = query.cursor === undefined ? 0 : decodeCursor(query.cursor, digest)
  if (offset === undefined)
    return {
      _tag: "BadCursor",
      message: "cursor does not belong to this query (or is malformed); start again without one",
    }
  const depthMax = query.depth ?? 1
  const direction = query.direction ?? "both"
  const types = query.relationTypes === undefined ? undefined : new Set(query.relationTypes)
  const depthOf = new Map<string, number>()
  let frontier = query.names.filter((name) => getEntity(view, project, name) !== undefined)
  for (const name of frontier) depthOf.set(name, 0)
  let truncated = false
  for (let depth = 1; depth <= depthMax && frontier.length > 0 && !truncated; depth++) {
    const next: Array<string> = []
    for (const relation of relationsTouching(view, project, frontier)) {
      if (types !== undefined && !types.has(relation.relationType)) continue
      const candidates: Array<string> = []
      if (direction !== "in" && depthOf.get(relation.from) === depth - 1) candidates.push(relation.to)
      if (direction !== "out" && depthOf.get(relation.to) === depth - 1) candidates.push(relation.from)
      for (const name of candidates) {
        if (depthOf.has(name) || getEntity(view, project, name) === undefined) continue
        if (depthOf.size >= neighborsReachMax) {
          truncated = true
          break
        }
        depthOf.set(name, depth)
        next.push(name)
      }
    }
    frontier = next
  }
  const ordered = [...depthOf.entries()]
    .map(([name, depth]) => ({ entity: getEntity(view, project, name)!, depth }))
    .sort((a, b) => a.depth - b.depth || a.entity.order - b.entity.order)
  const limit = query.limit ?? 100
  const page = ordered.slice(offset, offset + limit)
  const pageNames = new Set(page.map(({ entity }) => entity.name))
  const relations = relationsTouching(view, project, pageNames)
    .filter((relation) => depthOf.has(relation.from) && depthOf.has(relation.to))
    .filter((relation) => types === undefined || types.has(relation.relationType))
    .map(officialRelation)
  const more = offset + limit < ordered.length
  return {
    _tag: "Page",
    page: {
      entities: page.map(({ entity, depth }) => ({ ...officialEntity(entity), depth })),
      relations,
      total: ordered.length,
      truncated,
      ...(more ? { nextCursor: encodeCursor(digest, offset + limit) } : {}),
    },
  }
}

const iso = (millis: number) => new Date(millis).toISOString()

/** get_entity_details: entities with timestamps, and the relations touching them. */
export const entityDetails = (view: StoreView, project: string, names: ReadonlyArray<string>) => {
  const entities = [...new Set(names)]
    .flatMap((name) => getEntity(view, project, name) ?? [])
    .sort((a, b) => a.order - b.order)
  return {
    project,
    entities: entities.map((entity) => ({
      name: entity.name,
      entityType: entity.entityType,
      createdAt: iso(entity.createdAt),
      updatedAt: iso(entity.updatedAt),
      observations: entity.observations.map((observation) => ({
        text: observation.text,
        createdAt: iso(observation.createdAt),
      })),
    })),
    relations: relationsTouching(
      view,
      project,
      entities.map((entity) => entity.name),
    ).map((relation) => ({ ...officialRelation(relation), createdAt: iso(relation.createdAt) })),
    missing: names.filter((name) => getEntity(view, project, name) === undefined),
  }
}
