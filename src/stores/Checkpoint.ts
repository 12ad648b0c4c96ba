/**
 * The LMDB checkpoint of one store: its own LMDB environment holding the applied state.
 *
 * Invariants:
 * - Every commit writes the data and `appliedSeq` (the last WAL sequence it reflects) in one
 *   LMDB transaction, so the checkpoint is never ahead of or behind its own data. Commits run on
 *   lmdb-js's write thread (asynchronous puts, which lmdb-js groups per JavaScript turn into one
 *   transaction), so the actor's thread never blocks on them.
 * - LMDB commits are visible at once; they are durable only when `flushed()` resolves. The store
 *   deletes WAL segments only below a sequence that was applied *and* flushed, so a crash before
 *   the flush replays those records from the WAL.
 * - Reads are plain LMDB read transactions (MVCC): they never wait for the writer.
 *
 * Values are treated as immutable: domain code builds new objects instead of editing what it read.
 */

import { Effect, Schema } from "effect"
import { type Database, open, type RootDatabase } from "lmdb"
import { compareKeys, keyEncoder } from "./KeyCodec.ts"

/** A failure of the LMDB environment itself (open, commit); the owning actor restarts on it. */
export class CheckpointError extends Schema.TaggedError<CheckpointError>()("CheckpointError", {
  path: Schema.String,
  message: Schema.String,
}) {}

/** One key/value pair of a store. Keys are strings; their UTF-8 order is the range order. */
export interface Entry {
  readonly key: string
  readonly value: unknown
}

/** A key range: `start` inclusive, `end` exclusive. */
export interface KeyRange {
  readonly start: string
  readonly end: string
  readonly limit?: number
  readonly reverse?: boolean
}

/** Read access to a store's state, used by queries and by `decide`. */
export interface StoreView {
  readonly get: (key: string) => unknown
  readonly getRange: (range: KeyRange) => Iterable<Entry>
  readonly count: (range: KeyRange) => number
}

/** Write access, used by `apply`. */
export interface StoreWriter extends StoreView {
  readonly put: (key: string, value: unknown) => void
  readonly remove: (key: string) => void
}

/** One pending change; `undefined` value removes the key. */
export type Change = readonly [key: string, value: unknown]

const metaAppliedSeq = "appliedSeq"
const metaSalt = "salt"

/** An open checkpoint. */
export interface Checkpoint {
  readonly path: string
  readonly appliedSeq: () => number
  /** The store generation recorded with the data, if any. */
  readonly salt: () => number | undefined
  readonly view: StoreView
  /**
   * Queues `changes` and `appliedSeq` (and `salt`) as one transaction on lmdb-js's write thread;
   * resolves when it is committed and visible. Everything queued in one JavaScript turn goes into
   * the same LMDB transaction, in call order.
   */
  readonly commit: (changes: ReadonlyArray<Change>, appliedSeq: number, salt: number) => Promise<void>
  /** Applies with a writer callback (used by replay), recording `appliedSeq` in the same transaction. */
  readonly commitWith: (write: (writer: StoreWriter) => void, appliedSeq: number, salt: number) => void
  /** Resolves when everything committed so far is on disk. */
  readonly flushed: () => Promise<void>
  readonly sizeBytes: () => number
  readonly close: () => Promise<void>
}

const dataView = (data: Database<unknown, string>): StoreView => ({
  get: (key) => data.get(key),
  getRange: (range) => {
    if (!range.reverse) return data.getRange(range) as Iterable<Entry>
    // lmdb-js walks a reverse range from `start` (inclusive, the high end) down to `end` (exclusive):
    // ask one past the limit to skip `range.end` itself, and look `range.start` up on its own.
    const limit = range.limit === undefined ? undefined : range.limit + 1
    const entries = [
      ...data.getRange({
        start: range.end,
        end: range.start,
        reverse: true,
        ...(limit !== undefined ? { limit } : {}),
      }),
    ].filter((entry) => entry.key !== range.end) as Array<Entry>
    const first = data.get(range.start)
    if (first !== undefined && compareKeys(range.start, range.end) < 0) entries.push({ key: range.start, value: first })
    return range.limit === undefined ? entries : entries.slice(0, range.limit)
  },
  count: (range) => {
    if (range.limit === undefined) return data.getKeysCount({ start: range.start, end: range.end })
    // lmdb-js's count ignores a limit: count the keys, stopping at it.
    let counted = 0
    for (const _ of data.getKeys({ start: range.start, end: range.end, limit: range.limit })) counted++
    return counted
  },
})

/** Opens (creating) the checkpoint environment at `path`. */
export const openCheckpoint = (path: string): Effect.Effect<Checkpoint, CheckpointError> =>
  Effect.try({
    try: () => {
      const env: RootDatabase = open({ path, maxDbs: 4, compression: false })
      // JSON, not msgpack: JSON.stringify escapes lone surrogates, so every JavaScript string round-trips.
      // Keys are bytes we encode ourselves (KeyCodec.ts): lmdb-js's string keys mangle long keys with U+0000.
      // (`keyEncoder` is a database option lmdb-js's types list only for the root environment.)
      const dataOptions = { name: "data", encoding: "json", keyEncoder } as const
      const data = env.openDB<unknown, string>(dataOptions)
      const meta = env.openDB<number, string>({ name: "meta" })
      const view = dataView(data)
      const writerIn = (): StoreWriter => ({
        ...view,
        put: (key, value) => void data.putSync(key, value),
        remove: (key) => void data.removeSync(key),
      })
      const stamp = (appliedSeq: number, salt: number) => {
        meta.putSync(metaAppliedSeq, appliedSeq)
        meta.putSync(metaSalt, salt)
      }
      return {
        path,
        appliedSeq: () => meta.get(metaAppliedSeq) ?? 0,
        salt: () => meta.get(metaSalt),
        view,
        commit: (changes, appliedSeq, salt) => {
          for (const [key, value] of changes) {
            if (value === undefined) void data.remove(key)
            else void data.put(key, value)
          }
          void meta.put(metaSalt, salt)
          // Renew the read snapshot before anyone learns of the commit: the pending layer is dropped
          // on resolution, and a read through an older snapshot would then miss the batch.
          return meta.put(metaAppliedSeq, appliedSeq).then(() => env.resetReadTxn())
        },
        commitWith: (write, appliedSeq, salt) =>
          env.transactionSync(() => {
            write(writerIn())
            stamp(appliedSeq, salt)
          }),
        flushed: () => Promise.resolve(env.flushed).then(() => undefined),
        sizeBytes: () => {
          const stat = env.getStats() as {
            treeBranchPageCount?: number
            treeLeafPageCount?: number
            overflowPages?: number
            pageSize?: number
          }
          const pages = (stat.treeBranchPageCount ?? 0) + (stat.treeLeafPageCount ?? 0) + (stat.overflowPages ?? 0)
          return pages * (stat.pageSize ?? 4096)
        },
        close: () => env.close(),
      } satisfies Checkpoint
    },
    catch: (cause) => new CheckpointError({ path, message: cause instanceof Error ? cause.message : String(cause) }),
  })
