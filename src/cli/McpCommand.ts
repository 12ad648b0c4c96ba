/**
 * `mnemos mcp`: the stdio entry point MCP clients launch. Proxies to the daemon that owns the
 * data directory, starting one when none answers (see transports/Shim.ts). The daemon is looked
 * for, and started, before the shim's own modules load: a daemon's start is most of the wait for
 * the first answer, and it runs meanwhile.
 */
import { Effect, Option } from "effect"
import { Command, Flag } from "effect/cli"
import { resolveDataDir } from "../stores/datadir/DataDir.ts"
import { defaultHost, findOrStartDaemon } from "../transports/Daemon.ts"
import { dataDirFlag, portFlag } from "./ServeCommand.ts"

/** The names of `mnemos mcp`'s subcommands (McpInstallCommands.ts), known without loading them. */
export const mcpSubcommandNames: ReadonlyArray<string> = ["install", "uninstall", "status"]

export const mcpCommand = Command.make(
  "mcp",
  {
    dataDir: dataDirFlag,
    port: portFlag,
    host: Flag.String("host").pipe(
      Flag.withDescription(`Address of the daemon (default ${defaultHost})`),
      Flag.withDefault(defaultHost),
    ),
    noStart: Flag.Boolean("no-start").pipe(
      Flag.withDescription("Do not start a daemon when none answers; wait for one"),
      Flag.withDefault(false),
    ),
  },
  Effect.fn(function* ({ dataDir, port, host, noStart }) {
    const location = resolveDataDir(Option.getOrUndefined(dataDir))
    const target = { dataDir: location.path, host, port, autoStart: !noStart }
    const firstSearch = yield* Effect.promise(() => findOrStartDaemon(target))
    const { runShim } = yield* Effect.promise(() => import("../transports/Shim.ts"))
    yield* Effect.promise(() => runShim({ ...target, firstSearch }))
  }),
).pipe(Command.withDescription("Speak MCP on stdio through the daemon of the data directory (what MCP clients launch)"))
