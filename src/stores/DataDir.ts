/**
 * The data directory: where it is, and who owns it.
 *
 * Resolution order: `--data-dir`, then `$MNEMOS_DATA_DIR`, then `$XDG_DATA_HOME/mnemos`, then
 * `~/.local/share/mnemos`. One process owns a data directory at a time: it holds `mnemos.lock`,
 * a file created with O_EXCL that names its pid, host and start time. A second process gets a
 * `Locked` error naming the owner's pid. A lock whose process is gone (same host, pid not alive)
 * is stale and is taken over: it is first renamed to a name unique to the taker, re-read, and only
 * removed if it is still the stale lock that was judged (so two takers cannot both win).
 * Limitation: locks are judged by pid on the same host; a data directory shared over a network
 * file system between hosts is not supported.
 */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import { homedir, hostname } from "node:os"
import { join, resolve } from "node:path"
import { Effect, Schema, type Scope } from "effect"

/** Where the data directory came from, for `mnemos config` and error messages. */
export type DataDirSource = "flag" | "environment" | "xdg" | "default"

/** A resolved data directory. */
export interface DataDirLocation {
  readonly path: string
  readonly source: DataDirSource
}

/** Resolves the data directory from a flag value and the environment. */
export const resolveDataDir = (flag: string | undefined, env: NodeJS.ProcessEnv = process.env): DataDirLocation => {
  if (flag !== undefined && flag !== "") return { path: resolve(flag), source: "flag" }
  if (env.MNEMOS_DATA_DIR) return { path: resolve(env.MNEMOS_DATA_DIR), source: "environment" }
  if (env.XDG_DATA_HOME) return { path: resolve(env.XDG_DATA_HOME, "mnemos"), source: "xdg" }
  return { path: join(homedir(), ".local", "share", "mnemos"), source: "default" }
}

/** The owner recorded in `mnemos.lock`. */
export interface LockOwner {
  readonly pid: number
  readonly host: string
  readonly startedAt: string
  readonly command: string
}

/** Why the data directory could not be taken. */
export class DataDirError extends Schema.TaggedError<DataDirError>()("DataDirError", {
  reason: Schema.Literals(["Locked", "Io"]),
  path: Schema.String,
  ownerPid: Schema.optional(Schema.Number),
  message: Schema.String,
}) {}

export const lockFileName = "mnemos.lock"
const takeoverAttemptsMax = 5

const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

/** Reads the lock's owner, or undefined when there is no (readable) lock. */
export const readLockOwner = (dir: string): LockOwner | undefined => {
  try {
    return JSON.parse(fs.readFileSync(join(dir, lockFileName), "utf8")) as LockOwner
  } catch {
    return undefined
  }
}

/** True when the recorded owner is a live process on this host. */
export const isOwnerAlive = (owner: LockOwner): boolean => owner.host === hostname() && isAlive(owner.pid)

const tryCreate = (lockPath: string, owner: LockOwner): boolean => {
  let fd: number
  try {
    fd = fs.openSync(lockPath, "wx", 0o600)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return false
    throw error
  }
  try {
    fs.writeSync(fd, JSON.stringify(owner))
    fs.fsyncSync(fd)
  } finally {
    fs.closeSync(fd)
  }
  return true
}

/** Removes a stale lock only if the file at `lockPath` is still the one judged stale. */
const removeStale = (lockPath: string, stale: string): void => {
  const aside = `${lockPath}.stale-${process.pid}-${randomBytes(4).toString("hex")}`
  try {
    fs.renameSync(lockPath, aside)
  } catch {
    return // someone else moved it first
  }
  if (fs.readFileSync(aside, "utf8") === stale) {
    fs.rmSync(aside, { force: true })
    return
  }
  // We moved a fresh lock that another taker had just written: put it back unless a third exists.
  try {
    fs.linkSync(aside, lockPath)
  } catch {
    // a newer lock is in place; that owner wins
  }
  fs.rmSync(aside, { force: true })
}

const acquire = (dir: string, command: string): LockOwner => {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
  const lockPath = join(dir, lockFileName)
  const owner: LockOwner = { pid: process.pid, host: hostname(), startedAt: new Date().toISOString(), command }
  for (let attempt = 0; attempt < takeoverAttemptsMax; attempt++) {
    if (tryCreate(lockPath, owner)) return owner
    let text: string
    try {
      text = fs.readFileSync(lockPath, "utf8")
    } catch {
      continue // released between our attempts
    }
    let current: LockOwner | undefined
    try {
      current = JSON.parse(text) as LockOwner
    } catch {
      current = undefined // a lock torn by a crash during its creation is stale
    }
    if (current !== undefined && current.pid === process.pid && current.host === owner.host) {
      throw new DataDirError({
        reason: "Locked",
        path: dir,
        ownerPid: current.pid,
        message: `${dir} is already open in this process`,
      })
    }
    if (current !== undefined && isOwnerAlive(current)) {
      throw new DataDirError({
        reason: "Locked",
        path: dir,
        ownerPid: current.pid,
        message: `data directory ${dir} is in use by mnemos process ${current.pid} (${current.command}, since ${current.startedAt}); stop it or use another --data-dir`,
      })
    }
    removeStale(lockPath, text)
  }
  throw new DataDirError({
    reason: "Locked",
    path: dir,
    message: `could not take the lock of ${dir}: it keeps changing hands`,
  })
}

/** Takes the data directory's lock for the life of the scope. */
export const lockDataDir = (dir: string, command: string): Effect.Effect<LockOwner, DataDirError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.try({
      try: () => acquire(dir, command),
      catch: (error) =>
        error instanceof DataDirError
          ? error
          : new DataDirError({
              reason: "Io",
              path: dir,
              message: `cannot lock ${dir}: ${error instanceof Error ? error.message : String(error)}`,
            }),
    }),
    (owner) =>
      Effect.sync(() => {
        if (readLockOwner(dir)?.pid === owner.pid) fs.rmSync(join(dir, lockFileName), { force: true })
      }),
  )
