/**
 * The daemon's presence on disk and on the network: where a data directory's daemon listens
 * (`daemon.json` in the data directory, written once listening, removed at shutdown), its bearer
 * token (`token`, mode 0600, made on first need), and `/ping` probes used by `mnemos serve` (is
 * this port already ours?) and by the `mnemos mcp` shim (is the daemon up?), and finding or
 * starting the daemon of a data directory (`findOrStartDaemon`): the shim's first step, light
 * enough to take before the shim itself is loaded, so that the daemon starts while it loads.
 */
import { spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { chmodSync, existsSync, mkdirSync, openSync, readFileSync, rmSync } from "node:fs"
import { join, resolve as resolvePath } from "node:path"
import { writeFileAtomic } from "../cli/AtomicFile.ts"
import { withAllocatorEnv, withHelperThreads } from "../runtime/AllocatorEnv.ts"
import { isAlive } from "../stores/datadir/DataDir.ts"

/** The daemon's default port; UDP telemetry listens on the next one. */
export const defaultPort = 7437
export const defaultHost = "127.0.0.1"
/** How long a `/ping` may take before the daemon counts as not answering. */
export const pingTimeoutMs = 1500

/** What `daemon.json` records. */
export interface DaemonInfo {
  readonly pid: number
  readonly host: string
  readonly port: number
  readonly startedAt: string
}

/** What `/ping` answers. */
export interface PingAnswer {
  readonly status: string
  readonly service: string
  readonly version: string
  readonly dataDir: string
  readonly pid: number
}

const daemonFile = (dataDir: string) => join(dataDir, "daemon.json")
const tokenFile = (dataDir: string) => join(dataDir, "token")

/** Records where this process listens. */
export const writeDaemonInfo = (dataDir: string, info: DaemonInfo): void =>
  writeFileAtomic(daemonFile(dataDir), [JSON.stringify(info)])

/** Forgets it again (only if it is still ours). */
export const removeDaemonInfo = (dataDir: string): void => {
  if (readDaemonInfo(dataDir)?.pid === process.pid) rmSync(daemonFile(dataDir), { force: true })
}

/** Where the data directory's daemon said it listens, if it did. */
export const readDaemonInfo = (dataDir: string): DaemonInfo | undefined => {
  try {
    return JSON.parse(readFileSync(daemonFile(dataDir), "utf8")) as DaemonInfo
  } catch {
    return undefined
  }
}

/** The data directory's bearer token, created (0600) when missing. */
export const ensureToken = (dataDir: string): string => {
  const file = tokenFile(dataDir)
  if (!existsSync(file)) writeFileAtomic(file, [randomBytes(32).toString("base64url")])
  chmodSync(file, 0o600)
  return readFileSync(file, "utf8").trim()
}

/** The token if one exists (clients send it when they have it). */
export const readToken = (dataDir: string): string | undefined => {
  try {
    return readFileSync(tokenFile(dataDir), "utf8").trim()
  } catch {
    return undefined
  }
}

/** How long a daemon whose process is alive may take to answer /ping (a busy machine, a long GC). */
export const pingAliveTimeoutMs = 15_000

/**
 * The daemon `daemon.json` names, asked patiently: a first /ping as `ping`, and when that gets no
 * answer while the process `daemon.json` names is still alive, another with `pingAliveTimeoutMs`.
 * A live daemon is then told from a gone one by whether its process exists, not by how fast a
 * loaded machine schedules it.
 */
export const pingDaemon = async (info: DaemonInfo): Promise<PingAnswer | undefined> => {
  const answer = await ping(info.host, info.port)
  if (answer !== undefined || !isAlive(info.pid)) return answer
  return ping(info.host, info.port, pingAliveTimeoutMs)
}

/**
 * `node:http`'s `request`, loaded at the first ping: every command loads this module, and a
 * `serve --stdio` never pings (loading HTTP's modules was about 2 ms of its first answer).
 */
const httpRequest = () => process.getBuiltinModule("node:http").request

/** GET /ping on host:port; undefined when nothing (or not mnemos) answers in time. */
export const ping = (host: string, port: number, timeoutMs = pingTimeoutMs): Promise<PingAnswer | undefined> =>
  new Promise((resolve) => {
    const req = httpRequest()(
      { host, port, path: "/ping", method: "GET", timeout: timeoutMs, headers: { host: `${host}:${port}` } },
      (res) => {
        const chunks: Array<Buffer> = []
        res.on("data", (chunk: Buffer) => chunks.push(chunk))
        res.on("end", () => {
          try {
            const answer = JSON.parse(Buffer.concat(chunks).toString("utf8")) as PingAnswer
            resolve(answer.service === "mnemos" ? answer : undefined)
          } catch {
            resolve(undefined)
          }
        })
      },
    )
    req.on("timeout", () => req.destroy())
    req.on("error", () => resolve(undefined))
    req.end()
  })

/** Where to find (or start) the daemon of a data directory, and whether to start one. */
export interface DaemonTarget {
  readonly dataDir: string
  /** Where to look for (or start) the daemon when the data directory names none. */
  readonly host?: string
  readonly port?: number
  /** Start a daemon when none answers (default true). */
  readonly autoStart?: boolean
  readonly log?: (line: string) => void
}

/** What `findOrStartDaemon` found. */
export type DaemonSearch =
  /** A daemon of the data directory answers (with autoStart off: any mnemos daemon). */
  | { readonly _tag: "Found"; readonly host: string; readonly port: number }
  /** None answered and the port was free: a daemon was started there, and may not listen yet. */
  | { readonly _tag: "Started"; readonly host: string; readonly port: number }
  /** None answered, and the daemon of another data directory holds the port to start one on. */
  | { readonly _tag: "Occupied"; readonly port: number; readonly occupant: PingAnswer }
  /** None answered, and autoStart is off. */
  | { readonly _tag: "Absent" }

/** The shim's lines on stderr. */
export const shimLog = (line: string): void => void process.stderr.write(`mnemos mcp: ${line}\n`)

/** Starts a detached `mnemos serve` of `dataDir` on host:port, logging to the data directory's daemon.log. */
const startDaemon = (target: DaemonTarget, host: string, port: number): void => {
  mkdirSync(target.dataDir, { recursive: true, mode: 0o700 })
  const logFd = openSync(join(target.dataDir, "daemon.log"), "a", 0o600)
  const cli = resolvePath(process.argv[1] ?? "")
  const child = spawn(
    process.execPath,
    [
      ...withHelperThreads(process.execArgv, process.env.NODE_OPTIONS),
      cli,
      "serve",
      "--data-dir",
      target.dataDir,
      "--host",
      host,
      "--port",
      String(port),
    ],
    { detached: true, stdio: ["ignore", logFd, logFd], env: withAllocatorEnv(process.env) },
  )
  child.unref()
  ;(target.log ?? shimLog)(
    `started a daemon (pid ${child.pid}) for ${target.dataDir} on ${host}:${port}; its log is ${join(target.dataDir, "daemon.log")}`,
  )
}

/**
 * Finds the daemon of `target.dataDir` (where `daemon.json` says, else `target`'s host and port),
 * or starts one on `target`'s host and port when none answers and the port is free.
 */
export const findOrStartDaemon = async (target: DaemonTarget): Promise<DaemonSearch> => {
  const recorded = readDaemonInfo(target.dataDir)
  const host = recorded?.host ?? target.host ?? defaultHost
  const port = recorded?.port ?? target.port ?? defaultPort
  const answer = await ping(host, port)
  // With autoStart off the daemon may be remote (another machine's data directory): any mnemos answers.
  if (answer !== undefined && (answer.dataDir === target.dataDir || target.autoStart === false))
    return { _tag: "Found", host, port }
  if (target.autoStart === false) return { _tag: "Absent" }
  const wanted = { host: target.host ?? defaultHost, port: target.port ?? defaultPort }
  // Asked already when the data directory names no other place (one round trip less before a start).
  const occupant = wanted.host === host && wanted.port === port ? answer : await ping(wanted.host, wanted.port)
  if (occupant !== undefined && occupant.dataDir !== target.dataDir)
    return { _tag: "Occupied", port: wanted.port, occupant }
  if (occupant === undefined) startDaemon(target, wanted.host, wanted.port)
  return { _tag: "Started", ...wanted }
}
