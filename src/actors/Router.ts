/**
 * The router: the one way in to the stores for every transport.
 *
 * Owns one supervised store actor per registered definition, each in `<dataDir>/stores/<name>`.
 * `dispatch` decodes a command arriving from outside with the store's command schema (the only
 * shape a store ever sees) and hands it to that store's mailbox; `store` gives typed access to
 * in-process callers (tool handlers). Stores are independent: one restarting or refusing (a
 * corrupt log) does not stop the others. In a shared memory (a `WriteRouting` provided), each
 * store's writes go to the daemon holding its writer lease; reads stay local.
 */
import { Context, Effect, Layer, Schema, type Scope } from "effect"
import type { EventBus } from "../stores/EventBus.ts"
import type { AnyStoreDefinition, StoreDefinition } from "../stores/StoreDefinition.ts"
import type { StoreError } from "../stores/StoreError.ts"
import type { CompactionReport } from "../stores/StoreKernel.ts"
import type { WalFs } from "../stores/wal/WalFs.ts"
import { defaultStoreOptions, makeStore, type Store, type StoreHealth, type StoreOptions } from "./StoreActor.ts"
import { WriteRouting } from "./WriteRouting.ts"

/** A command the router could not deliver: unknown store, or arguments that do not decode. */
export class RouterError extends Schema.TaggedError<RouterError>()("RouterError", {
  reason: Schema.Literals(["UnknownStore", "InvalidCommand"]),
  message: Schema.String,
}) {}

/** Routes commands and reads to stores. */
export class Router extends Context.Service<
  Router,
  {
    readonly store: <Command, Event, Reply, Failure>(
      definition: StoreDefinition<Command, Event, Reply, Failure>,
    ) => Store<Command, Reply, Failure>
    readonly dispatch: (storeName: string, command: unknown) => Effect.Effect<unknown, unknown>
    /** Compacts the named store (see `Store.compact`). */
    readonly compact: (storeName: string) => Effect.Effect<CompactionReport, RouterError | StoreError>
    /** The names of the stores, in registration order. */
    readonly names: () => ReadonlyArray<string>
    readonly health: () => ReadonlyArray<StoreHealth>
  }
>()("mnemos/actors/Router") {}

/** What a router is built from. */
export interface RouterConfig {
  readonly dataDir: string
  readonly stores: ReadonlyArray<AnyStoreDefinition>
  readonly storeOptions?: Partial<Omit<StoreOptions, "dir">>
}

/** Starts every store; they stop, draining their mailboxes, when the scope closes. */
export const makeRouter = (
  config: RouterConfig,
): Effect.Effect<Router["Service"], never, WalFs | EventBus | Scope.Scope> =>
  Effect.gen(function* () {
    // biome-ignore lint/suspicious/noExplicitAny: the registry erases each store's own types
    const stores = new Map<string, { definition: AnyStoreDefinition; store: Store<any, any, any> }>()
    const routing = yield* Effect.serviceOption(WriteRouting)
    for (const definition of config.stores) {
      if (stores.has(definition.name))
        return yield* Effect.die(new Error(`store "${definition.name}" registered twice`))
      const store = yield* makeStore(definition, {
        ...defaultStoreOptions,
        ...config.storeOptions,
        dir: `${config.dataDir}/stores/${definition.name}`,
        ...(routing._tag === "Some" ? { writeGate: routing.value.gate(definition.name) } : {}),
      })
      stores.set(definition.name, {
        definition,
        store: routing._tag === "Some" ? routing.value.route(definition, store) : store,
      })
    }
    return Router.of({
      store: <Command, Event, Reply, Failure>(definition: StoreDefinition<Command, Event, Reply, Failure>) => {
        const entry = stores.get(definition.name)
        if (entry === undefined || entry.definition !== definition)
          throw new Error(`store "${definition.name}" is not registered`)
        return entry.store as Store<Command, Reply, Failure>
      },
      dispatch: (storeName, command) => {
        const entry = stores.get(storeName)
        if (entry === undefined)
          return Effect.fail(new RouterError({ reason: "UnknownStore", message: `no store named "${storeName}"` }))
        return Schema.decodeUnknownEffect(entry.definition.commandSchema)(command).pipe(
          Effect.mapError((issue) => new RouterError({ reason: "InvalidCommand", message: String(issue) })),
          Effect.flatMap((decoded) => entry.store.send(decoded)),
        )
      },
      compact: (storeName) => {
        const entry = stores.get(storeName)
        if (entry === undefined)
          return Effect.fail(new RouterError({ reason: "UnknownStore", message: `no store named "${storeName}"` }))
        return entry.store.compact()
      },
      names: () => [...stores.keys()],
      health: () => [...stores.values()].map(({ store }) => store.health()),
    })
  })

/** The router as a layer over the real disk. */
export const layer = (config: RouterConfig): Layer.Layer<Router, never, WalFs | EventBus> =>
  Layer.effect(Router, makeRouter(config))
