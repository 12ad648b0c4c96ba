#!/usr/bin/env node
/**
 * The `mnemos` command. Logs go to stderr so stdout stays free for MCP and for data output.
 *
 * Only the module of the subcommand named on the command line is loaded (the shim that MCP clients
 * launch should not load the engine it proxies to); with no known subcommand named (`--help`,
 * `--version`, a typo) every one is, so help lists them all and the parser reports the mistake.
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Effect, Logger } from "effect"
import { Command } from "effect/cli"
import { versionLine } from "./cli/BuildInfo.ts"
import { withForceFlag } from "./cli/ForceFlag.ts"
import { runMain } from "./cli/Main.ts"

/** The built-in flags that list or complete subcommands. */
const helpFlags: ReadonlyArray<string> = ["--help", "-h", "--completions"]

/** Each subcommand, in help order, and how to load it for the command line `args`. */
const subcommands = [
  ["serve", async () => [(await import("./cli/ServeCommand.ts")).serveCommand]],
  [
    "mcp",
    async (args: ReadonlyArray<string>) => {
      const { mcpCommand, mcpSubcommandNames } = await import("./cli/McpCommand.ts")
      // `mnemos mcp` alone runs the stdio shim (its own handler), which MCP clients start and then
      // wait for: `mnemos mcp install|uninstall|status` (and the packages that edit clients'
      // configurations) load only for a line that may name one of them or asks for help.
      const mayNameOne = args.some((arg) => mcpSubcommandNames.includes(arg) || helpFlags.includes(arg))
      if (!mayNameOne) return [mcpCommand]
      const { mcpInstallCommands } = await import("./cli/McpInstallCommands.ts")
      return [mcpCommand.pipe(Command.withSubcommands(mcpInstallCommands))]
    },
  ],
  ["dashboard", async () => [(await import("./cli/DashboardCommand.ts")).dashboardCommand]],
  ["import", async () => [(await import("./cli/TransferCommands.ts")).importCommand]],
  ["export", async () => [(await import("./cli/TransferCommands.ts")).exportCommand]],
  ["gate", async () => [(await import("./cli/GateCommand.ts")).gateCommand]],
  ["doctor", async () => [(await import("./cli/DoctorCommand.ts")).doctorCommand]],
  ["health", async () => [(await import("./cli/HealthCommand.ts")).healthCommand]],
  ["repair", async () => [(await import("./cli/RepairCommand.ts")).repairCommand]],
  ["compact", async () => [(await import("./cli/CompactCommand.ts")).compactCommand]],
  ["cluster", async () => [(await import("./cli/ClusterCommands.ts")).clusterCommand]],
  ["config", async () => [(await import("./cli/ConfigCommand.ts")).configCommand]],
  ["model", async () => [(await import("./cli/ModelCommands.ts")).modelCommand]],
] as const

type Subcommand = Awaited<ReturnType<(typeof subcommands)[number][1]>>[number]

/** The subcommands to load for `args`: the one named first, or all of them. */
const commandsFor = async (args: ReadonlyArray<string>): Promise<ReadonlyArray<Subcommand>> => {
  const named = args.find((arg) => !arg.startsWith("-"))
  const chosen = subcommands.filter(([name]) => name === named)
  const loaded = await Promise.all((chosen.length > 0 ? chosen : subcommands).map(([, load]) => load(args)))
  return loaded.flat()
}

// No top-level await: the bundle is CommonJS (scripts/bundle.mjs), so that V8 can reuse its compiled code.
void commandsFor(process.argv.slice(2)).then((commands) =>
  runMain(
    Command.make("mnemos").pipe(
      Command.withDescription("mnemos — durable, fast memory for AI coding agents, over MCP"),
      Command.withSubcommands(commands),
      withForceFlag,
      Command.run({ version: versionLine() }),
      Effect.provide(NodeServices.layer),
      Effect.provideService(Logger.LogToStderr, true),
    ),
  ),
)
