/**
 * Runs a CLI program as the process: exit code 0 on success; a `CommandExit` failure exits with
 * its own code (after printing its message, if any); on an expected failure (a tagged
 * error with a message) prints `mnemos: <message>` to stderr and exits 1, without a stack trace;
 * on a defect prints the cause and exits 70. SIGINT/SIGTERM do not kill the program: commands
 * that run until stopped wait on `shutdownSignal` and then shut down cleanly, exiting 0.
 */
import { Cause, Effect, Exit, Schema } from "effect"
import { isCliError } from "effect/cli/CliError"

/** Resolves with the signal's name when the process is asked to stop (SIGINT or SIGTERM). */
export const shutdownSignal: Effect.Effect<string> = Effect.callback<string>((resume) => {
  const onSignal = (signal: NodeJS.Signals) => resume(Effect.succeed(signal))
  process.once("SIGINT", onSignal)
  process.once("SIGTERM", onSignal)
  return Effect.sync(() => {
    process.off("SIGINT", onSignal)
    process.off("SIGTERM", onSignal)
  })
})

/**
 * Ends a command with a specific exit code, e.g. `mnemos gate verify`: 1 blocked, 2 not found.
 * A non-empty message is printed to stderr as `mnemos: <message>`.
 */
export class CommandExit extends Schema.TaggedError<CommandExit>()("CommandExit", {
  exitCode: Schema.Int,
  message: Schema.String,
}) {}

const messageOf = (error: unknown): string | undefined =>
  typeof error === "object" &&
  error !== null &&
  "_tag" in error &&
  "message" in error &&
  typeof error.message === "string"
    ? error.message
    : undefined

/** Runs `program` and exits the process with its outcome. */
export const runMain = <E>(program: Effect.Effect<void, E>): void => {
  // Output is best effort: a log file on a full disk, or a reader that went away, makes these streams
  // fail (and stop); that must never end a daemon that is still serving.
  for (const stream of [process.stdout, process.stderr]) stream.on("error", () => undefined)
  const fiber = Effect.runFork(program)
  // A fiber waiting on a signal holds no libuv handle; keep the process alive until it ends.
  const keepAlive = setInterval(() => undefined, 2 ** 31 - 1)
  // A second signal while shutting down means "now".
  let signals = 0
  const force = () => {
    if (++signals > 1) process.exit(130)
  }
  process.on("SIGINT", force)
  process.on("SIGTERM", force)
  fiber.addObserver((exit) => {
    clearInterval(keepAlive)
    if (Exit.isSuccess(exit)) process.exit(0)
    const failure = Cause.findErrorOption(exit.cause)
    // The CLI parser has already printed its own error and the help text.
    if (failure._tag === "Some" && isCliError(failure.value)) process.exit(2)
    if (failure._tag === "Some" && failure.value instanceof CommandExit) {
      if (failure.value.message !== "") process.stderr.write(`mnemos: ${failure.value.message}\n`)
      process.exit(failure.value.exitCode)
    }
    const message = failure._tag === "Some" ? messageOf(failure.value) : undefined
    if (message !== undefined) {
      process.stderr.write(`mnemos: ${message}\n`)
      process.exit(1)
    }
    if (Cause.hasInterruptsOnly(exit.cause)) process.exit(130)
    process.stderr.write(`mnemos: internal error\n${Cause.pretty(exit.cause)}\n`)
    process.exit(70)
  })
}
