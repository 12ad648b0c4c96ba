/**
 * Import of a conversations backup (format: ConversationTransfer.ts): validate every line, then
 * apply all or nothing, with bounded memory.
 *
 * Pass 1 streams the file and stops at the first bad line, naming it: the header, JSON, every
 * field and limit of each record, the record count, the total bytes, ids repeated in the file
 * and, with policy `reject`, ids already stored. Nothing is written. Pass 2 streams the file again
 * into a staging generation (bounded chunks) and commits it in one event (Generations.ts). If
 * anything fails after staging began — the disk, the process, a concurrent write (`BUSY`) — the
 * staging generation is discarded (now, or by the next import / rebuild_index after a crash) and
 * the store is as before. Memory holds one line, one chunk of records and the ids seen (bounded
 * by the record limit).
 */
import { Effect, Result, Schema } from "effect"
import { ulid } from "ulid"
import type { StoreError } from "../stores/StoreError.ts"
import type { ConversationFailure } from "./ConversationStore.ts"
import {
  defaultImportLimits,
  exportFormatName,
  exportFormatVersion,
  type ImportLimits,
  type ImportPolicy,
  TransferFailed,
  type TransferProgress,
} from "./ConversationTransfer.ts"
import { BoundedImportRecord, currentGen, type GenerationReply, type ImportRecord } from "./Generations.ts"
import { type JsonlLine, readJsonlLines } from "./JsonlLines.ts"
import { type ConversationStoreHandle, discardLeftovers, finishDropping, whileImportRuns } from "./Maintenance.ts"
import { readStats, readStored } from "./MessageState.ts"

/** Records per staging command, at most, and their bytes (as lines) per command, at most. */
const stageChunkRecordsMax = 1_000
const stageChunkBytesMax = 4 * 1024 * 1024
/** Ids looked up in the store per read, when checking policy `reject`. */
const lookupChunkIds = 1_000

/** How to import. */
export interface ImportOptions {
  readonly policy: ImportPolicy
  /** Import every record into this project instead of the one it names. */
  readonly project?: string
}

/** What an import did. */
export interface ImportReport {
  readonly records: number
}

const Header = Schema.Struct({ format: Schema.Literal(exportFormatName), version: Schema.Literal(exportFormatVersion) })
const decodeHeader = Schema.decodeUnknownResult(Schema.fromJsonString(Header))
const decodeRecord = Schema.decodeUnknownResult(Schema.fromJsonString(BoundedImportRecord))

const failure = (message: string, line?: number) =>
  new TransferFailed({
    message: line === undefined ? message : `line ${line}: ${message}`,
    ...(line !== undefined ? { line } : {}),
  })
const storeFailure = (error: ConversationFailure | StoreError) => failure(error.message)

/** One record line of the file, decoded, or the reason it is bad. */
type RecordLine = { readonly line: number; readonly bytes: number; readonly record: ImportRecord }

/** Streams the record lines of `path`, checking the header and the per-line rules. */
const recordLines = (
  path: string,
  options: ImportOptions,
  limits: ImportLimits,
  onRecord: (record: RecordLine) => Effect.Effect<void, TransferFailed>,
  onBytes?: (bytesRead: number, bytesTotal: number) => void,
) =>
  Effect.gen(function* () {
    const lines = yield* Effect.try({
      try: () =>
        readJsonlLines(path, limits.lineBytesMax, (progress) => onBytes?.(progress.bytesRead, progress.bytesTotal)),
      catch: (error) => failure(`cannot read ${path}: ${String(error)}`),
    })
    const next = Effect.try({
      try: (): IteratorResult<JsonlLine> => lines.next(),
      catch: (error) => failure(`cannot read ${path}: ${error instanceof Error ? error.message : String(error)}`),
    })
    let records = 0
    let bytes = 0
    let header = false
    for (let item = yield* next; !item.done; item = yield* next) {
      const entry = item.value
      if (entry._tag === "TooLong") return yield* failure(`longer than ${limits.lineBytesMax} bytes`, entry.line)
      if (entry._tag === "NotUtf8") return yield* failure("not valid UTF-8", entry.line)
      if (!header) {
        if (Result.isFailure(decodeHeader(entry.text)))
          return yield* failure(`not a ${exportFormatName} version ${exportFormatVersion} header`, entry.line)
        header = true
        continue
      }
      if (entry.text.trim() === "") continue
      if (++records > limits.recordsMax) return yield* failure(`more than ${limits.recordsMax} records`, entry.line)
      bytes += entry.bytes
      if (bytes > limits.decodedBytesMax)
        return yield* failure(`more than ${limits.decodedBytesMax} bytes of records`, entry.line)
      const decoded = decodeRecord(entry.text, { onExcessProperty: "error" })
      if (Result.isFailure(decoded)) return yield* failure(decoded.failure.message.replace(/\n\s*/g, " "), entry.line)
      const record = options.project === undefined ? decoded.success : { ...decoded.success, project: options.project }
      yield* onRecord({ line: entry.line, bytes: entry.bytes, record })
    }
    if (!header) return yield* failure(`the file is empty; expected a ${exportFormatName} header`, 1)
    return records
  })

/** Pass 1: every line is valid; returns the record count. */
const validate = (
  store: ConversationStoreHandle,
  path: string,
  options: ImportOptions,
  limits: ImportLimits,
  onProgress?: TransferProgress,
) =>
  Effect.gen(function* () {
    const seen = new Map<string, number>()
    let lookups: Array<RecordLine> = []
    const checkStored = Effect.gen(function* () {
      const batch = lookups
      lookups = []
      const taken = yield* store
        .read((view) => {
          const gen = currentGen(view)
          return batch.find(({ record }) => {
            const stored = readStored(view, gen, record.project, record.message.message_id)
            return stored !== undefined && stored.deleted_at === undefined
          })
        })
        .pipe(Effect.mapError(storeFailure))
      if (taken !== undefined)
        return yield* failure(`message ${taken.record.message.message_id} already exists (policy reject)`, taken.line)
    })
    const records = yield* recordLines(
      path,
      options,
      limits,
      (line) =>
        Effect.gen(function* () {
          const key = `${line.record.project}\u0000${line.record.message.message_id}`
          const first = seen.get(key)
          if (first !== undefined)
            return yield* failure(
              `message ${line.record.message.message_id} appears twice (first on line ${first})`,
              line.line,
            )
          seen.set(key, line.line)
          if (options.policy === "reject") {
            lookups.push(line)
            if (lookups.length >= lookupChunkIds) yield* checkStored
          }
        }),
      (read, total) => onProgress?.("validating", read, total),
    )
    if (lookups.length > 0) yield* checkStored
    return records
  })

const send = (store: ConversationStoreHandle, command: Parameters<ConversationStoreHandle["send"]>[0]) =>
  store.send(command).pipe(Effect.mapError(storeFailure))

/** Pass 2: stages every record and commits; on any failure the staging is discarded. */
const stageAndCommit = (
  store: ConversationStoreHandle,
  path: string,
  options: ImportOptions,
  limits: ImportLimits,
  baseChanges: number,
  records: number,
  onProgress?: TransferProgress,
) => {
  const importId = ulid()
  const abort = send(store, { _tag: "AbortImport", import_id: importId }).pipe(
    Effect.andThen(finishDropping(store).pipe(Effect.mapError(storeFailure))),
    Effect.ignore,
  )
  return whileImportRuns(
    store,
    importId,
    Effect.gen(function* () {
      yield* send(store, { _tag: "BeginImport", import_id: importId, base_changes: baseChanges })
      let done = false
      while (!done) done = ((yield* send(store, { _tag: "CopyChunk", import_id: importId })) as GenerationReply).done
      let chunk: Array<ImportRecord> = []
      let chunkBytes = 0
      let staged = 0
      const flush = Effect.gen(function* () {
        if (chunk.length === 0) return
        const batch = chunk
        chunk = []
        chunkBytes = 0
        yield* send(store, { _tag: "StageImport", import_id: importId, policy: options.policy, records: batch })
        staged += batch.length
        onProgress?.("importing", staged, records)
      })
      const seenAgain = yield* recordLines(path, options, limits, (line) =>
        Effect.gen(function* () {
          chunk.push(line.record)
          chunkBytes += line.bytes
          if (chunk.length >= stageChunkRecordsMax || chunkBytes >= stageChunkBytesMax) yield* flush
        }),
      )
      yield* flush
      if (seenAgain !== records) return yield* failure(`${path} changed during the import; nothing was imported`)
      yield* send(store, { _tag: "CommitImport", import_id: importId })
    }).pipe(Effect.onError(() => abort)),
  )
}

/** Imports the backup at `path` into the store: every record, or (on any failure) none. */
export const importConversations = (
  store: ConversationStoreHandle,
  path: string,
  options: ImportOptions,
  limits: ImportLimits = defaultImportLimits,
  onProgress?: TransferProgress,
): Effect.Effect<ImportReport, TransferFailed> =>
  Effect.gen(function* () {
    const baseChanges = yield* store
      .read((view) => readStats(view, currentGen(view)).changes)
      .pipe(Effect.mapError(storeFailure))
    const records = yield* validate(store, path, options, limits, onProgress)
    if (records === 0) return { records }
    yield* discardLeftovers(store).pipe(Effect.mapError(storeFailure))
    yield* stageAndCommit(store, path, options, limits, baseChanges, records, onProgress)
    yield* finishDropping(store).pipe(Effect.mapError(storeFailure))
    return { records }
  })
