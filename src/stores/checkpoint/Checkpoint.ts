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
 * - Every page a read or a commit walks is mapped into the daemon's resident set and stays there
 *   until the environment closes (the kernel's page cache, counted as the process's own memory):
 *   one `read_graph` of 100,000 entities left 160 MiB of the file resident. `entriesTouched` counts
 *   what reads and commits walked since the environment opened, and `releaseMappedPages` closes and
 *   reopens it to let go of them (the store actor does, once the store idles; StoreActor.ts).
 *
 * Values are treated as immutable: domain code builds new objects instead of editing what it read.
 */

import { Effect, Schema } from "effect"
import { asBinary, type Database, open, type RootDatabase } from "lmdb"
import { compareKeys, keyedDatabase } from "./KeyCodec.ts"
import { allocateLockFile } from "./LmdbLockFile.ts"
import { lmdbMapOptions } from "./LmdbMap.ts"
import { freeBytes, noRoomFor, type TreeShape, transactionGrowthBound, type WriteSize } from "./LmdbRoom.ts"

/** A failure of the LMDB environment itself (open, commit); the owning actor restarts on it. */
export class CheckpointError extends Schema.TaggedError<CheckpointError>()("CheckpointError", {
  path: Schema.String,
  message: Schema.String,
}) {}

/**
 * An LMDB commit that failed because the disk (or quota) is full. The store keeps its changes and
 * retries the commit once space returns; see CommitQueue.ts.
 */
export class DiskFullError extends Schema.TaggedError<DiskFullError>()("DiskFullError", {
  path: Schema.String,
  message: Schema.String,
}) {}

const noSpaceCodes = new Set([28, 122]) // ENOSPC, EDQUOT
/** Longest wait for lmdb-js to settle a failed commit's `commitError`. */
const commitErrorWaitMs = 1000

/**
 * A failed LMDB write with less than this free on its file system counts as a full disk even when
 * the error is EIO: writing back mmap'd pages that the file system cannot allocate fails with EIO
 * instead of ENOSPC (seen on tmpfs and ext4 once free space ran out).
 */
const lowSpaceBytes = 64 * 1024 * 1024

/** True when the failed write to the LMDB environment at `path` failed because its disk is full. */
export const failedForSpace = (failure: unknown, path: string): boolean => {
  if (isNoSpace(failure)) return true
  const code = (failure as { code?: unknown } | undefined)?.code
  if (code !== 5 && code !== "EIO") return false
  const free = freeBytes(path)
  return free !== undefined && free < lowSpaceBytes
}

/** True when `error` (an lmdb-js or node error) says the disk is full. */
export const isNoSpace = (error: unknown): boolean => {
  if (typeof error !== "object" || error === null) return false
  const { code, message } = error as { code?: unknown; message?: unknown }
  return (
    code === "ENOSPC" ||
    code === "EDQUOT" ||
    (typeof code === "number" && noSpaceCodes.has(code)) ||
    (typeof message === "string" && /no space left on device|disk quota exceeded/i.test(message))
  )
}

/**
 * Settles an lmdb-js write promise without leaving a rejection unhandled. A failed lmdb-js commit
 * rejects every write of its transaction with "Commit failed" and hangs the real cause on the error
 * as a second rejected promise (`commitError`); left unhandled, either ends the process (that is how
 * a full disk used to stop the daemon). Resolves to the cause: undefined on success.
 */
export const settleLmdbWrite = (write: PromiseLike<unknown>): Promise<unknown> =>
  Promise.resolve(write).then(
    () => undefined,
    async (error: unknown) => {
      const commitError = (error as { commitError?: unknown } | undefined)?.commitError
      if (!(commitError instanceof Promise)) return error
      // lmdb-js rejects `commitError` right after the writes; the timer only guards against a hang.
      let timer: ReturnType<typeof setTimeout> | undefined
      const late = new Promise<unknown>((resolve) => {
        timer = setTimeout(() => resolve(error), commitErrorWaitMs)
      })
      const cause = commitError.then(
        () => error,
        (reason: unknown) => reason,
      )
      return Promise.race([cause, late]).finally(() => clearTimeout(timer))
    },
  )

/**
 * Resolves once everything `env` has committed is on disk (a failed sync resolves too: nothing
 * waits on it for good). Unlike `env.flushed`, it settles after a failed commit: lmdb-js 3.5 never
 * resolves the flush promise of a transaction that failed (a full disk), so `flushed` stays pending
 * until a later transaction succeeds — a search index whose last commit failed could not close or
 * compact. This asks LMDB itself to sync (`mdb_env_sync`) on lmdb-js's thread instead.
 */
export const syncLmdb = (env: RootDatabase): Promise<unknown> =>
  new Promise((resolve) => {
    const sync = (env as unknown as { sync: (done: (error?: unknown) => void) => void }).sync
    sync.call(env, (error) => resolve(error))
  })

const lmdbCommitFailedMessage = "Commit failed (see commitError for details)"

const isLmdbCommitFailure = (reason: unknown): reason is Error & { readonly commitError: Promise<unknown> } =>
  reason instanceof Error && reason.message === lmdbCommitFailedMessage && "commitError" in reason

let lmdbRejectionsGuarded = false

/**
 * lmdb-js (3.5) opens each event turn's transaction with an internal write whose promise nobody
 * awaits; when that transaction fails (a full disk), the promise rejects unhandled and Node ends the
 * process. The failure itself reaches the writes we do await (`settleLmdbWrite`), so this drops
 * exactly those internal rejections and leaves every other unhandled rejection to Node's default.
 */
export const guardLmdbCommitRejections = (): void => {
  if (lmdbRejectionsGuarded) return
  lmdbRejectionsGuarded = true
  process.on("unhandledRejection", (reason) => {
    if (!isLmdbCommitFailure(reason)) throw reason
    reason.commitError.catch(() => undefined)
  })
}

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

/** `range` from just after `key` (the smallest string above it: `key` and a NUL), or whole without one. */
export const rangeAfter = (range: KeyRange, key: string | undefined): KeyRange =>
  key === undefined ? range : { ...range, start: `${key}\u0000` }

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

/**
 * A change's value as the checkpoint stores it: JSON in UTF-8, as lmdb-js's `json` encoding would
 * write it (JSON, not msgpack: JSON.stringify escapes lone surrogates, so every JavaScript string
 * round-trips); undefined for a removal.
 */
export const encodedValue = (value: unknown): Buffer | undefined =>
  value === undefined ? undefined : Buffer.from(JSON.stringify(value), "utf8")

const metaAppliedSeq = "appliedSeq"
const metaSalt = "salt"
/** A shared log's position (JetStream stream sequence) of the last applied batch. */
const metaPosition = "position"

/** An open checkpoint. */
export interface Checkpoint {
  readonly path: string
  readonly appliedSeq: () => number
  /** The store generation recorded with the data, if any. */
  readonly salt: () => number | undefined
  /** A shared log's position of the last batch the data holds (a replica resumes after it). */
  readonly position: () => number | undefined
  readonly view: StoreView
  /**
   * Queues `changes` and `appliedSeq` (and `salt`) as one transaction on lmdb-js's write thread;
   * resolves when it is committed and visible. Everything queued in one JavaScript turn goes into
   * the same LMDB transaction, in call order. Rejects with `DiskFullError` when the disk is full
   * (nothing of the transaction is written), else with the commit's cause. `encoded`, when given,
   * holds each change's `encodedValue`, made beforehand (CommitQueue.ts encodes a batch's changes
   * as they wait, so a commit's own turn does not).
   */
  readonly commit: (
    changes: ReadonlyArray<Change>,
    appliedSeq: number,
    salt: number,
    position?: number,
    encoded?: ReadonlyArray<Buffer | undefined>,
  ) => Promise<void>
  /** Applies with a writer callback (used by replay), recording `appliedSeq` in the same transaction. */
  readonly commitWith: (write: (writer: StoreWriter) => void, appliedSeq: number, salt: number) => void
  /** Resolves when everything committed so far is on disk. */
  readonly flushed: () => Promise<void>
  readonly sizeBytes: () => number
  /** Entries read (and changes committed) since the environment was opened or last reopened. */
  readonly entriesTouched: () => number
  /**
   * Closes the environment and opens it again, so the file's pages mapped by reads and commits
   * leave the resident set (they stay in the page cache, the kernel's to drop). The caller
   * guarantees that no commit is in flight and that nothing reads until it resolves; `view` then
   * reads the reopened environment. Rejects when the environment cannot be opened again.
   */
  readonly releaseMappedPages: () => Promise<void>
  readonly close: () => Promise<void>
}

/** The databases of one open of a checkpoint's environment. */
interface Handles {
  readonly env: RootDatabase
  readonly data: Database<unknown, string>
  readonly meta: Database<number, string>
}

/**
 * Reads of the data database of `handles()` (the environment open now), counting the entries they
 * walk in `touched`.
 */
const dataView = (handles: () => Handles, touched: { count: number }): StoreView => {
  function* counted(entries: Iterable<Entry>): Iterable<Entry> {
    for (const entry of entries) {
      touched.count++
      yield entry
    }
  }
  return {
    get: (key) => {
      touched.count++
      return handles().data.get(key)
    },
    getRange: (range) => {
      const { data } = handles()
      if (!range.reverse) return counted(data.getRange(range) as Iterable<Entry>)
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
      if (first !== undefined && compareKeys(range.start, range.end) < 0)
        entries.push({ key: range.start, value: first })
      touched.count += entries.length + 1
      return range.limit === undefined ? entries : entries.slice(0, range.limit)
    },
    count: (range) => {
      const { data } = handles()
      let counted = 0
      if (range.limit === undefined) counted = data.getKeysCount({ start: range.start, end: range.end })
      // lmdb-js's count ignores a limit: count the keys, stopping at it.
      else for (const _ of data.getKeys({ start: range.start, end: range.end, limit: range.limit })) counted++
      touched.count += counted
      return counted
    },
  }
}

/**
 * The bytes of the pages `databases` use (branch, leaf, overflow). The root's statistics count only
 * the root's own pages, which name the others: a store of 100 MiB reported 4 KiB. The snapshot
 * each read takes is let go at once.
 */
export const lmdbUsedBytes = (databases: ReadonlyArray<Pick<Database, "getStats" | "resetReadTxn">>): number => {
  let bytes = 0
  for (const database of databases) {
    const stat = database.getStats() as {
      treeBranchPageCount?: number
      treeLeafPageCount?: number
      overflowPages?: number
      pageSize?: number
    }
    bytes +=
      ((stat.treeBranchPageCount ?? 0) + (stat.treeLeafPageCount ?? 0) + (stat.overflowPages ?? 0)) *
      (stat.pageSize ?? 4096)
  }
  databases[0]?.resetReadTxn()
  return bytes
}

const isFailure = (failed: unknown) => failed !== undefined
const encodedChange = ([, value]: Change) => encodedValue(value)

/** Opens (creating) the checkpoint environment at `path`. */
export const openCheckpoint = (path: string): Effect.Effect<Checkpoint, CheckpointError> =>
  Effect.try({
    try: () => {
      guardLmdbCommitRejections()
      allocateLockFile(path)
      const openHandles = (): Handles => {
        const env: RootDatabase = open({ path, maxDbs: 4, compression: false, ...lmdbMapOptions() })
        // Values are JSON (`encodedValue`, written as its bytes). Keys are bytes we encode ourselves
        // (KeyCodec.ts): lmdb-js's string keys mangle long keys with U+0000.
        return {
          env,
          data: env.openDB<unknown, string>(keyedDatabase("data", "json")),
          meta: env.openDB<number, string>({ name: "meta" }),
        }
      }
      let handles = openHandles()
      const touched = { count: 0 }
      const view = dataView(() => handles, touched)
      const writerIn = (): StoreWriter => ({
        ...view,
        put: (key, value) => void handles.data.putSync(key, value),
        remove: (key) => void handles.data.removeSync(key),
      })
      const stamp = (appliedSeq: number, salt: number) => {
        handles.meta.putSync(metaAppliedSeq, appliedSeq)
        handles.meta.putSync(metaSalt, salt)
      }
      /** Settles a commit's writes: the first failure is its error. */
      const committed = (failures: ReadonlyArray<unknown>) => {
        const failure = failures.find(isFailure)
        if (failure !== undefined) {
          const message = failure instanceof Error ? failure.message : String(failure)
          throw failedForSpace(failure, path) ? new DiskFullError({ path, message }) : failure
        }
        // Renew the read snapshot before anyone learns of the commit: the pending layer is dropped
        // on resolution, and a read through an older snapshot would then miss the batch.
        handles.env.resetReadTxn()
      }
      return {
        path,
        appliedSeq: () => handles.meta.get(metaAppliedSeq) ?? 0,
        salt: () => handles.meta.get(metaSalt),
        position: () => handles.meta.get(metaPosition),
        view,
        commit: (changes, appliedSeq, salt, position, given) => {
          const { data, meta } = handles
          // Encoded before it is written (as lmdb-js's `json` encoding would), to know the
          // transaction's size before LMDB writes a page of it (LmdbRoom.ts).
          // No closure made per commit (docs/benchmarks.md, "Closures made for each call").
          const encoded = given ?? changes.map(encodedChange)
          // KeyCodec escapes some characters: at most twice the key's UTF-8, and a terminator.
          const sizes: Array<WriteSize> = []
          for (let index = 0; index < changes.length; index++)
            sizes.push({
              keyBytes: 2 * Buffer.byteLength(changes[index]![0], "utf8") + 4,
              valueBytes: encoded[index]?.length,
            })
          const noRoom = noRoomFor(path, transactionGrowthBound(data.getStats() as TreeShape, sizes))
          if (noRoom !== undefined) return Promise.reject(new DiskFullError({ path, message: noRoom }))
          touched.count += changes.length
          // lmdb-js gives the writes of one transaction one promise, but a large turn can span
          // several: settle each distinct one, so no rejection is ever left unhandled.
          const writes = new Set<Promise<unknown>>()
          for (let index = 0; index < changes.length; index++) {
            const key = changes[index]![0]
            const value = encoded[index]
            writes.add(value === undefined ? data.remove(key) : data.put(key, asBinary(value)))
          }
          writes.add(meta.put(metaSalt, salt))
          if (position !== undefined) writes.add(meta.put(metaPosition, position))
          writes.add(meta.put(metaAppliedSeq, appliedSeq))
          return Promise.all([...writes].map(settleLmdbWrite)).then(committed)
        },
        commitWith: (write, appliedSeq, salt) =>
          handles.env.transactionSync(() => {
            write(writerIn())
            stamp(appliedSeq, salt)
          }),
        flushed: () => Promise.resolve(handles.env.flushed).then(() => undefined),
        sizeBytes: () => lmdbUsedBytes([handles.env, handles.data, handles.meta]),
        entriesTouched: () => touched.count,
        releaseMappedPages: async () => {
          await handles.env.close()
          handles = openHandles()
          touched.count = 0
        },
        close: () => handles.env.close(),
      } satisfies Checkpoint
    },
    catch: (cause) => new CheckpointError({ path, message: cause instanceof Error ? cause.message : String(cause) }),
  })
