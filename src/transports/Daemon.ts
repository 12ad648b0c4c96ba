/**
 * The daemon's presence on disk and on the network: where a data directory's daemon listens
 * (`daemon.json` in the data directory, written once listening, removed at shutdown), its bearer
 * token (`token`, mode 0600, made on first need), and `/ping` probes used by `mnemos serve` (is
 * this port already ours?) and by the `mnemos mcp` shim (is the daemon up?).
 */
import { randomBytes } from "node:crypto"
import { chmodSync, existsSync, readFileSync, rmSync } from "node:fs"
import { request } from "node:http"
import { join } from "node:path"
import { writeFileAtomic } from "../cli/AtomicFile.ts"
import { isAlive } from "../stores/DataDir.ts"

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

/** GET /ping on host:port; undefined when nothing (or not mnemos) answers in time. */
export const ping = (host: string, port: number, timeoutMs = pingTimeoutMs): Promise<PingAnswer | undefined> =>
  new Promise((resolve) => {
    const req = request(
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
