/**
 * How a domain store is declared: Schema'd commands and events, a `decide` function that turns a
 * command into events and a reply (or a domain failure), and an `apply` function that writes an
 * event's effect into the store's key/value state. `makeStore` (StoreActor.ts) turns a
 * definition into a supervised, durable actor; a domain store needs no other code.
 *
 * Rules a definition keeps, because replay depends on them:
 * - `apply` is deterministic: the same events on the same state give the same state. Anything
 *   that varies (time, ids) is decided in `decide` and carried in the event.
 * - `decide` only reads; it never writes. It may throw only for bugs (a thrown error is a defect:
 *   the actor restarts and the batch's callers get an error).
 */
import type { Result, Schema } from "effect"
import type { StoreView, StoreWriter } from "./checkpoint/Checkpoint.ts"

/** What `decide` knows besides the command. */
export interface CommandContext {
  /** The batch's time, ms since the epoch (from the Effect clock). */
  readonly now: number
}

/** The events a command produces and the reply its caller gets once they are durable. */
export interface Decision<Event, Reply> {
  readonly events: ReadonlyArray<Event>
  readonly reply: Reply
}

/** A domain store. */
export interface StoreDefinition<Command, Event, Reply, Failure> {
  /** Directory name and router key: lower-case letters, digits and dashes. */
  readonly name: string
  /** Decodes commands arriving from outside (the router), the only shape `decide` sees. */
  readonly commandSchema: Schema.Codec<Command, unknown>
  /** Encodes events into WAL payloads (as JSON) and decodes them on replay. */
  readonly eventSchema: Schema.Codec<Event, unknown>
  /**
   * Encodes the domain's refusals, so a keyed command that was refused is answered with the same
   * refusal when it is retried (without it, a refused keyed command is decided again).
   */
  readonly failureSchema?: Schema.Codec<Failure, unknown>
  readonly decide: (
    command: Command,
    state: StoreView,
    context: CommandContext,
  ) => Result.Result<Decision<Event, Reply>, Failure>
  readonly apply: (event: Event, state: StoreWriter) => void
  /**
   * What a compaction's snapshot keeps of a value (without it: all of it). A store drops there what
   * its rules no longer keep but earlier versions wrote — the content of an old tombstone, a body
   * quoted in an old audit summary — so it leaves every file. Pure; the result must be a value
   * `apply` and the reads accept.
   */
  readonly compactValue?: (key: string, value: unknown) => unknown
}

/** Any definition, for collections of stores. */
// biome-ignore lint/suspicious/noExplicitAny: a heterogeneous registry has to erase the type parameters
export type AnyStoreDefinition = StoreDefinition<any, any, any, any>
