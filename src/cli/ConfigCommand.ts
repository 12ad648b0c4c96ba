/**
 * `mnemos config`: the effective configuration, and where each value came from — a flag, the
 * environment, the data directory's config.json, or the default.
 *
 * It takes the same flags as `mnemos serve` (`--data-dir`, `--host`, `--port`, `--udp-port`,
 * `--active-nvim-file`, `--nats*`), so `mnemos config --port 8000` shows what `mnemos serve
 * --port 8000` would use. It reads; it never takes the lock or writes. A config.json that does not decode is shown with its error (and the
 * command exits 1, as a start would fail).
 */
import { Console, Effect, Option, Result, Schema } from "effect"
import { Command, Flag } from "effect/cli"
import { resolveActiveNvimFile } from "../editor/ActiveNvimFile.ts"
import { builtinKinds } from "../privacy/PrivacyFilter.ts"
import { type DataDirSource, dataDirShapeProblem, resolveDataDir } from "../stores/datadir/DataDir.ts"
import { readDataDirConfig } from "../stores/datadir/DataDirConfig.ts"
import { defaultLeaseMs } from "../stores/shared/NatsSettings.ts"
import { defaultHost, defaultPort, readDaemonInfo } from "../transports/Daemon.ts"
import {
  defaultNatsPrefix,
  type NatsFlags,
  natsCredsFlag,
  natsFlag,
  natsLeaseFlag,
  natsPrefixFlag,
  natsReplicasFlag,
  noNatsFlags,
  resolveNats,
  type Sourced,
} from "./NatsFlags.ts"
import { dataDirFlag } from "./ServeCommand.ts"

/** Where a value came from ("membership": the data directory's shared-memory.json). */
export type ConfigSource = "flag" | "environment" | "config file" | "membership" | "default"

/** One effective setting. */
export interface ConfigValue {
  readonly key: string
  readonly value: unknown
  readonly source: ConfigSource
  /** The flag, variable or file that set it. */
  readonly from: string
}

/** The config file could not be used; the settings were printed with the error. */
export class ConfigInvalid extends Schema.TaggedError<ConfigInvalid>()("ConfigInvalid", { message: Schema.String }) {}

const dataDirSources: Record<DataDirSource, { source: ConfigSource; from: string }> = {
  flag: { source: "flag", from: "--data-dir" },
  environment: { source: "environment", from: "MNEMOS_DATA_DIR" },
  MCP_MEMORY_STORE_DIR: { source: "environment", from: "MCP_MEMORY_STORE_DIR" },
  MEMORY_PATH: { source: "environment", from: "MEMORY_PATH" },
  xdg: { source: "environment", from: "XDG_DATA_HOME (+ /mnemos)" },
  default: { source: "default", from: "~/.local/share/mnemos" },
}

/** The effective settings for these flag values (`undefined`: not given) and environment. */
export const effectiveConfig = (
  flags: {
    readonly dataDir?: string
    readonly host?: string
    readonly port?: number
    readonly udpPort?: number
    readonly activeNvimFile?: string
    readonly nats?: NatsFlags
  },
  env: NodeJS.ProcessEnv = process.env,
): { readonly values: ReadonlyArray<ConfigValue>; readonly error: string | undefined } => {
  const location = resolveDataDir(flags.dataDir, env)
  const values: Array<ConfigValue> = [{ key: "dataDir", value: location.path, ...dataDirSources[location.source] }]
  const flagOr = <A>(
    key: string,
    flag: string,
    given: A | undefined,
    fallback: A,
    fallbackFrom: string,
  ): ConfigValue =>
    given !== undefined
      ? { key, value: given, source: "flag", from: flag }
      : { key, value: fallback, source: "default", from: fallbackFrom }
  const port = flags.port ?? defaultPort
  values.push(flagOr("daemon.host", "--host", flags.host, defaultHost, "loopback only"))
  values.push(flagOr("daemon.port", "--port", flags.port, defaultPort, "built in"))
  values.push(flagOr("daemon.udpPort", "--udp-port", flags.udpPort, port + 1, "the daemon port + 1"))
  const activeNvim = resolveActiveNvimFile(flags.activeNvimFile, location.path, env)
  values.push({
    key: "editor.activeNvimFile",
    value: activeNvim.path,
    ...(activeNvim.source === "flag"
      ? { source: "flag" as const, from: "--active-nvim-file" }
      : activeNvim.source === "environment"
        ? { source: "environment" as const, from: "MNEMOS_ACTIVE_NVIM_FILE" }
        : { source: "default" as const, from: "active_nvim.txt in the data directory" }),
  })
  const config = readDataDirConfig(location.path)
  const file = Result.isSuccess(config) ? config.success : undefined
  const fromFile = (present: boolean) =>
    present && file !== undefined
      ? { source: "config file" as const, from: file.path }
      : { source: "default" as const, from: "built in" }
  values.push({
    key: "privacy.builtinKinds",
    value: builtinKinds.filter((kind) => !(file?.privacy.disabledKinds ?? []).includes(kind)),
    ...fromFile((file?.privacy.disabledKinds.length ?? 0) > 0),
  })
  values.push({
    key: "privacy.disable",
    value: file?.privacy.disabledKinds ?? [],
    ...fromFile(file?.file.privacy?.disable !== undefined),
  })
  values.push({
    key: "privacy.patterns",
    value: (file?.privacy.customPatterns ?? []).map(
      (pattern) => `${pattern.name}: /${pattern.regex}/${pattern.flags ?? ""}`,
    ),
    ...fromFile(file?.file.privacy?.patterns !== undefined),
  })
  const nats = resolveNats(flags.nats ?? noNatsFlags, location.path)
  const sourced = (key: string, setting: Sourced<unknown> | undefined, fallback: unknown, fallbackFrom: string) =>
    values.push(
      setting === undefined
        ? { key, value: fallback, source: "default", from: fallbackFrom }
        : { key, value: setting.value, source: sourceOf(setting.source), from: setting.source },
    )
  sourced("nats.servers", nats.servers, [], "not shared: a local memory")
  sourced("nats.prefix", nats.prefix, defaultNatsPrefix, "built in")
  sourced("nats.replicas", nats.replicas, "3 on a cluster, else 1", "built in")
  sourced("nats.creds", nats.creds, "(none)", "built in")
  sourced("nats.leaseMs", nats.leaseMs, defaultLeaseMs, "built in")
  return {
    values,
    error: dataDirShapeProblem(location.path) ?? (Result.isFailure(config) ? config.failure : undefined),
  }
}

const sourceOf = (from: string): ConfigSource =>
  from.startsWith("--")
    ? "flag"
    : from.startsWith("MNEMOS_")
      ? "environment"
      : from.startsWith("config.json")
        ? "config file"
        : from.startsWith("shared-memory.json")
          ? "membership"
          : "default"

const show = (value: unknown) =>
  Array.isArray(value) ? (value.length === 0 ? "(none)" : value.join(", ")) : String(value)

export const configCommand = Command.make(
  "config",
  {
    dataDir: dataDirFlag,
    host: Flag.String("host").pipe(Flag.withDescription("As for mnemos serve"), Flag.optional),
    port: Flag.Int("port").pipe(Flag.withDescription("As for mnemos serve"), Flag.optional),
    udpPort: Flag.Int("udp-port").pipe(Flag.withDescription("As for mnemos serve"), Flag.optional),
    activeNvimFile: Flag.String("active-nvim-file").pipe(Flag.withDescription("As for mnemos serve"), Flag.optional),
    nats: natsFlag,
    natsPrefix: natsPrefixFlag,
    natsReplicas: natsReplicasFlag,
    natsCreds: natsCredsFlag,
    natsLeaseMs: natsLeaseFlag,
    json: Flag.Boolean("json").pipe(Flag.withDescription("Print JSON"), Flag.withDefault(false)),
  },
  Effect.fn(function* ({ dataDir, host, port, udpPort, activeNvimFile, json, ...nats }) {
    const given = <A>(option: Option.Option<A>) => Option.getOrUndefined(option)
    const flags = {
      ...(Option.isSome(dataDir) ? { dataDir: dataDir.value } : {}),
      ...(Option.isSome(host) ? { host: host.value } : {}),
      ...(Option.isSome(port) ? { port: port.value } : {}),
      ...(given(udpPort) !== undefined ? { udpPort: given(udpPort)! } : {}),
      ...(given(activeNvimFile) !== undefined ? { activeNvimFile: given(activeNvimFile)! } : {}),
      nats,
    }
    const { values, error } = effectiveConfig(flags)
    const dataDirPath = String(values[0]!.value)
    const daemon = readDaemonInfo(dataDirPath)
    if (json) yield* Console.log(JSON.stringify({ values, configFileError: error, runningDaemon: daemon }, null, 2))
    else {
      const width = Math.max(...values.map((value) => value.key.length))
      for (const value of values)
        yield* Console.log(`${value.key.padEnd(width)}  ${show(value.value)}   (${value.source}: ${value.from})`)
      if (daemon !== undefined)
        yield* Console.log(
          `a daemon recorded in ${dataDirPath}/daemon.json: pid ${daemon.pid} on ${daemon.host}:${daemon.port}`,
        )
    }
    if (error !== undefined) return yield* new ConfigInvalid({ message: error })
  }),
).pipe(Command.withDescription("Show the effective configuration and where each value comes from"))
