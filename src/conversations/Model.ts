/**
 * The conversation-memory domain as Effect Schemas, with the seed's limits and defaults
 * (seed 001, `docs/mcp.md` of Tiny ConvMem MCP).
 *
 * Two families live here:
 *
 * - `Message`, `Metadata`, `Relation`: the seed's message object exactly as tools return it. Field
 *   names are snake_case and key order is the seed's; `messageJson` builds that order explicitly.
 *   These schemas do NOT re-check limits, so events written under older limits still decode on
 *   replay.
 * - `Bounded*` and the argument pieces (`SessionId`, `Content`, `MetadataPatch`, ...): the same
 *   shapes with every limit, used on tool input and on import lines.
 *
 * Byte limits count UTF-8 bytes of the string as received.
 */
import { Schema } from "effect"
import { isMaxUtf8Bytes, isNonEmpty, isUlid, utf8ByteLength } from "../schema/TextChecks.ts"

// ---------------------------------------------------------------------------------------------
// Limits (seed 001) and defaults
// ---------------------------------------------------------------------------------------------

/** Max UTF-8 bytes of a session id: 256. */
export const sessionIdBytesMax = 256
/** Max UTF-8 bytes of a message's content: 1 MiB. */
export const contentBytesMax = 1024 * 1024
/** Max UTF-8 bytes of `metadata.tool_call_id`: 256. */
export const toolCallIdBytesMax = 256
/** Max tags per message: 32. */
export const tagsCountMax = 32
/** Max UTF-8 bytes of one tag: 128. */
export const tagBytesMax = 128
/** Max UTF-8 bytes of `metadata.summary`: 4096. */
export const summaryBytesMax = 4096
/** Max relations per message: 32. */
export const relationsCountMax = 32
/** Max `source_message_ids` per message: 64. */
export const sourceMessageIdsCountMax = 64
/** Highest importance; the lowest is 0. */
export const importanceMax = 100
/** Importance of a message whose metadata names none. */
export const importanceDefault = 50
/** Max UTF-8 bytes of a `metadata_json` / `filters_json` argument: 64 KiB (mnemos; bounds the JSON parse). */
export const jsonArgumentBytesMax = 64 * 1024
/** Max UTF-8 bytes of a search query: 4096. */
export const queryBytesMax = 4096

/** The message roles. */
export const Role = Schema.Literals(["user", "assistant", "system"])
export type Role = typeof Role.Type

/** Memory tiers; `short` by default. Tiers are attributes: nothing moves or expires by itself. */
export const memoryTiers = ["short", "mid", "long", "discard"] as const
export const MemoryTier = Schema.Literals(memoryTiers)
export type MemoryTier = typeof MemoryTier.Type

/** Memory kinds; `conversation` by default. */
export const memoryKinds = ["conversation", "episode", "semantic", "procedure", "preference", "summary"] as const
export const MemoryKind = Schema.Literals(memoryKinds)
export type MemoryKind = typeof MemoryKind.Type

/** The four relation types. */
export const relationTypes = ["depends_on", "derived_from", "supersedes", "related_to"] as const
export const RelationType = Schema.Literals(relationTypes)
export type RelationType = typeof RelationType.Type

/** UTF-8 byte length of `text`. */
export const utf8Bytes = utf8ByteLength
export { isMaxUtf8Bytes }

/** A canonical ULID: 26 upper-case Crockford base-32 characters, the first 0-7. */
export const Ulid = Schema.String.check(isUlid)

// ---------------------------------------------------------------------------------------------
// The seed's message object (stored and returned; no limit checks)
// ---------------------------------------------------------------------------------------------

/** One relation of a message to another. */
export const Relation = Schema.Struct({ type: RelationType, message_id: Schema.String })
export type Relation = typeof Relation.Type

/** A message's metadata: every field present except the two optional strings. */
export const Metadata = Schema.Struct({
  tool_call_id: Schema.optionalKey(Schema.String),
  tags: Schema.Array(Schema.String),
  memory_tier: MemoryTier,
  memory_kind: MemoryKind,
  importance: Schema.Number,
  summary: Schema.optionalKey(Schema.String),
  relations: Schema.Array(Relation),
  source_message_ids: Schema.Array(Schema.String),
})
export type Metadata = typeof Metadata.Type

/** The seed's message object. */
export const Message = Schema.Struct({
  message_id: Schema.String,
  session_id: Schema.String,
  timestamp: Schema.Number,
  role: Role,
  content: Schema.String,
  revision: Schema.Number,
  updated_at: Schema.Number,
  metadata: Metadata,
})
export type Message = typeof Message.Type

/** Metadata with every default, for a message written with `metadata_json` "{}". */
export const defaultMetadata: Metadata = {
  tags: [],
  memory_tier: "short",
  memory_kind: "conversation",
  importance: importanceDefault,
  relations: [],
  source_message_ids: [],
}

/** The metadata in the seed's key order, optional strings omitted when unset. */
export const metadataJson = (metadata: Metadata): Metadata => ({
  ...(metadata.tool_call_id !== undefined ? { tool_call_id: metadata.tool_call_id } : {}),
  tags: metadata.tags,
  memory_tier: metadata.memory_tier,
  memory_kind: metadata.memory_kind,
  importance: metadata.importance,
  ...(metadata.summary !== undefined ? { summary: metadata.summary } : {}),
  relations: metadata.relations.map((relation) => ({ type: relation.type, message_id: relation.message_id })),
  source_message_ids: metadata.source_message_ids,
})

/** The message in the seed's key order. */
export const messageJson = (message: Message): Message => ({
  message_id: message.message_id,
  session_id: message.session_id,
  timestamp: message.timestamp,
  role: message.role,
  content: message.content,
  revision: message.revision,
  updated_at: message.updated_at,
  metadata: metadataJson(message.metadata),
})

// ---------------------------------------------------------------------------------------------
// Bounded input shapes
// ---------------------------------------------------------------------------------------------

/** 1 to 256 UTF-8 bytes. */
export const SessionId = Schema.String.check(isNonEmpty, isMaxUtf8Bytes(sessionIdBytesMax))
/** 1 byte to 1 MiB. */
export const Content = Schema.String.check(isNonEmpty, isMaxUtf8Bytes(contentBytesMax))
/** 0 to 100. */
export const Importance = Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: importanceMax }))
/** A non-empty tag of at most 128 bytes. */
export const Tag = Schema.String.check(isNonEmpty, isMaxUtf8Bytes(tagBytesMax))
/** A relation with a canonical target id. */
export const BoundedRelation = Schema.Struct({ type: RelationType, message_id: Ulid })

/**
 * The fields `metadata_json` may carry; each absent field keeps its current value (update) or
 * its default (write). An empty `summary` or `tool_call_id` means "unset".
 */
export const MetadataPatch = Schema.Struct({
  tool_call_id: Schema.optionalKey(Schema.String.check(isMaxUtf8Bytes(toolCallIdBytesMax))),
  tags: Schema.optionalKey(Schema.Array(Tag).check(Schema.isMaxLength(tagsCountMax))),
  memory_tier: Schema.optionalKey(MemoryTier),
  memory_kind: Schema.optionalKey(MemoryKind),
  importance: Schema.optionalKey(Importance),
  summary: Schema.optionalKey(Schema.String.check(isMaxUtf8Bytes(summaryBytesMax))),
  relations: Schema.optionalKey(Schema.Array(BoundedRelation).check(Schema.isMaxLength(relationsCountMax))),
  source_message_ids: Schema.optionalKey(Schema.Array(Ulid).check(Schema.isMaxLength(sourceMessageIdsCountMax))),
})
export type MetadataPatch = typeof MetadataPatch.Type

/** `metadata_json`: a JSON object string whose keys are all `MetadataPatch` fields. */
export const MetadataJson = Schema.fromJsonString(MetadataPatch)

/** Applies a patch to metadata: present fields replace, empty optional strings unset. */
export const patchMetadata = (metadata: Metadata, patch: MetadataPatch): Metadata => {
  const toolCallId = patch.tool_call_id !== undefined ? patch.tool_call_id : metadata.tool_call_id
  const summary = patch.summary !== undefined ? patch.summary : metadata.summary
  return metadataJson({
    ...(toolCallId !== undefined && toolCallId !== "" ? { tool_call_id: toolCallId } : {}),
    tags: patch.tags ?? metadata.tags,
    memory_tier: patch.memory_tier ?? metadata.memory_tier,
    memory_kind: patch.memory_kind ?? metadata.memory_kind,
    importance: patch.importance ?? metadata.importance,
    ...(summary !== undefined && summary !== "" ? { summary } : {}),
    relations: patch.relations ?? metadata.relations,
    source_message_ids: patch.source_message_ids ?? metadata.source_message_ids,
  })
}

/** Stored metadata with every limit (import lines). */
export const BoundedMetadata = Schema.Struct({
  tool_call_id: Schema.optionalKey(Schema.String.check(isNonEmpty, isMaxUtf8Bytes(toolCallIdBytesMax))),
  tags: Schema.Array(Tag).check(Schema.isMaxLength(tagsCountMax)),
  memory_tier: MemoryTier,
  memory_kind: MemoryKind,
  importance: Importance,
  summary: Schema.optionalKey(Schema.String.check(isNonEmpty, isMaxUtf8Bytes(summaryBytesMax))),
  relations: Schema.Array(BoundedRelation).check(Schema.isMaxLength(relationsCountMax)),
  source_message_ids: Schema.Array(Ulid).check(Schema.isMaxLength(sourceMessageIdsCountMax)),
})

/** A millisecond timestamp: a non-negative integer. */
const Millis = Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))

/** A stored message with every limit (import lines). */
export const BoundedMessage = Schema.Struct({
  message_id: Ulid,
  session_id: SessionId,
  timestamp: Millis,
  role: Role,
  content: Content,
  revision: Schema.Int.check(Schema.isGreaterThanOrEqualTo(1)),
  updated_at: Millis,
  metadata: BoundedMetadata,
})

/** Two messages are the same when their seed JSON is the same. */
export const sameMessage = (a: Message, b: Message): boolean =>
  JSON.stringify(messageJson(a)) === JSON.stringify(messageJson(b))
