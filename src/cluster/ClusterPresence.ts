/**
 * The shared memory's presence as a service reference, and the shapes it answers with, apart from
 * its NATS implementation (Presence.ts, which imports this and never the reverse): the REST API
 * reads it in every daemon, and a daemon that serves a local memory must not load the NATS client
 * to find that the answer is `undefined`.
 */
import { Context, Effect } from "effect"

/** One daemon's heartbeat, as stored in the bucket. */
export interface Heartbeat {
  readonly daemonId: string
  readonly host: string
  readonly pid: number
  readonly startedAt: number
  /** When this heartbeat was written (the writer's clock). */
  readonly at: number
  readonly stores: ReadonlyArray<{ readonly name: string; readonly position: number; readonly state: string }>
}

/** One daemon as the panel shows it. */
export interface DaemonView extends Omit<Heartbeat, "stores"> {
  readonly self: boolean
  readonly live: boolean
  /** Milliseconds since its last heartbeat arrived here (this daemon's clock, not the writer's). */
  readonly silentMs: number
  readonly stores: ReadonlyArray<{
    readonly name: string
    readonly position: number
    readonly state: string
    /** Batches of the stream it has not applied yet (unknown while the stream cannot be asked). */
    readonly behind?: number
  }>
}

/** The shared memory as the panel shows it. */
export interface ClusterView {
  readonly prefix: string
  readonly servers: ReadonlyArray<string>
  readonly connected: boolean
  readonly server?: string
  readonly lastError?: string
  readonly self: string
  readonly daemons: ReadonlyArray<DaemonView>
  /** Each store's writer: the daemon holding its writer lease, as this daemon knows it (none while it moves). */
  readonly writers: ReadonlyArray<{ readonly store: string; readonly holder?: string }>
}

/** The shared memory's presence; `view` answers `undefined` for a daemon that serves a local memory. */
export const ClusterPresence = Context.Reference<{ readonly view: Effect.Effect<ClusterView | undefined> }>(
  "mnemos/cluster/ClusterPresence",
  { defaultValue: () => ({ view: Effect.succeed(undefined) }) },
)
