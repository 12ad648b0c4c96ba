/**
 * Writes a file so that readers (and a crash) see either the old content or the whole new one:
 * a temporary file beside the target, fsync'd, renamed over the target, then the directory
 * fsync'd so the rename itself is durable.
 */
import { randomBytes } from "node:crypto"
import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from "node:fs"
import { basename, dirname, join } from "node:path"

/** Writes `chunks` to `path` atomically and durably. */
export const writeFileAtomic = (path: string, chunks: Iterable<string | Uint8Array>): void => {
  const temporary = join(dirname(path), `.${basename(path)}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`)
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
