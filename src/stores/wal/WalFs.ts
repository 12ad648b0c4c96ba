/**
 * The file-system service under the write-ahead log.
 *
 * Every byte the WAL reads or writes goes through `WalFs`, so the same WAL code runs on the
 * real disk (`layerNode`) and on a simulated disk (`test/support/SimulatedDisk.ts`) that keeps
 * "written" and "durable" images apart, loses unsynced writes, tears the last sector and fails
 * I/O on a countdown. The contract both implementations keep:
 *
 * - `write` writes all of `bytes` at `offset` (short writes are looped inside) or fails.
 * - Data is durable only after `datasync` on that file returns; a directory entry (a created,
 *   renamed or removed file) is durable only after `syncDir` on its directory returns.
 * - `queueDurable` queues a write that is made durable as one call (`write` then `datasync`), and
 *   returns at once with a `Deferred` that settles when it did.
 *   Durable writes queued through one `WalFs` are made one at a time, in queue order, across all
 *   its files: each starts only after the one before it settled. Once one fails, every later one
 *   queued to the same file fails without writing a byte. So a caller may queue its next write
 *   while the last one is still on its way: the disk never holds the later one without the earlier.
 *   The real disk does each with one `pwrite` on a descriptor opened `O_DSYNC` (the kernel makes the
 *   data and the metadata needed to read it back durable before the call returns, exactly what
 *   `fdatasync` promises), on the WAL writer thread (WalWriter.ts).
 * - `close` waits until the file's queued durable writes settled.
 * - `truncate` changes the file's size; like a write, it is durable after `datasync`.
 * - Failures are `FsError` values with a `reason`; nothing throws.
 */

import { constants } from "node:fs"
import * as fsp from "node:fs/promises"
import { type FileHandle, open as openFile } from "node:fs/promises"
import { Context, Deferred, Effect, Exit, Layer, Schema } from "effect"
import { fileToken, forgetFile, queueWrite, type WriteFailure } from "./WalWriter.ts"

/** Why a file-system call failed; `NoSpace` is ENOSPC/EDQUOT, `NotFound` ENOENT, the rest `Io`. */
export const FsErrorReason = Schema.Literals(["NotFound", "NoSpace", "Io"])
export type FsErrorReason = typeof FsErrorReason.Type

/** A failed file-system call: which operation, on which path, and why. */
export class FsError extends Schema.TaggedError<FsError>()("FsError", {
  reason: FsErrorReason,
  op: Schema.String,
  path: Schema.String,
  message: Schema.String,
}) {}

/** An open file, positioned explicitly on every call (the WAL never relies on a cursor). */
export interface WalFile {
  readonly path: string
  readonly size: () => Effect.Effect<number, FsError>
  readonly read: (offset: number, length: number) => Effect.Effect<Uint8Array, FsError>
  readonly write: (offset: number, bytes: Uint8Array) => Effect.Effect<void, FsError>
  readonly datasync: () => Effect.Effect<void, FsError>
  /**
   * Queues `bytes` to be written at `offset` and made durable, in order with every other queued
   * write (see above); the Deferred settles when they are durable or the write failed. The caller
   * may reuse `bytes` at once.
   */
  readonly queueDurable: (offset: number, bytes: Uint8Array) => Effect.Effect<Deferred.Deferred<void, FsError>>
  readonly truncate: (length: number) => Effect.Effect<void, FsError>
  readonly close: () => Effect.Effect<void>
}

/** The file-system operations the WAL needs, and nothing more. */
export class WalFs extends Context.Service<
  WalFs,
  {
    readonly mkdirp: (dir: string) => Effect.Effect<void, FsError>
    /** Names (not paths) of the entries in `dir`; `[]` when `dir` does not exist. */
    readonly list: (dir: string) => Effect.Effect<ReadonlyArray<string>, FsError>
    /** Opens for reading and writing; `create` makes the file when missing (never truncates). */
    readonly open: (path: string, options: { readonly create: boolean }) => Effect.Effect<WalFile, FsError>
    readonly remove: (path: string) => Effect.Effect<void, FsError>
    readonly rename: (from: string, to: string) => Effect.Effect<void, FsError>
    /** Makes the directory's entries (creations, renames, removals) durable. */
    readonly syncDir: (dir: string) => Effect.Effect<void, FsError>
    /** Bytes an unprivileged writer may still allocate on the file system holding `dir`. */
    readonly freeBytes: (dir: string) => Effect.Effect<number, FsError>
  }
>()("mnemos/stores/WalFs") {}

const reasonOf = (cause: unknown): FsErrorReason => {
  const code = (cause as NodeJS.ErrnoException | undefined)?.code
  if (code === "ENOENT") return "NotFound"
  if (code === "ENOSPC" || code === "EDQUOT") return "NoSpace"
  return "Io"
}

const attempt = <A>(op: string, path: string, run: () => Promise<A>): Effect.Effect<A, FsError> =>
  Effect.tryPromise({ try: run, catch: (cause) => fsError(op, path, cause) })

const fsError = (op: string, path: string, cause: unknown) =>
  new FsError({
    reason: reasonOf(cause),
    op,
    path,
    message: cause instanceof Error ? cause.message : String(cause),
  })

const writeAll = async (handle: FileHandle, offset: number, bytes: Uint8Array): Promise<void> => {
  let done = 0
  while (done < bytes.length) {
    const { bytesWritten } = await handle.write(bytes, done, bytes.length - done, offset + done)
    done += bytesWritten
  }
}

/** Read and write, every write durable on return (see `queueDurable`). */
const readWriteDurable = constants.O_RDWR | constants.O_DSYNC

const nodeFile = (path: string, handle: FileHandle): WalFile => {
  const token = fileToken()
  // Settles (never rejects) when the last durable write queued to this file settled.
  let lastWrite: Promise<void> = Promise.resolve()
  return {
    path,
    size: () => attempt("stat", path, async () => (await handle.stat()).size),
    read: (offset, length) =>
      attempt("read", path, async () => {
        const buffer = Buffer.allocUnsafe(length)
        let done = 0
        while (done < length) {
          const { bytesRead } = await handle.read(buffer, done, length - done, offset + done)
          if (bytesRead === 0) break
          done += bytesRead
        }
        return done === length ? buffer : buffer.subarray(0, done)
      }),
    write: (offset, bytes) => attempt("write", path, () => writeAll(handle, offset, bytes)),
    datasync: () => attempt("fdatasync", path, () => handle.datasync()),
    // The handle is O_DSYNC: each pwrite the writer thread makes returns once its bytes are durable.
    queueDurable: (offset, bytes) =>
      Effect.sync(() => {
        const done = Deferred.makeUnsafe<void, FsError>()
        lastWrite = queueWrite(token, handle.fd, offset, bytes).then(
          () => {
            Deferred.doneUnsafe(done, Exit.void)
          },
          (failure: WriteFailure) => {
            Deferred.doneUnsafe(done, Exit.fail(fsError("write", path, failure)))
          },
        )
        return done
      }),
    truncate: (length) => attempt("truncate", path, () => handle.truncate(length)),
    // Never while the writer thread may still write through the descriptor (it could be reused).
    close: () =>
      Effect.promise(async () => {
        await lastWrite
        forgetFile(token)
        await handle.close().catch(() => undefined)
      }),
  }
}

/**
 * The real disk: durable writes on the WAL writer thread, everything else through `node:fs/promises`
 * (libuv's thread pool); nothing blocks the event loop.
 */
export const layerNode: Layer.Layer<WalFs> = Layer.succeed(
  WalFs,
  WalFs.of({
    mkdirp: (dir) => attempt("mkdir", dir, () => fsp.mkdir(dir, { recursive: true }).then(() => undefined)),
    list: (dir) =>
      attempt("readdir", dir, () =>
        fsp.readdir(dir).catch((cause: NodeJS.ErrnoException) => {
          if (cause.code === "ENOENT") return [] as Array<string>
          throw cause
        }),
      ),
    open: (path, { create }) =>
      (create
        ? // "a+" creates without truncating; the file is then reopened without O_APPEND.
          attempt("open", path, () => openFile(path, "a+").then((handle) => handle.close()))
        : Effect.void
      ).pipe(
        Effect.andThen(attempt("open", path, () => openFile(path, readWriteDurable))),
        Effect.map((handle) => nodeFile(path, handle)),
      ),
    remove: (path) => attempt("unlink", path, () => fsp.unlink(path)),
    rename: (from, to) => attempt("rename", from, () => fsp.rename(from, to)),
    syncDir: (dir) =>
      attempt("fsync-dir", dir, async () => {
        const handle = await openFile(dir, "r")
        try {
          await handle.sync()
        } finally {
          await handle.close()
        }
      }),
    freeBytes: (dir) =>
      attempt("statfs", dir, async () => {
        const stats = await fsp.statfs(dir)
        return stats.bavail * stats.bsize
      }),
  }),
)
