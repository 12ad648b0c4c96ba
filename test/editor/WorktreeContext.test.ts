/**
 * `get_active_worktree_context` on temporary repositories: a repository without commits, dirty
 * files of every kind, recent commits, a detached HEAD, a linked worktree, an upstream that is
 * behind, a directory outside any repository; and which worktree is "active" (the argument,
 * else the editor's focused file, else the workspace root).
 */
import { execFileSync } from "node:child_process"
import { mkdirSync, realpathSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { EditorFocus, makeMemoryEditorFocus } from "../../src/editor/EditorFocus.ts"
import { parseStatus, readWorktreeContext } from "../../src/editor/WorktreeContext.ts"
import { caller, callTool, removeTempDirs, tempDir, toolFailure } from "./harness.ts"

const gitEnv = {
  ...process.env,
  GIT_AUTHOR_NAME: "Ada",
  GIT_AUTHOR_EMAIL: "ada@example.com",
  GIT_COMMITTER_NAME: "Ada",
  GIT_COMMITTER_EMAIL: "ada@example.com",
  GIT_CONFIG_NOSYSTEM: "1",
  HOME: tempDir("mnemos-git-home-"),
}
const git = (cwd: string, ...args: Array<string>) =>
  execFileSync("git", args, { cwd, env: gitEnv, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim()

const newRepo = () => {
  const root = realpathSync(tempDir("mnemos-repo-"))
  git(root, "init", "--quiet", "--initial-branch=main")
  return root
}
const commit = (root: string, file: string, content: string, message: string) => {
  writeFileSync(join(root, file), content)
  git(root, "add", file)
  git(root, "commit", "--quiet", "-m", message)
  return git(root, "rev-parse", "HEAD")
}

afterAll(removeTempDirs)

describe("worktree context", () => {
  it.live("a repository without commits: its branch, no HEAD, untracked files", () =>
    Effect.gen(function* () {
      const root = newRepo()
      writeFileSync(join(root, "new.txt"), "hello")
      const context = yield* readWorktreeContext(root)
      assert.deepStrictEqual(context, {
        root,
        branch: "main",
        detached: false,
        linkedWorktree: false,
        dirty: [{ path: "new.txt", staged: "?", unstaged: "?", state: "untracked" }],
        dirtyCount: 1,
        recentCommits: [],
      })
    }),
  )

  it.live("dirty files of each kind, and the recent commits newest first", () =>
    Effect.gen(function* () {
      const root = newRepo()
      commit(root, "a.txt", "a\n", "first: add a")
      commit(root, "b.txt", "b\n", "second: add b")
      const head = commit(root, "c.txt", "c\n", "third: add c")
      writeFileSync(join(root, "a.txt"), "a changed\n") // modified, unstaged
      git(root, "rm", "--quiet", "b.txt") // deleted, staged
      git(root, "mv", "c.txt", "renamed.txt") // renamed, staged
      writeFileSync(join(root, "added.txt"), "new\n")
      git(root, "add", "added.txt") // added, staged
      writeFileSync(join(root, "untracked file.txt"), "?\n")
      mkdirSync(join(root, "sub"))
      writeFileSync(join(root, "sub", "inner.txt"), "in\n")

      const context = yield* readWorktreeContext(join(root, "sub", "inner.txt"), { commitsLimit: 2 })
      assert.strictEqual(context.root, root)
      assert.strictEqual(context.branch, "main")
      assert.strictEqual(context.head, head)
      assert.strictEqual(context.detached, false)
      assert.deepStrictEqual(
        [...context.dirty].sort((x, y) => x.path.localeCompare(y.path)),
        [
          { path: "a.txt", staged: ".", unstaged: "M", state: "modified" },
          { path: "added.txt", staged: "A", unstaged: ".", state: "added" },
          { path: "b.txt", staged: "D", unstaged: ".", state: "deleted" },
          { path: "renamed.txt", from: "c.txt", staged: "R", unstaged: ".", state: "renamed" },
          { path: "sub/", staged: "?", unstaged: "?", state: "untracked" },
          { path: "untracked file.txt", staged: "?", unstaged: "?", state: "untracked" },
        ],
      )
      assert.strictEqual(context.dirtyCount, 6)
      assert.deepStrictEqual(
        context.recentCommits.map((entry) => [entry.subject, entry.author]),
        [
          ["third: add c", "Ada"],
          ["second: add b", "Ada"],
        ],
      )
      assert.strictEqual(context.recentCommits[0]?.hash, head)
      assert.strictEqual(context.recentCommits[0]?.shortHash, head.slice(0, context.recentCommits[0]?.shortHash.length))
      assert.match(context.recentCommits[0]?.date ?? "", /^\d{4}-\d\d-\d\dT/)
    }),
  )

  it.live("a detached HEAD has a commit and no branch", () =>
    Effect.gen(function* () {
      const root = newRepo()
      const first = commit(root, "a.txt", "1", "one")
      commit(root, "a.txt", "2", "two")
      git(root, "checkout", "--quiet", "--detach", first)
      const context = yield* readWorktreeContext(root)
      assert.strictEqual(context.detached, true)
      assert.strictEqual(context.branch, undefined)
      assert.strictEqual(context.head, first)
      assert.deepStrictEqual(
        context.recentCommits.map((entry) => entry.subject),
        ["one"],
      )
    }),
  )

  it.live("a linked worktree, and a clone ahead of and behind its upstream", () =>
    Effect.gen(function* () {
      const root = newRepo()
      commit(root, "a.txt", "1", "one")
      const linked = join(realpathSync(tempDir("mnemos-linked-")), "wt")
      git(root, "worktree", "add", "--quiet", "-b", "feature", linked)
      const inLinked = yield* readWorktreeContext(linked)
      assert.strictEqual(inLinked.root, linked)
      assert.strictEqual(inLinked.branch, "feature")
      assert.strictEqual(inLinked.linkedWorktree, true)
      assert.strictEqual((yield* readWorktreeContext(root)).linkedWorktree, false)

      const clone = join(realpathSync(tempDir("mnemos-clone-")), "clone")
      git(root, "clone", "--quiet", root, clone)
      commit(clone, "mine.txt", "m", "local work")
      commit(root, "theirs.txt", "t", "upstream work 1")
      commit(root, "theirs2.txt", "t", "upstream work 2")
      git(clone, "fetch", "--quiet")
      const context = yield* readWorktreeContext(clone)
      assert.deepStrictEqual(context.upstream, { name: "origin/main", ahead: 1, behind: 2 })
    }),
  )

  it.live("outside any repository, or a path that does not exist: clear errors", () =>
    Effect.gen(function* () {
      const plain = realpathSync(tempDir("mnemos-plain-"))
      const outside = yield* readWorktreeContext(plain).pipe(Effect.flip)
      assert.strictEqual(outside.reason, "NotARepository")
      assert.include(outside.message, "is not inside a Git repository")
      const missing = yield* readWorktreeContext(join(plain, "missing")).pipe(Effect.flip)
      assert.strictEqual(missing.reason, "NoDirectory")
      const tool = yield* toolFailure(callTool("get_active_worktree_context", { path: plain }))
      assert.strictEqual(tool.code, "VALIDATION_ERROR")
    }),
  )

  it("parses porcelain status with -z, renames naming their source", () => {
    assert.deepStrictEqual(parseStatus("R  new name.ts\0old name.ts\0UU both.ts\0 T link\0"), [
      { path: "new name.ts", from: "old name.ts", staged: "R", unstaged: ".", state: "renamed" },
      { path: "both.ts", staged: "U", unstaged: "U", state: "conflicted" },
      { path: "link", staged: ".", unstaged: "T", state: "typechange" },
    ])
  })
})

describe("get_active_worktree_context", () => {
  it.live("uses the path given, else the editor's focused file, else the workspace root", () =>
    Effect.gen(function* () {
      const focused = newRepo()
      commit(focused, "focused.ts", "x", "focused repo")
      const workspace = newRepo()
      commit(workspace, "w.ts", "x", "workspace repo")

      const fromRoot = yield* callTool("get_active_worktree_context", {}, caller(workspace))
      assert.strictEqual(fromRoot.structured.root, workspace)
      assert.deepStrictEqual(fromRoot.structured.from, { path: workspace, source: "workspace root" })

      const focus = makeMemoryEditorFocus()
      focus.report({ file: join(focused, "focused.ts"), line: 1, col: 1, session: "nvim-1" })
      const fromFocus = yield* callTool("get_active_worktree_context", {}, caller(workspace)).pipe(
        Effect.provideService(EditorFocus, focus),
      )
      assert.strictEqual(fromFocus.structured.root, focused)
      assert.strictEqual((fromFocus.structured.from as { source: string }).source, "editor focus")

      const fromArgument = yield* callTool(
        "get_active_worktree_context",
        { path: "w.ts", commitsLimit: 0 },
        caller(workspace),
      ).pipe(Effect.provideService(EditorFocus, focus))
      assert.strictEqual(fromArgument.structured.root, workspace)
      assert.deepStrictEqual(fromArgument.structured.recentCommits, [])

      const nowhere = yield* toolFailure(callTool("get_active_worktree_context", {}))
      assert.strictEqual(nowhere.code, "NOT_FOUND")
      assert.include(nowhere.message, "no worktree is known")
    }),
  )
})
