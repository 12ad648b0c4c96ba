/**
 * search_nodes, made fast without changing its meaning.
 *
 * Owns one `SubstringIndex` per project, built on the first search in that project from the
 * store's state and then kept current from the event bus. Every graph event names the entities
 * it touched; the index re-reads those entities from the store and re-posts their texts, so the
 * order in which events are handled never matters. Each search first drains every event already
 * published — stores publish before they acknowledge, so a search that follows an acknowledged
 * write always sees it. A gap in the graph store's sequence (the bus dropped events for a slow
 * subscriber) discards the indexes; they are rebuilt on the next search. Candidates come from the
 * index and every answer equals a scan (`searchNodesByScan`), which the tests check.
 */
import { Context, Duration, Effect, Layer, PubSub, Semaphore } from "effect"
import { type CommittedEvent, EventBus } from "../actors/EventBus.ts"
import { Router } from "../actors/Router.ts"
import type { StoreView } from "../stores/Checkpoint.ts"
import type { StoreError } from "../stores/StoreActor.ts"
import { entitiesByName } from "./GraphKeys.ts"
import { getEntity, subgraphOf } from "./GraphQueries.ts"
import { type GraphEvent, graphStore } from "./GraphStore.ts"
import type { KnowledgeGraph } from "./Model.ts"
import { SubstringIndex } from "./SubstringIndex.ts"

/** How often the index catches up with the event bus when nobody searches. */
const backgroundDrainIntervalMs = 50

/** Index sizes, for health. */
export interface GraphSearchStats {
  readonly projectsIndexed: number
  readonly entitiesIndexed: number
  readonly eventsApplied: number
  readonly rebuilds: number
}

/** The graph's substring search. */
export class GraphSearch extends Context.Service<
  GraphSearch,
  {
    readonly searchNodes: (project: string, query: string) => Effect.Effect<KnowledgeGraph, StoreError>
    readonly stats: () => GraphSearchStats
  }
>()("mnemos/graph/GraphSearch") {}

/** The entity names an event touched, per project. */
const touched = (event: GraphEvent): ReadonlyArray<string> => {
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

const textsOf = (view: StoreView, project: string, name: string): ReadonlyArray<string> | undefined => {
  const entity = getEntity(view, project, name)
  return entity === undefined
    ? undefined
    : [entity.name, entity.entityType, ...entity.observations.map((observation) => observation.text)]
}

export const layer: Layer.Layer<GraphSearch, never, Router | EventBus> = Layer.effect(
  GraphSearch,
  Effect.gen(function* () {
    const store = (yield* Router).store(graphStore)
    const subscription = yield* (yield* EventBus).subscribe
    const lock = yield* Semaphore.make(1)
    const indexes = new Map<string, SubstringIndex<string>>()
    let lastSeq: number | undefined
    let eventsApplied = 0
    let rebuilds = 0

    const applyEvents = (events: ReadonlyArray<CommittedEvent>) =>
      store.read((view) => {
        for (const committed of events) {
          if (committed.store !== graphStore.name) continue
          if (lastSeq !== undefined && committed.seq !== lastSeq + 1 && committed.seq > lastSeq) {
            indexes.clear() // events were dropped: rebuild lazily from the store
            rebuilds++
          }
          lastSeq = Math.max(lastSeq ?? 0, committed.seq)
          const event = committed.event as GraphEvent
          const index = indexes.get(event.project)
          if (index === undefined) continue
          for (const name of touched(event)) {
            const texts = textsOf(view, event.project, name)
            if (texts === undefined) index.remove(name)
            else index.upsert(name, texts)
          }
          eventsApplied++
        }
      })

    const drain = Effect.gen(function* () {
      const events = yield* PubSub.takeUpTo(subscription, Number.MAX_SAFE_INTEGER)
      if (events.length > 0) yield* applyEvents(events)
    })

    const indexFor = (view: StoreView, project: string): SubstringIndex<string> => {
      let index = indexes.get(project)
      if (index === undefined) {
        index = new SubstringIndex<string>()
        for (const { value } of view.getRange(entitiesByName(project))) {
          const entity = value as { name: string; entityType: string; observations: ReadonlyArray<{ text: string }> }
          index.upsert(entity.name, [
            entity.name,
            entity.entityType,
            ...entity.observations.map((observation) => observation.text),
          ])
        }
        indexes.set(project, index)
      }
      return index
    }

    // Keep up between searches too, so the bus never has to drop events for this subscriber.
    // (It drains under the lock: taking events outside it could hide them from a search.)
    yield* Effect.forkScoped(
      Effect.forever(
        Effect.sleep(Duration.millis(backgroundDrainIntervalMs)).pipe(
          Effect.andThen(lock.withPermits(1)(drain)),
          Effect.catch(() => Effect.void),
        ),
      ),
    )

    const searchNodes = (project: string, query: string) =>
      lock.withPermits(1)(
        Effect.gen(function* () {
          yield* drain
          return yield* store.read((view) => {
            const names = indexFor(view, project).search(query)
            const entities = names.flatMap((name) => getEntity(view, project, name) ?? [])
            return subgraphOf(view, project, entities)
          })
        }),
      )

    return GraphSearch.of({
      searchNodes,
      stats: () => ({
        projectsIndexed: indexes.size,
        entitiesIndexed: [...indexes.values()].reduce((sum, index) => sum + index.size, 0),
        eventsApplied,
        rebuilds,
      }),
    })
  }),
)
