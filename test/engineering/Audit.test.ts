/**
 * The audit ledger: one entry per committed mutation of every store — every mutating engineering
 * tool and the graph tools — with who, when, tool, project and summary; nothing for reads,
 * refusals, no-op changes or the ledger's own appends; visible as soon as the mutation is
 * acknowledged; queryable by store, tool, who, record, time and page; kept across restarts;
 * duplicates of a source audited once and lost sources reported as a gap.
 */

import { afterAll, assert, describe, it } from "@effect/vitest"
import { Effect, Result } from "effect"
import { auditEntryOf } from "../../src/engineering/AuditEntries.ts"
import { queryAudit } from "../../src/engineering/AuditQueries.ts"
import { auditStore } from "../../src/engineering/AuditStore.ts"
import type { Entry, KeyRange, StoreWriter } from "../../src/stores/checkpoint/Checkpoint.ts"
import { engineeringTools } from "../../src/tools/EngineeringTools.ts"
import { callTool, makeRepo, openEngine, removeTempDirs, tempDir, testCaller, withEngine } from "./harness.ts"

afterAll(removeTempDirs)

// biome-ignore lint/suspicious/noExplicitAny: tests read the tools' JSON answers
type Json = any
const call = (name: string, args: object, caller = testCaller()) =>
  callTool(name, args, caller) as Effect.Effect<Json, never>
const audit = (args: object = {}) =>
  call("query_audit", { limit: 500, ...args }).pipe(Effect.map((r) => r.entries as Array<Json>))

/** Calls every mutating engineering tool once (some twice to reach their second path). */
const exerciseEveryMutation = Effect.gen(function* () {
  const repo = makeRepo(["init"])
  const caller = testCaller({ rootDir: repo })
  const task = (yield* call("add_task", { title: "t" })).task
  yield* call("update_task", { id: task.id, status: "doing" })
  yield* call("complete_task", { id: task.id })
  const adr = (yield* call("record_adr", { title: "a", context: "c", decision: "d" })).adr
  yield* call("update_adr", { id: adr.id, status: "accepted" })
  const note = (yield* call("add_sticky_note", { text: "n" })).note
  yield* call("remove_sticky_note", { id: note.id })
  const summary = (yield* call("add_session_summary", { summary: "s" })).summary
  const milestone = (yield* call("add_milestone", { title: "m" })).milestone
  yield* call("archive_session_summaries", { ids: [summary.id], milestone_id: milestone.id })
  const handoff = (yield* call("add_handoff", { to_agent: "b", summary: "h" })).handoff
  yield* call("acknowledge_handoff", { id: handoff.id })
  yield* call("pin_file", { path: "a.ts" })
  yield* call("save_context_workspace", { name: "w" })
  yield* call("unpin_file", { path: "a.ts" })
  yield* call("load_context_workspace", { name: "w" })
  yield* call("log_code_change", { summary: "c" }, caller)
  yield* call("log_error_fix", { error_signature: "e", fix: "f" }, caller)
  yield* call("log_tech_debt", { description: "d", severity: "low", location: "x" }, caller)
  yield* call("add_snippet", { title: "s", code: "x" })
  const item = (yield* call("add_pr_checklist_item", { pr: "#1", text: "t" })).item
  yield* call("update_pr_checklist_item", { id: item.id, checked: true })
  yield* call("register_environment", { name: "ci" })
  yield* call("gate_set", { action: "push", status: "authorized" })
  yield* call("gate_verify", { action: "push", consume: true })
  return { task, milestone }
})

describe("audit ledger", () => {
  it.effect("every mutating engineering tool leaves entries naming itself, who and the project", () =>
    withEngine(
      Effect.gen(function* () {
        yield* exerciseEveryMutation
        const entries = yield* audit()
        const mutating = engineeringTools
          .filter((tool) => tool.definition.annotations?.readOnlyHint !== true)
          .map((tool) => tool.definition.name)
        assert.sameMembers([...new Set(entries.map((entry) => entry.tool))], mutating)
        for (const entry of entries) {
          assert.strictEqual(entry.project, "demo")
          assert.strictEqual(entry.who, "tester/1 via test")
          assert.match(entry.at, /^\d{4}-\d{2}-\d{2}T/)
          assert.isString(entry.recordId)
          assert.isAbove(entry.summary.length, 0)
        }
        const seqs = entries.map((entry) => entry.seq)
        assert.deepStrictEqual(
          seqs,
          [...seqs].sort((a, b) => b - a),
          "newest first",
        )
      }),
    ),
  )

  it.effect("reads, refused writes and no-op updates leave nothing; the ledger never audits itself", () =>
    withEngine(
      Effect.gen(function* () {
        const task = (yield* call("add_task", { title: "same" })).task
        const before = (yield* audit()).length
        yield* call("list_tasks", {})
        yield* call("update_task", { id: task.id, title: "same" })
        yield* callTool("update_task", { id: task.id, title: "x", expected_revision: 9 }).pipe(Effect.ignore)
        yield* callTool("add_task", { title: "" }).pipe(Effect.ignore)
        yield* call("gate_verify", { action: "push" })
        yield* audit()
        assert.strictEqual((yield* audit()).length, before)
        assert.deepStrictEqual(yield* audit({ store: "audit", project: "*" }), [])
      }),
    ),
  )

  it.effect("an entry is there as soon as the mutation is acknowledged, with its summary", () =>
    withEngine(
      Effect.gen(function* () {
        const { adr } = yield* call("record_adr", { title: "Use LMDB", context: "c", decision: "d" })
        const [entry] = yield* audit({ record_id: adr.id })
        assert.strictEqual(entry.summary, "created adr #1: Use LMDB")
        assert.deepStrictEqual(
          [entry.store, entry.tool, entry.action, entry.kind],
          ["adrs", "record_adr", "created", "adr"],
        )
      }),
    ),
  )

  it.effect("filters by store, tool, who, record and time, pages with nextCursor, and spans projects with *", () =>
    withEngine(
      Effect.gen(function* () {
        const alice = testCaller({ client: "alice" })
        const bob = testCaller({ client: "bob", project: "other" })
        const t = (yield* call("add_task", { title: "a" }, alice)).task
        yield* call("update_task", { id: t.id, status: "doing" }, alice)
        yield* call("add_sticky_note", { text: "n" }, alice)
        yield* call("add_task", { title: "b" }, bob)
        assert.strictEqual((yield* audit({ store: "tasks" })).length, 2)
        assert.strictEqual((yield* audit({ tool: "update_task" })).length, 1)
        assert.strictEqual((yield* audit({ who: "ali" })).length, 3)
        assert.strictEqual((yield* audit({ record_id: t.id })).length, 2)
        assert.strictEqual((yield* audit({ project: "*" })).length, 4)
        assert.strictEqual((yield* audit({ project: "*", who: "bob" }))[0].project, "other")
        assert.strictEqual((yield* audit({ since: "2999-01-01" })).length, 0)
        assert.strictEqual((yield* audit({ until: "2999-01-01" })).length, 3)
        const first = yield* call("query_audit", { limit: 2 })
        const second = yield* call("query_audit", { limit: 2, cursor: first.nextCursor })
        assert.strictEqual(first.entries.length, 2)
        assert.strictEqual(second.entries.length, 1)
        assert.isUndefined(second.nextCursor)
        assert.deepStrictEqual(
          [...first.entries, ...second.entries].map((entry: Json) => entry.seq),
          (yield* audit()).map((entry) => entry.seq),
        )
      }),
    ),
  )
})

describe("audit ledger over the full engine", () => {
  it.live(
    "graph mutations are audited with the tool they imply and the client that asked, and the ledger survives a restart",
    () =>
      Effect.promise(async () => {
        const dir = tempDir()
        const first = await openEngine(dir)
        await first.ok("create_entities", {
          entities: [{ name: "WAL", entityType: "module", observations: ["fsync"] }],
        })
        await first.ok("add_observations", { observations: [{ entityName: "WAL", contents: ["segments"] }] })
        await first.ok("create_relations", { relations: [{ from: "WAL", to: "LMDB", relationType: "feeds" }] })
        await first.ok("delete_entities", { entityNames: ["WAL"] })
        await first.ok("add_task", { title: "survive" })
        const before = (await first.ok("query_audit", { limit: 500 })).structured.entries
        await first.close()
        const second = await openEngine(dir)
        const after = (await second.ok("query_audit", { limit: 500 })).structured.entries
        await second.close()
        assert.deepStrictEqual(after, before)
        const who = "eng-test/1 via test" // the MCP client of `openEngine`
        assert.deepStrictEqual(
          before.map((entry: Json) => [entry.store, entry.tool, entry.who, entry.summary]).reverse(),
          [
            ["graph", "create_entities", who, "created 1 entity: WAL"],
            ["graph", "add_observations", who, "added 1 observation to WAL"],
            ["graph", "create_relations", who, "created 1 relation: WAL -feeds-> LMDB"],
            ["graph", "delete_entities", who, "deleted 1 entity: WAL"],
            ["tasks", "add_task", who, "created task " + before[0].recordId + ": survive"],
          ],
        )
      }),
  )
})

describe("audit entries of other stores", () => {
  it("a written conversation message is audited with its author", () => {
    const entry = auditEntryOf({
      store: "conversations",
      seq: 3,
      at: 1_000,
      event: { _tag: "MessageWritten", project: "p", created_by: "claude-code/2 via ws", message: {} },
    })
    assert.deepInclude(entry, {
      store: "conversations",
      project: "p",
      who: "claude-code/2 via ws",
      tool: "MessageWritten",
    })
  })
})

describe("audit store", () => {
  const memoryState = (): StoreWriter => {
    const map = new Map<string, unknown>()
    const range = (r: KeyRange): Array<Entry> =>
      [...map.keys()]
        .filter((key) => key >= r.start && key < r.end)
        .sort()
        .map((key) => ({ key, value: map.get(key) }))
    return {
      get: (key) => map.get(key),
      getRange: range,
      count: (r) => range(r).length,
      put: (key, value) => void map.set(key, value),
      remove: (key) => void map.delete(key),
    }
  }
  const entry = (store: string, sourceSeq: number) => ({
    store,
    sourceSeq,
    at: sourceSeq,
    project: "p",
    who: "w",
    tool: "t",
    action: "created",
    summary: `${store}#${sourceSeq}`,
  })
  const append = (state: StoreWriter, entries: Array<ReturnType<typeof entry>>) => {
    const decided = auditStore.decide({ _tag: "Append", entries }, state, { now: 99 })
    if (Result.isFailure(decided)) throw new Error("refused")
    for (const event of decided.success.events) auditStore.apply(event, state)
    return decided.success.reply.appended
  }

  it("audits a source once however often it is published, and records a gap when sources are skipped", () => {
    const state = memoryState()
    assert.strictEqual(append(state, [entry("tasks", 1), entry("tasks", 2), entry("tasks", 2)]), 2)
    assert.strictEqual(append(state, [entry("tasks", 1), entry("tasks", 2)]), 0, "re-published after recovery")
    assert.strictEqual(append(state, [entry("tasks", 6), entry("notes", 40)]), 3)
    const all = queryAudit(state, { project: "*", limit: 100 }).entries
    assert.deepStrictEqual(all.map((e) => [e.store, e.action, e.project, e.summary]).reverse(), [
      ["tasks", "created", "p", "tasks#1"],
      ["tasks", "created", "p", "tasks#2"],
      [
        "tasks",
        "gap",
        "*",
        '3 event(s) of store "tasks" (seq 3..5) were not audited: the ledger fell behind or the process stopped before appending them',
      ],
      ["tasks", "created", "p", "tasks#6"],
      ["notes", "created", "p", "notes#40"],
    ])
    assert.strictEqual(queryAudit(state, { project: "p", limit: 100 }).entries.length, 4, "gaps are ledger-wide")
  })
})
