/**
 * The code-history tools and their Git context binding, on real temporary repositories made with
 * the `git` binary: a branch with commits, a detached HEAD, a repository without commits, a
 * subdirectory, a directory outside any repository and one that does not exist. Then snippets,
 * PR checklists, environments (fingerprint drift), milestones and list_engineering_records.
 */
import { mkdirSync } from "node:fs"
import { join } from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import { readGitContext } from "../../src/engineering/GitContext.ts"
import { callTool, git, makeRepo, outcomeOf, removeTempDirs, tempDir, testCaller, withEngine } from "./harness.ts"

afterAll(removeTempDirs)

// biome-ignore lint/suspicious/noExplicitAny: tests read the tools' JSON answers
type Json = any
const call = (name: string, args: object, caller = testCaller()) =>
  callTool(name, args, caller) as Effect.Effect<Json, never>

describe("readGitContext on real repositories", () => {
  it.effect("a branch: root, branch, HEAD commit and its full message", () =>
    Effect.gen(function* () {
      const repo = makeRepo(["first", "second commit\n\nwith a body"], "feature/x")
      const context = yield* readGitContext(repo)
      assert.deepStrictEqual(context, {
        root: repo,
        branch: "feature/x",
        detached: false,
        commit: git(repo, "rev-parse", "HEAD"),
        commitMessage: "second commit\n\nwith a body",
      })
    }),
  )

  it.effect("a detached HEAD: no branch, detached, the checked-out commit", () =>
    Effect.gen(function* () {
      const repo = makeRepo(["one", "two"])
      const first = git(repo, "rev-parse", "HEAD~1")
      git(repo, "checkout", "--quiet", "--detach", first)
      const context = yield* readGitContext(repo)
      assert.deepStrictEqual(context, { root: repo, detached: true, commit: first, commitMessage: "one" })
    }),
  )

  it.effect("a repository without commits has a branch and no commit; a subdirectory finds its root", () =>
    Effect.gen(function* () {
      const empty = makeRepo([], "trunk")
      assert.deepStrictEqual(yield* readGitContext(empty), { root: empty, branch: "trunk", detached: false })
      const repo = makeRepo(["x"])
      mkdirSync(join(repo, "src", "deep"), { recursive: true })
      assert.strictEqual((yield* readGitContext(join(repo, "src", "deep"))).root, repo)
    }),
  )

  it.effect("outside a repository, a missing directory and a relative path are typed failures", () =>
    Effect.gen(function* () {
      const plain = tempDir("mnemos-plain-")
      const reasons = yield* Effect.forEach([plain, join(plain, "missing"), "relative/dir"], (dir) =>
        readGitContext(dir).pipe(
          Effect.exit,
          Effect.map((exit) => (Exit.isFailure(exit) ? (exit.cause.reasons[0] as Json).error.reason : "ok")),
        ),
      )
      assert.deepStrictEqual(reasons, ["NotARepository", "NoDirectory", "NoDirectory"])
    }),
  )
})

describe("git-bound tools", () => {
  it.effect("log_code_change, log_error_fix and log_tech_debt record the repository of the client's root", () =>
    withEngine(
      Effect.gen(function* () {
        const repo = makeRepo(["init", "fix the parser"], "main")
        const head = git(repo, "rev-parse", "HEAD")
        const caller = testCaller({ rootDir: repo })
        const expected = { root: repo, branch: "main", detached: false, commit: head, commitMessage: "fix the parser" }
        const change = (yield* call("log_code_change", { summary: "parser rewrite", files: ["src/p.ts"] }, caller))
          .change
        const fix = (yield* call("log_error_fix", { error_signature: "TypeError: x", fix: "guard" }, caller)).errorFix
        const debt = (yield* call(
          "log_tech_debt",
          { description: "dup code", severity: "low", location: "src/p.ts:10" },
          caller,
        )).techDebt
        for (const record of [change, fix, debt]) assert.deepStrictEqual(record.git, expected)
      }),
    ),
  )

  it.effect(
    "a cwd argument wins over the root, relative cwd resolves against the root, detached HEAD is recorded",
    () =>
      withEngine(
        Effect.gen(function* () {
          const root = makeRepo(["root repo"])
          const other = makeRepo(["a", "b"], "dev")
          const first = git(other, "rev-parse", "HEAD~1")
          git(other, "checkout", "--quiet", "--detach", first)
          const caller = testCaller({ rootDir: root })
          const detached = (yield* call("log_code_change", { summary: "s", cwd: other }, caller)).change
          assert.deepStrictEqual(detached.git, { root: other, detached: true, commit: first, commitMessage: "a" })
          mkdirSync(join(root, "pkg"))
          const relative = (yield* call(
            "log_tech_debt",
            { description: "d", severity: "high", location: "x", cwd: "pkg" },
            caller,
          )).techDebt
          assert.strictEqual(relative.git.root, root)
        }),
      ),
  )

  it.effect(
    "outside a repository (or with no root at all) the record is still stored, saying why there is no git",
    () =>
      withEngine(
        Effect.gen(function* () {
          const plain = tempDir("mnemos-plain-")
          const inPlain = (yield* call(
            "log_error_fix",
            { error_signature: "E1", fix: "f" },
            testCaller({ rootDir: plain }),
          )).errorFix
          assert.isUndefined(inPlain.git)
          assert.include(inPlain.gitUnavailable, "not inside a Git repository")
          const rootless = (yield* call("log_code_change", { summary: "s" })).change
          assert.include(rootless.gitUnavailable, "no cwd given")
          const missing = (yield* call("log_code_change", { summary: "s", cwd: join(plain, "nope") })).change
          assert.include(missing.gitUnavailable, "not an absolute path to a directory")
        }),
      ),
  )

  it.effect("their argument errors are VALIDATION_ERROR", () =>
    withEngine(
      Effect.gen(function* () {
        const outcomes = yield* Effect.forEach(
          [
            ["log_code_change", { summary: "" }],
            ["log_code_change", { summary: "s", change_type: "rewrite" }],
            ["log_error_fix", { error_signature: "e" }],
            ["log_tech_debt", { description: "d", severity: "huge", location: "x" }],
            ["log_tech_debt", { description: "d", severity: "low" }],
          ] as const,
          ([name, args]) => outcomeOf(callTool(name, args)),
        )
        assert.deepStrictEqual(outcomes, Array(5).fill("VALIDATION_ERROR"))
      }),
    ),
  )
})

describe("snippets, PR checklists, environments, milestones", () => {
  it.effect("add_snippet stores code verbatim; list_engineering_records finds it by text, newest first", () =>
    withEngine(
      Effect.gen(function* () {
        const code = "const x = 1\n\tconsole.log(x) // ünïcödé"
        const a = (yield* call("add_snippet", { title: "retry loop", code, language: "ts" })).snippet
        const b = (yield* call("add_snippet", { title: "debounce", code: "fn()" })).snippet
        assert.strictEqual(a.code, code)
        const all = (yield* call("list_engineering_records", { kind: "snippet" })).records
        assert.deepStrictEqual(
          all.map((r: Json) => r.id),
          [b.id, a.id],
        )
        const found = (yield* call("list_engineering_records", { kind: "snippet", query: "CONSOLE.LOG" })).records
        assert.deepStrictEqual(
          found.map((r: Json) => r.id),
          [a.id],
        )
        assert.strictEqual(yield* outcomeOf(callTool("add_snippet", { title: "t", code: "" })), "VALIDATION_ERROR")
        assert.strictEqual(yield* outcomeOf(callTool("list_engineering_records", { kind: "task" })), "VALIDATION_ERROR")
      }),
    ),
  )

  it.effect("PR checklist items are checked and unchecked with who and revision checks", () =>
    withEngine(
      Effect.gen(function* () {
        const { item } = yield* call("add_pr_checklist_item", { pr: "#42", text: "tests green" })
        assert.deepStrictEqual([item.checked, item.checkedBy], [false, undefined])
        const checked = (yield* call(
          "update_pr_checklist_item",
          { id: item.id, checked: true },
          testCaller({ client: "reviewer" }),
        )).item
        assert.deepStrictEqual([checked.checked, checked.checkedBy, checked.revision], [true, "reviewer", 2])
        assert.isString(checked.checkedAt)
        const unchecked = (yield* call("update_pr_checklist_item", { id: item.id, checked: false })).item
        assert.deepStrictEqual(
          [unchecked.checked, unchecked.checkedBy, unchecked.checkedAt],
          [false, undefined, undefined],
        )
        assert.strictEqual(yield* outcomeOf(callTool("update_pr_checklist_item", { id: item.id })), "VALIDATION_ERROR")
        assert.strictEqual(
          yield* outcomeOf(callTool("update_pr_checklist_item", { id: item.id, checked: true, expected_revision: 1 })),
          "CONFLICT",
        )
        assert.strictEqual(
          yield* outcomeOf(callTool("update_pr_checklist_item", { id: "01J0000000000000000000000Z", checked: true })),
          "NOT_FOUND",
        )
        assert.strictEqual(yield* outcomeOf(callTool("add_pr_checklist_item", { text: "no pr" })), "VALIDATION_ERROR")
      }),
    ),
  )

  it.effect("register_environment upserts by name and reports fingerprint drift", () =>
    withEngine(
      Effect.gen(function* () {
        const first = yield* call("register_environment", {
          name: "ci",
          environment_type: "ci",
          fingerprint: ["node=20.11", "os=linux"],
        })
        assert.isNull(first.fingerprintChanged)
        const same = yield* call("register_environment", { name: "ci", fingerprint: ["os=linux", "node=20.11"] })
        assert.isFalse(same.fingerprintChanged)
        assert.strictEqual(same.environment.id, first.environment.id)
        assert.strictEqual(same.environment.fingerprintHash, first.environment.fingerprintHash)
        const drifted = yield* call("register_environment", { name: "ci", fingerprint: ["node=22.1", "os=linux"] })
        assert.deepStrictEqual(drifted.environment.fingerprint, { node: "22.1", os: "linux" })
        assert.isTrue(drifted.fingerprintChanged)
        assert.strictEqual((yield* call("list_engineering_records", { kind: "environment" })).records.length, 1)
        assert.strictEqual(
          yield* outcomeOf(callTool("register_environment", { name: "x", fingerprint: ["no value"] })),
          "VALIDATION_ERROR",
        )
      }),
    ),
  )

  it.effect("add_milestone keeps its retrospective and date; bad dates are refused", () =>
    withEngine(
      Effect.gen(function* () {
        const { milestone } = yield* call("add_milestone", {
          title: "v0.1",
          date: "2025-06-01",
          retrospective: "went well",
        })
        assert.deepStrictEqual(
          [milestone.title, milestone.date, milestone.retrospective],
          ["v0.1", "2025-06-01", "went well"],
        )
        assert.strictEqual(
          yield* outcomeOf(callTool("add_milestone", { title: "t", date: "June" })),
          "VALIDATION_ERROR",
        )
      }),
    ),
  )
})
