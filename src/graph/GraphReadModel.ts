/**
 * An in-memory read model of one project's graph, so search_nodes answers without touching LMDB:
 * the substring index, every entity in its official shape (with its creation order), every
 * relation, and an adjacency map from a name to the relations touching it.
 *
 * It is derived state: built from a store view, then refreshed from the view for exactly what an
 * event touched (re-reading is idempotent, so the order events are handled in never matters).
 * Answers equal `searchNodesByScan` on the same view — the same entities in creation order and
 * every relation with at least one end among them.
 */
import { rangeAfter, type StoreView } from "../stores/checkpoint/Checkpoint.ts"
import {
  entitiesInOrder,
  type GraphEntityRecord,
  type GraphRelationRecord,
  relationKey,
  relationsFrom,
  relationsInOrder,
  relationsTo,
} from "./GraphKeys.ts"
import { getEntity } from "./GraphQueries.ts"
import { type GraphEvent, touchedEntities } from "./GraphStore.ts"
import type { Entity, KnowledgeGraph, Relation } from "./Model.ts"
import { SubstringIndex } from "./SubstringIndex.ts"

/** What one drain has already re-read from its view, per project. */
export interface RefreshedInDrain {
  readonly entities: Set<string>
  readonly relationsOf: Set<string>
}

interface CachedEntity {
  readonly entity: Entity
  readonly order: number
}

interface CachedRelation {
  readonly relation: Relation
  readonly order: number
}

const textsOf = (entity: GraphEntityRecord): ReadonlyArray<string> => [
  entity.name,
  entity.entityType,
  ...entity.observations.map((observation) => observation.text),
]

/** One project's searchable graph, kept in memory. */
export class ProjectReadModel {
  private readonly index = new SubstringIndex<string>()
  private readonly entities = new Map<string, CachedEntity>()
  private readonly relations = new Map<string, CachedRelation>()
  private readonly relationsByOrder = new Map<number, Relation>()
  /** Name → creation orders of the relations touching it (numbers: cheap to hash and to sort). */
  private readonly adjacency = new Map<string, Set<number>>()

  /** How far a model being built has read (`buildFrom`): the last creation-order key of each kind. */
  private entitiesReadTo: string | undefined
  private relationsReadTo: string | undefined
  private readingRelations = false
  private built = false

  private constructor(private readonly project: string) {}

  /** A model of `project` to be built a slice at a time (`buildFrom`). */
  static building(project: string): ProjectReadModel {
    return new ProjectReadModel(project)
  }

  /**
   * Reads the next entities, then relations, in creation order from `view` (so the index's slots,
   * in insertion order, are creation order too), for about `sliceMs`; true once all are read. Each
   * slice may see a later state of the store than the one before: what changed in between is for
   * the caller to refresh from its events, as it does after the build (re-reading is idempotent).
   */
  buildFrom(view: StoreView, sliceMs: number): boolean {
    if (this.built) return true
    const startedAt = performance.now()
    // The clock is read after each entity or relation (~0.1 µs; an entity takes ~30 µs to index).
    const due = () => performance.now() - startedAt >= sliceMs
    if (!this.readingRelations) {
      for (const { key, value } of view.getRange(rangeAfter(entitiesInOrder(this.project), this.entitiesReadTo))) {
        const entity = getEntity(view, this.project, value as string)
        if (entity !== undefined) this.putEntity(entity)
        this.entitiesReadTo = key
        if (due()) return false
      }
      this.readingRelations = true
    }
    for (const { key, value } of view.getRange(rangeAfter(relationsInOrder(this.project), this.relationsReadTo))) {
      const relation = view.get(value as string) as GraphRelationRecord | undefined
      if (relation !== undefined) {
        this.removeRelation(value as string)
        this.putRelation(value as string, relation)
      }
      this.relationsReadTo = key
      if (due()) return false
    }
    this.index.compact()
    this.built = true
    return true
  }

  get size(): number {
    return this.entities.size
  }

  /**
   * Brings the model up to date with what `event` changed, re-reading it from `view`. `refreshed`
   * holds what was already re-read from this same view for earlier events of one drain: those
   * entities, and those names' relations, are current and skipped (a merge's events each touch its
   * target). The two are apart: an entity re-read for its creation says nothing of the relations a
   * later merge rewired onto it.
   */
  refresh(view: StoreView, event: GraphEvent, refreshed: RefreshedInDrain): void {
    const touched = touchedEntities(event)
    const names = touched.filter((name) => !refreshed.entities.has(name))
    for (const name of names) refreshed.entities.add(name)
    for (const name of names) {
      const entity = getEntity(view, this.project, name)
      if (entity === undefined) this.removeEntity(name)
      else this.putEntity(entity)
    }
    const rewired =
      event._tag === "EntitiesDeleted" || event._tag === "EntitiesMerged"
        ? touched.filter((name) => !refreshed.relationsOf.has(name))
        : []
    for (const name of rewired) refreshed.relationsOf.add(name)
    for (const key of this.affectedRelations(view, event, rewired)) {
      this.removeRelation(key)
      const relation = view.get(key) as GraphRelationRecord | undefined
      if (relation !== undefined) this.putRelation(key, relation)
    }
  }

  /** search_nodes: matching entities in creation order, and every relation touching one of them. */
  search(query: string): KnowledgeGraph {
    // The index answers in insertion order, which is creation order (entities are indexed in
    // creation order and a re-created one is appended); sort only if that ever does not hold.
    const found: Array<CachedEntity> = []
    let inOrder = true
    for (const name of this.index.search(query)) {
      const cached = this.entities.get(name)
      if (cached === undefined) continue
      if (found.length > 0 && cached.order < found[found.length - 1]!.order) inOrder = false
      found.push(cached)
    }
    if (!inOrder) found.sort((a, b) => a.order - b.order)
    const orders = new Set<number>()
    for (const { entity } of found) {
      const touching = this.adjacency.get(entity.name)
      if (touching !== undefined) for (const order of touching) orders.add(order)
    }
    const sortedOrders = Float64Array.from(orders).sort()
    const relations: Array<Relation> = []
    for (const order of sortedOrders) relations.push(this.relationsByOrder.get(order)!)
    return { entities: found.map(({ entity }) => entity), relations }
  }

  /**
   * The relations `event` named, and every relation touching `rewired` before and now. "Before" is
   * the model's own adjacency. "Now" is read from the view only for a merge's target: a deleted or
   * merged-away name has no relation left once the event is applied, and one given to it again by a
   * later event is named by that event (its relations, or its merge, which reads its target), so
   * reading the view for each of 10,000 deleted names found nothing at twice the cost of the rest.
   */
  private affectedRelations(view: StoreView, event: GraphEvent, rewired: ReadonlyArray<string>): Set<string> {
    const keys = new Set<string>()
    if (event._tag === "RelationsCreated" || event._tag === "RelationsDeleted") {
      for (const relation of event.relations)
        keys.add(relationKey(this.project, relation.from, relation.to, relation.relationType))
    }
    // Cascades and rewiring of deleted and merged names.
    for (const name of rewired) {
      for (const order of this.adjacency.get(name) ?? []) {
        const relation = this.relationsByOrder.get(order)
        if (relation !== undefined)
          keys.add(relationKey(this.project, relation.from, relation.to, relation.relationType))
      }
      if (event._tag !== "EntitiesMerged" || name !== event.target) continue
      for (const { key } of view.getRange(relationsFrom(this.project, name))) keys.add(key)
      for (const { value } of view.getRange(relationsTo(this.project, name))) keys.add(value as string)
    }
    return keys
  }

  private putEntity(record: GraphEntityRecord): void {
    const entity: Entity = {
      name: record.name,
      entityType: record.entityType,
      observations: record.observations.map((observation) => observation.text),
    }
    this.entities.set(record.name, { entity, order: record.order })
    this.index.upsert(record.name, textsOf(record))
  }

  private removeEntity(name: string): void {
    this.entities.delete(name)
    this.index.remove(name)
  }

  private putRelation(key: string, record: GraphRelationRecord): void {
    const relation: Relation = { from: record.from, to: record.to, relationType: record.relationType }
    this.relations.set(key, { relation, order: record.order })
    this.relationsByOrder.set(record.order, relation)
    for (const end of [record.from, record.to]) {
      const orders = this.adjacency.get(end) ?? new Set<number>()
      orders.add(record.order)
      this.adjacency.set(end, orders)
    }
  }

  private removeRelation(key: string): void {
    const cached = this.relations.get(key)
    if (cached === undefined) return
    this.relations.delete(key)
    this.relationsByOrder.delete(cached.order)
    for (const end of [cached.relation.from, cached.relation.to]) {
      const orders = this.adjacency.get(end)
      orders?.delete(cached.order)
      if (orders?.size === 0) this.adjacency.delete(end)
    }
  }
}
