/**
 * Reading and writing another program's config file safely.
 *
 * - A symbolic link (dotfiles managed in a repository) is followed: the file it points to is
 *   edited and the link stays a link.
 * - Before a write, the current file is copied beside itself (`<file>.mnemos-backup-<time>`, same
 *   mode); the new text is written to a temporary file, fsync'd and renamed over the original
 *   (cli/AtomicFile.ts), and the original's mode is kept.
 * - Clients rewrite their own files (Claude Code rewrites ~/.claude.json all the time), so the file
 *   is read again just before the rename: if it changed since it was planned, nothing is written
 *   and the caller plans again on the new text.
 */
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, realpathSync, statSync } from "node:fs"
import { dirname } from "node:path"
import { Effect, Schema } from "effect"
import { writeFileAtomic } from "../cli/AtomicFile.ts"

/** Why a client's config could not be read, edited or written. */
export class InstallError extends Schema.TaggedError<InstallError>()("InstallError", {
  reason: Schema.Literals(["Invalid", "Unsupported", "Io", "Changed", "Refused"]),
  path: Schema.String,
  message: Schema.String,
}) {}

/** A config file as read. */
export interface ConfigText {
  /** The path asked for. */
  readonly path: string
  /** The file actually edited (the target of a symbolic link). */
  readonly realPath: string
  readonly exists: boolean
  readonly text: string
  /** Permission bits to keep (new files: 0600). */
  readonly mode: number
}

/** Config files larger than this are refused (none is anywhere near it). */
export const configFileBytesMax = 64 * 1024 * 1024

const message = (error: unknown) => (error instanceof Error ? error.message : String(error))

/** Reads `path` (following a symbolic link); a missing file reads as empty. */
export const readConfigText = (path: string): Effect.Effect<ConfigText, InstallError> =>
  Effect.try({
    try: (): ConfigText => {
      if (!existsSync(path)) return { path, realPath: path, exists: false, text: "", mode: 0o600 }
      const realPath = realpathSync(path)
      const stats = statSync(realPath)
      if (!stats.isFile()) throw new Error("it is not a regular file")
      if (stats.size > configFileBytesMax) throw new Error(`it is larger than ${configFileBytesMax} bytes`)
      const text = readFileSync(realPath, "utf8")
      return { path, realPath, exists: true, text, mode: stats.mode & 0o777 }
    },
    catch: (error) => new InstallError({ reason: "Io", path, message: `cannot read ${path}: ${message(error)}` }),
  })

const backupName = (realPath: string, now: Date): string => {
  const stamp = now.toISOString().replace(/[-:]/g, "").replace(".", "")
  let candidate = `${realPath}.mnemos-backup-${stamp}`
  for (let index = 1; existsSync(candidate); index++) candidate = `${realPath}.mnemos-backup-${stamp}-${index}`
  return candidate
}

/**
 * Writes `text` over the file read as `original`: backup of the original (when it existed), then
 * an atomic, durable replace. Fails with `Changed` if the file is no longer what was read.
 */
export const writeConfigText = (
  original: ConfigText,
  text: string,
  now: Date,
): Effect.Effect<{ readonly backup: string | undefined }, InstallError> =>
  Effect.try({
    try: () => {
      const current = existsSync(original.realPath) ? readFileSync(original.realPath, "utf8") : undefined
      if (current !== (original.exists ? original.text : undefined))
        throw new InstallError({
          reason: "Changed",
          path: original.path,
          message: `${original.path} changed while it was being edited`,
        })
      let backup: string | undefined
      if (original.exists) {
        backup = backupName(original.realPath, now)
        copyFileSync(original.realPath, backup)
        chmodSync(backup, original.mode)
      } else mkdirSync(dirname(original.realPath), { recursive: true, mode: 0o700 })
      writeFileAtomic(original.realPath, [text])
      chmodSync(original.realPath, original.mode)
      return { backup }
    },
    catch: (error) =>
      error instanceof InstallError
        ? error
        : new InstallError({
            reason: "Io",
            path: original.path,
            message: `cannot write ${original.path}: ${message(error)}`,
          }),
  })
