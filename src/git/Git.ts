/**
 * Running `git` for the features that read a repository (the engineering stores' context binding,
 * the editor's worktree context): `git -C directory ...`, with a timeout, an output bound, no
 * prompts, no optional locks and no inherited GIT_DIR-style variables that would point it
 * elsewhere.
 */
import { execFile } from "node:child_process"
import { Effect, Schema } from "effect"

/** What one git run printed; `ok` is false when git exited non-zero. */
export interface GitRun {
  readonly ok: boolean
  readonly stdout: string
  readonly stderr: string
}

/** git could not be run (missing, timed out, output too large). */
export class GitFailed extends Schema.TaggedError<GitFailed>()("GitFailed", {
  directory: Schema.String,
  message: Schema.String,
}) {}

/** Limits of one run. */
export interface GitLimits {
  readonly timeoutMs: number
  readonly outputBytesMax: number
}

const gitEnvironment = (): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = { ...process.env, GIT_OPTIONAL_LOCKS: "0", GIT_TERMINAL_PROMPT: "0", LC_ALL: "C" }
  for (const name of ["GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_CEILING_DIRECTORIES"])
    delete env[name]
  return env
}

/** Runs `git -C directory ...args`; a non-zero exit is `ok: false`, a spawn failure or timeout fails. */
export const runGit = (directory: string, args: ReadonlyArray<string>, limits: GitLimits) =>
  Effect.callback<GitRun, GitFailed>((resume) => {
    const child = execFile(
      "git",
      ["-c", "core.fsmonitor=false", "-C", directory, ...args],
      { timeout: limits.timeoutMs, maxBuffer: limits.outputBytesMax, env: gitEnvironment(), encoding: "utf8" },
      (error, stdout, stderr) => {
        if (error === null) return resume(Effect.succeed({ ok: true, stdout, stderr }))
        if (typeof error.code === "number") return resume(Effect.succeed({ ok: false, stdout, stderr }))
        const why = error.killed ? `timed out after ${limits.timeoutMs} ms` : error.message
        resume(Effect.fail(new GitFailed({ directory, message: `git ${args[0]}: ${why}` })))
      },
    )
    return Effect.sync(() => void child.kill())
  })
