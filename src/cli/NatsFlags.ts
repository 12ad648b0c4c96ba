/**
 * The `--nats*` flags of `mnemos serve` (and `mnemos cluster`), and how a data directory's shared
 * memory is settled: each setting from its flag, else its `MNEMOS_NATS*` variable, else the data
 * directory's `config.json` (`nats`), else its membership (`shared-memory.json`), else the default.
 *
 * The membership rules (SharedMemory.ts): a data directory that holds a local memory does not start
 * replicating a shared one by a flag (`mnemos cluster join` moves it in); a replica does not start
 * another memory's streams (`--nats-prefix` must name its own); a replica started without `--nats`
 * rejoins its memory on the servers it remembers.
 */
import { Effect, Option, Schema } from "effect"
import { Flag } from "effect/cli"
import { readDataDirConfig } from "../stores/datadir/DataDirConfig.ts"
import { defaultLeaseMs, type NatsSettings, validateNatsSettings } from "../stores/shared/NatsSettings.ts"
import { newDaemonId, readMembership, storesHoldingData, writeMembership } from "../stores/shared/SharedMemory.ts"

/** The default name of a shared memory. */
export const defaultNatsPrefix = "mnemos"

export const natsFlag = Flag.String("nats").pipe(
  Flag.withDescription(
    "Join a shared memory on NATS JetStream: comma-separated nats:// or tls:// server URLs (also $MNEMOS_NATS, or config.json's nats.servers; docs/scaling.md)",
  ),
  Flag.optional,
)
export const natsPrefixFlag = Flag.String("nats-prefix").pipe(
  Flag.withDescription(`The shared memory's name, so one NATS can hold several (default "${defaultNatsPrefix}")`),
  Flag.optional,
)
export const natsReplicasFlag = Flag.Int("nats-replicas").pipe(
  Flag.withDescription("Replicas of each store's stream when it is created (default 3 on a cluster, else 1)"),
  Flag.optional,
)
export const natsLeaseFlag = Flag.Int("nats-lease-ms").pipe(
  Flag.withDescription(
    `How long a store's writer lease lasts unrenewed, in ms: the longest writes wait after the daemon holding it dies (default ${defaultLeaseMs})`,
  ),
  Flag.optional,
)
export const natsCredsFlag = Flag.String("nats-creds").pipe(
  Flag.withDescription("A NATS credentials file (JWT and seed), when the servers require one"),
  Flag.optional,
)

/** The flags as parsed. */
export interface NatsFlags {
  readonly nats: Option.Option<string>
  readonly natsPrefix: Option.Option<string>
  readonly natsReplicas: Option.Option<number>
  readonly natsCreds: Option.Option<string>
  readonly natsLeaseMs?: Option.Option<number>
}

/** No `--nats*` flag given (for commands that only read the other sources). */
export const noNatsFlags: NatsFlags = {
  nats: Option.none(),
  natsPrefix: Option.none(),
  natsReplicas: Option.none(),
  natsCreds: Option.none(),
}

/** A shared memory could not be joined as asked; the message says why and what to do. */
export class SharedMemoryRefused extends Schema.TaggedError<SharedMemoryRefused>()("SharedMemoryRefused", {
  message: Schema.String,
}) {}

/** One resolved setting and where it came from (for `mnemos config`). */
export interface Sourced<A> {
  readonly value: A
  readonly source: string
}

/** The NATS settings in effect for `dataDir`, each with its source; `servers` undefined: not shared. */
export interface ResolvedNats {
  readonly servers?: Sourced<ReadonlyArray<string>>
  readonly prefix: Sourced<string>
  readonly replicas?: Sourced<number>
  readonly creds?: Sourced<string>
  readonly leaseMs?: Sourced<number>
}

const listOf = (text: string) =>
  text
    .split(",")
    .map((server) => server.trim())
    .filter((server) => server !== "")

const first = <A>(...candidates: ReadonlyArray<Sourced<A | undefined>>): Sourced<A> | undefined =>
  candidates.find((candidate) => candidate.value !== undefined) as Sourced<A> | undefined

/** Resolves each setting in order: flag, environment, config.json, membership, default. */
export const resolveNats = (flags: NatsFlags, dataDir: string): ResolvedNats => {
  const config = readDataDirConfig(dataDir)
  const file = config._tag === "Success" ? config.success.file.nats : undefined
  const membership = readMembership(dataDir)
  const env = process.env
  const replicasEnv = env.MNEMOS_NATS_REPLICAS === undefined ? undefined : Number(env.MNEMOS_NATS_REPLICAS)
  const leaseEnv = env.MNEMOS_NATS_LEASE_MS === undefined ? undefined : Number(env.MNEMOS_NATS_LEASE_MS)
  const servers = first<ReadonlyArray<string>>(
    { value: Option.match(flags.nats, { onNone: () => undefined, onSome: listOf }), source: "--nats" },
    { value: env.MNEMOS_NATS ? listOf(env.MNEMOS_NATS) : undefined, source: "MNEMOS_NATS" },
    { value: file?.servers, source: "config.json nats.servers" },
    { value: membership?.servers, source: "shared-memory.json (this data directory's membership)" },
  )
  const prefix = first<string>(
    { value: Option.getOrUndefined(flags.natsPrefix), source: "--nats-prefix" },
    { value: env.MNEMOS_NATS_PREFIX || undefined, source: "MNEMOS_NATS_PREFIX" },
    { value: file?.prefix, source: "config.json nats.prefix" },
    { value: membership?.prefix, source: "shared-memory.json" },
  ) ?? { value: defaultNatsPrefix, source: "default" }
  const replicas = first<number>(
    { value: Option.getOrUndefined(flags.natsReplicas), source: "--nats-replicas" },
    { value: replicasEnv, source: "MNEMOS_NATS_REPLICAS" },
    { value: file?.replicas, source: "config.json nats.replicas" },
  )
  const creds = first<string>(
    { value: Option.getOrUndefined(flags.natsCreds), source: "--nats-creds" },
    { value: env.MNEMOS_NATS_CREDS || undefined, source: "MNEMOS_NATS_CREDS" },
    { value: file?.creds, source: "config.json nats.creds" },
  )
  const leaseMs = first<number>(
    { value: Option.getOrUndefined(flags.natsLeaseMs ?? Option.none()), source: "--nats-lease-ms" },
    { value: leaseEnv, source: "MNEMOS_NATS_LEASE_MS" },
    { value: file?.leaseMs, source: "config.json nats.leaseMs" },
  )
  return {
    ...(servers !== undefined ? { servers } : {}),
    prefix,
    ...(replicas !== undefined ? { replicas } : {}),
    ...(creds !== undefined ? { creds } : {}),
    ...(leaseMs !== undefined ? { leaseMs } : {}),
  }
}

/** The settings `resolved` gives, for a daemon of id `daemonId`; undefined when not shared. */
export const settingsOf = (resolved: ResolvedNats, daemonId: string): NatsSettings | undefined =>
  resolved.servers === undefined
    ? undefined
    : {
        servers: resolved.servers.value,
        prefix: resolved.prefix.value,
        daemonId,
        ...(resolved.replicas !== undefined ? { replicas: resolved.replicas.value } : {}),
        ...(resolved.creds !== undefined ? { credsFile: resolved.creds.value } : {}),
        ...(resolved.leaseMs !== undefined ? { leaseMs: resolved.leaseMs.value } : {}),
      }

/** A shared memory to run, and whether this start is the data directory's first in it. */
export interface SharedMemoryStart {
  readonly settings: NatsSettings
  /** Record the membership once the stores have opened (`recordMembership`). */
  readonly joining: boolean
}

/**
 * What `mnemos serve` runs: a shared memory's settings, or undefined for a local memory. Refuses
 * what would mix two histories.
 */
export const sharedMemoryFor = (
  flags: NatsFlags,
  dataDir: string,
): Effect.Effect<SharedMemoryStart | undefined, SharedMemoryRefused> =>
  Effect.gen(function* () {
    const resolved = resolveNats(flags, dataDir)
    const membership = readMembership(dataDir)
    const settings = settingsOf(resolved, membership?.daemonId ?? newDaemonId())
    if (settings === undefined) return undefined
    const invalid = validateNatsSettings(settings)
    if (invalid !== undefined) return yield* new SharedMemoryRefused({ message: invalid })
    if (membership !== undefined) {
      if (membership.prefix !== settings.prefix)
        return yield* new SharedMemoryRefused({
          message: `${dataDir} is a replica of the shared memory "${membership.prefix}", not "${settings.prefix}" (${resolved.prefix.source}); use another data directory, or \`mnemos cluster leave\` first`,
        })
      return { settings, joining: false }
    }
    const holding = yield* storesHoldingData(dataDir)
    if (holding.length > 0)
      return yield* new SharedMemoryRefused({
        message: `${dataDir} holds a local memory (stores ${holding.join(", ")}); \`mnemos cluster join --data-dir ${dataDir} --nats ${settings.servers.join(",")}\` moves it into the shared memory "${settings.prefix}" (docs/scaling.md)`,
      })
    return { settings, joining: true }
  })

/** Records that `dataDir` is a replica of the memory `settings` names (after its stores opened in it). */
export const recordMembership = (dataDir: string, settings: NatsSettings): void =>
  writeMembership(dataDir, {
    prefix: settings.prefix,
    servers: settings.servers,
    daemonId: settings.daemonId,
    joinedAt: new Date().toISOString(),
  })
