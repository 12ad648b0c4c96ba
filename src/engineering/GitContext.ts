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
import { statSync } from "node:fs"
import { isAbsolute } from "node:path"
import { Effect, Schema } from "effect"
import { runGit } from "../git/Git.ts"

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

/** Runs git in `directory`; a failure to run it is this module's error. */
const gitIn = (directory: string, args: ReadonlyArray<string>) =>
  runGit(directory, args, { timeoutMs: gitCommandTimeoutMs, outputBytesMax: gitOutputBytesMax }).pipe(
    Effect.mapError((error) => new GitContextUnavailable({ directory, reason: "GitFailed", message: error.message })),
  )

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
    const top = yield* gitIn(directory, ["rev-parse", "--show-toplevel"])
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
        gitIn(directory, ["symbolic-ref", "--quiet", "--short", "HEAD"]),
        gitIn(directory, ["log", "-1", "--format=%H%n%B"]),
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
