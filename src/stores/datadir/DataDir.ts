/**
 * The data directory: where it is, and who owns it.
 *
 * Resolution order: `--data-dir`, then `$MNEMOS_DATA_DIR`, then `$MCP_MEMORY_STORE_DIR` (seed 002's
 * name for it), then `$MEMORY_PATH` (seed 000's), then `$XDG_DATA_HOME/mnemos`, then
 * `~/.local/share/mnemos`. An empty variable counts as unset. A value from the environment may
 * start with `~` (the home directory) and, on Windows, hold `%NAME%` references: MCP clients pass
 * `env` entries verbatim, without a shell to expand them, and seed 000's configuration writes
 * `"MEMORY_PATH": "~/.claude-code/memory"`. A data directory is a directory: a path that is a file
 * (the official memory server's `memory.jsonl`, say) is refused when the directory is taken.
 *
 * One process owns a data directory at a time: it holds `mnemos.lock`, which names its pid, host,
 * start time and (on Linux) the boot and the process's start tick. The file is written whole under
 * a temporary name and linked into place, which fails if a lock exists, so no one ever reads a
 * half-written lock. A second process gets a `Locked` error naming the owner's pid.
 *
 * A lock is stale when its process is gone: same host, and the pid is not alive, or the machine
 * has rebooted since (another boot id), or the pid now belongs to another process (another start
 * tick: a container restarted with the same pid, say). A stale lock is taken over under a second,
 * short-lived lock (`mnemos.lock.takeover`, taken the same way): the taker re-reads the lock and
 * removes it only if it is still the one judged stale, then competes for the lock like anyone
 * else. So two takers never both win, and a fresh lock is never moved aside. A lock of another
 * host is never taken over (its process cannot be checked from here); the message says how to
 * remove it. A lock no one can parse (written by a crash of an older version) is stale once it
 * is older than `tornLockAgeMs`.
 *
 * Before the lock is taken the path is checked (`dataDirSafetyProblems`): a data directory that is
 * world-writable, or that sits under a world-writable directory without the sticky bit, or that is
 * reached through a symbolic link owned by another (non-root) user, is refused with reason
 * `Unsafe` and a message saying why and how to fix it — unless `AllowUnsafeDataDir` is set (the
 * global `--force` flag). Whoever controls such a path can swap the stores under mnemos. Once the
 * lock is held, the directory's config.json is read and its privacy settings are put in force for
 * this process (the owner is the only writer, so it is the one whose filter matters).
 *
 * The owner keeps the directory private (DataDirPermissions.ts): before anything is created the
 * process's umask becomes 0o077 (every file it creates from then on is 0600, every folder 0700),
 * and once the lock is held whatever of the directory other users could read is tightened, with
 * a line on stderr saying so.
 */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import { homedir, hostname } from "node:os"
import { dirname, isAbsolute, join, parse, resolve, sep } from "node:path"
import { Console, Context, Effect, Result, Schema, type Scope } from "effect"
import { configurePrivacy } from "../../privacy/PrivacyFilter.ts"
import { readDataDirConfig } from "./DataDirConfig.ts"
import { describeTightened, privateUmask, tightenDataDir } from "./DataDirPermissions.ts"

/** Where the data directory came from, for `mnemos config` and error messages. */
export type DataDirSource = "flag" | "environment" | "MCP_MEMORY_STORE_DIR" | "MEMORY_PATH" | "xdg" | "default"

/** A resolved data directory. */
export interface DataDirLocation {
  readonly path: string
  readonly source: DataDirSource
}

/**
 * A path from the environment as a shell would have expanded it: a leading `~` is the home
 * directory, and on Windows `%NAME%` is that variable (left as it is when unset).
 */
export const expandEnvPath = (
  value: string,
  env: NodeJS.ProcessEnv = process.env,
  platform: NodeJS.Platform = process.platform,
): string => {
  const home = (platform === "win32" ? env.USERPROFILE : env.HOME) || homedir()
  const withHome = value === "~" ? home : /^~[/\\]/.test(value) ? join(home, value.slice(2)) : value
  if (platform !== "win32") return withHome
  return withHome.replace(/%([^%]+)%/g, (reference, name: string) => env[name] || reference)
}

/** Resolves the data directory from a flag value and the environment. */
export const resolveDataDir = (
  flag: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
  platform: NodeJS.Platform = process.platform,
): DataDirLocation => {
  if (flag !== undefined && flag !== "") return { path: resolve(flag), source: "flag" }
  const fromEnv = (value: string) => resolve(expandEnvPath(value, env, platform))
  if (env.MNEMOS_DATA_DIR) return { path: fromEnv(env.MNEMOS_DATA_DIR), source: "environment" }
  // The seeds' variables, kept for their users: below mnemos's own.
  if (env.MCP_MEMORY_STORE_DIR) return { path: fromEnv(env.MCP_MEMORY_STORE_DIR), source: "MCP_MEMORY_STORE_DIR" }
  if (env.MEMORY_PATH) return { path: fromEnv(env.MEMORY_PATH), source: "MEMORY_PATH" }
  // The XDG spec: a relative $XDG_DATA_HOME is invalid and ignored.
  if (env.XDG_DATA_HOME && isAbsolute(env.XDG_DATA_HOME))
    return { path: resolve(env.XDG_DATA_HOME, "mnemos"), source: "xdg" }
  return { path: join(homedir(), ".local", "share", "mnemos"), source: "default" }
}

/**
 * Why `dir` cannot be a data directory because of what it is, or undefined: it is a file, or it
 * does not exist and is named like a JSON file (`memory.jsonl`, what `MEMORY_FILE_PATH` of the
 * official memory server names), which the user almost certainly meant as a file.
 */
export const dataDirShapeProblem = (dir: string): string | undefined => {
  let stats: fs.Stats | undefined
  try {
    stats = fs.statSync(dir)
  } catch {
    stats = undefined
  }
  const looksLikeFile = stats === undefined && /\.jsonl?$/i.test(dir)
  if ((stats === undefined || stats.isDirectory()) && !looksLikeFile) return undefined
  return `${dir} ${stats === undefined ? "is named like a file" : "is a file"}, not a directory: mnemos keeps its stores in a data directory (seed 000's MEMORY_PATH names a directory too). Point the variable at a directory; a memory.jsonl of @modelcontextprotocol/server-memory is brought in with: mnemos import --format official-jsonl FILE`
}

/** The owner recorded in `mnemos.lock`. */
export interface LockOwner {
  readonly pid: number
  readonly host: string
  readonly startedAt: string
  readonly command: string
  /** The kernel's boot id (Linux), to tell a lock left before a reboot. */
  readonly bootId?: string
  /** The process's start time in clock ticks since boot (Linux), to tell a reused pid. */
  readonly processStart?: number
}

/** Why the data directory could not be taken. */
export class DataDirError extends Schema.TaggedError<DataDirError>()("DataDirError", {
  reason: Schema.Literals(["Locked", "Io", "Unsafe", "Config", "NotADirectory"]),
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
const takeoverAttemptsMax = 20
/** How old an unparseable lock must be to count as torn by a crash rather than being written. */
export const tornLockAgeMs = 10_000
const takeoverFileName = `${lockFileName}.takeover`

/** Whether process `pid` exists (on this host); one owned by another user exists too. */
export const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

/** Linux's boot id; undefined elsewhere. */
const bootId = (): string | undefined => {
  try {
    return fs.readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim()
  } catch {
    return undefined
  }
}

/** A process's start time in clock ticks since boot (Linux, field 22 of /proc/<pid>/stat); undefined elsewhere. */
const processStart = (pid: number): number | undefined => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    // The command name (field 2) may hold spaces and parentheses: count fields after its last ")".
    const start = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19])
    return Number.isFinite(start) ? start : undefined
  } catch {
    return undefined
  }
}

/** What tells this process from every other, past or present: pid, host, boot, start tick. */
const thisProcessIdentity = (): Pick<LockOwner, "pid" | "host" | "bootId" | "processStart"> => {
  const boot = bootId()
  const start = processStart(process.pid)
  return {
    pid: process.pid,
    host: hostname(),
    ...(boot !== undefined ? { bootId: boot } : {}),
    ...(start !== undefined ? { processStart: start } : {}),
  }
}

/** Whether `owner` is this very process (not an earlier one that had the same pid). */
const isThisProcess = (owner: LockOwner): boolean => {
  const self = thisProcessIdentity()
  return (
    owner.pid === self.pid &&
    owner.host === self.host &&
    owner.bootId === self.bootId &&
    owner.processStart === self.processStart
  )
}

/** Reads the lock's owner, or undefined when there is no (readable) lock. */
export const readLockOwner = (dir: string): LockOwner | undefined => {
  try {
    return JSON.parse(fs.readFileSync(join(dir, lockFileName), "utf8")) as LockOwner
  } catch {
    return undefined
  }
}

/** True when the recorded owner is a live process on this host, the very process that took the lock. */
export const isOwnerHere = (owner: LockOwner): boolean => {
  if (owner.host !== hostname()) return false
  // Our own pid: this process, or an earlier one that had it (a container restarted, say).
  if (owner.pid === process.pid) return isThisProcess(owner)
  const boot = bootId()
  if (owner.bootId !== undefined && boot !== undefined && owner.bootId !== boot) return false
  if (!isAlive(owner.pid)) return false
  const start = owner.processStart === undefined ? undefined : processStart(owner.pid)
  return start === undefined || start === owner.processStart
}

/**
 * True unless the owner is known to be gone: a live process here, or a process on another host,
 * which cannot be checked from here and so is taken to be alive.
 */
export const isOwnerAlive = (owner: LockOwner): boolean => owner.host !== hostname() || isOwnerHere(owner)

/** Writes `text` to a new file at `path` (EEXIST when there is one); returns it still open. */
const writeNew = (path: string, text: string): number => {
  const fd = fs.openSync(path, "wx", 0o600)
  try {
    fs.writeSync(fd, text)
  } catch (error) {
    fs.closeSync(fd)
    throw error
  }
  return fd
}

/**
 * Syncs and closes `fd` off the event loop. A lock record matters only while its process lives:
 * after the machine crashes, a record that reached the disk empty is torn, and stale once older
 * than `tornLockAgeMs`, sooner than any machine restarts. Synced before going on, it cost every
 * start a disk flush (6 ms on the benchmark machine, before a first MCP answer).
 */
const syncInBackground = (fd: number): void =>
  fs.fsync(fd, () => {
    fs.close(fd, () => {})
  })

/**
 * Creates `path` holding `owner`, whole, unless it exists: the record is written under a
 * temporary name, then hard-linked into place (atomic, and failing with EEXIST like O_EXCL). On a
 * file system without hard links, falls back to O_EXCL and a write.
 */
const tryCreate = (path: string, owner: LockOwner): boolean => {
  const text = JSON.stringify(owner)
  const temporary = `${path}.new-${process.pid}-${randomBytes(4).toString("hex")}`
  const fd = writeNew(temporary, text)
  try {
    fs.linkSync(temporary, path)
    return true
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === "EEXIST") return false
    if (code !== "EPERM" && code !== "ENOTSUP" && code !== "EOPNOTSUPP") throw error
  } finally {
    fs.rmSync(temporary, { force: true })
    syncInBackground(fd)
  }
  try {
    syncInBackground(writeNew(path, text))
    return true
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return false
    throw error
  }
}

/** Blocks this thread for `ms` (start-up only: waiting for another taker to finish). */
const pause = (ms: number): void => {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)
}

/** Whether a lock file's text names an owner that is gone (or is a torn file old enough). */
const isStale = (path: string, text: string): boolean => {
  try {
    return !isOwnerAlive(JSON.parse(text) as LockOwner)
  } catch {
    try {
      return Date.now() - fs.statSync(path).mtimeMs > tornLockAgeMs
    } catch {
      return false
    }
  }
}

/** Removes `path` if it still holds `judged` (moved aside, re-read, put back if it changed meanwhile). */
const removeIfUnchanged = (path: string, judged: string): void => {
  const aside = `${path}.stale-${process.pid}-${randomBytes(4).toString("hex")}`
  try {
    fs.renameSync(path, aside)
  } catch {
    return // gone already
  }
  if (fs.readFileSync(aside, "utf8") !== judged) {
    try {
      fs.linkSync(aside, path)
    } catch {
      // a newer file is in place
    }
  }
  fs.rmSync(aside, { force: true })
}

/**
 * Removes the stale lock whose text is `judged`, holding the takeover lock meanwhile, so no other
 * taker touches `lock` at the same time. Returns without removing anything when another taker holds
 * the takeover lock (after a pause) or the lock changed hands.
 */
const takeOver = (dir: string, judged: string, self: LockOwner): void => {
  const lockPath = join(dir, lockFileName)
  const takeoverPath = join(dir, takeoverFileName)
  if (!tryCreate(takeoverPath, self)) {
    // Another taker is at work, or one crashed in the middle: then its takeover lock is stale.
    let text: string
    try {
      text = fs.readFileSync(takeoverPath, "utf8")
    } catch {
      return
    }
    if (isStale(takeoverPath, text)) removeIfUnchanged(takeoverPath, text)
    else pause(20)
    return
  }
  try {
    let current: string
    try {
      current = fs.readFileSync(lockPath, "utf8")
    } catch {
      return // released meanwhile
    }
    if (current === judged) fs.rmSync(lockPath, { force: true })
  } finally {
    fs.rmSync(takeoverPath, { force: true })
  }
}

const acquire = (dir: string, command: string): LockOwner => {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
  const lockPath = join(dir, lockFileName)
  const owner: LockOwner = { ...thisProcessIdentity(), startedAt: new Date().toISOString(), command }
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
      current = undefined
    }
    if (current !== undefined && isThisProcess(current)) {
      throw new DataDirError({
        reason: "Locked",
        path: dir,
        ownerPid: current.pid,
        message: `${dir} is already open in this process`,
      })
    }
    if (current !== undefined && current.host !== owner.host) {
      throw new DataDirError({
        reason: "Locked",
        path: dir,
        ownerPid: current.pid,
        message: `data directory ${dir} is locked by mnemos process ${current.pid} on host ${current.host} (${current.command}, since ${current.startedAt}), which cannot be checked from here; if that process is gone (or the host was renamed), remove ${lockPath}`,
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
    if (current === undefined && !isStale(lockPath, text)) {
      pause(50) // being written by a process of an older version, or torn a moment ago
      continue
    }
    takeOver(dir, text, owner)
  }
  throw new DataDirError({
    reason: "Locked",
    path: dir,
    message: `could not take the lock of ${dir}: ${lockPath} keeps changing hands, or is unreadable and was written moments ago (another process starting?); try again, or remove it if no mnemos process uses this directory`,
  })
}

const release = (dir: string, owner: LockOwner): void => {
  const lockPath = join(dir, lockFileName)
  let text: string
  try {
    text = fs.readFileSync(lockPath, "utf8")
  } catch {
    return
  }
  if (text === JSON.stringify(owner)) fs.rmSync(lockPath, { force: true })
}

/** Takes the lock, then puts the directory's config.json in force (releasing the lock if it is bad). */
const acquireChecked = (dir: string, command: string, allowUnsafe: boolean): LockOwner => {
  const shape = dataDirShapeProblem(dir)
  if (shape !== undefined) throw new DataDirError({ reason: "NotADirectory", path: dir, message: shape })
  if (!allowUnsafe) {
    const problems = dataDirSafetyProblems(dir)
    if (problems.length > 0) throw refuseUnsafe(dir, problems)
  }
  privateUmask()
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
 * when `AllowUnsafeDataDir` is set), puts its config.json in force, and makes the directory
 * private (saying so on stderr when it was not).
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
    ).pipe(
      Effect.tap(() =>
        Effect.suspend(() => {
          const changed = tightenDataDir(dir)
          return changed.length === 0 ? Effect.void : Console.error(`mnemos: ${describeTightened(dir, changed)}`)
        }),
      ),
    ),
  )
