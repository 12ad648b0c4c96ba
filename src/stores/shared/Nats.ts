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
import { type NatsSettings, natsConnectTimeoutMs, natsFailFastAfterMs, validateNatsSettings } from "./NatsSettings.ts"

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
