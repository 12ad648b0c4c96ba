/**
 * Where search keeps its derived data between runs: the documents it indexed, their vectors
 * (the costly part to recompute) and, per store, the last event sequence they reflect.
 *
 * `layerLmdb` uses its own LMDB environment under `<dataDir>/search/lmdb`, apart from the
 * stores' truth: deleting it is always safe (search rebuilds from the stores). Writes are
 * lmdb-js asynchronous puts (grouped per tick into one transaction) and never block a search;
 * nothing here is acknowledged to anyone, so losing the tail in a crash only means the next
 * start reconciles with the stores. MemoryPersistence.ts is the in-memory twin.
 *
 * A store's sequence is written only once the writes it covers are committed, and never again in
 * this process after a commit failed (a full disk): a later commit that succeeds must not record a
 * sequence past documents that were lost, so the next start finds an older sequence and reconciles.
 * A failed commit never ends the process. A turn's writes start only with room on the disk for them
 * (`turnRoomBytes`; LMDB must not meet a full disk, src/stores/checkpoint/LmdbRoom.ts): a turn
 * without it loses its writes as a failed commit does, and the next turn with room writes again.
 *
 * Vectors live in two slots (LMDB dbs `document-vectors` and `document-vectors-1`): the current
 * one, made with `model`, which searches use, and the other, which holds the next model's vectors
 * while a model change re-embeds everything (`nextModel`; ModelSwitch.ts). They are written there
 * as they are made, not held in memory; `switchToNextModel` makes the other slot current in one
 * transaction (with every earlier write committed before it), so a crash leaves one model's
 * complete set or the other's, never a mix. A slot no `nextModel` claims is emptied by `dropNextModel`.
 *
 * A load reads every document and vector through LMDB's memory map, and the kernel maps the pages
 * around each read too: at 100,000 entities (300,000 documents) the warm daemon kept 373 MiB of the
 * file resident that nothing would read again. `releaseMappedPages` (at the end of warm-up) unmaps
 * them; they stay in the page cache, the kernel's to drop, no longer in the daemon's resident set.
 * Writes map the pages their transactions walk as well (LMDB copies each page it changes out of the
 * map), so a long run of writes would map the whole file too: `writesSinceMappedPagesReleased`
 * lets the index core let go of them every so many writes (IndexCore.ts).
 *
 * It is also where the index reads documents whole (DocumentStore.ts: the index keeps only the
 * columns ranking reads). A write reaches LMDB only once its transaction commits, so the documents
 * put or removed since are answered from `unsettled` until then; a write whose commit failed stays
 * there, so the index and what it reads never disagree in this process.
 *
 * Keys: documents `store \0 group \0 id` → SearchDocument (so a scan yields whole groups);
 * vectors the same key → 14-byte content hash + the vector (VectorKeys.ts: why the same key, and
 * the move of vectors an older file kept by id); meta `seq \0 store`, `model` (its id),
 * `modelConfig` (where to load it), `nextModel` ({id, config}), `vectorsSlot` (0 or 1).
 */

import { readdirSync, renameSync, rmSync, statSync } from "node:fs"
import { join } from "node:path"
import { type Database, open, type RootDatabase } from "lmdb"
import {
  guardLmdbCommitRejections,
  lmdbUsedBytes,
  settleLmdbWrite,
  syncLmdb,
} from "../../stores/checkpoint/Checkpoint.ts"
import { keyedDatabase } from "../../stores/checkpoint/KeyCodec.ts"
import { allocateLockFile } from "../../stores/checkpoint/LmdbLockFile.ts"
import { lmdbMapOptions } from "../../stores/checkpoint/LmdbMap.ts"
import { noRoomFor } from "../../stores/checkpoint/LmdbRoom.ts"
import type { EncoderConfig } from "../embedding/EncoderLoader.ts"
import { type CompactVector, compactVector } from "../index/CompactVector.ts"
import { type DocumentStore, documentKey } from "../index/DocumentStore.ts"
import type { SearchDocument } from "../index/SearchDocument.ts"
import { noVector } from "../index/SearchIndex.ts"
import { keyVectorsByDocument, vectorSlotNames } from "./VectorKeys.ts"

export { documentKey } from "../index/DocumentStore.ts"

/** One persisted group. */
export interface PersistedGroup {
  readonly store: string
  readonly group: string
  readonly documents: ReadonlyArray<SearchDocument>
}

/**
 * A persisted vector and the content hash it was computed from: in its compact form, or as float32
 * when it was written before vectors were stored compact (or kept by the in-memory twin); "no
 * vector" is an empty Float32Array (`noVector`).
 */
export interface PersistedVector {
  readonly hash: string
  readonly vector: Float32Array | CompactVector
}

/** The model a set of vectors was made with: its id, and where it loads from (to load it again). */
export interface PersistedModel {
  readonly id: string
  /** Absent in an index written before it was recorded. */
  readonly config?: EncoderConfig | undefined
}

/**
 * Search's derived data on disk (or in memory); its documents are the index's document store.
 * A document's vectors are kept under its key (`documentKey`, as `SearchIndex.keyOf` gives it), and
 * removing the document removes them, in both slots.
 */
export interface SearchPersistence extends DocumentStore {
  readonly groups: () => Iterable<PersistedGroup>
  /** The vector of the document whose key is `key`. */
  readonly vector: (key: string) => PersistedVector | undefined
  /** The ids of one group's persisted documents. */
  readonly groupDocumentIds: (store: string, group: string) => ReadonlyArray<string>
  /** A float32 vector is stored compact; a compact one (as the index holds it) as it is. */
  readonly putVector: (key: string, hash: string, vector: Float32Array | CompactVector) => void
  readonly clearVectors: () => Promise<void>
  readonly seq: (store: string) => number | undefined
  readonly setSeq: (store: string, seq: number) => void
  /** The model of the current vectors. */
  readonly model: () => PersistedModel | undefined
  readonly setModel: (model: PersistedModel) => void
  /** The model whose vectors are being made in the other slot, if a model change is under way. */
  readonly nextModel: () => PersistedModel | undefined
  /** Empties the other slot, then records `model` as the one it is filled with. */
  readonly beginNextModel: (model: PersistedModel) => Promise<void>
  /** Forgets the next model and empties its slot. */
  readonly dropNextModel: () => Promise<void>
  readonly nextVector: (key: string) => PersistedVector | undefined
  readonly putNextVector: (key: string, hash: string, vector: Float32Array | CompactVector) => void
  /**
   * Makes the next model's slot the current one, atomically, and empties the former current one
   * (resolves when it is empty).
   */
  readonly switchToNextModel: () => Promise<void>
  /** Resolves once every write so far is committed (reads see a write only then). */
  readonly committed: () => Promise<void>
  readonly sizeBytes: () => number
  /**
   * Rewrites the files with the live entries only (LMDB's freed pages keep deleted text), so nothing
   * removed survives on disk. Nothing else may write meanwhile.
   */
  readonly compact: () => Promise<{ readonly bytesBefore: number; readonly bytesAfter: number }>
  /**
   * Lets go of the file's pages this process has mapped (every page a load read, and the pages
   * around them): the environment is closed once every write so far is committed, and opened
   * again. Nothing else may write meanwhile.
   */
  readonly releaseMappedPages: () => Promise<void>
  /**
   * Puts and removes since the file's mapped pages were last let go: each maps the pages its
   * transaction walks (LMDB copies a page from the map before changing it), so a run of writes
   * maps the file as a load does.
   */
  readonly writesSinceMappedPagesReleased: () => number
  readonly close: () => Promise<void>
}

const sep = "\u0000"
const hashBytes = 14

/**
 * The first byte of a vector written in its compact form. Vectors written before it are the
 * 14-byte hash, then float32 data; a hash is base-36 text, so its first byte is never this one.
 */
const compactVectorTag = 1

/**
 * `vector` as stored: the tag, the 14-byte hash, then (unless it is "no vector") the compact form
 * the index holds (CompactVector.ts): its peak as float32 and a signed byte a dimension — 119
 * bytes for 100 dimensions against 414 as float32. The index is given the same compact form
 * (or compacts a float32 vector the same way), so a load rebuilds exactly what was indexed.
 */
const encodeVector = (hash: string, vector: Float32Array | CompactVector): Buffer => {
  const compact = !(vector instanceof Float32Array) ? vector : vector.length === 0 ? undefined : compactVector(vector)
  const header = 1 + hashBytes
  const peakBytes = Float32Array.BYTES_PER_ELEMENT
  // Every byte is written below, so the buffer need not be zeroed: a slice of Node's pool instead of
  // an ArrayBuffer of its own for each vector, which the search thread and V8's helper then spent
  // 2.5–6 % of a sequential write's CPU making and sweeping (docs/benchmarks.md, "Vectors encoded
  // into Node's buffer pool"). lmdb-js keeps the slice (and so its pool) until the write is done.
  const out = Buffer.allocUnsafe(compact === undefined ? header : header + peakBytes + compact.codes.length)
  out[0] = compactVectorTag
  out.write(hash.padEnd(hashBytes, " ").slice(0, hashBytes), 1, "latin1")
  if (compact !== undefined) {
    out.writeFloatLE(compact.peak, header)
    out.set(new Uint8Array(compact.codes.buffer, compact.codes.byteOffset, compact.codes.length), header + peakBytes)
  }
  return out
}

const decodeVector = (bytes: Uint8Array): PersistedVector => {
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  if (buffer[0] === compactVectorTag) {
    const header = 1 + hashBytes
    const hash = buffer.toString("latin1", 1, header).trimEnd()
    if (buffer.length === header) return { hash, vector: noVector }
    const codes = new Int8Array(buffer.length - header - Float32Array.BYTES_PER_ELEMENT)
    new Uint8Array(codes.buffer).set(buffer.subarray(header + Float32Array.BYTES_PER_ELEMENT))
    return { hash, vector: { codes, peak: buffer.readFloatLE(header) } }
  }
  const floats = new Float32Array((buffer.length - hashBytes) / 4)
  Buffer.from(floats.buffer).set(buffer.subarray(hashBytes))
  return { hash: buffer.toString("latin1", 0, hashBytes).trimEnd(), vector: floats }
}

/** The group of a document key (groups may hold the separator; ids are the document's own). */
const groupOfKey = (key: string, store: string, id: string) => key.slice(store.length + 1, key.length - id.length - 1)

/** Groups consecutive documents of a key-ordered scan. */
export function* groupRuns(entries: Iterable<{ key: string; value: SearchDocument }>): Iterable<PersistedGroup> {
  let current: { store: string; group: string; documents: Array<SearchDocument> } | undefined
  for (const { key, value } of entries) {
    // Groups may hold the separator themselves (a conversation's is `project\0id`): the store is
    // what precedes the first one, the id (the document's own) what follows the last.
    const store = key.slice(0, key.indexOf(sep))
    const group = groupOfKey(key, store, value.id)
    if (current === undefined || current.store !== store || current.group !== group) {
      if (current !== undefined) yield current
      current = { store, group, documents: [] }
    }
    current.documents.push(value)
  }
  if (current !== undefined) yield current
}

/** Documents read per range query while loading. */
const loadBatchEntries = 1024

/**
 * Every persisted group in key order, read in batches of whole groups, each range read to its end
 * at once. The load goes on for seconds between other work; an iterator kept open that long holds
 * its snapshot, and LMDB cannot reuse the pages any commit frees meanwhile (a load during heavy
 * indexing grew the file to four times its live data). A group replaced or deleted between two
 * batches is one the load skips anyway (IndexCore's `replacedWhileLoading`).
 */
function* batchedGroups(documents: Database<SearchDocument, string>): Iterable<PersistedGroup> {
  let start: string | undefined
  let limit = loadBatchEntries
  for (;;) {
    const batch = [...documents.getRange(start === undefined ? { limit } : { start, limit })]
    const groups = [...groupRuns(batch)]
    if (batch.length < limit) {
      yield* groups
      return
    }
    if (groups.length === 1) {
      limit *= 2 // one group larger than the batch: read it whole
      continue
    }
    // The last group may go on past the batch: it starts the next one.
    const last = groups.pop()!
    yield* groups
    start = batch[batch.length - last.documents.length]!.key
    limit = loadBatchEntries
  }
}

type Slot = 0 | 1

interface Handles {
  readonly env: RootDatabase
  readonly documents: Database<SearchDocument, string>
  readonly vectors: readonly [Database<Uint8Array, string>, Database<Uint8Array, string>]
  readonly meta: Database<MetaValue, string>
}

type MetaValue = string | number | EncoderConfig | PersistedModel

const openHandles = (path: string): Handles => {
  // Its lock file allocated first: made sparse by LMDB, a full disk kills the process (SIGBUS).
  allocateLockFile(path)
  // Four dbs, and the two of an older file's vectors (VectorKeys.ts).
  const env: RootDatabase = open({ path, maxDbs: 6, compression: false, ...lmdbMapOptions() })
  // Keys are bytes encoded by KeyCodec (lmdb-js string keys mangle long keys with U+0000), written
  // straight into lmdb-js's key buffer as the stores' checkpoints' are (no Buffer a key); values
  // are JSON so every string round-trips.
  return {
    env,
    documents: env.openDB<SearchDocument, string>(keyedDatabase("documents", "json")),
    vectors: [
      env.openDB<Uint8Array, string>(keyedDatabase(vectorSlotNames[0], "binary")),
      env.openDB<Uint8Array, string>(keyedDatabase(vectorSlotNames[1], "binary")),
    ],
    meta: env.openDB<MetaValue, string>(keyedDatabase("meta", "json")),
  }
}

/**
 * The least room on disk a turn's writes (one transaction) start with; twice the most the file
 * has grown in one commit of this process, if that is more. The index's writes are the documents
 * and vectors of what it indexed in the turn: a few hundred KiB at a time in a bulk write of
 * 30,000-character observations (test/stores/FullDisk.test.ts).
 */
export const turnRoomBytes = 16 * 1024 * 1024

/** Entries copied per transaction by a compaction. */
const compactChunkEntries = 1000

/**
 * Copies every live entry of `from` into a new environment at `path` (fresh pages: nothing deleted
 * comes along), flushed to disk when it resolves.
 */
const copyInto = async (from: Handles, path: string): Promise<void> => {
  // The copy holds at most what the original's pages hold, in fresh pages.
  const noRoom = noRoomFor(join(path, ".."), lmdbUsedBytes([from.env, from.documents, ...from.vectors, from.meta]))
  if (noRoom !== undefined) throw new Error(`no room on disk for a compacted copy of the search index (${noRoom})`)
  const to = openHandles(path)
  try {
    const pairs = [
      [from.documents, to.documents],
      [from.vectors[0], to.vectors[0]],
      [from.vectors[1], to.vectors[1]],
      [from.meta, to.meta],
    ] as ReadonlyArray<readonly [Database<unknown, string>, Database<unknown, string>]>
    for (const [source, target] of pairs) {
      let chunk: Array<{ key: string; value: unknown }> = []
      const flush = () =>
        to.env.transactionSync(() => {
          for (const { key, value } of chunk) target.putSync(key, value)
          chunk = []
        })
      for (const entry of source.getRange({})) {
        chunk.push(entry as { key: string; value: unknown })
        if (chunk.length >= compactChunkEntries) flush()
      }
      flush()
    }
    await to.env.flushed
  } finally {
    await to.env.close()
  }
}

const dirBytes = (dir: string): number => {
  try {
    return readdirSync(dir).reduce((sum, name) => sum + statSync(join(dir, name)).size, 0)
  } catch {
    return 0
  }
}

/**
 * Opens (creating) the LMDB environment at `path`. A compaction's leftovers (`path-compact`,
 * `path-old`) are removed: this is a cache of the stores, so a compaction cut short just loses it.
 */
export const openLmdbPersistence = (path: string): SearchPersistence => {
  guardLmdbCommitRejections()
  const copyPath = `${path}-compact`
  const oldPath = `${path}-old`
  for (const leftover of [copyPath, oldPath]) rmSync(leftover, { recursive: true, force: true })
  let handles = openHandles(path)
  const notMoved = keyVectorsByDocument(path, handles, turnRoomBytes)
  if (notMoved !== undefined)
    process.stderr.write(
      `mnemos: the search index's vectors are moved to their new keys once there is room on the disk (${notMoved}); until then what has no vector is embedded again\n`,
    )
  // Every write of one JavaScript turn shares one promise (one LMDB transaction): watch each once.
  let lastWrite: Promise<unknown> = Promise.resolve()
  /** The first failed commit: lmdb-js then never finishes closing the environment. */
  let failure: unknown
  /** Set once a write was lost (a failed commit, or a turn without room): no sequence is recorded after. */
  let lost = false
  let writesSinceRelease = 0
  const lose = (failed: unknown) => {
    if (lost) return
    lost = true
    process.stderr.write(
      `mnemos: the search index could not save its changes (${failed instanceof Error ? failed.message : String(failed)}); it is rebuilt from the stores at the next start\n`,
    )
  }
  const dataFile = join(path, "data.mdb")
  const fileBytes = () => {
    try {
      return statSync(dataFile).size
    } catch {
      return 0
    }
  }
  let lastFileBytes = fileBytes()
  let largestGrowth = 0
  let turnHasRoom: boolean | undefined
  /** Whether this turn's writes (one transaction) may start: the first write of a turn looks. */
  const hasRoom = (): boolean => {
    if (turnHasRoom === undefined) {
      const noRoom = noRoomFor(path, Math.max(turnRoomBytes, 2 * largestGrowth))
      turnHasRoom = noRoom === undefined
      if (noRoom !== undefined) lose(new Error(noRoom))
      setImmediate(() => {
        turnHasRoom = undefined
      })
    }
    return turnHasRoom
  }
  const watch = (write: Promise<unknown>): void => {
    writesSinceRelease++
    // A read keeps its snapshot until the thread's next macrotask, which a busy search thread
    // (a long embedding run) can put off for seconds; pages freed by the commits made meanwhile
    // cannot be reused while it is held, so the file grew to 4x its live data. Letting go of it
    // at each write bounds that to the transaction in flight.
    handles.env.resetReadTxn()
    if (write === lastWrite) return
    lastWrite = write
    void settleLmdbWrite(write).then(noteSettled)
  }
  /** After each transaction: the file's growth, and the first failure. */
  const noteSettled = (failed: unknown) => {
    const bytes = fileBytes()
    largestGrowth = Math.max(largestGrowth, bytes - lastFileBytes)
    lastFileBytes = bytes
    if (failed === undefined) return
    failure ??= failed
    lose(failed)
  }
  /** Issues `write` when this turn has room for its writes. */
  const issue = (write: () => Promise<unknown>): void => {
    if (hasRoom()) watch(write())
  }
  /**
   * A vector's put or removal in `db` (either slot), when this turn has room: as `issue`, with no
   * closure made per vector (docs/benchmarks.md, "Closures made for each call").
   */
  const putVectorIn = (
    db: Database<Uint8Array, string>,
    key: string,
    hash: string,
    vector: Float32Array | CompactVector,
  ) => {
    if (hasRoom()) watch(db.put(key, encodeVector(hash, vector)))
  }
  const removeVectorIn = (db: Database<Uint8Array, string>, key: string) => {
    if (hasRoom()) watch(db.remove(key))
  }
  /** Waits for the writes so far to be committed and synced; resolves with the first failure, if any. */
  const settled = async (): Promise<unknown> => {
    failure ??= await settleLmdbWrite(lastWrite)
    // After a failed commit (a full disk) lmdb-js never settles `env.flushed`: LMDB syncs instead.
    // Otherwise `flushed`, which also waits for lmdb-js's own write thread to be done with the
    // last transaction (syncing alone and then closing for a compaction raced with it: "Attempt
    // to reset an invalid read txn" in the search thread, one rebuild_index in three).
    if (failure === undefined) await settleLmdbWrite(handles.env.flushed)
    else await syncLmdb(handles.env)
    return failure
  }
  /** Documents written by transactions not committed yet, by key (`document` undefined: removed). */
  const unsettled = new Map<string, { readonly document: SearchDocument | undefined }>()
  let documentsWrite: Promise<unknown> | undefined
  let documentsWritten: Array<readonly [string, { readonly document: SearchDocument | undefined }]> = []
  const writeDocument = (key: string, document: SearchDocument | undefined) => {
    if (!hasRoom()) {
      unsettled.set(key, { document }) // kept, as a write whose commit failed is
      return
    }
    const write = document === undefined ? handles.documents.remove(key) : handles.documents.put(key, document)
    watch(write)
    const entry = { document }
    unsettled.set(key, entry)
    if (write !== documentsWrite) {
      documentsWrite = write
      const written: typeof documentsWritten = []
      documentsWritten = written
      // Bound: no closure made per transaction (docs/benchmarks.md, "Closures made for each call").
      void settleLmdbWrite(write).then(forgetCommitted.bind(undefined, written))
    }
    documentsWritten.push([key, entry])
  }
  /** Once `written`'s transaction is committed, reads find its documents on disk. */
  const forgetCommitted = (written: typeof documentsWritten, failed: unknown) => {
    if (failed !== undefined) return // kept: what the index holds is not on disk
    handles.env.resetReadTxn() // a read taken before the commit would not see it
    for (const [key, entry] of written) if (unsettled.get(key) === entry) unsettled.delete(key)
  }
  // Kept here as well as written: a read sees a write only once it is committed.
  let slot: Slot = handles.meta.get("vectorsSlot") === 1 ? 1 : 0
  const storedId = handles.meta.get("model") as string | undefined
  const storedConfig = handles.meta.get("modelConfig") as EncoderConfig | undefined
  let model: PersistedModel | undefined =
    storedId === undefined
      ? undefined
      : { id: storedId, ...(storedConfig !== undefined ? { config: storedConfig } : {}) }
  let nextModel = handles.meta.get("nextModel") as PersistedModel | undefined
  const current = () => handles.vectors[slot]
  const other = () => handles.vectors[slot === 0 ? 1 : 0]
  const read = (db: Database<Uint8Array, string>, key: string) => {
    const bytes = db.getBinary(key)
    return bytes === undefined ? undefined : decodeVector(bytes)
  }
  const writeModel = (written: PersistedModel) => {
    model = written
    issue(() => handles.meta.put("model", written.id))
    issue(() =>
      written.config === undefined
        ? handles.meta.remove("modelConfig")
        : handles.meta.put("modelConfig", written.config),
    )
  }
  /** Empties a db, in order with the other writes (and waited for by `close` and `compact` as they are). */
  const clear = (db: Database<Uint8Array, string>): Promise<void> => {
    if (!hasRoom()) return Promise.resolve()
    const cleared = db.clearAsync()
    watch(cleared)
    return cleared.then(() => undefined)
  }
  const forgetNextModel = () => {
    nextModel = undefined
    issue(() => handles.meta.remove("nextModel"))
  }
  return {
    groups: () => batchedGroups(handles.documents),
    vector: (key) => read(current(), key),
    groupDocumentIds: (store, group) => {
      // The range of `store\0group\0` also holds longer groups that begin with it (`group\0x`).
      const prefix = `${store}${sep}${group}${sep}`
      const ids: Array<string> = []
      for (const { key, value } of handles.documents.getRange({ start: prefix, end: `${store}${sep}${group}\u0001` }))
        if (groupOfKey(key, store, value.id) === group) ids.push(value.id)
      return ids
    },
    document: (store, group, id) => {
      const key = documentKey(store, group, id)
      const written = unsettled.get(key)
      return written !== undefined ? written.document : handles.documents.get(key)
    },
    holds: (group, document) => {
      const key = documentKey(document.store, group, document.id)
      const written = unsettled.get(key)
      const json = JSON.stringify(document)
      // Compared as the JSON lmdb-js stores (its `json` encoding is JSON.stringify): nothing parsed.
      if (written !== undefined) return written.document !== undefined && JSON.stringify(written.document) === json
      const bytes = handles.documents.getBinary(key)
      return bytes !== undefined && Buffer.from(json, "utf8").equals(bytes)
    },
    putDocument: (group, document) => writeDocument(documentKey(document.store, group, document.id), document),
    removeDocument: (store, group, id) => {
      const key = documentKey(store, group, id)
      writeDocument(key, undefined)
      removeVectorIn(current(), key)
      if (nextModel !== undefined) removeVectorIn(other(), key)
    },
    putVector: (key, hash, vector) => putVectorIn(current(), key, hash, vector),
    clearVectors: () => clear(current()),
    seq: (store) => handles.meta.get(`seq${sep}${store}`) as number | undefined,
    setSeq: (store, seq) =>
      void settleLmdbWrite(lastWrite).then((failed) => {
        if (failed === undefined && !lost) issue(() => handles.meta.put(`seq${sep}${store}`, seq))
      }),
    model: () => model,
    setModel: writeModel,
    nextModel: () => nextModel,
    beginNextModel: async (next) => {
      forgetNextModel()
      await clear(other())
      nextModel = next
      issue(() => handles.meta.put("nextModel", next))
    },
    dropNextModel: async () => {
      forgetNextModel()
      await clear(other())
    },
    nextVector: (key) => read(other(), key),
    putNextVector: (key, hash, vector) => putVectorIn(other(), key, hash, vector),
    switchToNextModel: async () => {
      if (nextModel === undefined) throw new Error("no next model to switch to")
      const former = current()
      // One JavaScript turn: one transaction, committed after every earlier write.
      slot = slot === 0 ? 1 : 0
      issue(() => handles.meta.put("vectorsSlot", slot))
      writeModel(nextModel)
      forgetNextModel()
      await clear(former)
    },
    committed: () => settleLmdbWrite(lastWrite).then(() => undefined),
    sizeBytes: () => lmdbUsedBytes([handles.env, handles.documents, ...handles.vectors, handles.meta]),
    compact: async () => {
      // lmdb-js never finishes closing an environment whose last commit failed: the compaction
      // would wait for it for good, and the search thread with it (every later search unanswered).
      const failed = await settled()
      if (failed !== undefined)
        throw new Error(
          `the search index cannot be compacted in this process since a write of it failed (${failed instanceof Error ? failed.message : String(failed)}); restart the daemon first`,
        )
      const bytesBefore = dirBytes(path)
      rmSync(copyPath, { recursive: true, force: true })
      await copyInto(handles, copyPath)
      await handles.env.close()
      // The copy replaces the original; a crash in between leaves leftovers the next open removes.
      renameSync(path, oldPath)
      renameSync(copyPath, path)
      rmSync(oldPath, { recursive: true, force: true })
      handles = openHandles(path)
      lastFileBytes = fileBytes()
      return { bytesBefore, bytesAfter: dirBytes(path) }
    },
    releaseMappedPages: async () => {
      // Writes made while waiting (a store's sequence is written once the writes it covers are
      // committed) are waited for too. After a failed commit the environment cannot be closed
      // (see `compact`): its pages stay mapped.
      writesSinceRelease = 0
      let seen: Promise<unknown>
      do {
        seen = lastWrite
        if ((await settled()) !== undefined) return
      } while (seen !== lastWrite)
      await handles.env.close()
      handles = openHandles(path)
    },
    writesSinceMappedPagesReleased: () => writesSinceRelease,
    close: async () => {
      // After a failed commit lmdb-js never finishes closing (see `compact`); everything committed
      // is synced first, and the process is ending anyway.
      if ((await settled()) === undefined) await handles.env.close()
    },
  }
}

/**
 * How many documents the environment at `path` holds, read from LMDB's counts without loading
 * them (the indexer decides by it where a persisted index is served); 0 when it cannot be read.
 */
export const persistedDocumentCount = (path: string): number => {
  let env: RootDatabase | undefined
  try {
    env = open({ path, maxDbs: 5, compression: false, readOnly: true })
    const stats = env.openDB({ name: "documents", keyEncoding: "binary" }).getStats() as { entryCount?: number }
    return stats.entryCount ?? 0
  } catch {
    return 0
  } finally {
    void env?.close()
  }
}
