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
 *
 * Before the lock is taken the path is checked (`dataDirSafetyProblems`): a data directory that is
 * world-writable, or that sits under a world-writable directory without the sticky bit, or that is
 * reached through a symbolic link owned by another (non-root) user, is refused with reason
 * `Unsafe` and a message saying why and how to fix it — unless `AllowUnsafeDataDir` is set (the
 * global `--force` flag). Whoever controls such a path can swap the stores under mnemos. Once the
 * lock is held, the directory's config.json is read and its privacy settings are put in force for
 * this process (the owner is the only writer, so it is the one whose filter matters).
 */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import { homedir, hostname } from "node:os"
import { dirname, join, parse, resolve, sep } from "node:path"
import { Context, Effect, Result, Schema, type Scope } from "effect"
import { configurePrivacy } from "../privacy/PrivacyFilter.ts"
import { readDataDirConfig } from "./DataDirConfig.ts"

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
  reason: Schema.Literals(["Locked", "Io", "Unsafe", "Config"]),
  path: Schema.String,
  ownerPid: Schema.optional(Schema.Number),
  message: Schema.String,
}) {}

export const lockFileName = "mnemos.lock"

/** Set (by the global `--force` flag) to accept a data directory that fails the safety checks. */
export const AllowUnsafeDataDir = Context.Reference<boolean>("mnemos/stores/DataDir/AllowUnsafeDataDir", {
  defaultValue: () => false,
})

/** One reason a data directory path is unsafe. */
export interface DataDirSafetyProblem {
  readonly kind: "WorldWritable" | "ForeignSymlink"
  /** The path component at fault. */
  readonly path: string
  readonly message: string
  /** A command that fixes it. */
  readonly fix: string
}

/** Who is asking, for the ownership checks (injected by tests). */
export interface SafetyIdentity {
  readonly uid: number | undefined
  readonly platform: NodeJS.Platform
}

const currentIdentity = (): SafetyIdentity => ({ uid: process.getuid?.(), platform: process.platform })

const modeText = (mode: number) => `0${(mode & 0o7777).toString(8)}`

/**
 * What is unsafe about `dir` (empty when nothing is): every existing directory from the root to
 * `dir` is looked at, following symbolic links. On Windows (no POSIX modes) nothing is checked.
 */
export const dataDirSafetyProblems = (
  dir: string,
  identity: SafetyIdentity = currentIdentity(),
): ReadonlyArray<DataDirSafetyProblem> => {
  if (identity.platform === "win32") return []
  const target = resolve(dir)
  const problems: Array<DataDirSafetyProblem> = []
  const root = parse(target).root
  let current = root
  const components = target
    .slice(root.length)
    .split(sep)
    .filter((part) => part !== "")
  for (const [index, component] of components.entries()) {
    const candidate = join(current, component)
    let link: fs.Stats
    try {
      link = fs.lstatSync(candidate)
    } catch {
      break // the rest does not exist yet; it will be created 0700
    }
    if (link.isSymbolicLink()) {
      if (identity.uid !== undefined && link.uid !== identity.uid && link.uid !== 0)
        problems.push({
          kind: "ForeignSymlink",
          path: candidate,
          message: `${candidate} is a symbolic link owned by another user (uid ${link.uid}), who can point it anywhere`,
          fix: `use the real path instead: --data-dir ${join(safeRealpath(candidate), ...components.slice(index + 1))}`,
        })
      current = safeRealpath(candidate)
    } else current = candidate
    let stats: fs.Stats
    try {
      stats = fs.statSync(current)
    } catch {
      break
    }
    const isTarget = index === components.length - 1
    const worldWritable = (stats.mode & 0o002) !== 0
    const sticky = (stats.mode & 0o1000) !== 0
    if (stats.isDirectory() && worldWritable && (isTarget || !sticky))
      problems.push({
        kind: "WorldWritable",
        path: current,
        message: isTarget
          ? `${current} is world-writable (mode ${modeText(stats.mode)}): any local user can replace the stores in it`
          : `${current} is world-writable without the sticky bit (mode ${modeText(stats.mode)}): any local user can rename ${target} away and put another in its place`,
        fix: isTarget ? `chmod 700 ${current}` : `chmod o-w ${current}  (or chmod +t ${current})`,
      })
  }
  return problems
}

const safeRealpath = (path: string): string => {
  try {
    return fs.realpathSync(path)
  } catch {
    return resolve(dirname(path), fs.readlinkSync(path))
  }
}

const refuseUnsafe = (dir: string, problems: ReadonlyArray<DataDirSafetyProblem>): DataDirError =>
  new DataDirError({
    reason: "Unsafe",
    path: dir,
    message: `refusing data directory ${dir}: ${problems.map((problem) => `${problem.message}; fix: ${problem.fix}`).join("; ")}. Pass --force to use it anyway.`,
  })
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

const release = (dir: string, owner: LockOwner): void => {
  if (readLockOwner(dir)?.pid === owner.pid) fs.rmSync(join(dir, lockFileName), { force: true })
}

/** Takes the lock, then puts the directory's config.json in force (releasing the lock if it is bad). */
const acquireChecked = (dir: string, command: string, allowUnsafe: boolean): LockOwner => {
  if (!allowUnsafe) {
    const problems = dataDirSafetyProblems(dir)
    if (problems.length > 0) throw refuseUnsafe(dir, problems)
  }
  const owner = acquire(dir, command)
  const config = readDataDirConfig(dir)
  if (Result.isFailure(config)) {
    release(dir, owner)
    throw new DataDirError({ reason: "Config", path: dir, message: `${config.failure} (see docs/privacy.md)` })
  }
  configurePrivacy(config.success.privacy)
  return owner
}

/**
 * Takes the data directory's lock for the life of the scope, after the safety checks (skipped
 * when `AllowUnsafeDataDir` is set), and puts its config.json in force.
 */
export const lockDataDir = (dir: string, command: string): Effect.Effect<LockOwner, DataDirError, Scope.Scope> =>
  Effect.flatMap(AllowUnsafeDataDir, (allowUnsafe) =>
    Effect.acquireRelease(
      Effect.try({
        try: () => acquireChecked(dir, command, allowUnsafe),
        catch: (error) =>
          error instanceof DataDirError
            ? error
            : new DataDirError({
                reason: "Io",
                path: dir,
                message: `cannot lock ${dir}: ${error instanceof Error ? error.message : String(error)}`,
              }),
      }),
      (owner) => Effect.sync(() => release(dir, owner)),
    ),
  )
