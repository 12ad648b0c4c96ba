/**
 * The shared memory's presence as a service reference, apart from its NATS implementation
 * (Presence.ts): the REST API reads it in every daemon, and a daemon that serves a local memory
 * must not load the NATS client to find that the answer is `undefined`.
 */
import { Context, Effect } from "effect"
import type { ClusterView } from "./Presence.ts"

/** The shared memory's presence; `view` answers `undefined` for a daemon that serves a local memory. */
export const ClusterPresence = Context.Reference<{ readonly view: Effect.Effect<ClusterView | undefined> }>(
  "mnemos/cluster/ClusterPresence",
  { defaultValue: () => ({ view: Effect.succeed(undefined) }) },
)
