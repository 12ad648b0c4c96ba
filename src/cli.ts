#!/usr/bin/env node
/**
 * The `mnemos` command. Logs go to stderr so stdout stays free for MCP and for data output.
 */
import { NodeServices } from "@effect/platform-node"
import { Effect, Logger } from "effect"
import { Command } from "effect/cli"
import { versionLine } from "./cli/BuildInfo.ts"
import { clusterCommand } from "./cli/ClusterCommands.ts"
import { compactCommand } from "./cli/CompactCommand.ts"
import { configCommand } from "./cli/ConfigCommand.ts"
import { dashboardCommand } from "./cli/DashboardCommand.ts"
import { doctorCommand } from "./cli/DoctorCommand.ts"
import { withForceFlag } from "./cli/ForceFlag.ts"
import { gateCommand } from "./cli/GateCommand.ts"
import { healthCommand } from "./cli/HealthCommand.ts"
import { runMain } from "./cli/Main.ts"
import { mcpCommand } from "./cli/McpCommand.ts"
import { mcpInstallCommands } from "./cli/McpInstallCommands.ts"
import { repairCommand } from "./cli/RepairCommand.ts"
import { serveCommand } from "./cli/ServeCommand.ts"
import { exportCommand, importCommand } from "./cli/TransferCommands.ts"

// `mnemos mcp` alone runs the stdio shim (its own handler); `mnemos mcp install|uninstall|status` are subcommands.
const mcp = mcpCommand.pipe(Command.withSubcommands(mcpInstallCommands))

const mnemos = Command.make("mnemos").pipe(
  Command.withDescription("mnemos — durable, fast memory for AI coding agents, over MCP"),
  Command.withSubcommands([
    serveCommand,
    mcp,
    dashboardCommand,
    importCommand,
    exportCommand,
    gateCommand,
    doctorCommand,
    healthCommand,
    repairCommand,
    compactCommand,
    clusterCommand,
    configCommand,
  ]),
  withForceFlag,
)

runMain(
  mnemos.pipe(
    Command.run({ version: versionLine() }),
    Effect.provide(NodeServices.layer),
    Effect.provideService(Logger.LogToStderr, true),
  ),
)
