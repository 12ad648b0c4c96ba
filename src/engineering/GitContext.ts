/**
 * Git context binding: the repository around a directory, its branch, HEAD commit and commit
 * message, found by running `git` (read-only plumbing commands, each with a timeout), so agents
 * never pass them by hand.
 *
 * A detached HEAD has no branch (`detached: true`); a repository without commits has a branch
 * but no commit; a directory outside any repository is `NotARepository`. The child gets a clean
 * Git environment (no inherited GIT_DIR/GIT_WORK_TREE, no optional locks, no prompts, no
 * fsmonitor hook) and runs only rev-parse, symbolic-ref and log, so reading context never
 * changes the repository or runs a hook the repository configures.
 */
import { execFile } from "node:child_process"
import { statSync } from "node:fs"
import { isAbsolute } from "node:path"
import { Effect, Schema } from "effect"

/** How long one git command may run. */
export const gitCommandTimeoutMs = 5_000
/** Most output read from one git command. */
export const gitOutputBytesMax = 1024 * 1024
/** Longest commit message kept, in UTF-16 code units. */
export const gitCommitMessageCharsMax = 4 * 1024

/** What a record remembers of the repository it was logged in. */
export const GitInfo = Schema.Struct({
  root: Schema.String,
  branch: Schema.optionalKey(Schema.String),
  detached: Schema.Boolean,
  commit: Schema.optionalKey(Schema.String),
  commitMessage: Schema.optionalKey(Schema.String),
})
export type GitInfo = typeof GitInfo.Type

/** Why no Git context could be read. */
export class GitContextUnavailable extends Schema.TaggedError<GitContextUnavailable>()("GitContextUnavailable", {
  directory: Schema.String,
  reason: Schema.Literals(["NoDirectory", "NotARepository", "GitFailed"]),
  message: Schema.String,
}) {}

interface GitRun {
  readonly ok: boolean
  readonly stdout: string
  readonly stderr: string
}

const gitEnvironment = (): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = { ...process.env, GIT_OPTIONAL_LOCKS: "0", GIT_TERMINAL_PROMPT: "0", LC_ALL: "C" }
  for (const name of ["GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_CEILING_DIRECTORIES"])
    delete env[name]
  return env
}

/** Runs `git -C directory ...args`; a non-zero exit is `ok: false`, a spawn failure or timeout fails. */
const runGit = (directory: string, args: ReadonlyArray<string>) =>
  Effect.callback<GitRun, GitContextUnavailable>((resume) => {
    const child = execFile(
      "git",
      ["-c", "core.fsmonitor=false", "-C", directory, ...args],
      { timeout: gitCommandTimeoutMs, maxBuffer: gitOutputBytesMax, env: gitEnvironment(), encoding: "utf8" },
      (error, stdout, stderr) => {
        if (error === null) return resume(Effect.succeed({ ok: true, stdout, stderr }))
        if (typeof error.code === "number") return resume(Effect.succeed({ ok: false, stdout, stderr }))
        const why = error.killed ? `timed out after ${gitCommandTimeoutMs} ms` : error.message
        resume(Effect.fail(new GitContextUnavailable({ directory, reason: "GitFailed", message: `git ${why}` })))
      },
    )
    return Effect.sync(() => void child.kill())
  })

const isDirectory = (path: string): boolean => {
  try {
    return statSync(path).isDirectory()
  } catch {
    return false
  }
}

/** Reads the Git context of `directory` (an absolute path). */
export const readGitContext = (directory: string): Effect.Effect<GitInfo, GitContextUnavailable> =>
  Effect.gen(function* () {
    if (!isAbsolute(directory) || !isDirectory(directory))
      return yield* new GitContextUnavailable({
        directory,
        reason: "NoDirectory",
        message: `${directory} is not an absolute path to a directory on the server's machine`,
      })
    const top = yield* runGit(directory, ["rev-parse", "--show-toplevel"])
    if (!top.ok) {
      const notRepo = /not a git repository/i.test(top.stderr)
      return yield* new GitContextUnavailable({
        directory,
        reason: notRepo ? "NotARepository" : "GitFailed",
        message: notRepo ? `${directory} is not inside a Git repository` : `git failed: ${top.stderr.trim()}`,
      })
    }
    const [branch, head] = yield* Effect.all(
      [
        runGit(directory, ["symbolic-ref", "--quiet", "--short", "HEAD"]),
        runGit(directory, ["log", "-1", "--format=%H%n%B"]),
      ],
      { concurrency: 2 },
    )
    const newline = head.stdout.indexOf("\n")
    const commit = head.ok && newline > 0 ? head.stdout.slice(0, newline) : undefined
    const message = head.ok && newline > 0 ? head.stdout.slice(newline + 1).trim() : undefined
    return {
      root: top.stdout.trim(),
      ...(branch.ok ? { branch: branch.stdout.trim() } : {}),
      detached: !branch.ok,
      ...(commit !== undefined ? { commit } : {}),
      ...(message !== undefined ? { commitMessage: message.slice(0, gitCommitMessageCharsMax) } : {}),
    } satisfies GitInfo
  })
