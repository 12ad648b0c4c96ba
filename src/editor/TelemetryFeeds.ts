/**
 * Feeds the editor tools from the daemon's telemetry: `EditorFocus` from the UDP focus
 * datagrams, `TerminalLog` from `POST /terminal/telemetry`. Both read the telemetry's state on
 * every call (it is in memory and small), so there is nothing to keep in sync.
 *
 * A focus datagram names its Neovim instance in `server` (its `v:servername`, sent by
 * `scripts/nvim/mnemos-focus.lua`); the telemetry keeps it when its datagram schema has that
 * field, and the focus then leads the Neovim tools to that instance.
 */
import { Effect, Layer, Predicate } from "effect"
import type { FocusEntry, Telemetry } from "../transports/Telemetry.ts"
import { EditorFocus, type EditorFocusService, type FocusReport } from "./EditorFocus.ts"
import { TerminalLog, type TerminalLogService } from "./TerminalLog.ts"

const focusOf = (entry: FocusEntry): FocusReport => {
  const server = (entry as { readonly server?: unknown }).server
  return {
    file: entry.file,
    line: entry.line,
    col: entry.col,
    session: entry.session,
    at: entry.at,
    ...(Predicate.isString(server) && server !== "" ? { server } : {}),
  }
}

/** The editor focus, read from the telemetry's latest focus per session. */
export const editorFocusFromTelemetry = (telemetry: Telemetry["Service"]): EditorFocusService => ({
  recent: telemetry.editorActive.pipe(Effect.map((active) => active.sessions.map(focusOf))),
})

/** The terminal log, read from the telemetry's ring of shell commands. */
export const terminalLogFromTelemetry = (telemetry: Telemetry["Service"]): TerminalLogService => ({
  recent: (limit) =>
    telemetry.terminalRecent.pipe(
      Effect.map((recent) =>
        recent.entries.slice(Math.max(0, recent.entries.length - limit)).map((entry) => ({
          command: entry.command,
          exitCode: entry.exit_code,
          cwd: entry.cwd,
          at: entry.at,
          ...(entry.output_tail !== undefined ? { outputTail: entry.output_tail } : {}),
          ...(entry.session !== undefined ? { session: entry.session } : {}),
        })),
      ),
    ),
})

/** Provides `EditorFocus` and `TerminalLog` from the daemon's telemetry. */
export const layerFromTelemetry = (telemetry: Telemetry["Service"]): Layer.Layer<never> =>
  Layer.merge(
    Layer.succeed(EditorFocus, editorFocusFromTelemetry(telemetry)),
    Layer.succeed(TerminalLog, terminalLogFromTelemetry(telemetry)),
  )
