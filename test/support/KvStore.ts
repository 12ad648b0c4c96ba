/**
 * A small key/value store declared on the store kernel, used by the kernel's tests.
 * `Poison` is a command whose `decide` throws, standing in for a bug in domain code;
 * `Reject` is a command the domain refuses.
 */
import { Result, Schema } from "effect"
import type { StoreDefinition } from "../../src/stores/StoreDefinition.ts"

export const KvCommand = Schema.Union([
  Schema.TaggedStruct("Put", { key: Schema.String, value: Schema.String }),
  Schema.TaggedStruct("Delete", { key: Schema.String }),
  Schema.TaggedStruct("Poison", {}),
  Schema.TaggedStruct("Reject", {}),
  /** Succeeds, changing nothing, when `key` holds `value`; refused otherwise. */
  Schema.TaggedStruct("Expect", { key: Schema.String, value: Schema.String }),
])
export type KvCommand = typeof KvCommand.Type

export const KvEvent = Schema.Union([
  Schema.TaggedStruct("Stored", { key: Schema.String, value: Schema.String, at: Schema.Number }),
  Schema.TaggedStruct("Deleted", { key: Schema.String }),
])
export type KvEvent = typeof KvEvent.Type

export class KvRejected extends Schema.TaggedError<KvRejected>()("KvRejected", { message: Schema.String }) {}

const keyOf = (key: string) => `kv:${key}`

export const kvStore = (
  name = "kv",
): StoreDefinition<KvCommand, KvEvent, { readonly changed: boolean }, KvRejected> => ({
  name,
  commandSchema: KvCommand,
  eventSchema: KvEvent,
  failureSchema: KvRejected,
  decide: (command, state, context) => {
    switch (command._tag) {
      case "Put":
        return Result.succeed({
          events: [{ _tag: "Stored", key: command.key, value: command.value, at: context.now }],
          reply: { changed: (state.get(keyOf(command.key)) as { value: string } | undefined)?.value !== command.value },
        })
      case "Delete":
        return state.get(keyOf(command.key)) === undefined
          ? Result.succeed({ events: [], reply: { changed: false } })
          : Result.succeed({ events: [{ _tag: "Deleted", key: command.key }], reply: { changed: true } })
      case "Poison":
        throw new Error("poisoned command: a bug in decide")
      case "Reject":
        return Result.fail(new KvRejected({ message: "rejected by the domain" }))
      case "Expect":
        return (state.get(keyOf(command.key)) as { value: string } | undefined)?.value === command.value
          ? Result.succeed({ events: [], reply: { changed: false } })
          : Result.fail(new KvRejected({ message: `${command.key} does not hold ${command.value}` }))
    }
  },
  apply: (event, state) => {
    if (event._tag === "Stored") state.put(keyOf(event.key), { value: event.value, at: event.at })
    else state.remove(keyOf(event.key))
  },
})

/** Every key/value pair, read from a store view. */
export const readAll = (
  view: import("../../src/stores/checkpoint/Checkpoint.ts").StoreView,
): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const { key, value } of view.getRange({ start: "kv:", end: "kv;" }))
    out[key.slice(3)] = (value as { value: string }).value
  return out
}
