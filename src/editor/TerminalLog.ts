/**
 * What the person's shell just ran: the recent commands reported by the shell hooks (command,
 * exit code, working directory, output tail), for `get_recent_logs`.
 *
 * Like `EditorFocus`, an interface the tools depend on instead of the transport: the daemon
 * feeds it from its terminal telemetry (`TelemetryFeeds.ts`); its default knows of no command.
 */
import { Context, Effect } from "effect"

/** One finished shell command. */
export interface TerminalCommandReport {
  readonly command: string
  readonly exitCode: number
  readonly cwd: string
  readonly outputTail?: string
  readonly session?: string
  /** When the report arrived (ISO 8601). */
  readonly at: string
}

/** Reads the recent shell commands. */
export interface TerminalLogService {
  /** The last `limit` commands, oldest first. */
  readonly recent: (limit: number) => Effect.Effect<ReadonlyArray<TerminalCommandReport>>
}

/** The terminal log the tools read; by default, no command was ever reported. */
export const TerminalLog = Context.Reference<TerminalLogService>("mnemos/editor/TerminalLog", {
  defaultValue: () => ({ recent: () => Effect.succeed([]) }),
})

/** An in-memory terminal log (tests, embedded use), keeping the last `capacity` commands. */
export const makeMemoryTerminalLog = (
  capacity: number,
): TerminalLogService & { readonly report: (command: TerminalCommandReport) => void } => {
  const ring: Array<TerminalCommandReport> = []
  return {
    recent: (limit) => Effect.sync(() => ring.slice(Math.max(0, ring.length - limit))),
    report: (command) => {
      ring.push(command)
      if (ring.length > capacity) ring.shift()
    },
  }
}
