/**
 * `mnemos mcp install | uninstall | status`: put mnemos into the MCP clients' configs, take it out,
 * and show what is configured where.
 *
 * The entry launches the stdio shim of one data directory (`node .../cli.js mcp --data-dir DIR`,
 * see install/Installer.ts `shimLaunch`). Every write keeps a backup beside the file and is atomic;
 * `--dry-run` prints the unified diff instead of writing. With no `--client`, the clients whose
 * config directory exists are detected: on a terminal the user picks among them; otherwise the
 * command lists them and exits 2, asking for `--client` (or `--client all`).
 *
 * What the commands read from the machine (home, platform, terminal, clock) comes from the
 * `InstallContext` reference, so tests run them against temporary homes of every OS layout.
 */
import { homedir } from "node:os"
import { Console, Context, Effect, Option, Schema } from "effect"
import { CliError, Command, Flag, Prompt } from "effect/cli"
import {
  type ClientDefinition,
  type ClientId,
  clientById,
  clientIds,
  clients,
  currentEnvironment,
  type InstallEnvironment,
  type InstallScope,
  type ServerLaunch,
} from "../install/Clients.ts"
import { InstallError } from "../install/ConfigFile.ts"
import {
  applyChange,
  defaultServerName,
  detectClients,
  type InstallTarget,
  planChange,
  shimLaunch,
  statusOf,
  type TargetStatus,
  targetOf,
} from "../install/Installer.ts"
import { unifiedDiff } from "../install/TextDiff.ts"
import { resolveDataDir } from "../stores/datadir/DataDir.ts"
import { defaultHost, defaultPort, ping, pingDaemon, readDaemonInfo } from "../transports/Daemon.ts"
import { dataDirFlag } from "./ServeCommand.ts"

/** What the install commands take from the machine; tests provide their own. */
export interface InstallMachine {
  readonly environment: InstallEnvironment
  /** Whether a person can be asked (stdin and stdout are terminals). */
  readonly interactive: boolean
  readonly now: () => Date
  /** How clients start the shim of a data directory. */
  readonly launch: (dataDir: string) => ServerLaunch
}

/** The machine the install commands run on (default: this process's). */
export const InstallContext = Context.Reference<InstallMachine>("mnemos/cli/McpInstallCommands/InstallContext", {
  defaultValue: () => ({
    environment: currentEnvironment(homedir(), process.cwd(), process.env),
    interactive: process.stdin.isTTY === true && process.stdout.isTTY === true,
    now: () => new Date(),
    launch: (dataDir) => shimLaunch(dataDir),
  }),
})

/** Some targets could not be changed; the message lists them. */
export class InstallFailed extends Schema.TaggedError<InstallFailed>()("InstallFailed", { message: Schema.String }) {}

const clientFlag = Flag.Literals("client", [...clientIds, "all"]).pipe(
  Flag.withDescription(`The client: ${clientIds.join(", ")}, or all (every detected client)`),
  Flag.optional,
)
const scopeFlag = Flag.Literals("scope", ["user", "project"]).pipe(
  Flag.withDescription("user (your own config, the default) or project (the project's shared config file)"),
  Flag.withDefault("user" as const),
)
const dryRunFlag = Flag.Boolean("dry-run").pipe(
  Flag.withDescription("Print the diff of each file instead of writing it"),
  Flag.withDefault(false),
)
const nameFlag = Flag.String("name").pipe(
  Flag.withDescription(`The server's name in the client's config (default ${defaultServerName})`),
  Flag.withDefault(defaultServerName),
)
const projectDirFlag = Flag.String("project-dir").pipe(
  Flag.withDescription("The project of --scope project (default: the current directory)"),
  Flag.optional,
)

const machineWith = (projectDir: Option.Option<string>) =>
  Effect.map(
    InstallContext,
    (machine): InstallMachine =>
      Option.isSome(projectDir)
        ? { ...machine, environment: { ...machine.environment, projectDir: projectDir.value } }
        : machine,
  )

const label = (target: InstallTarget) => `${target.client.displayName} (${target.scope})`

/** The clients to act on: the one named, every detected one (`all`), or the ones a person picks. */
const chooseClients = (
  client: Option.Option<ClientId | "all">,
  machine: InstallMachine,
  verb: "install" | "uninstall",
  candidates: ReadonlyArray<ClientDefinition>,
) =>
  Effect.gen(function* () {
    if (Option.isSome(client) && client.value !== "all") return [clientById(client.value)]
    if (Option.isSome(client)) return candidates
    const names = candidates.map((candidate) => candidate.id).join(", ")
    if (candidates.length === 0)
      return yield* new CliError.UserError({
        cause: "no client",
        userMessage: `no MCP client ${verb === "install" ? "detected" : "has mnemos configured"}; name one with --client (${clientIds.join(", ")})`,
      })
    if (!machine.interactive)
      return yield* new CliError.UserError({
        cause: "not interactive",
        userMessage: `no --client given and this is not a terminal to ask on. ${verb === "install" ? "Detected" : "Configured in"}: ${names}. Run mnemos mcp ${verb} --client NAME (or --client all)`,
      })
    const chosen = yield* Prompt.run(
      Prompt.MultiSelect({
        message: `${verb === "install" ? "Install mnemos into" : "Remove mnemos from"} which clients?`,
        choices: candidates.map((candidate) => ({ title: candidate.displayName, value: candidate.id, selected: true })),
      }),
    )
    return chosen.map(clientById)
  })

const failures = (errors: ReadonlyArray<InstallError>, verb: string) =>
  errors.length === 0
    ? Effect.void
    : Effect.fail(
        new InstallFailed({
          message: `could not ${verb} in ${errors.length} place(s):\n${errors.map((error) => `  ${error.message}`).join("\n")}`,
        }),
      )

/** Installs or uninstalls in each target, printing what happened; collects failures. */
const changeAll = (
  targets: ReadonlyArray<InstallTarget>,
  name: string,
  launch: ServerLaunch | undefined,
  dryRun: boolean,
  machine: InstallMachine,
) =>
  Effect.gen(function* () {
    const errors: Array<InstallError> = []
    let written = 0
    for (const target of targets) {
      if (target.why !== undefined) yield* Console.log(`! ${label(target)}: ${target.why}`)
      const outcome = yield* Effect.result(
        dryRun
          ? Effect.map(planChange(target, name, launch), (plan) => ({ plan, backup: undefined }))
          : applyChange(target, name, launch, machine.now()),
      )
      if (outcome._tag === "Failure") {
        errors.push(outcome.failure)
        yield* Console.error(`✗ ${label(target)}: ${outcome.failure.message}`)
        continue
      }
      const { plan, backup } = outcome.success
      const verb = launch === undefined ? "removed from" : plan.entryBefore === undefined ? "added to" : "updated in"
      if (!plan.changed)
        yield* Console.log(
          `= ${label(target)}: ${launch === undefined ? "not configured in" : "already configured in"} ${target.path}; nothing to do`,
        )
      else if (dryRun) {
        yield* Console.log(`~ ${label(target)}: would change ${target.path}`)
        yield* Console.log(
          unifiedDiff(plan.file.text, plan.after, `${target.path}`, `${target.path} (after)`).trimEnd(),
        )
      } else {
        written++
        yield* Console.log(
          `✓ ${label(target)}: ${name} ${verb} ${target.path}${backup !== undefined ? ` (backup: ${backup})` : ""}`,
        )
      }
    }
    return { errors, written }
  })

const resolveTargets = (
  chosen: ReadonlyArray<ClientDefinition>,
  scope: InstallScope,
  environment: InstallEnvironment,
) =>
  Effect.gen(function* () {
    const targets: Array<InstallTarget> = []
    for (const client of chosen) {
      const target = targetOf(client, scope, environment)
      if (target instanceof InstallError) {
        if (chosen.length === 1) return yield* new InstallFailed({ message: target.message })
        yield* Console.error(`- ${client.displayName}: skipped, ${target.message}`)
      } else targets.push(target)
    }
    return targets
  })

/** `mnemos mcp install`. */
export const installCommand = Command.make(
  "install",
  {
    client: clientFlag,
    scope: scopeFlag,
    dryRun: dryRunFlag,
    dataDir: dataDirFlag,
    name: nameFlag,
    projectDir: projectDirFlag,
  },
  Effect.fn(function* ({ client, scope, dryRun, dataDir, name, projectDir }) {
    const machine = yield* machineWith(projectDir)
    const chosen = yield* chooseClients(client, machine, "install", detectClients(machine.environment))
    const location = resolveDataDir(Option.getOrUndefined(dataDir))
    const launch = machine.launch(location.path)
    const targets = yield* resolveTargets(chosen, scope, machine.environment)
    const { errors, written } = yield* changeAll(targets, name, launch, dryRun, machine)
    if (written > 0) yield* Console.log(`Restart the client(s) to load mnemos (data directory ${location.path}).`)
    yield* failures(errors, "install")
  }),
).pipe(
  Command.withDescription("Add mnemos to MCP clients' configs (backup beside each file; --dry-run shows the diff)"),
)

/** `mnemos mcp uninstall`. */
export const uninstallCommand = Command.make(
  "uninstall",
  { client: clientFlag, scope: scopeFlag, dryRun: dryRunFlag, name: nameFlag, projectDir: projectDirFlag },
  Effect.fn(function* ({ client, scope, dryRun, name, projectDir }) {
    const machine = yield* machineWith(projectDir)
    const configured: Array<ClientDefinition> = []
    for (const candidate of clients) {
      const target = targetOf(candidate, scope, machine.environment)
      if (target instanceof InstallError) continue
      const status = yield* statusOf(target, name, undefined)
      if (status.entry !== undefined) configured.push(candidate)
    }
    const chosen = yield* chooseClients(client, machine, "uninstall", configured)
    const targets = yield* resolveTargets(chosen, scope, machine.environment)
    const { errors, written } = yield* changeAll(targets, name, undefined, dryRun, machine)
    if (written > 0) yield* Console.log("Restart the client(s) to unload mnemos.")
    yield* failures(errors, "uninstall")
  }),
).pipe(
  Command.withDescription(
    "Remove mnemos from MCP clients' configs (backup beside each file; --dry-run shows the diff)",
  ),
)

const describeStatus = (status: TargetStatus, launch: ServerLaunch): string => {
  if (status.problem !== undefined) return `unreadable: ${status.problem}`
  if (!status.exists) return "no config file"
  if (status.entry === undefined) return "not configured"
  if (status.matches) return "configured ✓"
  const current = launch.args[launch.args.indexOf("--data-dir") + 1]
  return status.dataDir !== undefined && status.dataDir !== current
    ? `configured for another data directory: ${status.dataDir}`
    : "configured, but launches another mnemos (run mnemos mcp install to update)"
}

/** `mnemos mcp status`. */
export const statusCommand = Command.make(
  "status",
  {
    client: Flag.Literals("client", clientIds).pipe(Flag.withDescription("Only this client"), Flag.optional),
    dataDir: dataDirFlag,
    name: nameFlag,
    projectDir: projectDirFlag,
    json: Flag.Boolean("json").pipe(Flag.withDescription("Print JSON"), Flag.withDefault(false)),
  },
  Effect.fn(function* ({ client, dataDir, name, projectDir, json }) {
    const machine = yield* machineWith(projectDir)
    const location = resolveDataDir(Option.getOrUndefined(dataDir))
    const launch = machine.launch(location.path)
    const detected = new Set(detectClients(machine.environment).map((candidate) => candidate.id))
    const rows: Array<{ status: TargetStatus; installed: boolean }> = []
    for (const candidate of Option.isSome(client) ? [clientById(client.value)] : clients)
      for (const scope of candidate.scopes) {
        const target = targetOf(candidate, scope, machine.environment)
        if (target instanceof InstallError) continue
        rows.push({ status: yield* statusOf(target, name, launch), installed: detected.has(candidate.id) })
      }
    const info = readDaemonInfo(location.path)
    const host = info?.host ?? defaultHost
    const port = info?.port ?? defaultPort
    const answer = yield* Effect.promise(() => (info !== undefined ? pingDaemon(info) : ping(host, port)))
    const daemon =
      answer !== undefined && answer.dataDir === location.path
        ? { answers: true, host, port, pid: answer.pid, dataDir: answer.dataDir }
        : { answers: false, host, port, other: answer?.dataDir }
    if (json) {
      yield* Console.log(
        JSON.stringify(
          {
            dataDir: location.path,
            launch,
            clients: rows.map(({ status, installed }) => ({
              client: status.target.client.id,
              scope: status.target.scope,
              path: status.target.path,
              ...(status.target.why !== undefined ? { why: status.target.why } : {}),
              ...((status.target.alsoPresent ?? []).length > 0 ? { alsoPresent: status.target.alsoPresent } : {}),
              clientDetected: installed,
              configured: status.entry !== undefined,
              current: status.matches,
              dataDir: status.dataDir,
              problem: status.problem,
            })),
            daemon,
          },
          null,
          2,
        ),
      )
      return
    }
    yield* Console.log(`data directory: ${location.path}`)
    for (const { status, installed } of rows) {
      // A client that is not there, or a project file that does not exist, is noise.
      if (!status.exists && (!installed || status.target.scope === "project")) continue
      yield* Console.log(
        `${status.target.client.displayName.padEnd(15)} ${status.target.scope.padEnd(8)} ${describeStatus(status, launch).padEnd(30)} ${status.target.path}`,
      )
      if (status.target.why !== undefined) yield* Console.log(`${"".padEnd(25)}chosen: ${status.target.why}`)
    }
    const missing = clients.filter((candidate) => !detected.has(candidate.id)).map((candidate) => candidate.displayName)
    if (missing.length > 0) yield* Console.log(`not detected: ${missing.join(", ")}`)
    yield* Console.log(
      daemon.answers
        ? `daemon: answers on ${host}:${port} (pid ${answer?.pid})`
        : answer !== undefined
          ? `daemon: ${host}:${port} is the daemon of another data directory (${answer.dataDir})`
          : `daemon: not running on ${host}:${port} (the first client to start launches it)`,
    )
  }),
).pipe(Command.withDescription("Show which clients have mnemos configured, where, and whether the daemon answers"))

/** The subcommands of `mnemos mcp`. */
export const mcpInstallCommands = [installCommand, uninstallCommand, statusCommand] as const
