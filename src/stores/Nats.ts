/**
 * The daemon's connection to the NATS JetStream servers that hold a shared memory
 * (`mnemos serve --nats URL[,URL...]`). One client connection per daemon, for every store's log.
 *
 * Owns the connection and what is known of its condition: whether it is connected now, since when
 * it is not, and the last error. The client reconnects by itself, to any server of the cluster, for as
 * long as the daemon runs; while it is away, a store's writes fail fast with `Unavailable` naming the
 * servers (JetStreamWal.ts) and reads go on from local state.
 */
import { readFileSync } from "node:fs"
import { type JetStreamClient, type JetStreamManager, jetstream, jetstreamManager } from "@nats-io/jetstream"
import { connect, credsAuthenticator, type NatsConnection } from "@nats-io/transport-node"
import { Context, Effect, Layer, Schema } from "effect"

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
}

/** Why NATS could not be used. */
export class NatsError extends Schema.TaggedError<NatsError>()("NatsError", {
  reason: Schema.Literals(["Unreachable", "Config"]),
  message: Schema.String,
}) {}

/** The connection's condition, for health and doctor. */
export interface NatsStatus {
  readonly servers: ReadonlyArray<string>
  readonly prefix: string
  readonly connected: boolean
  /** The server connected to now. */
  readonly server?: string
  /** When the connection was lost, if it is lost. */
  readonly disconnectedSince?: number
  readonly lastError?: string
}

/** The daemon's NATS connection. */
export class Nats extends Context.Service<
  Nats,
  {
    readonly settings: NatsSettings
    readonly connection: NatsConnection
    readonly jetstream: JetStreamClient
    readonly manager: JetStreamManager
    /** Stream replicas this daemon asks for when it creates a stream. */
    readonly replicas: number
    readonly status: () => NatsStatus
    /** Why writes must not wait now (disconnected for longer than `natsFailFastAfterMs`), if so. */
    readonly unavailable: () => string | undefined
  }
>()("mnemos/stores/Nats") {}

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
  return undefined
}

/** Connects; the connection closes (draining) when the scope closes. */
export const makeNats = (settings: NatsSettings) =>
  Effect.gen(function* () {
    const invalid = validateNatsSettings(settings)
    if (invalid !== undefined) return yield* new NatsError({ reason: "Config", message: invalid })
    const authenticator =
      settings.credsFile === undefined
        ? undefined
        : yield* Effect.try({
            try: () => credsAuthenticator(readFileSync(settings.credsFile!)),
            catch: (error) =>
              new NatsError({
                reason: "Config",
                message: `cannot read the NATS credentials file ${settings.credsFile}: ${error instanceof Error ? error.message : String(error)}`,
              }),
          })
    const connection = yield* Effect.tryPromise({
      try: () =>
        connect({
          servers: [...settings.servers],
          name: `mnemos daemon ${settings.daemonId}`,
          timeout: natsConnectTimeoutMs,
          maxReconnectAttempts: -1,
          reconnectTimeWait: 250,
          ...(settings.servers.some((server) => server.startsWith("tls://")) ? { tls: {} } : {}),
          ...(authenticator !== undefined ? { authenticator } : {}),
        }),
      catch: (error) =>
        new NatsError({
          reason: "Unreachable",
          message: `cannot reach NATS at ${settings.servers.join(", ")}: ${error instanceof Error ? error.message : String(error)}`,
        }),
    })
    yield* Effect.addFinalizer(() => Effect.promise(() => connection.drain().catch(() => connection.close())))
    let disconnectedSince: number | undefined
    let lastError: string | undefined
    void (async () => {
      for await (const status of connection.status()) {
        if (status.type === "disconnect") disconnectedSince ??= Date.now()
        else if (status.type === "reconnect") disconnectedSince = undefined
        else if (status.type === "error") lastError = String((status as { error?: unknown }).error ?? "error")
      }
    })()
    const manager = yield* Effect.promise(() => jetstreamManager(connection))
    const inCluster = connection.info?.cluster !== undefined
    const status = (): NatsStatus => ({
      servers: settings.servers,
      prefix: settings.prefix,
      connected: disconnectedSince === undefined && !connection.isClosed(),
      ...(connection.getServer() !== "" ? { server: connection.getServer() } : {}),
      ...(disconnectedSince !== undefined ? { disconnectedSince } : {}),
      ...(lastError !== undefined ? { lastError } : {}),
    })
    return Nats.of({
      settings,
      connection,
      jetstream: jetstream(connection),
      manager,
      replicas: settings.replicas ?? (inCluster ? 3 : 1),
      status,
      unavailable: () =>
        disconnectedSince !== undefined && Date.now() - disconnectedSince >= natsFailFastAfterMs
          ? `NATS at ${settings.servers.join(", ")} is unreachable (disconnected ${Math.round((Date.now() - disconnectedSince) / 1000)} s ago)`
          : connection.isClosed()
            ? `the connection to NATS at ${settings.servers.join(", ")} is closed`
            : undefined,
    })
  })

/** The connection as a layer. */
export const layer = (settings: NatsSettings): Layer.Layer<Nats, NatsError> => Layer.effect(Nats, makeNats(settings))
