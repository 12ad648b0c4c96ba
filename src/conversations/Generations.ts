/**
 * All-or-nothing imports with bounded memory: the conversations store's generations.
 *
 * Every message key lives in a generation (ConversationKeys.ts); readers use the current one.
 * An import never touches it. It
 *   1. begins: picks a fresh generation,
 *   2. copies the current generation's messages into the fresh one, a bounded chunk per event,
 *      each inserted as a write would be (`apply` reads them from the state, so the WAL carries
 *      key ranges, not data), so every derived key (sessions, links, relations, counters) of the
 *      fresh generation is made from the messages it holds,
 *   3. stages the imported records into the fresh generation, a bounded chunk per event,
 *   4. commits: one small event switches `cur` to the fresh generation — readers see the whole
 *      import from then on, or, before it, none of it,
 *   5. drops the old generation, a bounded chunk of keys per event.
 * Writes go on meanwhile: a change of a message already copied is applied to the fresh generation
 * too (`mirroredGen`), one not copied yet is copied as it is by then, so the commit loses none.
 * Each step is an ordinary durable command, so a crash anywhere leaves either the old state
 * (before the commit: the staging generation is garbage, discarded by the next import or
 * rebuild_index) or the new one (after it: the old generation is garbage, dropped the same way).
 *
 * Memory: the actor holds one batch's changes in its overlay, so every chunk is bounded in keys and
 * in (approximate) bytes.
 */
import { Result, Schema } from "effect"
import type { StoreView, StoreWriter } from "../stores/checkpoint/Checkpoint.ts"
import { compareKeys } from "../stores/checkpoint/KeyCodec.ts"
import {
  allMessages,
  currentGenKey,
  firstGen,
  genPrefix,
  importStateKey,
  lastIdKey,
  messageKeyInGen,
  nextGenKey,
  type StoredMessage,
  switchesKey,
  wholeGen,
} from "./ConversationKeys.ts"
import { erase, insertLive, insertStored, readStored } from "./MessageState.ts"
import { BoundedMessage, Message } from "./Model.ts"

/** Keys copied or dropped per event, at most. */
export const generationChunkKeysMax = 2_000
/** Approximate bytes copied per event, at most (one message may exceed it alone). */
export const generationChunkBytesMax = 16 * 1024 * 1024

/** A record of an import file, as staged. */
export const ImportRecord = Schema.Struct({
  project: Schema.String,
  created_by: Schema.String,
  message: Message,
})
export type ImportRecord = typeof ImportRecord.Type

/** An import record with every limit, for import lines. */
export const BoundedImportRecord = Schema.Struct({
  project: Schema.String.check(
    Schema.makeFilter<string>((text) =>
      text.length > 0 && !text.includes("\u0000") && Buffer.byteLength(text) <= 256
        ? undefined
        : "expected a project name of 1 to 256 bytes without U+0000",
    ),
  ),
  created_by: Schema.String.check(
    Schema.makeFilter<string>((text) => (Buffer.byteLength(text) <= 1024 ? undefined : "expected at most 1024 bytes")),
  ),
  message: BoundedMessage,
})

/** What an import in progress (or its leftovers) is doing. */
export type ImportState =
  | {
      readonly phase: "staging"
      readonly import_id: string
      readonly from_gen: number
      readonly to_gen: number
      /** The current generation's change count when the import began (reported, not checked). */
      readonly base_changes: number
      /** The last key copied, within its generation (`ImportCopiedMessages`: a message key). */
      readonly copied_through?: string
      readonly copy_done: boolean
    }
  | { readonly phase: "dropping"; readonly gen: number }

/** The generation readers use. */
export const currentGen = (state: StoreView): number => (state.get(currentGenKey) as number | undefined) ?? firstGen

/** The import in progress or interrupted, if any. */
export const readImportState = (state: StoreView): ImportState | undefined =>
  state.get(importStateKey) as ImportState | undefined

/** Generation commands. */
export const GenerationCommand = Schema.Union([
  Schema.TaggedStruct("BeginImport", { import_id: Schema.String, base_changes: Schema.Number }),
  Schema.TaggedStruct("CopyChunk", {
    import_id: Schema.String,
    /** Messages to copy in this chunk, at most (and never more than `generationChunkKeysMax`). */
    keys_max: Schema.optionalKey(Schema.Int.check(Schema.isGreaterThan(0))),
  }),
  Schema.TaggedStruct("StageImport", {
    import_id: Schema.String,
    policy: Schema.Literals(["overwrite", "reject"]),
    records: Schema.Array(BoundedImportRecord),
  }),
  Schema.TaggedStruct("CommitImport", { import_id: Schema.String }),
  Schema.TaggedStruct("AbortImport", { import_id: Schema.optionalKey(Schema.String) }),
  Schema.TaggedStruct("DropChunk", {}),
])
export type GenerationCommand = typeof GenerationCommand.Type

/** Generation events. */
export const GenerationEvent = Schema.Union([
  Schema.TaggedStruct("ImportBegun", {
    import_id: Schema.String,
    from_gen: Schema.Number,
    to_gen: Schema.Number,
    base_changes: Schema.Number,
  }),
  /** Copied every key in a range (written before writes went on during imports; replayed as it was). */
  Schema.TaggedStruct("ImportCopied", {
    import_id: Schema.String,
    after: Schema.optionalKey(Schema.String),
    through: Schema.String,
  }),
  /** Inserted the messages of a range of message keys into the staging generation. */
  Schema.TaggedStruct("ImportCopiedMessages", {
    import_id: Schema.String,
    after: Schema.optionalKey(Schema.String),
    through: Schema.String,
  }),
  Schema.TaggedStruct("ImportCopyFinished", { import_id: Schema.String }),
  Schema.TaggedStruct("ImportStaged", { import_id: Schema.String, records: Schema.Array(ImportRecord) }),
  Schema.TaggedStruct("ImportCommitted", { import_id: Schema.String }),
  Schema.TaggedStruct("ImportAborted", { import_id: Schema.String }),
  Schema.TaggedStruct("GenerationChunkDropped", { gen: Schema.Number, through: Schema.String }),
  Schema.TaggedStruct("GenerationDropped", { gen: Schema.Number }),
])
export type GenerationEvent = typeof GenerationEvent.Type

/** Why a generation command was refused. */
export class GenerationRefused extends Schema.TaggedError<GenerationRefused>()("GenerationRefused", {
  reason: Schema.Literals(["Busy", "Invalid"]),
  message: Schema.String,
}) {}

/** Replies to generation commands. */
export interface GenerationReply {
  /** CopyChunk and DropChunk: nothing is left to do. */
  readonly done: boolean
}

type Outcome = Result.Result<{ events: ReadonlyArray<GenerationEvent>; reply: GenerationReply }, GenerationRefused>

const ok = (events: ReadonlyArray<GenerationEvent>, done = true): Outcome => Result.succeed({ events, reply: { done } })
const refuse = (reason: GenerationRefused["reason"], message: string): Outcome =>
  Result.fail(new GenerationRefused({ reason, message }))

/** A rough size of a stored value: messages by their content, everything else small. */
const approximateBytes = (value: unknown): number => {
  const content = (value as Partial<StoredMessage> | undefined)?.message?.content
  return 256 + (typeof content === "string" ? content.length * 3 : 0)
}

/** The next chunk of `gen`'s messages after the key `after` (within the generation): its last key, if any. */
const nextChunk = (state: StoreView, gen: number, after: string | undefined, keysMax: number): string | undefined => {
  const prefix = genPrefix(gen)
  const range = allMessages(gen)
  let bytes = 0
  let last: string | undefined
  let keys = 0
  const start = after === undefined ? range.start : `${prefix}${after}\u0000`
  for (const { key, value } of state.getRange({ start, end: range.end, limit: keysMax })) {
    last = key.slice(prefix.length)
    bytes += approximateBytes(value)
    if (++keys >= keysMax || bytes >= generationChunkBytesMax) break
  }
  return last
}

/** The next chunk of every key of `gen` (dropping a generation): the last key, if any. */
const nextDropChunk = (state: StoreView, gen: number): string | undefined => {
  const prefix = genPrefix(gen)
  let last: string | undefined
  for (const { key } of state.getRange({ ...wholeGen(gen), limit: generationChunkKeysMax }))
    last = key.slice(prefix.length)
  return last
}

const stagingOf = (state: StoreView, importId: string) => {
  const current = readImportState(state)
  return current?.phase === "staging" && current.import_id === importId ? current : undefined
}

/** Decides a generation command. */
export const decideGeneration = (command: GenerationCommand, state: StoreView): Outcome => {
  switch (command._tag) {
    case "BeginImport": {
      if (readImportState(state) !== undefined)
        return refuse("Busy", "another import is in progress or was interrupted; its leftovers must be discarded first")
      const from = currentGen(state)
      const to = Math.max((state.get(nextGenKey) as number | undefined) ?? firstGen + 1, from + 1)
      return ok([
        {
          _tag: "ImportBegun",
          import_id: command.import_id,
          from_gen: from,
          to_gen: to,
          base_changes: command.base_changes,
        },
      ])
    }
    case "CopyChunk": {
      const staging = stagingOf(state, command.import_id)
      if (staging === undefined) return refuse("Invalid", `no import ${command.import_id} is staging`)
      if (staging.copy_done) return ok([])
      const keysMax = Math.min(command.keys_max ?? generationChunkKeysMax, generationChunkKeysMax)
      const through = nextChunk(state, staging.from_gen, staging.copied_through, keysMax)
      if (through === undefined) return ok([{ _tag: "ImportCopyFinished", import_id: command.import_id }])
      const after = staging.copied_through
      return ok(
        [
          {
            _tag: "ImportCopiedMessages",
            import_id: command.import_id,
            ...(after !== undefined ? { after } : {}),
            through,
          },
        ],
        false,
      )
    }
    case "StageImport": {
      const staging = stagingOf(state, command.import_id)
      if (staging === undefined || !staging.copy_done)
        return refuse("Invalid", `no import ${command.import_id} is ready to stage records`)
      if (command.policy === "reject") {
        const taken = command.records.find((record) => {
          const existing = readStored(state, staging.to_gen, record.project, record.message.message_id)
          return existing !== undefined && existing.deleted_at === undefined
        })
        if (taken !== undefined)
          return refuse("Invalid", `message ${taken.message.message_id} already exists (policy reject)`)
      }
      return ok([{ _tag: "ImportStaged", import_id: command.import_id, records: command.records }])
    }
    case "CommitImport": {
      const staging = stagingOf(state, command.import_id)
      if (staging === undefined || !staging.copy_done)
        return refuse("Invalid", `no import ${command.import_id} is ready to commit`)
      return ok([{ _tag: "ImportCommitted", import_id: command.import_id }])
    }
    case "AbortImport": {
      const current = readImportState(state)
      if (current?.phase !== "staging") return ok([])
      if (command.import_id !== undefined && current.import_id !== command.import_id) return ok([])
      return ok([{ _tag: "ImportAborted", import_id: current.import_id }])
    }
    case "DropChunk": {
      const current = readImportState(state)
      if (current?.phase !== "dropping") return ok([])
      const through = nextDropChunk(state, current.gen)
      if (through === undefined) return ok([{ _tag: "GenerationDropped", gen: current.gen }])
      return ok([{ _tag: "GenerationChunkDropped", gen: current.gen, through }], false)
    }
  }
}

const putImportState = (state: StoreWriter, next: ImportState) => state.put(importStateKey, next)

/** The generation an import is staging, if any. */
export const stagingGen = (state: StoreView): number | undefined => {
  const staging = readImportState(state)
  return staging?.phase === "staging" ? staging.to_gen : undefined
}

/**
 * The staging generation a change of message `id` of `project` must be applied to as well (it is
 * copied there already), if an import is staging.
 */
export const mirroredGen = (state: StoreView, project: string, id: string): number | undefined => {
  const staging = readImportState(state)
  if (staging?.phase !== "staging") return undefined
  if (staging.copy_done) return staging.to_gen
  const through = staging.copied_through
  return through !== undefined && compareKeys(messageKeyInGen(project, id), through) <= 0 ? staging.to_gen : undefined
}

/** Applies a generation event. */
export const applyGeneration = (event: GenerationEvent, state: StoreWriter): void => {
  switch (event._tag) {
    case "ImportBegun": {
      putImportState(state, {
        phase: "staging",
        import_id: event.import_id,
        from_gen: event.from_gen,
        to_gen: event.to_gen,
        base_changes: event.base_changes,
        copy_done: false,
      })
      state.put(nextGenKey, event.to_gen + 1)
      return
    }
    case "ImportCopied": {
      const staging = stagingOf(state, event.import_id)
      if (staging === undefined) return
      const from = genPrefix(staging.from_gen)
      const to = genPrefix(staging.to_gen)
      const start = event.after === undefined ? from : `${from}${event.after}\u0000`
      for (const { key, value } of [...state.getRange({ start, end: `${from}${event.through}\u0000` })])
        state.put(`${to}${key.slice(from.length)}`, value)
      putImportState(state, { ...staging, copied_through: event.through })
      return
    }
    case "ImportCopiedMessages": {
      const staging = stagingOf(state, event.import_id)
      if (staging === undefined) return
      const from = genPrefix(staging.from_gen)
      const start = event.after === undefined ? allMessages(staging.from_gen).start : `${from}${event.after}\u0000`
      for (const { value } of [...state.getRange({ start, end: `${from}${event.through}\u0000` })]) {
        const stored = value as StoredMessage
        const existing = readStored(state, staging.to_gen, stored.project, stored.message.message_id)
        if (existing !== undefined) erase(state, staging.to_gen, existing)
        insertStored(state, staging.to_gen, stored)
      }
      putImportState(state, { ...staging, copied_through: event.through })
      return
    }
    case "ImportCopyFinished": {
      const staging = stagingOf(state, event.import_id)
      if (staging !== undefined) putImportState(state, { ...staging, copy_done: true })
      return
    }
    case "ImportStaged": {
      const staging = stagingOf(state, event.import_id)
      if (staging === undefined) return
      let lastId = state.get(lastIdKey) as string | undefined
      for (const record of event.records) {
        const existing = readStored(state, staging.to_gen, record.project, record.message.message_id)
        if (existing !== undefined) erase(state, staging.to_gen, existing)
        insertLive(state, staging.to_gen, record)
        if (lastId === undefined || record.message.message_id > lastId) lastId = record.message.message_id
      }
      if (lastId !== undefined) state.put(lastIdKey, lastId)
      return
    }
    case "ImportCommitted": {
      const staging = stagingOf(state, event.import_id)
      if (staging === undefined) return
      state.put(currentGenKey, staging.to_gen)
      state.put(switchesKey, ((state.get(switchesKey) as number | undefined) ?? 0) + 1)
      putImportState(state, { phase: "dropping", gen: staging.from_gen })
      return
    }
    case "ImportAborted": {
      const staging = stagingOf(state, event.import_id)
      if (staging !== undefined) putImportState(state, { phase: "dropping", gen: staging.to_gen })
      return
    }
    case "GenerationChunkDropped": {
      const range = wholeGen(event.gen)
      for (const { key } of [
        ...state.getRange({ start: range.start, end: `${genPrefix(event.gen)}${event.through}\u0000` }),
      ])
        state.remove(key)
      return
    }
    case "GenerationDropped": {
      state.remove(importStateKey)
      return
    }
  }
}
