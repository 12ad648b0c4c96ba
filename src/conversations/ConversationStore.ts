/**
 * The `conversations` store: the conversation messages of seed 001 on the store kernel.
 *
 * `decide` validates against the current state and picks everything that varies — message ids,
 * timestamps, revisions — so events carry whole messages and `apply` is deterministic. Ids are
 * ULIDs issued in strictly increasing order across the store (`lastid`): the next id is a fresh
 * ULID of `now`, or, if the last id is from the same millisecond or later (a burst, a clock step
 * back, an imported id from the future), the last id plus one. History therefore follows id order.
 *
 * Messages are scoped by project (the caller's, as every mnemos record); the seed's tools and JSON
 * never show it. Deletes are logical: the record stays as a tombstone until `PurgeTombstones`
 * (rebuild_index) removes it. Import commands live in Generations.ts.
 *
 * Events, as published on the event bus (for the search indexer): `MessageWritten` and
 * `MessageUpdated` carry the whole message; `MessageDeleted` names it; `TombstonesPurged` only
 * drops already-deleted messages. `ImportCommitted` replaces the whole state at once (the staged
 * records of `ImportStaged` are invisible until then): a subscriber resynchronises from the store.
 */
import { Result, Schema } from "effect"
import { decodeTime, incrementBase32, ulid } from "ulid"
import type { StoreView, StoreWriter } from "../stores/checkpoint/Checkpoint.ts"
import type { Decision, StoreDefinition } from "../stores/StoreDefinition.ts"
import {
  allTombstones,
  isMessageKey,
  lastIdKey,
  parseTombstoneKey,
  type StoredMessage,
  statsKey,
} from "./ConversationKeys.ts"
import {
  applyGeneration,
  currentGen,
  decideGeneration,
  GenerationCommand,
  GenerationEvent,
  GenerationRefused,
  type GenerationReply,
  mirroredGen,
  stagingGen,
} from "./Generations.ts"
import { erase, insertLive, markDeleted, readStats, readStored, replaceLive, tombstoneOf } from "./MessageState.ts"
import {
  BoundedMetadata,
  Content,
  Message,
  type Metadata,
  MetadataPatch,
  patchMetadata,
  Role,
  SessionId,
  sameMessage,
  Ulid,
} from "./Model.ts"

/** Who is writing, and in which project. */
const Origin = { project: Schema.String, created_by: Schema.String }

/** Message commands. */
export const MessageCommand = Schema.Union([
  Schema.TaggedStruct("Write", {
    ...Origin,
    session_id: SessionId,
    role: Role,
    content: Content,
    metadata: BoundedMetadata,
  }),
  Schema.TaggedStruct("Update", {
    project: Schema.String,
    message_id: Ulid,
    content: Schema.optionalKey(Content),
    metadata: Schema.optionalKey(MetadataPatch),
    expected_revision: Schema.optionalKey(Schema.Int),
  }),
  Schema.TaggedStruct("Delete", {
    project: Schema.String,
    message_id: Ulid,
    session_id: Schema.optionalKey(Schema.String),
  }),
  Schema.TaggedStruct("PurgeTombstones", {}),
])
export type MessageCommand = typeof MessageCommand.Type

/** Every command of the store. */
export const ConversationCommand = Schema.Union([MessageCommand, GenerationCommand])
export type ConversationCommand = typeof ConversationCommand.Type

/** Message events. */
export const MessageEvent = Schema.Union([
  Schema.TaggedStruct("MessageWritten", { ...Origin, message: Message }),
  Schema.TaggedStruct("MessageUpdated", { project: Schema.String, message: Message }),
  Schema.TaggedStruct("MessageDeleted", { project: Schema.String, message_id: Schema.String, at: Schema.Number }),
  Schema.TaggedStruct("TombstonesPurged", { at: Schema.Number }),
])
export type MessageEvent = typeof MessageEvent.Type

/** Every event of the store, as written to its WAL and published on the bus. */
export const ConversationEvent = Schema.Union([MessageEvent, GenerationEvent])
export type ConversationEvent = typeof ConversationEvent.Type

/** A message command the domain refuses. */
export class MessageRejected extends Schema.TaggedError<MessageRejected>()("MessageRejected", {
  reason: Schema.Literals(["NotFound", "Conflict", "Invalid"]),
  message: Schema.String,
}) {}

export type ConversationFailure = MessageRejected | GenerationRefused

/** Replies, by command. */
export interface WriteReply {
  readonly message: Message
}
export interface UpdateReply {
  readonly changed: boolean
  readonly message: Message
}
export interface DeleteReply {
  readonly deleted: boolean
}
export interface PurgeReply {
  readonly records_removed: number
}
export type ConversationReply = WriteReply | UpdateReply | DeleteReply | PurgeReply | GenerationReply

type Outcome = Result.Result<Decision<ConversationEvent, ConversationReply>, ConversationFailure>

const ok = (events: ReadonlyArray<ConversationEvent>, reply: ConversationReply): Outcome =>
  Result.succeed({ events, reply })
const reject = (reason: MessageRejected["reason"], message: string): Outcome =>
  Result.fail(new MessageRejected({ reason, message }))

/** The id of a message written at `now`: strictly greater than every id issued before. */
export const nextMessageId = (last: string | undefined, now: number): string =>
  last !== undefined && decodeTime(last) >= now ? incrementBase32(last) : ulid(now)

const selfRelation = (id: string, metadata: Metadata) =>
  metadata.relations.some((relation) => relation.message_id === id)

const decideMessage = (command: MessageCommand, state: StoreView, now: number): Outcome => {
  const gen = currentGen(state)
  switch (command._tag) {
    case "Write": {
      const message_id = nextMessageId(state.get(lastIdKey) as string | undefined, now)
      const message: Message = {
        message_id,
        session_id: command.session_id,
        timestamp: now,
        role: command.role,
        content: command.content,
        revision: 1,
        updated_at: now,
        metadata: command.metadata,
      }
      return ok([{ _tag: "MessageWritten", project: command.project, created_by: command.created_by, message }], {
        message,
      })
    }
    case "Update": {
      const stored = readStored(state, gen, command.project, command.message_id)
      if (stored === undefined || stored.deleted_at !== undefined)
        return reject("NotFound", `message ${command.message_id} not found`)
      const current = stored.message
      if (command.expected_revision !== undefined && command.expected_revision !== current.revision)
        return reject(
          "Conflict",
          `message ${command.message_id} is at revision ${current.revision}, not the expected ${command.expected_revision}`,
        )
      const metadata =
        command.metadata === undefined ? current.metadata : patchMetadata(current.metadata, command.metadata)
      if (selfRelation(current.message_id, metadata))
        return reject("Invalid", `message ${current.message_id} cannot have a relation to itself`)
      const candidate: Message = { ...current, content: command.content ?? current.content, metadata }
      if (sameMessage(candidate, current)) return ok([], { changed: false, message: current })
      const message: Message = {
        ...candidate,
        revision: current.revision + 1,
        updated_at: Math.max(now, current.updated_at),
      }
      return ok([{ _tag: "MessageUpdated", project: command.project, message }], { changed: true, message })
    }
    case "Delete": {
      const stored = readStored(state, gen, command.project, command.message_id)
      const guarded = command.session_id !== undefined && stored?.message.session_id !== command.session_id
      if (stored === undefined || stored.deleted_at !== undefined || guarded) return ok([], { deleted: false })
      return ok([{ _tag: "MessageDeleted", project: command.project, message_id: command.message_id, at: now }], {
        deleted: true,
      })
    }
    case "PurgeTombstones": {
      const records_removed = readStats(state, gen).deleted
      return ok(records_removed > 0 ? [{ _tag: "TombstonesPurged", at: now }] : [], { records_removed })
    }
  }
}

/** Applies a message event to generation `gen`. */
const applyMessageTo = (event: MessageEvent, state: StoreWriter, gen: number): void => {
  switch (event._tag) {
    case "MessageWritten": {
      const stored = readStored(state, gen, event.project, event.message.message_id)
      if (stored !== undefined) erase(state, gen, stored) // an import staged the same id: the write is later
      insertLive(state, gen, { project: event.project, created_by: event.created_by, message: event.message })
      return
    }
    case "MessageUpdated": {
      const stored = readStored(state, gen, event.project, event.message.message_id)
      if (stored !== undefined && stored.deleted_at === undefined) replaceLive(state, gen, stored, event.message)
      return
    }
    case "MessageDeleted": {
      const stored = readStored(state, gen, event.project, event.message_id)
      if (stored !== undefined && stored.deleted_at === undefined) markDeleted(state, gen, stored, event.at)
      return
    }
    case "TombstonesPurged": {
      for (const { key } of [...state.getRange(allTombstones(gen))]) {
        const { project, id } = parseTombstoneKey(gen, key)
        const stored = readStored(state, gen, project, id)
        if (stored !== undefined) erase(state, gen, stored)
        else state.remove(key)
      }
      const stats = readStats(state, gen)
      state.put(statsKey(gen), { ...stats, epoch: stats.epoch + 1 })
      return
    }
  }
}

/**
 * Applies a message event to the current generation and, while an import stages one, to the
 * staging generation where the message is copied already (`mirroredGen`): the import then commits
 * every write made meanwhile.
 */
const applyMessage = (event: MessageEvent, state: StoreWriter): void => {
  applyMessageTo(event, state, currentGen(state))
  if (event._tag === "MessageWritten") {
    const last = state.get(lastIdKey) as string | undefined
    if (last === undefined || event.message.message_id > last) state.put(lastIdKey, event.message.message_id)
  }
  const mirror =
    event._tag === "TombstonesPurged"
      ? stagingGen(state)
      : mirroredGen(state, event.project, event._tag === "MessageDeleted" ? event.message_id : event.message.message_id)
  if (mirror !== undefined) applyMessageTo(event, state, mirror)
}

const messageCommandTags: ReadonlySet<string> = new Set<MessageCommand["_tag"]>([
  "Write",
  "Update",
  "Delete",
  "PurgeTombstones",
])
const messageEventTags: ReadonlySet<string> = new Set<MessageEvent["_tag"]>([
  "MessageWritten",
  "MessageUpdated",
  "MessageDeleted",
  "TombstonesPurged",
])
const isGenerationCommand = (command: ConversationCommand): command is GenerationCommand =>
  !messageCommandTags.has(command._tag)
const isGenerationEvent = (event: ConversationEvent): event is GenerationEvent => !messageEventTags.has(event._tag)

/** The conversations store's definition. */
export const conversationStore: StoreDefinition<
  ConversationCommand,
  ConversationEvent,
  ConversationReply,
  ConversationFailure
> = {
  name: "conversations",
  commandSchema: ConversationCommand,
  eventSchema: ConversationEvent,
  failureSchema: Schema.Union([MessageRejected, GenerationRefused]),
  decide: (command, state, context) =>
    isGenerationCommand(command) ? decideGeneration(command, state) : decideMessage(command, state, context.now),
  apply: (event, state) => (isGenerationEvent(event) ? applyGeneration(event, state) : applyMessage(event, state)),
  // A tombstone written before tombstones kept no content is compacted into one that keeps none.
  compactValue: (key, value) => {
    const stored = value as StoredMessage
    return isMessageKey(key) && stored.deleted_at !== undefined ? tombstoneOf(stored, stored.deleted_at) : value
  },
}
