/**
 * `active_nvim.txt`, as seed 002 keeps it for scripts and other tools: where the person is looking
 * (the latest editor focus of any session, "last focused wins"), one JSON line with seed 002's
 * keys, `{"session_id","file","line","col"}`, rewritten whenever a focus datagram moves it.
 *
 * Owns one fiber per daemon, fed by the telemetry's change signals (a sliding buffer: a burst of
 * cursor moves coalesces, and the file is always brought to the latest focus). Each write goes to
 * a temporary file beside the target (mode 0600) renamed over it, so a reader sees the old line or
 * the new one, never half of one. Not fsync'd: the file describes the present, like the telemetry
 * it comes from, and is rewritten on the next move. A write that fails (a missing, read-only
 * folder) is said once on stderr per distinct reason; the daemon serves on.
 */
import { randomBytes } from "node:crypto"
import { closeSync, mkdirSync, openSync, renameSync, rmSync, writeSync } from "node:fs"
import { basename, dirname, join, resolve } from "node:path"
import { Console, Effect, PubSub, type Scope } from "effect"
import { expandEnvPath } from "../stores/datadir/DataDir.ts"
import { editorActiveUri, type FocusEntry, type Telemetry } from "../transports/Telemetry.ts"

/** The file's name in the data directory (seed 002's). */
export const activeNvimFileName = "active_nvim.txt"

/** Where the file is, and what chose it (for `mnemos config`). */
export interface ActiveNvimFileLocation {
  readonly path: string
  readonly source: "flag" | "environment" | "default"
}

/** `--active-nvim-file`, else `$MNEMOS_ACTIVE_NVIM_FILE`, else `<data directory>/active_nvim.txt`. */
export const resolveActiveNvimFile = (
  flag: string | undefined,
  dataDir: string,
  env: NodeJS.ProcessEnv = process.env,
): ActiveNvimFileLocation => {
  if (flag !== undefined && flag !== "") return { path: resolve(flag), source: "flag" }
  if (env.MNEMOS_ACTIVE_NVIM_FILE)
    return { path: resolve(expandEnvPath(env.MNEMOS_ACTIVE_NVIM_FILE, env)), source: "environment" }
  return { path: join(dataDir, activeNvimFileName), source: "default" }
}

/** The file's content for `focus`: one JSON line with seed 002's keys. */
export const activeNvimText = (focus: Pick<FocusEntry, "session" | "file" | "line" | "col">): string =>
  `${JSON.stringify({ session_id: focus.session, file: focus.file, line: focus.line, col: focus.col })}\n`

/** Replaces `path` with `text`: a 0600 temporary file beside it, renamed over it. */
export const replaceFile = (path: string, text: string): void => {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 })
  const temporary = join(dirname(path), `.${basename(path)}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`)
  const fd = openSync(temporary, "wx", 0o600)
  try {
    writeSync(fd, text)
  } finally {
    closeSync(fd)
  }
  try {
    renameSync(temporary, path)
  } catch (error) {
    rmSync(temporary, { force: true })
    throw error
  }
}

/** Keeps `path` at the telemetry's latest focus for the life of the scope. */
export const keepActiveNvimFile = (
  telemetry: Telemetry["Service"],
  path: string,
): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    const changes = yield* telemetry.changes
    let written: string | undefined
    let lastProblem: string | undefined
    const bringUpToDate = Effect.gen(function* () {
      const { active } = yield* telemetry.editorActive
      if (active === null) return
      const text = activeNvimText(active)
      if (text === written) return
      const problem = yield* Effect.sync(() => {
        try {
          replaceFile(path, text)
          return undefined
        } catch (error) {
          return error instanceof Error ? error.message : String(error)
        }
      })
      if (problem === undefined) written = text
      else if (problem !== lastProblem) yield* Console.error(`mnemos: cannot write ${path}: ${problem}`)
      lastProblem = problem
    })
    yield* PubSub.take(changes).pipe(
      Effect.flatMap((uri) => (uri === editorActiveUri ? bringUpToDate : Effect.void)),
      Effect.forever,
      Effect.forkScoped,
    )
  })
