/**
 * Who serves a shared memory, and how far behind each daemon is (the dashboard's "Shared memory"
 * panel, `GET /api/cluster`).
 *
 * Every daemon of a shared memory publishes a heartbeat on the core NATS subject `<prefix>.presence`
 * every `heartbeatMs` — its id, host, pid, start time and, per store, the stream position it has
 * applied — and listens to everyone's. (Core publish/subscribe, not a JetStream KV bucket: it has
 * no stream leader to elect when a NATS node is lost, so the list stays current through the very
 * faults it is there to show.) A daemon is shown live while its last heartbeat arrived less than
 * `liveWithinMs` ago, silent after that, and is forgotten after `forgetAfterMs`; one that stops says
 * goodbye and is dropped at once. A daemon started later knows the others from their next beat.
 * How far behind a daemon is, per store, is the stream's last position (asked of JetStream, at most
 * once per `streamInfoCacheMs`) minus the position it reported.
 *
 * Presence is advisory: the heartbeat never blocks a write, and while NATS is out of reach it is
 * skipped (the panel then says the connection is down).
 */
import { hostname } from "node:os"
import { Effect, Layer, Option, Schedule } from "effect"
import { Router } from "../actors/Router.ts"
import { Nats } from "../stores/shared/Nats.ts"
import { currentStreamOf } from "../stores/shared/StoreGenerations.ts"
import { ClusterPresence, type ClusterView, type DaemonView, type Heartbeat } from "./ClusterPresence.ts"

/** How often a daemon says it is there. */
export const heartbeatMs = 2_000
/** A daemon is shown live while its last heartbeat is younger than this. */
export const liveWithinMs = 3 * heartbeatMs
/** A daemon silent this long (gone without a goodbye) leaves the list. */
export const forgetAfterMs = 10 * 60_000
/** Stream positions are asked of JetStream at most this often. */
const streamInfoCacheMs = 1_000
/** Longest wait for one NATS request of the panel (the panel answers without it). */
const requestTimeoutMs = 2_000

/** What a stopping daemon says last. */
interface Goodbye {
  readonly daemonId: string
  readonly bye: true
}

const withTimeout = <A>(promise: Promise<A>): Promise<A> =>
  Promise.race([
    promise,
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error("NATS did not answer")), requestTimeoutMs)),
  ])

/** Heartbeats for this daemon, and the view of every daemon. Built only for a shared memory. */
export const layer = Layer.effect(
  ClusterPresence,
  Effect.gen(function* () {
    // The connection is the shared logs' (Engine.ts builds this layer only beside them).
    const connection = yield* Effect.serviceOption(Nats)
    if (Option.isNone(connection)) return { view: Effect.succeed(undefined) }
    const nats = connection.value
    const router = yield* Router
    const { prefix, daemonId } = nats.settings
    const subject = `${prefix}.presence`
    const startedAt = Date.now()
    const heard = new Map<string, { readonly heartbeat: Heartbeat; readonly receivedAt: number }>()

    const heartbeat = (): Heartbeat => ({
      daemonId,
      host: hostname(),
      pid: process.pid,
      startedAt,
      at: Date.now(),
      stores: router
        .health()
        .map((store) => ({ name: store.name, position: store.wal?.position ?? 0, state: store.state })),
    })
    const publish = (message: Heartbeat | Goodbye) => {
      try {
        nats.connection.publish(subject, JSON.stringify(message))
      } catch {
        // Advisory: the next beat tries again.
      }
    }

    const subscription = nats.connection.subscribe(subject, {
      callback: (error, message) => {
        if (error !== null) return
        try {
          const received = message.json<Heartbeat | Goodbye>()
          if (typeof received.daemonId !== "string" || received.daemonId === daemonId) return
          if ("bye" in received) heard.delete(received.daemonId)
          else if (Array.isArray(received.stores))
            heard.set(received.daemonId, { heartbeat: received, receivedAt: Date.now() })
        } catch {
          // Not a heartbeat: ignored.
        }
      },
    })
    yield* Effect.forkScoped(
      Effect.repeat(
        Effect.sync(() => {
          if (nats.unavailable() === undefined) publish(heartbeat())
          for (const [id, { receivedAt }] of heard) if (Date.now() - receivedAt > forgetAfterMs) heard.delete(id)
        }),
        Schedule.spaced(heartbeatMs),
      ),
    )
    yield* Effect.addFinalizer(() =>
      Effect.promise(async () => {
        publish({ daemonId, bye: true })
        subscription.unsubscribe()
        await withTimeout(nats.connection.flush()).catch(() => undefined)
      }),
    )

    let streamLast: { readonly at: number; readonly last: Map<string, number> } | undefined
    const lastPositions = async (stores: ReadonlyArray<string>): Promise<Map<string, number>> => {
      if (streamLast !== undefined && Date.now() - streamLast.at < streamInfoCacheMs) return streamLast.last
      const last = new Map<string, number>()
      await Promise.all(
        stores.map(async (store) => {
          try {
            const info = await withTimeout(currentStreamOf(nats, store).then((name) => nats.manager.streams.info(name)))
            last.set(store, info.state.last_seq)
          } catch {
            // Unknown: the panel shows no "behind" for this store.
          }
        }),
      )
      streamLast = { at: Date.now(), last }
      return last
    }

    const view = Effect.promise(async (): Promise<ClusterView> => {
      const status = nats.status()
      const daemons: Array<DaemonView> = []
      const storeNames = router.health().map((store) => store.name)
      const last = status.connected ? await lastPositions(storeNames) : new Map<string, number>()
      const entries = [{ heartbeat: heartbeat(), receivedAt: Date.now() }, ...heard.values()]
      for (const { heartbeat: beat, receivedAt } of entries) {
        const self = beat.daemonId === daemonId
        const silentMs = Math.max(0, Date.now() - receivedAt)
        daemons.push({
          ...beat,
          self,
          live: silentMs < liveWithinMs,
          silentMs,
          stores: beat.stores.map((store) => {
            const streamPosition = last.get(store.name)
            return {
              ...store,
              ...(streamPosition === undefined ? {} : { behind: Math.max(0, streamPosition - store.position) }),
            }
          }),
        })
      }
      daemons.sort((a, b) => Number(b.self) - Number(a.self) || a.daemonId.localeCompare(b.daemonId))
      return {
        prefix,
        servers: status.servers,
        connected: status.connected,
        ...(status.server === undefined ? {} : { server: status.server }),
        ...(status.lastError === undefined ? {} : { lastError: status.lastError }),
        self: daemonId,
        daemons,
        writers: router.health().map((store) => ({
          store: store.name,
          ...(store.writer?.holder !== undefined ? { holder: store.writer.holder } : {}),
        })),
      }
    })
    return { view }
  }),
)
