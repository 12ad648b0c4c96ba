/**
 * A generic store of project records on the store kernel: tasks, ADRs, notes, code history and
 * gates are each a `makeRecordStore` over a few record kinds, and need no other store code.
 *
 * Every record has an id (ULID, decided here from the batch clock, so ids sort by creation), a
 * project, a kind, a revision (1 on create, +1 on every change), `createdAt`/`updatedAt`,
 * `createdBy`/`updatedBy`, and the kind's data. A command is a list of operations applied all
 * or nothing: create, update (a patch; `null` removes a field), upsert by the kind's unique key
 * (a gate's action, a workspace's name, a pinned file's path) and logical delete. An operation
 * with `expectedRevision` fails with `Conflict` unless the record is at exactly that revision.
 * Later operations of a command see the earlier ones (a new ADR and the one it supersedes change
 * together). A change that leaves a record as it was writes nothing.
 *
 * Each kind's data Schema is checked in `decide`, before anything is written. WAL events carry
 * the whole record and are decoded with the generic record Schema only, so a kind that gains a
 * field later (new fields must be optional) never makes old events unreadable. Events also carry
 * who (`updatedBy`) and the tool, for the audit ledger.
 */
import { Result, Schema } from "effect"
import { monotonicFactory } from "ulid"
import type { StoreView, StoreWriter } from "../stores/checkpoint/Checkpoint.ts"
import type { Decision, StoreDefinition } from "../stores/StoreDefinition.ts"
import {
  type ExpiryEntry,
  expiryKey,
  isKeySafe,
  isRecordKey,
  numberKey,
  projectKey,
  recordDescendingKey,
  recordKey,
  ulidPattern,
  uniqueKey,
} from "./RecordKeys.ts"

/** Most operations in one command. */
export const recordOpsMax = 1_000
/** Largest record data, as JSON, in UTF-16 code units (about 1 MiB of ASCII). */
export const recordDataCharsMax = 1024 * 1024
/** Longest unique key (a gate's action, a workspace's name, a pinned path), in UTF-16 code units. */
export const recordIdLengthMax = 256

/** A record's kind-specific fields (checked by the kind's Schema before they are stored). */
export type RecordData = { readonly [field: string]: unknown }

/** A record as a record store keeps it. */
export const StoredRecord = Schema.Struct({
  id: Schema.String,
  project: Schema.String,
  kind: Schema.String,
  number: Schema.optionalKey(Schema.Int),
  unique: Schema.optionalKey(Schema.String),
  expiresAt: Schema.optionalKey(Schema.Number),
  /** 1 on create, +1 on every change: an import refuses anything below 1. */
  revision: Schema.Int.check(Schema.isGreaterThanOrEqualTo(1)),
  createdAt: Schema.Number,
  updatedAt: Schema.Number,
  createdBy: Schema.String,
  updatedBy: Schema.String,
  deletedAt: Schema.optionalKey(Schema.Number),
  deletedBy: Schema.optionalKey(Schema.String),
  data: Schema.Record(Schema.String, Schema.Unknown),
})
export type StoredRecord = typeof StoredRecord.Type

/** One kind of record: its data Schema and how to name, find and search it. */
export interface RecordKind<D extends RecordData = RecordData> {
  /** Lower-case name with underscores, e.g. "sticky_note". */
  readonly name: string
  readonly data: Schema.Codec<D, unknown>
  /** A kind with a unique key has at most one live record per key and project (upserts find it). */
  readonly uniqueBy?: (data: D) => string
  /** Numbered kinds get 1, 2, 3, ... per project (ADR-0001). */
  readonly numbered?: boolean
  /** A one-line title for lists and search results. */
  readonly title: (data: D) => string
  /**
   * What names a record where its body may not go — the audit ledger, and the event of its
   * deletion, which outlive it: a task's title, a pinned file's path. A kind whose title is its
   * body (a sticky note's text) has none, and is named there by kind and id only.
   */
  readonly namedBy?: (data: D) => string
  /** The texts `query` filters and search match against. */
  readonly text: (data: D) => ReadonlyArray<string | undefined>
  /** When a record of this kind stops being live by itself (a sticky note's TTL); see RecordExpiry.ts. */
  readonly expiresAt?: (data: D) => number | undefined
  /** Derives fields from a change (e.g. `completedAt` when a task becomes done); pure. */
  readonly normalize?: (next: D, previous: D | undefined, now: number) => D
}

/** Any kind, for code that handles records of every kind (queries, lists). */
// biome-ignore lint/suspicious/noExplicitAny: the data type is erased; `dataOf` gives it back
export type AnyRecordKind = RecordKind<any>

/** Declares a kind, keeping its data type. */
export const defineKind = <D extends RecordData>(kind: RecordKind<D>): RecordKind<D> => kind

/** The data of a record of `kind` (checked against the kind's Schema when it was written). */
export const dataOf = <D extends RecordData>(_kind: RecordKind<D>, record: StoredRecord): D => record.data as D

const Data = Schema.Record(Schema.String, Schema.Unknown)
const Revision = Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))

/** One operation of a command. */
export const RecordOp = Schema.Union([
  Schema.TaggedStruct("Create", { kind: Schema.String, data: Data, id: Schema.optionalKey(Schema.String) }),
  Schema.TaggedStruct("Update", {
    kind: Schema.String,
    id: Schema.String,
    expectedRevision: Schema.optionalKey(Revision),
    patch: Data,
  }),
  Schema.TaggedStruct("Upsert", { kind: Schema.String, data: Data, expectedRevision: Schema.optionalKey(Revision) }),
  Schema.TaggedStruct("Delete", {
    kind: Schema.String,
    id: Schema.optionalKey(Schema.String),
    unique: Schema.optionalKey(Schema.String),
    expectedRevision: Schema.optionalKey(Revision),
  }),
])
export type RecordOp = typeof RecordOp.Type

/** A command: operations in one project, by someone, through some tool. */
export const RecordCommand = Schema.Struct({
  project: Schema.String,
  by: Schema.String,
  tool: Schema.String,
  ops: Schema.Array(RecordOp).check(Schema.isMinLength(1), Schema.isMaxLength(recordOpsMax)),
})
export type RecordCommand = typeof RecordCommand.Type

/** Longest record title carried in an event (for the audit ledger). */
export const eventTitleCharsMax = 200

/**
 * The one event of a record store: a record as it now is, with who changed it through which tool.
 * `title` is the record's title (its name only, or empty, when it is deleted); `name` is its
 * kind's name for it, when the kind has one — all the audit ledger keeps (events written before
 * it existed have none).
 */
export const RecordEvent = Schema.TaggedStruct("RecordWritten", {
  change: Schema.Literals(["created", "updated", "deleted"]),
  tool: Schema.String,
  title: Schema.String,
  name: Schema.optionalKey(Schema.String),
  record: StoredRecord,
})
export type RecordEvent = typeof RecordEvent.Type

/** A command the store refuses; nothing of it is written. */
export class RecordRejected extends Schema.TaggedError<RecordRejected>()("RecordRejected", {
  reason: Schema.Literals(["NotFound", "Conflict", "Invalid"]),
  message: Schema.String,
}) {}

/** The records as each operation left them, in operation order. */
export interface RecordReply {
  readonly records: ReadonlyArray<StoredRecord>
}

/** A record store's definition plus its kinds. */
export interface RecordStoreDefinition
  extends StoreDefinition<RecordCommand, RecordEvent, RecordReply, RecordRejected> {
  readonly kinds: ReadonlyArray<AnyRecordKind>
}

/** Data that passed its kind's checks, with what the store derives from it. */
interface Checked {
  readonly data: RecordData
  readonly unique: string | undefined
  readonly expiresAt: number | undefined
}

const invalid = (message: string) => new RecordRejected({ reason: "Invalid", message })
const notFound = (kind: string, what: string) =>
  new RecordRejected({ reason: "NotFound", message: `no ${kind.replaceAll("_", " ")} ${what} in this project` })

/** A kind's name for a record with `data`, cut to `eventTitleCharsMax`. */
const nameOf = (kind: RecordKind<RecordData>, data: RecordData): string | undefined =>
  kind.namedBy?.(data).slice(0, eventTitleCharsMax)

/**
 * The tombstone that replaces a deleted record: who made it and when, its number (numbered kinds
 * never reuse one), and no data — what was deleted is in no key of the state, so a compaction
 * leaves it in no file. (Its unique key and expiry go too; `apply` drops their indexes.)
 */
export const tombstoneOf = (record: StoredRecord, now: number, by: string): StoredRecord => {
  const { unique: _, expiresAt: __, data: ___, ...kept } = record
  return {
    ...kept,
    revision: record.revision + 1,
    updatedAt: now,
    updatedBy: by,
    deletedAt: record.deletedAt ?? now,
    deletedBy: record.deletedBy ?? by,
    data: {},
  }
}

/** A compaction keeps a tombstone written before tombstones kept no content as one that keeps none. */
export const compactRecordValue = (key: string, value: unknown): unknown => {
  if (!isRecordKey(key)) return value
  const record = value as StoredRecord
  if (record.deletedAt === undefined) return value
  const { unique: _, expiresAt: __, data: ___, ...kept } = record
  return { ...kept, data: {} } satisfies StoredRecord
}

const isValidName = (text: string): boolean => text !== "" && text.length <= recordIdLengthMax && isKeySafe(text)

/** Makes a record store named `name` holding `kinds`. */
export const makeRecordStore = (name: string, kinds: ReadonlyArray<AnyRecordKind>): RecordStoreDefinition => {
  const kindsByName = new Map(kinds.map((kind) => [kind.name, kind as RecordKind<RecordData>]))
  const nextId = monotonicFactory()

  const decide = (
    command: RecordCommand,
    state: StoreView,
    context: { readonly now: number },
  ): Result.Result<Decision<RecordEvent, RecordReply>, RecordRejected> => {
    const { project, by, tool } = command
    const { now } = context
    if (project === "" || !isKeySafe(project))
      return Result.fail(invalid("a project must be non-empty and may not contain control characters"))
    // What earlier operations of this command changed (decide never writes the state).
    const records = new Map<string, StoredRecord>()
    const uniques = new Map<string, string | undefined>()
    const numbers = new Map<string, number>()
    const events: Array<RecordEvent> = []
    const replies: Array<StoredRecord> = []

    const find = (kind: string, id: string): StoredRecord | undefined => {
      const key = recordKey(project, kind, id)
      const found = records.get(key) ?? (state.get(key) as StoredRecord | undefined)
      return found?.deletedAt === undefined ? found : undefined
    }
    const findUnique = (kind: string, unique: string): StoredRecord | undefined => {
      const key = uniqueKey(project, kind, unique)
      const id = uniques.has(key) ? uniques.get(key) : (state.get(key) as string | undefined)
      return id === undefined ? undefined : find(kind, id)
    }
    const write = (change: RecordEvent["change"], record: StoredRecord, previous: StoredRecord | undefined) => {
      const kind = kindsByName.get(record.kind)!
      // A tombstone has no data: its event is named from the record it replaces.
      const data = change === "deleted" ? (previous?.data ?? {}) : record.data
      const name = nameOf(kind, data)
      const title = change === "deleted" ? (name ?? "") : kind.title(data).slice(0, eventTitleCharsMax)
      records.set(recordKey(project, record.kind, record.id), record)
      if (previous?.unique !== undefined) uniques.set(uniqueKey(project, record.kind, previous.unique), undefined)
      if (record.unique !== undefined && record.deletedAt === undefined)
        uniques.set(uniqueKey(project, record.kind, record.unique), record.id)
      events.push({ _tag: "RecordWritten", change, tool, title, ...(name !== undefined ? { name } : {}), record })
      replies.push(record)
    }
    const checkRevision = (record: StoredRecord, expected: number | undefined): RecordRejected | undefined =>
      expected === undefined || expected === record.revision
        ? undefined
        : new RecordRejected({
            reason: "Conflict",
            message: `${record.kind.replaceAll("_", " ")} ${record.id} is at revision ${record.revision}, not ${expected}: it changed since you read it; read it again and retry`,
          })
    /** Checks `data` against the kind and derives its unique key; returns the stored form. */
    const validate = (
      kind: RecordKind<RecordData>,
      data: unknown,
      previous: StoredRecord | undefined,
    ): Result.Result<Checked, RecordRejected> => {
      const decoded = Schema.decodeUnknownResult(kind.data)(data)
      if (Result.isFailure(decoded)) return Result.fail(invalid(`invalid ${kind.name}: ${decoded.failure.message}`))
      const normalized = kind.normalize?.(decoded.success, previous?.data, now) ?? decoded.success
      if (JSON.stringify(normalized).length > recordDataCharsMax)
        return Result.fail(invalid(`a ${kind.name} may hold at most ${recordDataCharsMax} characters of JSON`))
      const unique = kind.uniqueBy?.(normalized)
      if (unique !== undefined && !isValidName(unique))
        return Result.fail(
          invalid(`the ${kind.name}'s key must be 1 to ${recordIdLengthMax} characters, no control characters`),
        )
      return Result.succeed({ data: normalized, unique, expiresAt: kind.expiresAt?.(normalized) })
    }
    const created = (kind: RecordKind<RecordData>, id: string, { data, unique, expiresAt }: Checked) => {
      let number: number | undefined
      if (kind.numbered === true) {
        const key = numberKey(project, kind.name)
        number = (numbers.get(key) ?? (state.get(key) as number | undefined) ?? 0) + 1
        numbers.set(key, number)
      }
      const record: StoredRecord = {
        id,
        project,
        kind: kind.name,
        ...(number !== undefined ? { number } : {}),
        ...(unique !== undefined ? { unique } : {}),
        ...(expiresAt !== undefined ? { expiresAt } : {}),
        revision: 1,
        createdAt: now,
        updatedAt: now,
        createdBy: by,
        updatedBy: by,
        data,
      }
      write("created", record, undefined)
    }
    const changed = (previous: StoredRecord, { data, unique, expiresAt }: Checked) => {
      if (JSON.stringify(data) === JSON.stringify(previous.data)) return void replies.push(previous)
      const { unique: _, expiresAt: __, ...rest } = previous
      write(
        "updated",
        {
          ...rest,
          ...(unique !== undefined ? { unique } : {}),
          ...(expiresAt !== undefined ? { expiresAt } : {}),
          revision: previous.revision + 1,
          updatedAt: now,
          updatedBy: by,
          data,
        },
        previous,
      )
    }

    for (const op of command.ops) {
      const kind = kindsByName.get(op.kind)
      if (kind === undefined) return Result.fail(invalid(`store "${name}" has no record kind "${op.kind}"`))
      switch (op._tag) {
        case "Create": {
          const id = op.id ?? nextId(now)
          if (!ulidPattern.test(id))
            return Result.fail(invalid(`a record id must be a ULID, not ${JSON.stringify(id)}`))
          const key = recordKey(project, kind.name, id)
          if (records.has(key) || state.get(key) !== undefined)
            return Result.fail(new RecordRejected({ reason: "Conflict", message: `${kind.name} ${id} already exists` }))
          const checked = validate(kind, op.data, undefined)
          if (Result.isFailure(checked)) return Result.fail(checked.failure)
          const { unique } = checked.success
          if (unique !== undefined && findUnique(kind.name, unique) !== undefined)
            return Result.fail(
              new RecordRejected({ reason: "Conflict", message: `a ${kind.name} "${unique}" already exists` }),
            )
          created(kind, id, checked.success)
          break
        }
        case "Update": {
          const previous = find(kind.name, op.id)
          if (previous === undefined) return Result.fail(notFound(kind.name, op.id))
          const conflict = checkRevision(previous, op.expectedRevision)
          if (conflict !== undefined) return Result.fail(conflict)
          const merged: Record<string, unknown> = { ...previous.data }
          for (const [field, value] of Object.entries(op.patch)) {
            if (value === null) delete merged[field]
            else if (value !== undefined) merged[field] = value
          }
          const checked = validate(kind, merged, previous)
          if (Result.isFailure(checked)) return Result.fail(checked.failure)
          const { unique } = checked.success
          const holder = unique === undefined ? undefined : findUnique(kind.name, unique)
          if (holder !== undefined && holder.id !== previous.id)
            return Result.fail(
              new RecordRejected({ reason: "Conflict", message: `another ${kind.name} "${unique}" already exists` }),
            )
          changed(previous, checked.success)
          break
        }
        case "Upsert": {
          const probe = validate(kind, op.data, undefined)
          if (Result.isFailure(probe)) return Result.fail(probe.failure)
          const unique = probe.success.unique
          if (unique === undefined) return Result.fail(invalid(`a ${kind.name} has no unique key to upsert by`))
          const previous = findUnique(kind.name, unique)
          if (previous === undefined) {
            if (op.expectedRevision !== undefined) return Result.fail(notFound(kind.name, `"${unique}"`))
            created(kind, nextId(now), probe.success)
            break
          }
          const conflict = checkRevision(previous, op.expectedRevision)
          if (conflict !== undefined) return Result.fail(conflict)
          const checked = validate(kind, op.data, previous)
          if (Result.isFailure(checked)) return Result.fail(checked.failure)
          changed(previous, checked.success)
          break
        }
        case "Delete": {
          const previous =
            op.id !== undefined
              ? find(kind.name, op.id)
              : op.unique !== undefined
                ? findUnique(kind.name, op.unique)
                : undefined
          if (previous === undefined) return Result.fail(notFound(kind.name, op.id ?? `"${op.unique ?? ""}"`))
          const conflict = checkRevision(previous, op.expectedRevision)
          if (conflict !== undefined) return Result.fail(conflict)
          write("deleted", tombstoneOf(previous, now, by), previous)
          break
        }
      }
    }
    return Result.succeed({ events, reply: { records: replies } })
  }

  const apply = (event: RecordEvent, state: StoreWriter): void => {
    const { record } = event
    const key = recordKey(record.project, record.kind, record.id)
    const previous = state.get(key) as StoredRecord | undefined
    if (previous?.unique !== undefined && (previous.unique !== record.unique || record.deletedAt !== undefined)) {
      const index = uniqueKey(record.project, record.kind, previous.unique)
      if (state.get(index) === record.id) state.remove(index)
    }
    if (previous?.expiresAt !== undefined)
      state.remove(expiryKey(previous.expiresAt, record.project, record.kind, record.id))
    state.put(key, record)
    if (previous === undefined) state.put(recordDescendingKey(record.project, record.kind, record.id), record.id)
    if (record.expiresAt !== undefined && record.deletedAt === undefined)
      state.put(expiryKey(record.expiresAt, record.project, record.kind, record.id), {
        at: record.expiresAt,
        project: record.project,
        kind: record.kind,
        id: record.id,
      } satisfies ExpiryEntry)
    if (record.unique !== undefined && record.deletedAt === undefined)
      state.put(uniqueKey(record.project, record.kind, record.unique), record.id)
    if (record.number !== undefined) {
      const counter = numberKey(record.project, record.kind)
      if (record.number > ((state.get(counter) as number | undefined) ?? 0)) state.put(counter, record.number)
    }
    state.put(projectKey(record.project), 1)
  }

  return {
    name,
    commandSchema: RecordCommand,
    eventSchema: RecordEvent,
    failureSchema: RecordRejected,
    decide,
    apply,
    compactValue: compactRecordValue,
    kinds,
  }
}
