/**
 * Where the person is looking: the latest focus each editor session reported (file, cursor and,
 * for Neovim, the RPC address of that instance, its `v:servername`).
 *
 * The editor tools depend on this small interface, not on the transport that receives focus
 * datagrams: the daemon feeds it from its UDP telemetry (see `TelemetryFeeds.ts`), tests from
 * `makeMemoryEditorFocus`. It is a `Context.Reference` whose default knows of no focus, so a
 * session without telemetry (embedded `serve --stdio`) still has the tools, which then say that
 * no editor has reported its focus.
 */
import { Context, Effect } from "effect"

/** One editor session's latest focus. Lines and columns are 1-based. */
export interface FocusReport {
  readonly file: string
  readonly line: number
  readonly col: number
  readonly session: string
  /** The Neovim RPC address (`v:servername`) of the session, when the editor is Neovim. */
  readonly server?: string
  /** When the report arrived (ISO 8601). */
  readonly at: string
}

/** Reads the editor sessions' latest focus reports. */
export interface EditorFocusService {
  /** The latest report of each session, most recent first. */
  readonly recent: Effect.Effect<ReadonlyArray<FocusReport>>
}

/** The editor focus the tools read; by default, none was ever reported. */
export const EditorFocus = Context.Reference<EditorFocusService>("mnemos/editor/EditorFocus", {
  defaultValue: () => ({ recent: Effect.succeed([]) }),
})

/** The most recent focus that names a Neovim server, if any session reported one. */
export const lastNeovimFocus: Effect.Effect<FocusReport | undefined> = Effect.gen(function* () {
  const focus = yield* EditorFocus
  const reports = yield* focus.recent
  return reports.find((report) => report.server !== undefined && report.server !== "")
})

/** An in-memory focus feed (tests, embedded use): `report` records a session's latest focus. */
export const makeMemoryEditorFocus = (): EditorFocusService & {
  readonly report: (focus: Omit<FocusReport, "at"> & { readonly at?: string }) => void
} => {
  const sessions = new Map<string, FocusReport>()
  return {
    recent: Effect.sync(() => [...sessions.values()].reverse()),
    report: (focus) => {
      sessions.delete(focus.session)
      sessions.set(focus.session, { ...focus, at: focus.at ?? new Date().toISOString() })
    },
  }
}
