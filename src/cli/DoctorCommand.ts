/**
 * `mnemos doctor`: checks everything a start depends on and, for each problem, prints the command
 * that fixes it.
 *
 * Checks: the data directory (exists, writable, safe path), its permissions (nothing in it
 * readable by other users — a start tightens it —, token 0600), config.json, the lock and its owner, the daemon and its ports, the embedding model, free
 * disk space, every store's log, and how far the search index lags the stores. It reads only: the
 * store logs are checked on a read-only view of the disk (stores/WalRepair.ts), and only while no
 * process owns the data directory (a running daemon is asked for its stores' health instead).
 * Exit code 1 when a check failed; warnings alone exit 0.
 */
import * as fs from "node:fs"
import { createServer } from "node:net"
import { hostname } from "node:os"
import { dirname, join } from "node:path"
import { Console, Effect, Option, Result, Schema } from "effect"
import { Command, Flag } from "effect/cli"
import type { StoreHealth } from "../actors/StoreActor.ts"
import { domainStores } from "../Engine.ts"
import { defaultModelName, packagedModelDir } from "../search/embedding/Embedder.ts"
import { defaultVocabularySize, isStaticModelCurrent } from "../search/embedding/StaticModelBuild.ts"
import { openLmdbPersistence } from "../search/persistence/SearchPersistence.ts"
import {
  type DataDirLocation,
  dataDirSafetyProblems,
  isOwnerAlive,
  lockFileName,
  readLockOwner,
  resolveDataDir,
  tornLockAgeMs,
} from "../stores/datadir/DataDir.ts"
import { dataDirConfigFileName, readDataDirConfig } from "../stores/datadir/DataDirConfig.ts"
import { looseEntries } from "../stores/datadir/DataDirPermissions.ts"
import { readMembership } from "../stores/shared/SharedMemory.ts"
import { checkStoreLog, storeDirs } from "../stores/wal/WalRepair.ts"
import { defaultHost, ping, readDaemonInfo } from "../transports/Daemon.ts"
import { fetchDaemonStats, runningDaemon } from "./HealthCommand.ts"
import { noNatsFlags, resolveNats, settingsOf } from "./NatsFlags.ts"
import { dataDirFlag, portFlag } from "./ServeCommand.ts"

/** Below this much free space a write may fail soon. */
const diskBytesFail = 100 * 1024 * 1024
/** Below this much free space, say so. */
const diskBytesWarn = 1024 * 1024 * 1024

/** One finding. */
export interface Finding {
  readonly level: "ok" | "warn" | "fail"
  readonly check: string
  readonly detail: string
  /** The command (or action) that fixes it. */
  readonly fix?: string
}

/** At least one check failed; the findings were printed. */
export class DoctorFailed extends Schema.TaggedError<DoctorFailed>()("DoctorFailed", { message: Schema.String }) {}

const ok = (check: string, detail: string): Finding => ({ level: "ok", check, detail })
const warn = (check: string, detail: string, fix?: string): Finding => ({
  level: "warn",
  check,
  detail,
  ...(fix ? { fix } : {}),
})
const fail = (check: string, detail: string, fix: string): Finding => ({ level: "fail", check, detail, fix })
const mode = (stats: fs.Stats) => `0${(stats.mode & 0o777).toString(8)}`
const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(0)} MiB`

const checkDirectory = (location: DataDirLocation): ReadonlyArray<Finding> => {
  const dir = location.path
  if (!fs.existsSync(dir))
    return [
      ok(
        "data directory",
        `${dir} (from ${location.source}) does not exist yet; the first start creates it (mode 0700)`,
      ),
    ]
  const stats = fs.statSync(dir)
  if (!stats.isDirectory())
    return [fail("data directory", `${dir} is not a directory`, `mv ${dir} ${dir}.old  (or choose another --data-dir)`)]
  const findings: Array<Finding> = []
  try {
    fs.accessSync(dir, fs.constants.R_OK | fs.constants.W_OK | fs.constants.X_OK)
    findings.push(ok("data directory", `${dir} (from ${location.source})`))
  } catch {
    findings.push(
      fail("data directory", `${dir} is not readable and writable by you`, `chmod u+rwx ${dir}  (or chown it to you)`),
    )
  }
  for (const problem of dataDirSafetyProblems(dir)) findings.push(fail("path safety", problem.message, problem.fix))
  if (process.platform !== "win32") {
    const loose = looseEntries(dir)
    if (loose.length > 0 && (stats.mode & 0o002) === 0)
      findings.push(
        warn(
          "permissions",
          `${loose.length} file(s) and folder(s) of ${dir} are readable by other users (such as ${loose[0]!.path}, mode 0${loose[0]!.mode.toString(8)}); memories are private, and the next start of mnemos makes them 0600 / 0700`,
          `chmod -R go-rwx ${dir}  (or start mnemos)`,
        ),
      )
    const token = join(dir, "token")
    if (fs.existsSync(token) && (fs.statSync(token).mode & 0o077) !== 0)
      findings.push(
        fail(
          "permissions",
          `${token} (the bearer token) is readable by other users (mode ${mode(fs.statSync(token))})`,
          `chmod 600 ${token}`,
        ),
      )
  }
  return findings
}

const checkConfig = (dir: string): Finding => {
  const config = readDataDirConfig(dir)
  if (Result.isFailure(config))
    return fail(
      "config",
      config.failure,
      `edit ${join(dir, dataDirConfigFileName)} (docs/privacy.md describes it), or move it away`,
    )
  const privacy = config.success.privacy
  return ok(
    "config",
    config.success.present
      ? `${config.success.path}: ${privacy.customPatterns.length} custom pattern(s), ${privacy.disabledKinds.length} built-in kind(s) off`
      : "no config.json (every default)",
  )
}

const checkLock = (dir: string): { finding: Finding; ownerAlive: boolean } => {
  const owner = readLockOwner(dir)
  const lockPath = join(dir, lockFileName)
  if (owner === undefined) {
    if (fs.existsSync(lockPath))
      return {
        finding: warn(
          "lock",
          `${lockPath} is unreadable (torn by a crash, or being written right now); a start takes it over once it is ${tornLockAgeMs / 1000} s old`,
        ),
        ownerAlive: false,
      }
    return { finding: ok("lock", "not in use"), ownerAlive: false }
  }
  if (owner.host !== hostname())
    return {
      finding: warn(
        "lock",
        `held by pid ${owner.pid} on host ${owner.host} (${owner.command}) since ${owner.startedAt}, which cannot be checked from here; a start here is refused`,
        `rm ${lockPath} if no mnemos process on ${owner.host} uses this directory (or this host was renamed)`,
      ),
      ownerAlive: true,
    }
  if (isOwnerAlive(owner))
    return {
      finding: ok("lock", `in use by pid ${owner.pid} (${owner.command}) since ${owner.startedAt}`),
      ownerAlive: true,
    }
  return {
    finding: warn(
      "lock",
      `left by pid ${owner.pid} (${owner.command}), which is not running here any more; the next start takes it over`,
      "nothing to do",
    ),
    ownerAlive: false,
  }
}

const portFree = (host: string, port: number) =>
  new Promise<boolean>((resolve) => {
    const server = createServer()
    server.once("error", () => resolve(false))
    server.listen(port, host, () => server.close(() => resolve(true)))
  })

const checkDaemon = (dir: string, port: number) =>
  Effect.promise(async (): Promise<{ findings: ReadonlyArray<Finding>; stores?: ReadonlyArray<StoreHealth> }> => {
    const daemon = await runningDaemon(dir)
    if (daemon !== undefined) {
      let stores: ReadonlyArray<StoreHealth> | undefined
      try {
        stores = (await fetchDaemonStats(dir, daemon)).stores as ReadonlyArray<StoreHealth>
      } catch {
        stores = undefined
      }
      return {
        findings: [ok("daemon", `answers on ${daemon.host}:${daemon.port} (pid ${daemon.pid})`)],
        ...(stores !== undefined ? { stores } : {}),
      }
    }
    const findings: Array<Finding> = []
    const recorded = readDaemonInfo(dir)
    if (recorded !== undefined)
      findings.push(
        warn(
          "daemon",
          `${join(dir, "daemon.json")} names pid ${recorded.pid} on ${recorded.host}:${recorded.port}, which does not answer (it did not shut down cleanly)`,
          `nothing to do: the next mnemos serve rewrites it (or: rm ${join(dir, "daemon.json")})`,
        ),
      )
    else findings.push(ok("daemon", "not running (mnemos mcp starts it when a client connects)"))
    if (!(await portFree(defaultHost, port))) {
      const other = await ping(defaultHost, port)
      findings.push(
        other !== undefined
          ? warn(
              "ports",
              `port ${port} is taken by the mnemos daemon of another data directory (${other.dataDir}, pid ${other.pid})`,
              `mnemos serve --port ${port + 2} --data-dir ${dir}  (and give the same --port to mnemos mcp)`,
            )
          : fail(
              "ports",
              `port ${port} on ${defaultHost} is in use by another program`,
              `mnemos serve --port ${port + 2}  (and mnemos mcp --port ${port + 2})`,
            ),
      )
    } else findings.push(ok("ports", `${defaultHost}:${port} is free`))
    return { findings }
  })

const checkModel = (dir: string): Finding => {
  try {
    if (isStaticModelCurrent(packagedModelDir(), defaultVocabularySize))
      return ok("model files", `the default embedding model is built (${packagedModelDir()})`)
    const cached = join(dir, "search", "models", defaultModelName)
    if (isStaticModelCurrent(cached, defaultVocabularySize))
      return ok("model files", `the default embedding model is in ${cached}`)
    return warn(
      "model files",
      "the default embedding model is not built; the first start builds it into the data directory (a few seconds; search is full-text only meanwhile)",
      "npm run build",
    )
  } catch (error) {
    return fail(
      "model files",
      `cannot check the embedding model: ${error instanceof Error ? error.message : String(error)}`,
      "npm install && npm run build",
    )
  }
}

const checkDisk = (dir: string): Finding => {
  let probe = dir
  while (!fs.existsSync(probe) && dirname(probe) !== probe) probe = dirname(probe)
  try {
    const stats = fs.statfsSync(probe)
    const free = Number(stats.bavail) * Number(stats.bsize)
    if (free < diskBytesFail)
      return fail(
        "disk space",
        `${mib(free)} free on the file system of ${probe}`,
        `free space on that file system (du -sh ${probe}/*)`,
      )
    if (free < diskBytesWarn)
      return warn("disk space", `${mib(free)} free on the file system of ${probe}`, "free some space soon")
    return ok("disk space", `${mib(free)} free`)
  } catch (error) {
    return warn("disk space", `cannot tell: ${error instanceof Error ? error.message : String(error)}`)
  }
}

const checkStores = (dir: string, ownerAlive: boolean, daemonStores: ReadonlyArray<StoreHealth> | undefined) =>
  Effect.gen(function* () {
    const findings: Array<Finding> = []
    const lastSeqs = new Map<string, number>()
    if (daemonStores !== undefined) {
      for (const store of daemonStores)
        findings.push(
          store.state === "running"
            ? ok(`store ${store.name}`, `running, applied sequence ${store.appliedSeq}`)
            : fail(
                `store ${store.name}`,
                `${store.state}${store.lastError ? `: ${store.lastError}` : ""}`,
                "stop the daemon, then run mnemos repair",
              ),
        )
      return { findings, lastSeqs }
    }
    if (ownerAlive)
      return { findings: [ok("stores", "not checked: another process owns the data directory")], lastSeqs }
    for (const { store, dir: storeDir } of storeDirs(dir)) {
      const check = yield* checkStoreLog(store, storeDir)
      lastSeqs.set(store, check.lastSeq ?? check.appliedSeq)
      if (check.state === "ok") findings.push(ok(`store ${store}`, `log opens, up to sequence ${check.lastSeq}`))
      else if (check.state === "torn-tail")
        findings.push(warn(`store ${store}`, check.message ?? "torn tail", "nothing to do: the next start cuts it off"))
      else if (check.state === "corrupt")
        findings.push(fail(`store ${store}`, `corrupt log: ${check.message}`, `mnemos repair --data-dir ${dir}`))
      else findings.push(fail(`store ${store}`, `${check.message}`, `check the permissions of ${storeDir}`))
    }
    if (findings.length === 0) findings.push(ok("stores", "none yet"))
    return { findings, lastSeqs }
  })

/** Search's file is reported as swollen past this many bytes more than its data uses (and twice it). */
export const searchSlackBytesMax = 64 * 1024 * 1024

/**
 * The search index: whether it is behind a store, and whether its file is much larger than its
 * data (space freed by deletions, or left by mnemos before 2026-12-02, whose load kept one read
 * snapshot open while indexing committed: a daemon maps the live pages scattered through it).
 */
const checkSearchIndex = (dir: string, lastSeqs: ReadonlyMap<string, number>): ReadonlyArray<Finding> => {
  const path = join(dir, "search", "lmdb")
  if (lastSeqs.size === 0) return []
  if (!fs.existsSync(path))
    return [warn("index lag", "the search index is not built yet; the next start builds it from the stores")]
  let persistence: ReturnType<typeof openLmdbPersistence> | undefined
  try {
    persistence = openLmdbPersistence(path)
    const behind = [...lastSeqs.entries()]
      .map(([store, seq]) => ({ store, lag: seq - (persistence!.seq(store) ?? 0) }))
      .filter((entry) => entry.lag > 0)
    const fileBytes = fs.statSync(join(path, "data.mdb")).size
    const usedBytes = persistence.sizeBytes()
    return [
      behind.length === 0
        ? ok("index lag", "the search index is up to date with every store")
        : warn(
            "index lag",
            `the search index is behind: ${behind.map((entry) => `${entry.store} by ${entry.lag} event(s)`).join(", ")}; the next start catches up`,
            `nothing to do (or rebuild it from scratch: rm -r ${join(dir, "search")})`,
          ),
      fileBytes - usedBytes > searchSlackBytesMax && fileBytes > 2 * usedBytes
        ? warn(
            "search file",
            `the search index's file is ${mib(fileBytes)} for ${mib(usedBytes)} of data (free pages: a daemon keeps more of it in memory than it needs)`,
            `mnemos compact --data-dir ${dir}`,
          )
        : ok("search file", `${mib(fileBytes)} for ${mib(usedBytes)} of data`),
    ]
  } catch (error) {
    return [
      warn(
        "index lag",
        `cannot read the search index: ${error instanceof Error ? error.message : String(error)}`,
        `rm -r ${join(dir, "search")}  (it is rebuilt from the stores)`,
      ),
    ]
  } finally {
    void persistence?.close()
  }
}

/** How long doctor waits for NATS. */
const natsProbeTimeoutMs = 3_000

/**
 * The shared memory, when the data directory is in one (or configured for one): NATS reachable, the
 * stores' streams and, with a daemon running, how far each store is behind its stream.
 */
const checkSharedMemory = (dir: string, stores: ReadonlyArray<StoreHealth> | undefined) =>
  Effect.gen(function* () {
    const resolved = resolveNats(noNatsFlags, dir)
    const membership = readMembership(dir)
    if (resolved.servers === undefined)
      return [ok("shared memory", "none: a local memory (serve --nats URL shares one; docs/scaling.md)")]
    const settings = settingsOf(resolved, membership?.daemonId ?? "doctor")!
    const where = `"${settings.prefix}" on NATS ${settings.servers.join(", ")}`
    const findings: Array<Finding> = []
    if (membership === undefined)
      findings.push(
        warn(
          "shared memory",
          `configured (${resolved.servers.source}) but this data directory has not joined ${where}`,
          `mnemos cluster join --data-dir ${dir}  (moves a local memory in; an empty data directory joins on its first start)`,
        ),
      )
    const reached = yield* Effect.scoped(
      Effect.gen(function* () {
        const { makeNats } = yield* Effect.promise(() => import("../stores/shared/Nats.ts"))
        const { currentStreamOf } = yield* Effect.promise(() => import("../stores/shared/StoreGenerations.ts"))
        const nats = yield* makeNats(settings)
        const streams: Array<string> = []
        for (const store of domainStores) {
          const info = yield* Effect.promise(() =>
            currentStreamOf(nats, store.name)
              .then((name) => nats.manager.streams.info(name))
              .catch(() => undefined),
          )
          const position = stores?.find((health) => health.name === store.name)?.wal?.position
          if (info !== undefined)
            streams.push(
              `${store.name} ${info.state.last_seq}${position !== undefined ? ` (behind by ${Math.max(0, info.state.last_seq - position)})` : ""}`,
            )
        }
        return { server: nats.connection.getServer(), streams }
      }),
    ).pipe(Effect.timeoutOption(natsProbeTimeoutMs), Effect.result)
    if (reached._tag === "Failure" || reached.success._tag === "None") {
      const why =
        reached._tag === "Failure" ? reached.failure.message : `no answer within ${natsProbeTimeoutMs / 1000} s`
      findings.push(
        fail(
          "shared memory",
          `NATS unreachable for ${where}: ${why}; writes fail with Unavailable while reads serve the local copy`,
          "start the NATS servers (or check --nats and the network), or `mnemos cluster leave` to keep a local copy",
        ),
      )
      return findings
    }
    const { server, streams } = reached.success.value
    findings.push(
      ok(
        "shared memory",
        `${where}: connected to ${server}; stream positions ${streams.length > 0 ? streams.join(", ") : "(no stream yet)"}`,
      ),
    )
    return findings
  })

/** Every check, in order. */
export const runChecks = (location: DataDirLocation, port: number) =>
  Effect.gen(function* () {
    const dir = location.path
    const findings: Array<Finding> = [...checkDirectory(location)]
    const exists = fs.existsSync(dir)
    if (exists) findings.push(checkConfig(dir))
    const lock = exists ? checkLock(dir) : { finding: ok("lock", "not in use"), ownerAlive: false }
    findings.push(lock.finding)
    const daemon = yield* checkDaemon(dir, port)
    findings.push(...daemon.findings)
    findings.push(checkModel(dir), checkDisk(dir))
    if (exists) findings.push(...(yield* checkSharedMemory(dir, daemon.stores)))
    if (exists) {
      const stores = yield* checkStores(dir, lock.ownerAlive, daemon.stores)
      findings.push(...stores.findings)
      if (!lock.ownerAlive) {
        findings.push(...checkSearchIndex(dir, stores.lastSeqs))
      }
    }
    return findings
  })

const symbol = { ok: "✓", warn: "!", fail: "✗" } as const

export const doctorCommand = Command.make(
  "doctor",
  {
    dataDir: dataDirFlag,
    port: portFlag,
    json: Flag.Boolean("json").pipe(Flag.withDescription("Print JSON"), Flag.withDefault(false)),
  },
  Effect.fn(function* ({ dataDir, port, json }) {
    const location = resolveDataDir(Option.getOrUndefined(dataDir))
    const findings = yield* runChecks(location, port)
    if (json) yield* Console.log(JSON.stringify({ dataDir: location.path, findings }, null, 2))
    else {
      yield* Console.log(`mnemos doctor: ${location.path}`)
      for (const finding of findings) {
        yield* Console.log(`${symbol[finding.level]} ${finding.check}: ${finding.detail}`)
        if (finding.fix !== undefined && finding.level !== "ok") yield* Console.log(`    fix: ${finding.fix}`)
      }
    }
    const failed = findings.filter((finding) => finding.level === "fail").length
    const warned = findings.filter((finding) => finding.level === "warn").length
    if (!json)
      yield* Console.log(
        failed + warned === 0 ? "everything looks right" : `${failed} problem(s), ${warned} warning(s)`,
      )
    if (failed > 0)
      return yield* new DoctorFailed({ message: `${failed} problem(s) found; each is listed above with its fix` })
  }),
).pipe(
  Command.withDescription("Check the data directory, lock, daemon, ports, model, disk, stores and index; print fixes"),
)
