/**
 * search_nodes, made fast without changing its meaning.
 *
 * Owns one in-memory read model per project (GraphReadModel.ts: a substring index, the entities
 * and the relation adjacency), built on the first search in that project from the store's state
 * and then kept current from the event bus. Every graph event says what it touched; the model
 * re-reads exactly that from the store, so the order in which events are handled never matters. Each search first drains every event already
 * published — stores publish before they acknowledge, so a search that follows an acknowledged
 * write always sees it. A gap in the graph store's sequence (the bus dropped events for a slow
 * subscriber) discards the indexes; they are rebuilt on the next search. Candidates come from the
 * index and every answer equals a scan (`searchNodesByScan`), which the tests check.
 */
import { Context, Effect, Layer, PubSub, Semaphore } from "effect"
import { Router } from "../actors/Router.ts"
import { type CommittedEvent, EventBus, followBus, isDomainEvent } from "../stores/EventBus.ts"
import type { StoreError } from "../stores/StoreError.ts"
import { ProjectReadModel, type RefreshedInDrain } from "./GraphReadModel.ts"
import { type GraphEvent, graphStore } from "./GraphStore.ts"
import type { KnowledgeGraph } from "./Model.ts"

/** Graph events re-read per turn of the event loop when catching up (each names up to 100 entities). */
const refreshSliceEvents = 4

/** How often the index catches up with the event bus when nobody searches, while events come. */
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

/** How GraphSearch works, where tests change it. */
export interface GraphSearchOptions {
  /** How long a model's build reads before it lets the event loop run (`buildSliceMsDefault`). */
  readonly buildSliceMs: number
}

/**
 * A model's build reads this long (ms) at a time: other calls wait at most about this for it. At
 * 10 ms a slice the 100,000 entities of issue 28's graph build in about 5 s, as in one piece.
 */
export const buildSliceMsDefault = 10

export const layerWith = (
  options: GraphSearchOptions = { buildSliceMs: buildSliceMsDefault },
): Layer.Layer<GraphSearch, never, Router | EventBus> =>
  Layer.effect(
    GraphSearch,
    Effect.gen(function* () {
      const store = (yield* Router).store(graphStore)
      const bus = yield* EventBus
      const subscription = yield* bus.subscribe
      const lock = yield* Semaphore.make(1)
      const indexes = new Map<string, ProjectReadModel>()
      let lastSeq: number | undefined
      let eventsApplied = 0
      let rebuilds = 0

      /**
       * Applies drained events in slices of `refreshSliceEvents`, letting the event loop run between
       * them: a call at the limits is 100 events of 100 names, and re-reading them all in one turn
       * held the thread for as long as the call itself. What one slice re-read is skipped by later
       * slices: every drained event was committed before the first slice read the view.
       */
      const applyEvents = (events: ReadonlyArray<CommittedEvent>) =>
        Effect.gen(function* () {
          const refreshed = new Map<string, RefreshedInDrain>()
          for (let start = 0; start < events.length; start += refreshSliceEvents) {
            if (start > 0) yield* Effect.yieldNow
            yield* store.read((view) => {
              for (const committed of events.slice(start, start + refreshSliceEvents)) {
                if (committed.store !== graphStore.name) continue
                if (lastSeq !== undefined && committed.seq !== lastSeq + 1 && committed.seq > lastSeq) {
                  indexes.clear() // events were dropped: rebuild lazily from the store
                  refreshed.clear()
                  rebuilds++
                }
                lastSeq = Math.max(lastSeq ?? 0, committed.seq)
                if (!isDomainEvent(committed)) continue
                const event = committed.event as GraphEvent
                const model = indexes.get(event.project)
                eventsApplied++
                if (model === undefined) continue
                let done = refreshed.get(event.project)
                if (done === undefined) {
                  done = { entities: new Set(), relationsOf: new Set() }
                  refreshed.set(event.project, done)
                }
                model.refresh(view, event, done)
              }
            })
          }
        })

      const drain = Effect.gen(function* () {
        const events = yield* PubSub.takeUpTo(subscription, Number.MAX_SAFE_INTEGER)
        if (events.length > 0) yield* applyEvents(events)
      })

      /**
       * The project's model, built on its first search a slice at a time (`buildSliceMs`), letting
       * the event loop run between slices: at 100,000 entities a build takes seconds, and in one piece
       * it held every other call that long. The lock is held throughout, so events published meanwhile
       * wait in the subscription; the drain that follows the build refreshes what they touched.
       */
      const modelFor = (project: string) =>
        Effect.gen(function* () {
          for (;;) {
            const model = indexes.get(project)
            if (model !== undefined) return model
            const building = ProjectReadModel.building(project)
            while (!(yield* store.read((view) => building.buildFrom(view, options.buildSliceMs))))
              yield* Effect.yieldNow
            indexes.set(project, building)
            yield* drain
            // A gap in the events drained (the bus dropped some) discarded it: built again.
          }
        })

      // Keep up between searches too, so the bus never has to drop events for this subscriber;
      // asleep while nothing is published. (It drains under the lock: taking events outside it
      // could hide them from a search.)
      yield* Effect.forkScoped(
        followBus(bus, subscription, {
          intervalMs: backgroundDrainIntervalMs,
          step: lock
            .withPermits(1)(drain)
            .pipe(Effect.catch(() => Effect.void)),
        }).run,
      )

      const searchNodes = (project: string, query: string) =>
        lock.withPermits(1)(
          Effect.gen(function* () {
            yield* drain
            return (yield* modelFor(project)).search(query)
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

export const layer = layerWith()
