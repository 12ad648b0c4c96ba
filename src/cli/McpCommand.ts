/**
 * `mnemos mcp`: the stdio entry point MCP clients launch. Proxies to the daemon that owns the
 * data directory, starting one when none answers (see transports/Shim.ts).
 */
import { Effect, Option } from "effect"
import { Command, Flag } from "effect/cli"
import { resolveDataDir } from "../stores/DataDir.ts"
import { defaultHost } from "../transports/Daemon.ts"
import { runShim } from "../transports/Shim.ts"
import { dataDirFlag, portFlag } from "./ServeCommand.ts"

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
    yield* Effect.promise(() => runShim({ dataDir: location.path, host, port, autoStart: !noStart }))
  }),
).pipe(Command.withDescription("Speak MCP on stdio through the daemon of the data directory (what MCP clients launch)"))
