#!/usr/bin/env node
/**
 * The `mnemos` command. Logs go to stderr so stdout stays free for MCP and for data output.
 */
import { NodeServices } from "@effect/platform-node"
import { Effect, Logger } from "effect"
import { Command } from "effect/cli"
import { versionLine } from "./cli/BuildInfo.ts"
import { runMain } from "./cli/Main.ts"
import { mcpCommand } from "./cli/McpCommand.ts"
import { serveCommand } from "./cli/ServeCommand.ts"
import { exportCommand, importCommand } from "./cli/TransferCommands.ts"

const mnemos = Command.make("mnemos").pipe(
  Command.withDescription("mnemos — durable, fast memory for AI coding agents, over MCP"),
  Command.withSubcommands([serveCommand, mcpCommand, importCommand, exportCommand]),
)

runMain(
  mnemos.pipe(
    Command.run({ version: versionLine() }),
    Effect.provide(NodeServices.layer),
    Effect.provideService(Logger.LogToStderr, true),
  ),
)
