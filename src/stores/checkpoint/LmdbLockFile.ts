/**
 * An LMDB environment's lock file made with its pages allocated, before LMDB opens the
 * environment. LMDB creates `lock.mdb` with ftruncate (a sparse file: no block is allocated) and
 * then writes it through a shared memory map; on a full file system a write to a page it cannot
 * allocate kills the process with SIGBUS — not an error anyone can handle. Seen when the search
 * thread first opened its index after the disk had filled (a core dump: memset in
 * mdb_env_setup_locks on search/lmdb/lock.mdb). Written here with write(2), a full disk is an
 * ENOSPC error like any other write's: the caller reports the disk full and tries again later.
 *
 * LMDB keeps a lock file at least as large as it needs (its reader table then has more slots), so
 * `lockFileBytes` only has to be at least LMDB's size for 126 readers (about 8 KiB).
 */
import { closeSync, fstatSync, mkdirSync, openSync, rmSync, writeSync } from "node:fs"
import { join } from "node:path"

/** The lock file's size: LMDB needs about 8 KiB for its default 126 readers; more slots are harmless. */
export const lockFileBytes = 16 * 1024

/**
 * Makes `envDir`/lock.mdb with every byte written, unless it exists. Only a new lock file is
 * written: one that exists may be in use (its reader table is live) and is left as LMDB keeps it.
 */
export const allocateLockFile = (envDir: string): void => {
  mkdirSync(envDir, { recursive: true })
  const path = join(envDir, "lock.mdb")
  let fd: number
  try {
    fd = openSync(path, "wx", 0o600)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return
    throw error
  }
  try {
    const zeros = Buffer.alloc(lockFileBytes)
    for (let written = 0; written < zeros.length; )
      written += writeSync(fd, zeros, written, zeros.length - written, written)
    if (fstatSync(fd).size !== lockFileBytes) throw new Error(`${path}: written short`)
    closeSync(fd)
  } catch (error) {
    // Not left half-made: LMDB would ftruncate it back to a sparse file.
    closeSync(fd)
    rmSync(path, { force: true })
    throw error
  }
}
