/**
 * The global `--force` flag: use a data directory that fails the safety checks (world-writable,
 * reached through another user's symbolic link) anyway. It sets `AllowUnsafeDataDir`, which the
 * lock of the data directory reads (stores/DataDir.ts), for whichever command runs.
 */
import { Effect } from "effect"
import { Command, Flag, GlobalFlag } from "effect/cli"
import { AllowUnsafeDataDir } from "../stores/datadir/DataDir.ts"

/** `--force`, accepted by every command. */
export const forceFlag = GlobalFlag.Setting("force")({
  flag: Flag.Boolean("force").pipe(
    Flag.withDescription(
      "Use the data directory even if it is world-writable or reached through another user's symlink",
    ),
    Flag.withDefault(false),
  ),
})

/** Adds `--force` to `command` and its subcommands. */
export const withForceFlag = <Name extends string, Input, E, R, ContextInput>(
  command: Command.Command<Name, Input, ContextInput, E, R>,
) =>
  command.pipe(
    // Provided around every handler from the flag's value; the global flag then supplies that value.
    Command.provideEffect(
      AllowUnsafeDataDir,
      Effect.gen(function* () {
        return yield* forceFlag
      }),
    ),
    Command.withGlobalFlags([forceFlag]),
  )
