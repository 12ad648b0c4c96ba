/**
 * Backup of the conversations store: export to, and import from, a versioned JSONL file.
 *
 * Format (version 1): line 1 is the header `{"format":"mnemos-conversations","version":1}`; every
 * other line is one live message, `{"project","created_by","message":{...seed message object...}}`,
 * ordered by project, then creation. Deleted messages are not exported.
 *
 * Export reads one consistent snapshot (one read transaction) and streams it to a temporary file
 * beside the target, fsyncs, renames it over the target and fsyncs the directory: readers and a
 * crash see the old file or the whole new one. It refuses a message whose line would be longer
 * than an import accepts, so every export can be imported.
 *
 * Import (ConversationImport.ts) reads this format back, all or nothing, within the limits here.
 * The daemon serves both over HTTP (transports/ConversationTransferApi.ts) with these same files.
 */
import { Effect, Result, Schema } from "effect"
import { writeFileAtomic } from "../cli/AtomicFile.ts"
import type { StoreView } from "../stores/checkpoint/Checkpoint.ts"
import type { StoreError } from "../stores/StoreError.ts"
import {
  allMessages,
  allSessions,
  historyOf,
  idOfHistoryKey,
  parseSessionKey,
  type StoredMessage,
} from "./ConversationKeys.ts"
import type { ConversationFailure } from "./ConversationStore.ts"
import { currentGen } from "./Generations.ts"
import type { ConversationStoreHandle } from "./Maintenance.ts"
import { readStats, readStored } from "./MessageState.ts"
import { messageJson, utf8Bytes } from "./Model.ts"

/** The export format's name and version, from its header line. */
export const exportFormatName = "mnemos-conversations"
export const exportFormatVersion = 1

/** The seed's import limits. */
export interface ImportLimits {
  /** Records per file: 100,000. */
  readonly recordsMax: number
  /** Bytes per line: 1 MiB + 4096. */
  readonly lineBytesMax: number
  /** Bytes of all lines together: 4 GiB. */
  readonly decodedBytesMax: number
}

export const defaultImportLimits: ImportLimits = {
  recordsMax: 100_000,
  lineBytesMax: 1024 * 1024 + 4096,
  decodedBytesMax: 4 * 1024 * 1024 * 1024,
}

/**
 * The most bytes a file sent to the daemon for import may have: every record line at the limit
 * together, the header line and a "\r\n" after every line. (A file on disk is only held to the
 * line limits; blank lines beyond these bytes are refused on upload only.)
 */
export const importUploadBytesMax = (limits: ImportLimits): number =>
  limits.decodedBytesMax + limits.lineBytesMax + (limits.recordsMax + 1) * 2

/** Bytes written to the export file per write call: about 1 MiB. */
const exportChunkBytes = 1024 * 1024

/** What an import does with a message id that is already stored. */
export type ImportPolicy = "overwrite" | "reject"

/** An import or export that could not be done; nothing was changed. The message says why. */
export class TransferFailed extends Schema.TaggedError<TransferFailed>()("TransferFailed", {
  /** The 1-based line of the file at fault, if one is. */
  line: Schema.optional(Schema.Int),
  message: Schema.String,
}) {}

/**
 * Progress of a long transfer: the phase and how far it got (of `total`, when known), in bytes
 * while validating or uploading (to the daemon), else in records.
 */
export type TransferProgress = (
  phase: "validating" | "importing" | "exporting" | "uploading",
  done: number,
  total: number,
) => void

/** The export's first line (without its "\n"). */
export const exportHeaderLine = JSON.stringify({ format: exportFormatName, version: exportFormatVersion })

const lineOf = (stored: StoredMessage): string =>
  JSON.stringify({ project: stored.project, created_by: stored.created_by, message: messageJson(stored.message) })

const failure = (message: string, line?: number) =>
  new TransferFailed({
    message: line === undefined ? message : `line ${line}: ${message}`,
    ...(line !== undefined ? { line } : {}),
  })

const storeFailure = (error: ConversationFailure | StoreError) => failure(error.message)

// ---------------------------------------------------------------------------------------------
// Export

/** Which messages to export. */
export interface ExportSelection {
  readonly project?: string
  readonly session?: string
}

function* selectedMessages(view: StoreView, selection: ExportSelection): Generator<StoredMessage> {
  const gen = currentGen(view)
  if (selection.session === undefined) {
    for (const { value } of view.getRange(allMessages(gen, selection.project))) {
      const stored = value as StoredMessage
      if (stored.deleted_at === undefined) yield stored
    }
    return
  }
  for (const { key } of view.getRange(allSessions(gen))) {
    const { project, session } = parseSessionKey(gen, key)
    if (session !== selection.session || (selection.project !== undefined && project !== selection.project)) continue
    for (const { key: entry } of view.getRange(historyOf(gen, project, session))) {
      const stored = readStored(view, gen, project, idOfHistoryKey(entry))
      if (stored !== undefined && stored.deleted_at === undefined) yield stored
    }
  }
}

/** Writes the selected live messages to `path` atomically; returns how many. */
export const exportConversations = (
  store: ConversationStoreHandle,
  path: string,
  selection: ExportSelection,
  limits: ImportLimits = defaultImportLimits,
  onProgress?: TransferProgress,
): Effect.Effect<{ readonly records: number }, TransferFailed> =>
  store
    .read((view) => {
      const total = readStats(view, currentGen(view)).active
      let records = 0
      function* chunks(): Generator<string> {
        let pending = `${exportHeaderLine}\n`
        for (const stored of selectedMessages(view, selection)) {
          const line = lineOf(stored)
          if (utf8Bytes(line) > limits.lineBytesMax)
            throw failure(
              `message ${stored.message.message_id} would need a line of ${utf8Bytes(line)} bytes, more than the ${limits.lineBytesMax} an import accepts; nothing was exported`,
            )
          pending += `${line}\n`
          records++
          if (pending.length >= exportChunkBytes) {
            yield pending
            pending = ""
            onProgress?.("exporting", records, total)
          }
        }
        yield pending
      }
      try {
        writeFileAtomic(path, chunks())
        return Result.succeed({ records })
      } catch (error) {
        return Result.fail(error instanceof TransferFailed ? error : failure(`cannot write ${path}: ${String(error)}`))
      }
    })
    .pipe(
      Effect.mapError(storeFailure),
      Effect.flatMap((result) => Effect.fromResult(result)),
    )
