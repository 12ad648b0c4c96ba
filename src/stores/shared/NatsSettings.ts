/**
 * How a daemon joins a shared memory (`mnemos serve --nats ...`), and the checks on it: a leaf, so
 * that reading the flags and the config file never loads the NATS client (Nats.ts does, and only a
 * daemon of a shared memory imports it).
 */

/** A shared memory's name: what its streams are named after (letters, digits, `-`, `_`). */
export const natsPrefixPattern = /^[A-Za-z0-9_-]{1,32}$/
/** How long the first connection may take before the daemon gives up starting. */
export const natsConnectTimeoutMs = 5_000
/** After this long disconnected, writes stop waiting for a reconnection and fail at once. */
export const natsFailFastAfterMs = 2_000

/** How a daemon joins a shared memory. */
export interface NatsSettings {
  /** `nats://host:port` or `tls://host:port` URLs of the cluster's servers (any of them will do). */
  readonly servers: ReadonlyArray<string>
  /** Names the shared memory: one NATS can hold several (default "mnemos"). */
  readonly prefix: string
  /** Replicas of each store's stream; default 3 when the server is in a cluster, else 1. */
  readonly replicas?: number
  /** A NATS credentials file (JWT and seed), when the servers require one. */
  readonly credsFile?: string
  /** This daemon's id: the origin of its appends, and its name in the cluster's presence list. */
  readonly daemonId: string
  /**
   * How long a store's writer lease lasts without a renewal (src/cluster/WriterLeases.ts): the
   * longest a store's writes wait after its holder dies. Default `defaultLeaseMs`.
   */
  readonly leaseMs?: number
}

/** A writer lease's length by default (`--nats-lease-ms`). */
export const defaultLeaseMs = 3_000
/** Shortest and longest writer lease accepted. */
export const leaseMsMin = 500
export const leaseMsMax = 60_000

/** Checks settings before connecting; the message says what is wrong. */
export const validateNatsSettings = (settings: NatsSettings): string | undefined => {
  if (settings.servers.length === 0) return "--nats needs at least one server URL"
  for (const server of settings.servers) {
    if (!/^(nats|tls):\/\/[^\s/]+$/.test(server) && !/^[^\s/:]+:\d+$/.test(server))
      return `"${server}" is not a NATS server URL (nats://host:port or tls://host:port)`
  }
  if (!natsPrefixPattern.test(settings.prefix))
    return `--nats-prefix "${settings.prefix}" may hold only letters, digits, "-" and "_" (at most 32)`
  if (
    settings.replicas !== undefined &&
    (!Number.isInteger(settings.replicas) || settings.replicas < 1 || settings.replicas > 5)
  )
    return `--nats-replicas must be 1 to 5 (JetStream's limit), not ${settings.replicas}`
  if (
    settings.leaseMs !== undefined &&
    (!Number.isInteger(settings.leaseMs) || settings.leaseMs < leaseMsMin || settings.leaseMs > leaseMsMax)
  )
    return `--nats-lease-ms must be a whole number from ${leaseMsMin} to ${leaseMsMax}, not ${settings.leaseMs}`
  return undefined
}
