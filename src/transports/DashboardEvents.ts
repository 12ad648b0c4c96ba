/**
 * The dashboard's live feed: committed events pushed to browsers over the `/events` WebSocket,
 * and the write-rate counters behind the Stats view.
 *
 * Owns one event-bus subscription for the whole daemon (not one per browser) and the set of
 * connected browsers. Each event is cut down to what the views need (`LiveEvent`: store, seq,
 * kind of change, project, and the names a graph change touched, at most `liveItemsMax` of them)
 * and queued per browser; queues are flushed every `liveFlushIntervalMs`, so a write reaches an
 * open page well within a second. A browser that cannot keep up (more than
 * `liveClientBufferBytesMax` unsent, or `liveQueueEventsMax` queued) loses its queue and is told to
 * `resync` (re-read everything) instead. (Sequence gaps are no sign of loss here: a store's
 * sequence also numbers records that publish no event, such as idempotency keys.) The socket is
 * pinged every
 * `livePingIntervalMs`, so the page notices a dead daemon quickly.
 *
 * Messages, all JSON: `{type:"hello", at}` first, then `{type:"events", events}`,
 * `{type:"resync", reason}` and `{type:"ping", at}`.
 */

import { Effect, PubSub, type Scope } from "effect"
import { WebSocket, WebSocketServer } from "ws"
import type { LiveEvent } from "../dashboard/LiveEvent.ts"
import type { GraphEvent } from "../graph/GraphStore.ts"
import { type CommittedEvent, EventBus, isDomainEvent } from "../stores/EventBus.ts"

/** How often queued events are sent. */
export const liveFlushIntervalMs = 50
/** How often an idle socket is pinged. */
export const livePingIntervalMs = 10_000
/** Most names (entities, relations, observations) one live event lists; beyond it, `partial`. */
export const liveItemsMax = 200
/** Unsent bytes at which a browser counts as too slow and is told to resync. */
export const liveClientBufferBytesMax = 4 * 1024 * 1024
/** Most events queued for one browser between flushes. */
export const liveQueueEventsMax = 5_000
/** Most browsers connected at once. */
export const liveClientsMax = 64
/** Seconds of write-rate history kept. */
export const rateWindowSeconds = 600
/** The store whose events mirror every other store's; it is not counted as writes. */
const auditStoreName = "audit"

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null
const stringOf = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined)

const bounded = <A>(items: ReadonlyArray<A>): { items: ReadonlyArray<A>; partial: boolean } => ({
  items: items.slice(0, liveItemsMax),
  partial: items.length > liveItemsMax,
})

const graphDetails = (event: GraphEvent): LiveEvent["graph"] => {
  switch (event._tag) {
    case "EntitiesCreated": {
      const { items, partial } = bounded(event.entities)
      return {
        entities: items.map((entity) => ({
          name: entity.name,
          type: entity.entityType,
          observations: entity.observations.length,
        })),
        partial,
      }
    }
    case "RelationsCreated": {
      const { items, partial } = bounded(event.relations)
      return { relations: items.map((r) => ({ from: r.from, to: r.to, type: r.relationType })), partial }
    }
    case "ObservationsAdded":
    case "ObservationsDeleted": {
      const sign = event._tag === "ObservationsAdded" ? 1 : -1
      const changes = event._tag === "ObservationsAdded" ? event.additions : event.deletions
      const { items, partial } = bounded(changes)
      return { observed: items.map((c) => ({ name: c.entityName, delta: sign * c.texts.length })), partial }
    }
    case "EntitiesDeleted": {
      const { items, partial } = bounded(event.names)
      return { removed: items, partial }
    }
    case "RelationsDeleted": {
      const { items, partial } = bounded(event.relations)
      return { relationsRemoved: items.map((r) => ({ from: r.from, to: r.to, type: r.relationType })), partial }
    }
    case "EntitiesMerged":
      return { partial: true }
  }
}

/** Cuts a committed event down to what the dashboard shows. */
export type { LiveEvent }

export const liveEventOf = (committed: CommittedEvent): LiveEvent => {
  const event = isRecord(committed.event) ? committed.event : {}
  const tag = stringOf(event._tag) ?? "event"
  const base = {
    store: committed.store,
    seq: committed.seq,
    at: committed.at,
    tag,
    ...(committed.origin === undefined ? {} : { origin: committed.origin }),
  }
  if (committed.store === "graph") {
    const graph = committed.event as GraphEvent
    return { ...base, project: graph.project, graph: graphDetails(graph) }
  }
  const record = isRecord(event.record) ? event.record : undefined
  if (tag === "RecordWritten" && record !== undefined) {
    const data = isRecord(record.data) ? record.data : {}
    const status = stringOf(data.status)
    return {
      ...base,
      ...(stringOf(record.project) !== undefined ? { project: stringOf(record.project)! } : {}),
      record: {
        change: stringOf(event.change) ?? "updated",
        kind: stringOf(record.kind) ?? "record",
        id: stringOf(record.id) ?? "",
        title: (stringOf(event.title) ?? "").slice(0, 200),
        tool: stringOf(event.tool) ?? "",
        by: stringOf(record.updatedBy) ?? "",
        ...(status !== undefined ? { status } : {}),
      },
    }
  }
  const project = stringOf(event.project)
  return project !== undefined ? { ...base, project } : base
}

/** Writes per second over the last `rateWindowSeconds`, per store. */
export interface WriteRates {
  readonly windowSeconds: number
  /** Epoch second of the last bucket. */
  readonly until: number
  /** Events per second, oldest first, `windowSeconds` long (every store but the audit ledger). */
  readonly perSecond: ReadonlyArray<number>
  readonly totalByStore: Readonly<Record<string, number>>
  /** The last sequence number seen per store. */
  readonly lastSeqByStore: Readonly<Record<string, number>>
}

/** The live feed. */
export interface DashboardEvents {
  /** Takes over an upgraded socket (already authenticated). */
  readonly attach: (socket: WebSocket) => void
  readonly webSocketServer: WebSocketServer
  readonly rates: () => WriteRates
  readonly clients: () => number
  /** Closes every browser socket ("going away"). */
  readonly close: () => void
}

interface Client {
  readonly socket: WebSocket
  queue: Array<LiveEvent>
  mustResync: string | undefined
}

/** Starts the feed; it stops (and closes every browser socket) when the scope closes. */
export const makeDashboardEvents: Effect.Effect<DashboardEvents, never, EventBus | Scope.Scope> = Effect.gen(
  function* () {
    const clients = new Set<Client>()
    const webSocketServer = new WebSocketServer({ noServer: true, maxPayload: 64 * 1024 })
    const buckets = new Map<number, number>()
    const totalByStore: Record<string, number> = {}
    const lastSeqByStore: Record<string, number> = {}

    const send = (client: Client, message: unknown) => sendText(client, Buffer.from(JSON.stringify(message)))
    /** Sends a message already serialised (as a text frame). */
    const sendText = (client: Client, text: Buffer) => {
      if (client.socket.readyState === WebSocket.OPEN) client.socket.send(text, { binary: false })
    }
    const count = (committed: CommittedEvent) => {
      lastSeqByStore[committed.store] = Math.max(lastSeqByStore[committed.store] ?? 0, committed.seq)
      if (committed.store === auditStoreName || !isDomainEvent(committed)) return
      totalByStore[committed.store] = (totalByStore[committed.store] ?? 0) + 1
      const second = Math.floor(committed.at / 1000)
      buckets.set(second, (buckets.get(second) ?? 0) + 1)
      if (buckets.size > rateWindowSeconds * 2)
        for (const key of buckets.keys()) if (key <= second - rateWindowSeconds) buckets.delete(key)
    }
    const enqueue = (batch: ReadonlyArray<CommittedEvent>) => {
      for (const committed of batch) count(committed)
      if (clients.size === 0) return
      const live = batch.filter(isDomainEvent).map(liveEventOf)
      for (const client of clients) {
        if (client.mustResync !== undefined) continue
        if (client.queue.length + live.length > liveQueueEventsMax) {
          client.queue = []
          client.mustResync = "too many events at once"
        } else client.queue.push(...live)
      }
    }
    const flush = () => {
      // Every queue is a suffix of the events enqueued since the last flush (a queue starts empty,
      // at a page's arrival or after a flush or a resync, and grows by the same batches for every
      // page): queues that start with the same event are the same. Each is serialised once,
      // however many pages follow.
      const serialised = new Map<LiveEvent, Buffer>()
      for (const client of clients) {
        if (client.socket.bufferedAmount > liveClientBufferBytesMax) {
          client.queue = []
          client.mustResync ??= "the page fell behind"
          continue
        }
        if (client.mustResync !== undefined) {
          send(client, { type: "resync", reason: client.mustResync })
          client.mustResync = undefined
        } else if (client.queue.length > 0) {
          const first = client.queue[0]!
          let text = serialised.get(first)
          if (text === undefined) {
            text = Buffer.from(JSON.stringify({ type: "events", events: client.queue }))
            serialised.set(first, text)
          }
          sendText(client, text)
          client.queue = []
        }
      }
    }

    const subscription = yield* (yield* EventBus).subscribe
    yield* Effect.forkScoped(Effect.forever(PubSub.takeAll(subscription).pipe(Effect.map((batch) => enqueue(batch)))))
    /** The flush and ping timers: running only while a page follows (an idle daemon is not woken). */
    let timers: { readonly flush: NodeJS.Timeout; readonly ping: NodeJS.Timeout } | undefined
    const stopTimers = () => {
      if (timers === undefined) return
      clearInterval(timers.flush)
      clearInterval(timers.ping)
      timers = undefined
    }
    const detach = (client: Client) => {
      clients.delete(client)
      if (clients.size === 0) stopTimers()
    }

    const close = () => {
      stopTimers()
      for (const client of clients) client.socket.close(1001, "the mnemos daemon is shutting down")
      clients.clear()
      for (const socket of webSocketServer.clients) socket.terminate()
    }
    yield* Effect.addFinalizer(() => Effect.sync(close))

    const attach = (socket: WebSocket) => {
      if (clients.size >= liveClientsMax) return socket.close(1013, "too many dashboard pages open")
      const client: Client = { socket, queue: [], mustResync: undefined }
      clients.add(client)
      timers ??= {
        flush: setInterval(flush, liveFlushIntervalMs),
        ping: setInterval(() => {
          for (const client of clients) send(client, { type: "ping", at: Date.now() })
        }, livePingIntervalMs),
      }
      socket.on("close", () => detach(client))
      socket.on("error", () => detach(client))
      socket.on("message", () => undefined) // the page sends nothing that matters
      send(client, { type: "hello", at: Date.now() })
    }
    const rates = (): WriteRates => {
      const until = Math.floor(Date.now() / 1000)
      const perSecond: Array<number> = []
      for (let second = until - rateWindowSeconds + 1; second <= until; second++)
        perSecond.push(buckets.get(second) ?? 0)
      return { windowSeconds: rateWindowSeconds, until, perSecond, totalByStore, lastSeqByStore }
    }
    return { attach, webSocketServer, rates, clients: () => clients.size, close }
  },
)
