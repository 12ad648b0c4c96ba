/**
 * Who may read a data directory: its owner only. Memories, the write-ahead logs, the search
 * indexes and the bearer token are private, and a file other users can read leaks them all.
 *
 * Two parts, both for the process that owns the data directory (stores/DataDir.ts calls them
 * while it takes the lock):
 * - `privateUmask` sets the process's umask to 0o077 before anything is created, so every file
 *   created afterwards — by mnemos itself, by lmdb-js (which asks for 0664) and by the WAL — is
 *   0600 and every folder 0700. The umask is process-wide; a worker thread cannot set it (its
 *   process's is used), and Windows has no modes.
 * - `tightenDataDir` removes the group and other bits from every file and folder of an existing
 *   data directory that this user owns (a directory made 0755 by hand, or by an older mnemos):
 *   symbolic links are not followed, and what another user owns is left alone. It says what it
 *   changed, for the caller to report; `doctor` lists the same entries without changing them
 *   (`looseEntries`).
 */
import * as fs from "node:fs"
import { join } from "node:path"
import { isMainThread } from "node:worker_threads"

/** The umask that makes new files 0600 and new folders 0700. */
export const privateUmaskBits = 0o077
/** Most entries walked in one data directory (far above what mnemos creates). */
export const dataDirEntriesMax = 100_000

/** A file or folder readable (or writable) by other users. */
export interface LooseEntry {
  readonly path: string
  readonly mode: number
  readonly isDirectory: boolean
}

/** Makes every file this process creates from now on private (0600 files, 0700 folders). */
export const privateUmask = (): void => {
  if (process.platform === "win32" || !isMainThread) return
  process.umask(privateUmaskBits)
}

/** Every entry under `dir` (and `dir` itself) owned by `uid` that others may read or write. */
export const looseEntries = (dir: string, uid = process.getuid?.()): ReadonlyArray<LooseEntry> => {
  if (process.platform === "win32" || uid === undefined) return []
  const loose: Array<LooseEntry> = []
  const pending = [dir]
  let walked = 0
  while (pending.length > 0 && walked < dataDirEntriesMax) {
    const path = pending.pop()!
    walked++
    let stats: fs.Stats
    try {
      stats = fs.lstatSync(path)
    } catch {
      continue // removed meanwhile
    }
    if (stats.isSymbolicLink() || stats.uid !== uid) continue
    if ((stats.mode & privateUmaskBits) !== 0)
      loose.push({ path, mode: stats.mode & 0o7777, isDirectory: stats.isDirectory() })
    if (!stats.isDirectory()) continue
    try {
      for (const name of fs.readdirSync(path)) pending.push(join(path, name))
    } catch {
      // unreadable: nothing below it to look at
    }
  }
  return loose
}

/** Takes the group and other bits off every loose entry of `dir`; the entries it changed. */
export const tightenDataDir = (dir: string): ReadonlyArray<LooseEntry> => {
  const changed: Array<LooseEntry> = []
  for (const entry of looseEntries(dir)) {
    try {
      fs.chmodSync(entry.path, entry.mode & ~privateUmaskBits)
      changed.push(entry)
    } catch {
      // removed meanwhile, or not ours after all
    }
  }
  return changed
}

/** One line saying what `tightenDataDir` did, for stderr. */
export const describeTightened = (dir: string, changed: ReadonlyArray<LooseEntry>): string => {
  const folders = changed.filter((entry) => entry.isDirectory).length
  const files = changed.length - folders
  const first = changed[0]!
  return `made ${dir} private: ${files} file(s) and ${folders} folder(s) were readable by other users (such as ${first.path}, mode 0${first.mode.toString(8)}); they are now 0600 and 0700`
}
