/**
 * Where a store's writes are decided, when that is not always here: in a shared memory each store
 * has one writer at a time (the daemon holding its writer lease, src/cluster/WriterLeases.ts), and
 * every other daemon sends its writes there. The router asks this service, when one is provided,
 * for each store's gate (may this daemon decide the store's writes now?) and wraps each store's
 * `send` with it; a local memory provides none, and every store decides its own writes.
 */
import { Context } from "effect"
import type { StoreDefinition } from "../stores/StoreDefinition.ts"
import type { Store, WriterHealth } from "./StoreActor.ts"

/** One store's writer, for health and the dashboard. */
export interface WriterView extends WriterHealth {
  readonly store: string
}

/** The write routing of a shared memory. */
export class WriteRouting extends Context.Service<
  WriteRouting,
  {
    /** The gate the store's actor asks before deciding a batch (see `StoreOptions.writeGate`). */
    readonly gate: (store: string) => () => string | undefined
    /** The store as callers use it: writes go to the lease holder, reads stay local. */
    readonly route: <Command, Event, Reply, Failure>(
      definition: StoreDefinition<Command, Event, Reply, Failure>,
      store: Store<Command, Reply, Failure>,
    ) => Store<Command, Reply, Failure>
    readonly writers: () => ReadonlyArray<WriterView>
  }
>()("mnemos/actors/WriteRouting") {}
