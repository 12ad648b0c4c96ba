/**
 * `mnemos serve`: run the engine on a data directory until SIGINT/SIGTERM.
 *
 * With `--stdio` the engine speaks MCP on stdin/stdout in this process (embedded mode, one
 * agent, no network); logs go to stderr only. Either way the data directory's lock is held for
 * the life of the process, and shutdown answers in-flight work and flushes before exiting 0.
 */
import { Console, Effect, Layer, Option } from "effect"
import { Command, Flag } from "effect/cli"
import * as Engine from "../Engine.ts"
import { resolveDataDir } from "../stores/DataDir.ts"
import { versionLine } from "./BuildInfo.ts"
import { shutdownSignal } from "./Main.ts"
import { catalogue } from "../tools/Catalogue.ts"
import { serveStdio } from "../transports/Stdio.ts"

/** `--data-dir`, shared by every command that opens a data directory. */
export const dataDirFlag = Flag.String("data-dir").pipe(
  Flag.withDescription("Data directory (default: $MNEMOS_DATA_DIR, else $XDG_DATA_HOME/mnemos, else ~/.local/share/mnemos)"),
  Flag.optional
)

export const serveCommand = Command.make(
  "serve",
  {
    dataDir: dataDirFlag,
    stdio: Flag.Boolean("stdio").pipe(Flag.withDescription("Speak MCP on stdin/stdout in this process (embedded mode)"), Flag.withDefault(false))
  },
  Effect.fn(function* ({ dataDir, stdio }) {
    const location = resolveDataDir(Option.getOrUndefined(dataDir))
    const engine = Engine.layer({ dataDir: location.path, command: stdio ? "mnemos serve --stdio" : "mnemos serve" })
    yield* Effect.gen(function* () {
      yield* Console.error(`mnemos ${versionLine()}`)
      yield* Console.error(`data directory: ${location.path} (from ${location.source})`)
      const stopped = stdio
        ? Effect.raceFirst(serveStdio({ tools: catalogue }).pipe(Effect.as("stdin closed")), shutdownSignal)
        : shutdownSignal
      const reason = yield* stopped
      yield* Console.error(`${reason}: shutting down (finishing in-flight writes, flushing)`)
    }).pipe(Effect.provide(Layer.fresh(engine)))
  })
).pipe(Command.withDescription("Run the memory engine on a data directory until interrupted"))
