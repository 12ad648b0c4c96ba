/**
 * The full archive of a data directory: every key and value of every store, in one JSONL file,
 * that restores into an empty data directory so that the stores read back identically.
 *
 *   line 1   {"format":"mnemos-archive","version":1,"createdAt":…,"stores":["graph",…]}
 *   then     {"s":"<store>","k":"<key>","v":<value>}          one per key, stores in order
 *   last     {"end":true,"entries":{"<store>":n,…},"sha256":"<hex of every line before>"}
 *
 * Export reads each store through its actor (so a log not yet checkpointed is included) in one
 * read transaction per store, streaming to a temporary file that is fsync'd and renamed into
 * place. Import is all or nothing: pass 1 checks the whole file (header, every line's shape, known
 * stores, no repeated key, the counts and the checksum of the trailer) and every entry against its
 * store's state schema (StateSchema.ts: a key the store has, a value of the type its reads expect),
 * and that every store of the target is empty; pass 2 writes each store's checkpoint into a
 * staging directory beside `stores/` (applied sequence 0, a fresh generation, no log), checks
 * that its entries hold together (`StateSchema.integrity`: every index entry names a record that
 * exists, every record has its index entries) and only then swaps it in with a rename. Every key and string value passes the privacy filter on the way
 * in (and is checked as filtered); what is written is the value as the archive has it, so an
 * archive restores byte for byte. The checksum detects damage, not tampering: anyone can
 * recompute it, which is why the values are checked. The caller holds the data directory's lock
 * for the whole run.
 */
import { createHash, randomBytes } from "node:crypto"
import * as fs from "node:fs"
import { basename, dirname, join } from "node:path"
import { Effect, Result, Schema } from "effect"
import { Router } from "../actors/Router.ts"
import { type JsonlLine, readJsonlLines } from "../conversations/JsonlLines.ts"
import { filterPrivate, filterText } from "../privacy/PrivacyFilter.ts"
import { openCheckpoint } from "../stores/checkpoint/Checkpoint.ts"
import type { StateSchema } from "../stores/StateSchema.ts"
import type { AnyStoreDefinition } from "../stores/StoreDefinition.ts"
import { checkStoreLog, readCheckpointSeq, storeDirs } from "../stores/wal/WalRepair.ts"

export const archiveFormatName = "mnemos-archive"
export const archiveFormatVersion = 1
/** The longest line an archive may have (a value is at most a WAL record, 16 MiB, as JSON). */
export const archiveLineBytesMax = 48 * 1024 * 1024
/** Entries per LMDB transaction when restoring. */
const restoreChunkEntries = 5_000
/** Every key of a store sorts inside this range. */
const allKeys = { start: "", end: "\u{10FFFF}" }

/** An archive could not be written or read; the message says why (and where). */
export class ArchiveError extends Schema.TaggedError<ArchiveError>()("ArchiveError", { message: Schema.String }) {}

/** Progress: `phase`, done and total (entries, or bytes while validating). */
export type ArchiveProgress = (phase: "exporting" | "validating" | "importing", done: number, total: number) => void

/** What an export or import moved. */
export interface ArchiveReport {
  readonly entries: Readonly<Record<string, number>>
}

const Header = Schema.Struct({
  format: Schema.Literal(archiveFormatName),
  version: Schema.Literal(archiveFormatVersion),
  createdAt: Schema.String,
  stores: Schema.Array(Schema.String),
})
const Entry = Schema.Struct({ s: Schema.String, k: Schema.String, v: Schema.Unknown })
const Trailer = Schema.Struct({
  end: Schema.Literal(true),
  entries: Schema.Record(Schema.String, Schema.Number),
  sha256: Schema.String,
})
const decodeHeader = Schema.decodeUnknownResult(Schema.fromJsonString(Header))
const decodeEntry = Schema.decodeUnknownResult(Schema.fromJsonString(Entry))
const decodeTrailer = Schema.decodeUnknownResult(Schema.fromJsonString(Trailer))

const message = (error: unknown) => (error instanceof Error ? error.message : String(error))

/** True when the first line of `path` is an archive header (used to recognise `mnemos import FILE`). */
export const isArchiveFile = (path: string): boolean => {
  try {
    for (const line of readJsonlLines(path, 4096))
      return line._tag === "Line" && line.text.includes(`"${archiveFormatName}"`)
    return false
  } catch {
    return false
  }
}

/** A file written in place of `path` on `commit`, or never there at all. */
const atomicWriter = (path: string) => {
  const temporary = join(dirname(path), `.${basename(path)}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`)
  const fd = fs.openSync(temporary, "wx", 0o600)
  return {
    write: (text: string) => void fs.writeSync(fd, text),
    commit: () => {
      fs.fsyncSync(fd)
      fs.closeSync(fd)
      fs.renameSync(temporary, path)
      const directory = fs.openSync(dirname(path), "r")
      try {
        fs.fsyncSync(directory)
      } finally {
        fs.closeSync(directory)
      }
    },
    abort: () => {
      try {
        fs.closeSync(fd)
      } catch {
        // already closed
      }
      fs.rmSync(temporary, { force: true })
    },
  }
}

/** Writes every entry of every store in `stores` to `path`, atomically. */
export const exportArchive = (
  path: string,
  stores: ReadonlyArray<AnyStoreDefinition>,
  onProgress: ArchiveProgress = () => undefined,
): Effect.Effect<ArchiveReport, ArchiveError, Router> =>
  Effect.gen(function* () {
    const router = yield* Router
    const writer = yield* Effect.try({
      try: () => atomicWriter(path),
      catch: (error) => new ArchiveError({ message: `cannot write ${path}: ${message(error)}` }),
    })
    const hash = createHash("sha256")
    const emit = (line: string) => {
      hash.update(`${line}\n`)
      writer.write(`${line}\n`)
    }
    const entries: Record<string, number> = {}
    return yield* Effect.gen(function* () {
      emit(
        JSON.stringify({
          format: archiveFormatName,
          version: archiveFormatVersion,
          createdAt: new Date().toISOString(),
          stores: stores.map((store) => store.name),
        }),
      )
      for (const definition of stores) {
        const count = yield* router
          .store(definition)
          .read((view) => {
            const total = view.count(allKeys)
            let done = 0
            for (const { key, value } of view.getRange(allKeys)) {
              emit(JSON.stringify({ s: definition.name, k: key, v: value }))
              if (++done % 1000 === 0) onProgress("exporting", done, total)
            }
            onProgress("exporting", done, total)
            return done
          })
          .pipe(
            Effect.mapError(
              (error) => new ArchiveError({ message: `cannot read store "${definition.name}": ${error.message}` }),
            ),
          )
        entries[definition.name] = count
      }
      const digest = hash.copy().digest("hex")
      writer.write(`${JSON.stringify({ end: true, entries, sha256: digest })}\n`)
      yield* Effect.try({
        try: () => writer.commit(),
        catch: (error) => new ArchiveError({ message: `cannot write ${path}: ${message(error)}` }),
      })
      return { entries } satisfies ArchiveReport
    }).pipe(Effect.onError(() => Effect.sync(writer.abort)))
  })

const lineFailure = (path: string, line: number, why: string) =>
  new ArchiveError({ message: `${path}:${line}: ${why} (nothing was imported)` })

/** Pass 1: checks the whole file; returns the entry count per store. */
const validateArchive = (
  path: string,
  states: ReadonlyMap<string, StateSchema>,
  onProgress: ArchiveProgress,
): Result.Result<Record<string, number>, ArchiveError> => {
  const hash = createHash("sha256")
  const counts: Record<string, number> = {}
  const seen = new Set<string>()
  let header = false
  let trailer: typeof Trailer.Type | undefined
  let lastStore: string | undefined
  const finished = new Set<string>()
  let lines: Generator<JsonlLine>
  try {
    lines = readJsonlLines(path, archiveLineBytesMax, (progress) =>
      onProgress("validating", progress.bytesRead, progress.bytesTotal),
    )
  } catch (error) {
    return Result.fail(new ArchiveError({ message: `cannot read ${path}: ${message(error)}` }))
  }
  try {
    for (const line of lines) {
      if (line._tag === "TooLong")
        return Result.fail(lineFailure(path, line.line, `longer than ${archiveLineBytesMax} bytes`))
      if (line._tag === "NotUtf8") return Result.fail(lineFailure(path, line.line, "not UTF-8"))
      if (trailer !== undefined) return Result.fail(lineFailure(path, line.line, "text after the closing line"))
      if (!header) {
        const decoded = decodeHeader(line.text)
        if (Result.isFailure(decoded))
          return Result.fail(lineFailure(path, line.line, `not a mnemos archive header: ${decoded.failure.message}`))
        const unknown = decoded.success.stores.filter((store) => !states.has(store))
        if (unknown.length > 0)
          return Result.fail(lineFailure(path, line.line, `stores this mnemos does not have: ${unknown.join(", ")}`))
        header = true
        hash.update(`${line.text}\n`)
        continue
      }
      if (line.text.startsWith('{"end"')) {
        const decoded = decodeTrailer(line.text)
        if (Result.isFailure(decoded))
          return Result.fail(lineFailure(path, line.line, `bad closing line: ${decoded.failure.message}`))
        trailer = decoded.success
        continue
      }
      const decoded = decodeEntry(line.text)
      if (Result.isFailure(decoded)) return Result.fail(lineFailure(path, line.line, decoded.failure.message))
      const { s: store, v: value } = decoded.success
      const state = states.get(store)
      if (state === undefined) return Result.fail(lineFailure(path, line.line, `unknown store "${store}"`))
      // Checked as it will be written: through the privacy filter.
      const key = filterText(decoded.success.k)
      const problem = state.problem(key, filterPrivate(value))
      if (problem !== undefined)
        return Result.fail(lineFailure(path, line.line, `store "${store}", key ${JSON.stringify(key)}: ${problem}`))
      if (store !== lastStore) {
        if (finished.has(store)) return Result.fail(lineFailure(path, line.line, `store "${store}" appears twice`))
        if (lastStore !== undefined) finished.add(lastStore)
        lastStore = store
      }
      const id = `${store}\u0000${key}`
      if (seen.has(id))
        return Result.fail(lineFailure(path, line.line, `key ${JSON.stringify(key)} of "${store}" repeated`))
      seen.add(id)
      counts[store] = (counts[store] ?? 0) + 1
      hash.update(`${line.text}\n`)
    }
  } catch (error) {
    return Result.fail(new ArchiveError({ message: `cannot read ${path}: ${message(error)}` }))
  }
  if (!header) return Result.fail(new ArchiveError({ message: `${path} is empty (nothing was imported)` }))
  if (trailer === undefined)
    return Result.fail(
      new ArchiveError({ message: `${path} has no closing line: it was cut short (nothing was imported)` }),
    )
  if (trailer.sha256 !== hash.digest("hex"))
    return Result.fail(
      new ArchiveError({
        message: `${path}: the checksum does not match: the file was changed or damaged (nothing was imported)`,
      }),
    )
  for (const [store, count] of Object.entries(trailer.entries))
    if ((counts[store] ?? 0) !== count)
      return Result.fail(
        new ArchiveError({
          message: `${path}: store "${store}" should have ${count} entries, the file has ${counts[store] ?? 0} (nothing was imported)`,
        }),
      )
  return Result.succeed(counts)
}

/** Why the target's store is not empty, or undefined when it is. */
const notEmpty = (store: string, storeDir: string) =>
  Effect.gen(function* () {
    if (!fs.existsSync(storeDir)) return undefined
    const log = yield* checkStoreLog(store, storeDir)
    if (log.state === "corrupt" || log.state === "unreadable") return `its log cannot be read (${log.message})`
    const { appliedSeq } = yield* Effect.mapError(
      readCheckpointSeq(storeDir),
      (why) => new ArchiveError({ message: why }),
    )
    if ((log.lastSeq ?? 0) > 0 || appliedSeq > 0)
      return `it holds records (sequence ${Math.max(log.lastSeq ?? 0, appliedSeq)})`
    return undefined
  })

/**
 * Writes one store's entries from the archive into a fresh checkpoint at `lmdbDir`, then checks
 * that they hold together (`StateSchema.integrity`) before anything is put in place.
 */
const restoreStore = (
  path: string,
  store: string,
  state: StateSchema | undefined,
  lmdbDir: string,
  total: number,
  onProgress: ArchiveProgress,
) =>
  Effect.acquireUseRelease(
    Effect.mapError(
      openCheckpoint(lmdbDir),
      (error) => new ArchiveError({ message: `cannot create ${lmdbDir}: ${error.message}` }),
    ),
    (checkpoint) =>
      Effect.try({
        try: () => {
          const salt = randomBytes(4).readUInt32LE(0) || 1
          let chunk: Array<readonly [string, unknown]> = []
          let done = 0
          const flush = () => {
            const entries = chunk
            checkpoint.commitWith(
              (writer) => {
                for (const [key, value] of entries) writer.put(key, value)
              },
              0,
              salt,
            )
            chunk = []
          }
          for (const line of readJsonlLines(path, archiveLineBytesMax)) {
            if (line._tag !== "Line") continue
            const entry = JSON.parse(line.text) as Partial<typeof Entry.Type>
            if (entry.s !== store || typeof entry.k !== "string") continue // the header, the trailer, other stores
            chunk.push([filterText(entry.k), filterPrivate(entry.v)])
            if (chunk.length >= restoreChunkEntries) flush()
            if (++done % 1000 === 0) onProgress("importing", done, total)
          }
          flush()
          onProgress("importing", done, total)
          return done
        },
        catch: (error) =>
          new ArchiveError({ message: `restoring store "${store}" failed: ${message(error)} (nothing was imported)` }),
      }).pipe(
        Effect.tap(() => Effect.promise(() => checkpoint.flushed())),
        Effect.tap(() => {
          const broken = state?.integrity?.(checkpoint.view)
          return broken === undefined
            ? Effect.void
            : Effect.fail(new ArchiveError({ message: `${path}: store "${store}": ${broken} (nothing was imported)` }))
        }),
      ),
    (checkpoint) => Effect.promise(() => checkpoint.close().catch(() => undefined)),
  )

/** Restores `path` into the (empty) data directory `dataDir`, each store's entries checked with `states`; the caller holds its lock. */
export const importArchive = (
  path: string,
  dataDir: string,
  stores: ReadonlyArray<AnyStoreDefinition>,
  states: ReadonlyMap<string, StateSchema>,
  onProgress: ArchiveProgress = () => undefined,
): Effect.Effect<ArchiveReport, ArchiveError> =>
  Effect.gen(function* () {
    const missing = stores.filter((store) => !states.has(store.name)).map((store) => store.name)
    if (missing.length > 0)
      return yield* new ArchiveError({
        message: `no state schema for store(s) ${missing.join(", ")}: their entries cannot be checked (nothing was imported)`,
      })
    const counts = yield* Effect.fromResult(validateArchive(path, states, onProgress))
    const storesDir = join(dataDir, "stores")
    // Every store directory there, known or not: the whole stores/ directory is replaced.
    const present = new Set([...stores.map((store) => store.name), ...storeDirs(dataDir).map((entry) => entry.store)])
    for (const store of present) {
      const why = yield* notEmpty(store, join(storesDir, store))
      if (why !== undefined)
        return yield* new ArchiveError({
          message: `the archive restores into an empty data directory only; store "${store}" of ${dataDir} is not empty: ${why} (nothing was imported)`,
        })
    }
    const staging = join(dataDir, `stores.importing-${process.pid}-${randomBytes(4).toString("hex")}`)
    yield* Effect.gen(function* () {
      for (const definition of stores) {
        const dir = join(staging, definition.name)
        fs.mkdirSync(join(dir, "wal"), { recursive: true, mode: 0o700 })
        yield* restoreStore(
          path,
          definition.name,
          states.get(definition.name),
          join(dir, "lmdb"),
          counts[definition.name] ?? 0,
          onProgress,
        )
      }
      yield* Effect.try({
        try: () => {
          // The target's stores are empty (checked): set them aside, put the restored ones in.
          const aside = `${storesDir}.replaced-${process.pid}-${randomBytes(4).toString("hex")}`
          if (fs.existsSync(storesDir)) fs.renameSync(storesDir, aside)
          fs.renameSync(staging, storesDir)
          const directory = fs.openSync(dataDir, "r")
          try {
            fs.fsyncSync(directory)
          } finally {
            fs.closeSync(directory)
          }
          fs.rmSync(aside, { recursive: true, force: true })
        },
        catch: (error) => new ArchiveError({ message: `cannot put the restored stores in place: ${message(error)}` }),
      })
    }).pipe(Effect.onError(() => Effect.sync(() => fs.rmSync(staging, { recursive: true, force: true }))))
    return { entries: counts } satisfies ArchiveReport
  })
