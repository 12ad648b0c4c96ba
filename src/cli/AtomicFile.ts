/**
 * Writes a file so that readers (and a crash) see either the old content or the whole new one:
 * a temporary file beside the target, fsync'd, renamed over the target, then the directory
 * fsync'd so the rename itself is durable. The temporary file is removed when anything fails.
 */
import { randomBytes } from "node:crypto"
import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from "node:fs"
import { basename, dirname, join } from "node:path"

/** A fresh name for the temporary file beside `path`. */
const temporaryPathFor = (path: string) =>
  join(dirname(path), `.${basename(path)}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`)

/** Renames the (fsync'd and closed) `temporary` over `path` and fsyncs the directory. */
const renameIntoPlace = (temporary: string, path: string): void => {
  try {
    renameSync(temporary, path)
  } catch (error) {
    rmSync(temporary, { force: true })
    throw error
  }
  const directory = openSync(dirname(path), "r")
  try {
    fsyncSync(directory)
  } finally {
    closeSync(directory)
  }
}

/** Writes `chunks` to `path` atomically and durably. */
export const writeFileAtomic = (path: string, chunks: Iterable<string | Uint8Array>): void => {
  const temporary = temporaryPathFor(path)
  const fd = openSync(temporary, "wx", 0o600)
  try {
    for (const chunk of chunks) writeSync(fd, typeof chunk === "string" ? Buffer.from(chunk, "utf8") : chunk)
    fsyncSync(fd)
  } catch (error) {
    closeSync(fd)
    rmSync(temporary, { force: true })
    throw error
  }
  closeSync(fd)
  renameIntoPlace(temporary, path)
}

/**
 * `writeFileAtomic` for content that arrives over time (a download): `fill` writes it to the
 * temporary file's descriptor. The target is replaced only when `fill` resolves; when it rejects
 * (a cut connection, a failed check of the content) the target is untouched.
 */
export const writeFileAtomicFrom = async (path: string, fill: (fd: number) => Promise<void>): Promise<void> => {
  const temporary = temporaryPathFor(path)
  const fd = openSync(temporary, "wx", 0o600)
  try {
    await fill(fd)
    fsyncSync(fd)
  } catch (error) {
    closeSync(fd)
    rmSync(temporary, { force: true })
    throw error
  }
  closeSync(fd)
  renameIntoPlace(temporary, path)
}
