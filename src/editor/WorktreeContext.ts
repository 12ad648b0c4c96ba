/**
 * The state of the Git worktree the person works in: repository root, branch (or detached HEAD),
 * HEAD commit, upstream and how far ahead/behind, dirty files, and the most recent commits.
 *
 * Read with `git` (read-only plumbing, each command with a timeout and an output limit) in a
 * clean Git environment (no inherited GIT_DIR and friends, no optional locks, no prompts), so
 * reading never changes the repository. A repository without commits has a branch but no HEAD
 * commit and no history; a detached HEAD has a commit but no branch; a directory outside any
 * repository is `NotARepository`.
 */
import { statSync } from "node:fs"
import { dirname, isAbsolute } from "node:path"
import { Effect, Schema } from "effect"
import { runGit } from "../git/Git.ts"

/** How long one git command may run. */
export const worktreeGitTimeoutMs = 5_000
/** Most output read from one git command. */
export const worktreeGitOutputBytesMax = 4 * 1024 * 1024
/** Most dirty files listed. */
export const dirtyFilesMax = 500
/** Most recent commits listed. */
export const recentCommitsMax = 50

/** One changed path, as `git status --porcelain` reports it. */
export interface DirtyFile {
  readonly path: string
  /** The path it was renamed or copied from. */
  readonly from?: string
  /** Status letter in the index (staged), `.` when unchanged, `?` untracked. */
  readonly staged: string
  /** Status letter in the worktree (unstaged). */
  readonly unstaged: string
  readonly state: "modified" | "added" | "deleted" | "renamed" | "copied" | "untracked" | "conflicted" | "typechange"
}

/** One commit. */
export interface CommitSummary {
  readonly hash: string
  readonly shortHash: string
  readonly author: string
  readonly date: string
  readonly subject: string
}

/** The worktree's state. */
export interface WorktreeContext {
  readonly root: string
  /** The branch HEAD is on; absent when detached. */
  readonly branch?: string
  readonly detached: boolean
  /** The HEAD commit; absent in a repository without commits. */
  readonly head?: string
  readonly upstream?: { readonly name: string; readonly ahead: number; readonly behind: number }
  /** A linked worktree (`git worktree add`) rather than the main one. */
  readonly linkedWorktree: boolean
  readonly dirty: ReadonlyArray<DirtyFile>
  readonly dirtyCount: number
  readonly recentCommits: ReadonlyArray<CommitSummary>
}

/** Why no context could be read. */
export class WorktreeError extends Schema.TaggedError<WorktreeError>()("WorktreeError", {
  directory: Schema.String,
  reason: Schema.Literals(["NoDirectory", "NotARepository", "GitFailed"]),
  message: Schema.String,
}) {}

/** Runs git in `directory`; a failure to run it is this module's error. */
const git = (directory: string, args: ReadonlyArray<string>) =>
  runGit(directory, args, { timeoutMs: worktreeGitTimeoutMs, outputBytesMax: worktreeGitOutputBytesMax }).pipe(
    Effect.mapError((error) => new WorktreeError({ directory, reason: "GitFailed", message: error.message })),
  )

const stateOf = (staged: string, unstaged: string): DirtyFile["state"] => {
  const pair = staged + unstaged
  if (pair === "??") return "untracked"
  if (staged === "U" || unstaged === "U" || pair === "AA" || pair === "DD") return "conflicted"
  if (staged === "R") return "renamed"
  if (staged === "C") return "copied"
  if (staged === "A") return "added"
  if (staged === "D" || unstaged === "D") return "deleted"
  if (staged === "T" || unstaged === "T") return "typechange"
  return "modified"
}

/** Parses `git status --porcelain=v1 -z`. */
export const parseStatus = (output: string): Array<DirtyFile> => {
  const fields = output.split("\0")
  const files: Array<DirtyFile> = []
  for (let index = 0; index < fields.length; index++) {
    const field = fields[index]!
    if (field.length < 4) continue
    const staged = field[0]!
    const unstaged = field[1]!
    const path = field.slice(3)
    const state = stateOf(staged, unstaged)
    if (state === "renamed" || state === "copied") {
      const from = fields[++index] ?? ""
      files.push({ path, from, staged, unstaged: unstaged === " " ? "." : unstaged, state })
    } else
      files.push({ path, staged: staged === " " ? "." : staged, unstaged: unstaged === " " ? "." : unstaged, state })
  }
  return files
}

const unitSeparator = "\u001f"
const recordSeparator = "\u001e"

const parseLog = (output: string): Array<CommitSummary> =>
  output
    .split(recordSeparator)
    .map((record) => record.replace(/^\n/, ""))
    .filter((record) => record !== "")
    .map((record) => {
      const [hash = "", shortHash = "", author = "", date = "", subject = ""] = record.split(unitSeparator)
      return { hash, shortHash, author, date, subject }
    })

const directoryOf = (path: string): string | undefined => {
  try {
    const info = statSync(path)
    return info.isDirectory() ? path : info.isFile() ? dirname(path) : undefined
  } catch {
    return undefined
  }
}

/** Reads the worktree around `path` (an absolute directory, or a file inside the worktree). */
export const readWorktreeContext = (
  path: string,
  options: { readonly commitsLimit: number } = { commitsLimit: 10 },
): Effect.Effect<WorktreeContext, WorktreeError> =>
  Effect.gen(function* () {
    const directory = isAbsolute(path) ? directoryOf(path) : undefined
    if (directory === undefined)
      return yield* new WorktreeError({
        directory: path,
        reason: "NoDirectory",
        message: `${path} is not an absolute path to a file or directory on the daemon's machine`,
      })
    const top = yield* git(directory, [
      "rev-parse",
      "--path-format=absolute",
      "--show-toplevel",
      "--git-dir",
      "--git-common-dir",
    ])
    if (!top.ok) {
      const notRepo = /not a git repository/i.test(top.stderr)
      return yield* new WorktreeError({
        directory,
        reason: notRepo ? "NotARepository" : "GitFailed",
        message: notRepo ? `${directory} is not inside a Git repository` : `git rev-parse failed: ${top.stderr.trim()}`,
      })
    }
    const [root = directory, gitDir = "", commonDir = ""] = top.stdout.trim().split("\n")
    const commitsLimit = Math.max(0, Math.min(options.commitsLimit, recentCommitsMax))
    const [branch, head, upstream, status, log] = yield* Effect.all(
      [
        git(root, ["symbolic-ref", "--quiet", "--short", "HEAD"]),
        git(root, ["rev-parse", "--verify", "--quiet", "HEAD"]),
        git(root, ["rev-list", "--left-right", "--count", "HEAD...@{upstream}"]),
        git(root, ["status", "--porcelain=v1", "-z", "--untracked-files=normal"]),
        commitsLimit === 0
          ? Effect.succeed({ ok: true, stdout: "", stderr: "" })
          : git(root, [
              "log",
              `-n${commitsLimit}`,
              `--format=%H${unitSeparator}%h${unitSeparator}%an${unitSeparator}%aI${unitSeparator}%s${recordSeparator}`,
            ]),
      ],
      { concurrency: 2 },
    )
    if (!status.ok)
      return yield* new WorktreeError({
        directory,
        reason: "GitFailed",
        message: `git status failed: ${status.stderr.trim()}`,
      })
    const upstreamName = upstream.ok
      ? yield* git(root, ["rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{upstream}"])
      : undefined
    const [ahead = 0, behind = 0] = upstream.ok ? upstream.stdout.trim().split(/\s+/).map(Number) : []
    const dirty = parseStatus(status.stdout)
    return {
      root,
      ...(branch.ok ? { branch: branch.stdout.trim() } : {}),
      detached: !branch.ok && head.ok,
      ...(head.ok ? { head: head.stdout.trim() } : {}),
      ...(upstreamName?.ok ? { upstream: { name: upstreamName.stdout.trim(), ahead, behind } } : {}),
      linkedWorktree: gitDir !== commonDir,
      dirty: dirty.slice(0, dirtyFilesMax),
      dirtyCount: dirty.length,
      recentCommits: head.ok && log.ok ? parseLog(log.stdout) : [],
    }
  })
