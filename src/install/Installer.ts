/**
 * Installing mnemos into MCP clients: plan an edit of one client's config, show it, apply it;
 * report what is configured where.
 *
 * A plan is computed from the file's current text and is pure: `before`, `after`, and whether
 * anything changes. Installing twice changes nothing the second time (no write, no backup), and
 * uninstalling what is not there neither. Installing over an existing `mnemos` entry replaces only
 * what mnemos manages (`command`, `args`, and `type` where the client uses it) and keeps the rest
 * (`env`, `disabled`, timeouts) as the user set them. Applying re-reads the file and, when the
 * client rewrote it meanwhile, plans again on the new text (up to `replanAttemptsMax` times).
 */
import { existsSync } from "node:fs"
import { dirname, isAbsolute, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { isDeepStrictEqual } from "node:util"
import { Effect } from "effect"
import {
  type ClientDefinition,
  chooseConfigPath,
  clients,
  type InstallEnvironment,
  type InstallScope,
  type ServerLaunch,
} from "./Clients.ts"
import { type ConfigText, InstallError, readConfigText, writeConfigText } from "./ConfigFile.ts"
import { parseJsonc, setAt, valueAt } from "./JsoncEdit.ts"
import { editTomlServer, parseToml, serverIn } from "./TomlEdit.ts"

/** The entry name mnemos uses in every client. */
export const defaultServerName = "mnemos"
/** How often an apply plans again when the client rewrote its file in between. */
const replanAttemptsMax = 3

/** One config file of one client. */
export interface InstallTarget {
  readonly client: ClientDefinition
  readonly scope: InstallScope
  readonly path: string
  /** Why this file, when the client has several places (see `chooseConfigPath`). */
  readonly why?: string | undefined
  /** Other files of the client that exist and were not chosen. */
  readonly alsoPresent?: ReadonlyArray<string>
}

/** The target of `client` in `scope`, or why there is none. */
export const targetOf = (
  client: ClientDefinition,
  scope: InstallScope,
  environment: InstallEnvironment,
): InstallTarget | InstallError => {
  const places = client.scopes.includes(scope) ? client.configPlaces(environment, scope) : undefined
  if (places === undefined)
    return new InstallError({
      reason: "Unsupported",
      path: "",
      message: `${client.displayName} has no ${scope}-scope configuration (supported: ${client.scopes.join(", ")})`,
    })
  const chosen = chooseConfigPath(client, places)
  return { client, scope, path: chosen.path, why: chosen.why, alsoPresent: chosen.alsoPresent }
}

/** The clients whose configuration directory exists. */
export const detectClients = (environment: InstallEnvironment): ReadonlyArray<ClientDefinition> =>
  clients.filter((client) => client.presence(environment).some((dir) => existsSync(dir)))

/** What an install or uninstall would do to one file. */
export interface InstallPlan {
  readonly target: InstallTarget
  readonly action: "install" | "uninstall"
  readonly file: ConfigText
  readonly after: string
  readonly changed: boolean
  /** The entry as it was before (undefined: absent). */
  readonly entryBefore: unknown
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const invalid = (target: InstallTarget, why: string) =>
  new InstallError({
    reason: "Invalid",
    path: target.path,
    message: `cannot edit ${target.path}: ${why}; fix the file (a backup is never needed for a file that is not changed)`,
  })

const planJson = (
  target: InstallTarget,
  file: ConfigText,
  name: string,
  launch: ServerLaunch | undefined,
): Effect.Effect<{ after: string; entryBefore: unknown }, InstallError> => {
  const document = parseJsonc(file.text)
  if (document._tag === "Invalid") return Effect.fail(invalid(target, document.message))
  const serversPath = target.client.serversPath
  const servers = valueAt(document, [...serversPath])
  if (servers !== undefined && !isRecord(servers))
    return Effect.fail(invalid(target, `"${serversPath.join(".")}" is not an object`))
  const entryPath = [...serversPath, name]
  const entryBefore = valueAt(document, entryPath)
  return Effect.try({
    try: () => {
      if (launch === undefined)
        return { after: entryBefore === undefined ? file.text : setAt(file.text, entryPath, undefined), entryBefore }
      const wanted = target.client.entry(launch)
      if (!isRecord(entryBefore)) return { after: setAt(file.text, entryPath, wanted), entryBefore }
      // Keep the user's own settings of the entry; replace only what mnemos manages, where it differs.
      let after = file.text
      for (const [key, value] of Object.entries(wanted))
        if (!isDeepStrictEqual(entryBefore[key], value)) after = setAt(after, [...entryPath, key], value)
      return { after, entryBefore }
    },
    catch: (error) =>
      new InstallError({
        reason: "Refused",
        path: target.path,
        message: `${target.path}: ${error instanceof Error ? error.message : String(error)}; add the entry by hand:\n${JSON.stringify({ [serversPath.join(".")]: { [name]: launch === undefined ? undefined : target.client.entry(launch) } }, null, 2)}`,
      }),
  })
}

const planToml = (
  target: InstallTarget,
  file: ConfigText,
  name: string,
  launch: ServerLaunch | undefined,
): Effect.Effect<{ after: string; entryBefore: unknown }, InstallError> => {
  const document = parseToml(file.text)
  if (document._tag === "Invalid") return Effect.fail(invalid(target, `not valid TOML (${document.message})`))
  const entryBefore = serverIn(document.value, name)
  const edit = editTomlServer(
    file.text,
    name,
    launch === undefined ? undefined : { command: launch.command, args: launch.args },
  )
  if (edit._tag === "Refused")
    return Effect.fail(
      new InstallError({ reason: "Refused", path: target.path, message: `${target.path}: ${edit.message}` }),
    )
  return Effect.succeed({ after: edit.text, entryBefore })
}

/** Plans installing (`launch`) or uninstalling (`undefined`) the entry `name` in `target`. */
export const planChange = (
  target: InstallTarget,
  name: string,
  launch: ServerLaunch | undefined,
): Effect.Effect<InstallPlan, InstallError> =>
  Effect.gen(function* () {
    const file = yield* readConfigText(target.path)
    const planned =
      target.client.format === "toml"
        ? yield* planToml(target, file, name, launch)
        : yield* planJson(target, file, name, launch)
    return {
      target,
      action: launch === undefined ? "uninstall" : "install",
      file,
      after: planned.after,
      changed: planned.after !== file.text,
      entryBefore: planned.entryBefore,
    } satisfies InstallPlan
  })

/** What applying a plan did. */
export interface AppliedChange {
  readonly plan: InstallPlan
  /** Where the previous file was copied (undefined: nothing written, or no previous file). */
  readonly backup: string | undefined
}

/** Plans and applies; plans again when the file changed underneath. */
export const applyChange = (
  target: InstallTarget,
  name: string,
  launch: ServerLaunch | undefined,
  now: Date,
): Effect.Effect<AppliedChange, InstallError> =>
  Effect.gen(function* () {
    for (let attempt = 1; ; attempt++) {
      const plan = yield* planChange(target, name, launch)
      if (!plan.changed) return { plan, backup: undefined }
      const written = yield* writeConfigText(plan.file, plan.after, now).pipe(
        Effect.map((result) => ({ plan, backup: result.backup }) satisfies AppliedChange),
        Effect.catch((error) =>
          error.reason === "Changed" && attempt < replanAttemptsMax ? Effect.succeed(undefined) : Effect.fail(error),
        ),
      )
      if (written !== undefined) return written
    }
  })

/** What one config file says about mnemos. */
export interface TargetStatus {
  readonly target: InstallTarget
  readonly exists: boolean
  /** The entry, when there is one. */
  readonly entry: unknown
  /** The entry launches exactly `launch` (when given). */
  readonly matches: boolean
  /** The data directory the entry's `--data-dir` names. */
  readonly dataDir: string | undefined
  /** Set when the file cannot be read or parsed. */
  readonly problem: string | undefined
}

const dataDirOf = (entry: unknown): string | undefined => {
  if (!isRecord(entry) || !Array.isArray(entry.args)) return undefined
  const index = entry.args.indexOf("--data-dir")
  const value = index >= 0 ? entry.args[index + 1] : undefined
  return typeof value === "string" ? value : undefined
}

/** Reads what `target` has configured under `name`. */
export const statusOf = (
  target: InstallTarget,
  name: string,
  launch: ServerLaunch | undefined,
): Effect.Effect<TargetStatus> =>
  readConfigText(target.path).pipe(
    Effect.map((file): TargetStatus => {
      let entry: unknown
      let problem: string | undefined
      if (target.client.format === "toml") {
        const document = parseToml(file.text)
        if (document._tag === "Invalid") problem = `not valid TOML: ${document.message}`
        else entry = serverIn(document.value, name)
      } else {
        const document = parseJsonc(file.text)
        if (document._tag === "Invalid") problem = `not valid JSON: ${document.message}`
        else entry = valueAt(document, [...target.client.serversPath, name])
      }
      const matches =
        launch !== undefined &&
        isRecord(entry) &&
        entry.command === launch.command &&
        isDeepStrictEqual(entry.args, [...launch.args])
      return { target, exists: file.exists, entry, matches, dataDir: dataDirOf(entry), problem }
    }),
    Effect.catch((error) =>
      Effect.succeed({
        target,
        exists: true,
        entry: undefined,
        matches: false,
        dataDir: undefined,
        problem: error.message,
      } satisfies TargetStatus),
    ),
  )

/** The package's built entry point, when `npm run build` has made it. */
const builtCli = (): string => join(dirname(fileURLToPath(import.meta.url)), "..", "..", "dist", "cli.js")

/**
 * How a client starts the stdio shim of `dataDir`: this Node binary, the CLI script (the built
 * dist/cli.js when running from source and it exists, else the source through the same loader
 * flags), `mcp --data-dir <dir>`. Absolute paths only: GUI clients do not have the shell's PATH.
 */
export const shimLaunch = (
  dataDir: string,
  process_: {
    readonly execPath: string
    readonly argv: ReadonlyArray<string>
    readonly execArgv: ReadonlyArray<string>
  } = process,
): ServerLaunch => {
  const script = resolve(process_.argv[1] ?? "mnemos")
  const fromSource = script.endsWith(".ts")
  const built = builtCli()
  const entry = fromSource && existsSync(built) ? [built] : fromSource ? [...process_.execArgv, script] : [script]
  return {
    command: process_.execPath,
    args: [...entry, "mcp", "--data-dir", isAbsolute(dataDir) ? dataDir : resolve(dataDir)],
  }
}
