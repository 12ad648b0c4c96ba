/**
 * What the conversations store's state holds under each key (the layout of ConversationKeys.ts),
 * as a full archive import checks it (stores/StateSchema.ts): the generation pointers and import
 * state at the top, and in each generation the stored messages (matching their ids), the
 * history, link, session, order, relation and tombstone indexes, the changelog and the counters.
 */
import { Schema } from "effect"
import type { StoreView } from "../stores/checkpoint/Checkpoint.ts"
import {
  decodeProblemOf,
  everyKey,
  firstProblemUnder,
  keyMismatch,
  presenceProblem,
  type StateSchema,
  unknownKey,
} from "../stores/StateSchema.ts"
import { currentGenKey, historyKey, importStateKey, lastIdKey, nextGenKey, switchesKey } from "./ConversationKeys.ts"
import { Message, memoryKinds } from "./Model.ts"

const Count = Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))
const Generation = Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))

const storedMessageProblem = decodeProblemOf(
  Schema.Struct({
    project: Schema.String,
    created_by: Schema.String,
    deleted_at: Schema.optionalKey(Schema.Number),
    dead_bytes: Schema.optionalKey(Count),
    message: Message,
  }),
)
const linkProblem = decodeProblemOf(
  Schema.Struct({ prev: Schema.optionalKey(Schema.String), next: Schema.optionalKey(Schema.String) }),
)
const sessionProblem = decodeProblemOf(
  Schema.Struct({
    session_id: Schema.String,
    message_count: Count,
    kind_counts: Schema.Struct(Object.fromEntries(memoryKinds.map((kind) => [kind, Count]))),
    first_id: Schema.String,
    started_at: Schema.Number,
    last_id: Schema.String,
    last_message_at: Schema.Number,
  }),
)
const changeProblem = decodeProblemOf(Schema.Struct({ project: Schema.String, message_id: Schema.String }))
const statsProblem = decodeProblemOf(
  Schema.Struct({
    active: Count,
    deleted: Count,
    writes: Count,
    updates: Count,
    changes: Count,
    content_bytes: Count,
    metadata_bytes: Count,
    dead_bytes: Count,
    relations: Count,
    epoch: Count,
  }),
)
const importStateProblem = decodeProblemOf(
  Schema.Union([
    Schema.Struct({
      phase: Schema.Literal("staging"),
      import_id: Schema.String,
      from_gen: Generation,
      to_gen: Generation,
      base_changes: Count,
      copied_through: Schema.optionalKey(Schema.String),
      copy_done: Schema.Boolean,
    }),
    Schema.Struct({ phase: Schema.Literal("dropping"), gen: Generation }),
  ]),
)
const generationProblem = decodeProblemOf(Generation)
const countProblem = decodeProblemOf(Count)
const stringProblem = decodeProblemOf(Schema.String)

/** The value of a key inside a generation (`g<gen>` + separator + ...): `parts` after the prefix. */
const generationEntryProblem = (parts: ReadonlyArray<string>, value: unknown): string | undefined => {
  switch (`${parts[0]}/${parts.length}`) {
    case "m/3":
      return (
        storedMessageProblem(value) ?? keyMismatch((value as { message: object }).message, { message_id: parts[2] })
      )
    case "ln/3":
      return linkProblem(value)
    case "s/3":
      return sessionProblem(value)
    case "cl/2":
      return changeProblem(value)
    case "st/1":
      return statsProblem(value)
    case "h/4":
    case "so/4":
    case "ri/5":
    case "d/3":
      return presenceProblem(value)
  }
  return unknownKey
}

interface StoredMessage {
  readonly project: string
  readonly deleted_at?: number
  readonly message: { readonly message_id: string; readonly session_id: string }
}

const shown = (key: string) => JSON.stringify(key.replaceAll("\u0005", "/"))

/**
 * Every live message has its history entry, and every history, link and tombstone entry names a
 * message that exists (live for history and links, deleted for a tombstone): reads walk the
 * history index, so an entry naming nothing answers a message that is not there.
 */
const conversationIntegrity = (view: StoreView): string | undefined =>
  firstProblemUnder(view, everyKey, (key, value) => {
    const [head, kind, project, ...rest] = key.split("\u0005")
    if (!/^g[0-9a-z]+$/.test(head!)) return undefined
    const messageOf = (id: string) => view.get([head, "m", project, id].join("\u0005")) as StoredMessage | undefined
    switch (`${kind}/${rest.length}`) {
      case "m/1": {
        const stored = value as StoredMessage
        if (stored.deleted_at !== undefined) return undefined
        const history = historyKey(
          Number.parseInt(head!.slice(1), 36),
          stored.project,
          stored.message.session_id,
          rest[0]!,
        )
        return view.get(history) === undefined
          ? `message ${shown(key)}: its history entry ${shown(history)} is missing`
          : undefined
      }
      case "h/2":
      case "ln/1":
      case "d/1": {
        const id = rest[rest.length - 1]!
        const stored = messageOf(id)
        if (stored === undefined)
          return `index entry ${shown(key)} names the message ${JSON.stringify(id)}, which does not exist`
        const deleted = stored.deleted_at !== undefined
        return deleted === (kind === "d")
          ? undefined
          : `index entry ${shown(key)} names the message ${JSON.stringify(id)}, which is ${deleted ? "deleted" : "not deleted"}`
      }
    }
    return undefined
  })

/** The conversations store's state. */
export const conversationState: StateSchema = {
  integrity: conversationIntegrity,
  problem: (key, value) => {
    const [head, ...parts] = key.split("\u0005")
    if (parts.length > 0) return /^g[0-9a-z]+$/.test(head!) ? generationEntryProblem(parts, value) : unknownKey
    switch (head) {
      case currentGenKey:
      case nextGenKey:
        return generationProblem(value)
      case switchesKey:
        return countProblem(value)
      case lastIdKey:
        return stringProblem(value)
      case importStateKey:
        return importStateProblem(value)
    }
    return unknownKey
  },
}
