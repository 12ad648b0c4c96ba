/**
 * The context tools — sticky notes (with TTL expiry under a test clock), session summaries and
 * their archiving, handoffs, context workspaces and pinned files — called through their Schemas
 * and handlers on a real engine, under `TestClock`: time only moves when the test moves it.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { RecordExpiry } from "../../src/engineering/RecordExpiry.ts"
import { callTool, outcomeOf, removeTempDirs, testCaller, withEngine } from "./harness.ts"

afterAll(removeTempDirs)

// biome-ignore lint/suspicious/noExplicitAny: tests read the tools' JSON answers
type Json = any
const call = (name: string, args: object, caller = testCaller()) =>
  callTool(name, args, caller) as Effect.Effect<Json, never>
const seconds = (n: number) => n * 1000

describe("sticky notes", () => {
  it.effect("a note with ttl_seconds is listed until it expires, then leaves the list by itself", () =>
    withEngine(
      Effect.gen(function* () {
        const { note } = yield* call("add_sticky_note", { text: "deploy freeze until 5pm", ttl_seconds: 60 })
        const forever = (yield* call("add_sticky_note", { text: "the build needs Node 20" })).note
        assert.strictEqual(note.expiresAt, new Date(seconds(60)).toISOString())
        const texts = (result: Json) => result.notes.map((n: Json) => n.text)
        assert.deepStrictEqual(texts(yield* call("list_sticky_notes", {})), [forever.text, note.text])
        yield* TestClock.adjust(seconds(59))
        assert.deepStrictEqual(texts(yield* call("list_sticky_notes", {})), [forever.text, note.text])
        yield* TestClock.adjust(seconds(1))
        assert.deepStrictEqual(texts(yield* call("list_sticky_notes", {})), [forever.text])
      }),
    ),
  )

  it.effect("the expiry sweeper deletes the note by itself when its TTL runs out, and the ledger says so", () =>
    withEngine(
      Effect.gen(function* () {
        const expiry = yield* RecordExpiry
        const { note } = yield* call("add_sticky_note", { text: "short-lived", ttl_seconds: 60 })
        assert.strictEqual(yield* expiry.sweep, 0, "nothing is due before the TTL")
        yield* TestClock.adjust(seconds(60))
        // The sweeper woke at 60 s; its delete is real I/O, so wait for it (bounded, by yielding).
        let entries: Array<Json> = []
        for (let attempt = 0; attempt < 500 && entries.length === 0; attempt++) {
          yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 10)))
          entries = (yield* call("query_audit", { record_id: note.id, tool: "ttl_expiry" })).entries
        }
        assert.deepStrictEqual(
          entries.map((entry: Json) => [entry.who, entry.action, entry.summary]),
          [["mnemos", "deleted", `deleted sticky note ${note.id}`]],
        )
        assert.strictEqual(yield* expiry.sweep, 0, "swept once")
      }),
    ),
  )

  it.effect("an expired note stays out of workspaces saved and loaded later", () =>
    withEngine(
      Effect.gen(function* () {
        const short = (yield* call("add_sticky_note", { text: "short", ttl_seconds: 10 })).note
        const saved = (yield* call("save_context_workspace", { name: "ws" })).workspace
        assert.deepStrictEqual(saved.notes, [short.id])
        yield* TestClock.adjust(seconds(11))
        const loaded = yield* call("load_context_workspace", { name: "ws" })
        assert.deepStrictEqual(loaded.notes, [])
        assert.deepStrictEqual(loaded.gone.notes, [short.id])
        const resaved = (yield* call("save_context_workspace", { name: "ws" })).workspace
        assert.deepStrictEqual(resaved.notes, [])
      }),
    ),
  )

  it.effect("filters by tag and text; remove_sticky_note removes, then NOT_FOUND; bad ttl is refused", () =>
    withEngine(
      Effect.gen(function* () {
        const a = (yield* call("add_sticky_note", { text: "Alpha note", tags: ["ops"] })).note
        yield* call("add_sticky_note", { text: "beta note" })
        assert.deepStrictEqual(
          (yield* call("list_sticky_notes", { tag: "ops" })).notes.map((n: Json) => n.id),
          [a.id],
        )
        assert.deepStrictEqual(
          (yield* call("list_sticky_notes", { query: "ALPHA" })).notes.map((n: Json) => n.id),
          [a.id],
        )
        const removed = (yield* call("remove_sticky_note", { id: a.id })).removed
        assert.strictEqual(removed.deletedBy, "tester/1 via test")
        assert.strictEqual((yield* call("list_sticky_notes", {})).notes.length, 1)
        assert.strictEqual(yield* outcomeOf(callTool("remove_sticky_note", { id: a.id })), "NOT_FOUND")
        assert.strictEqual(
          yield* outcomeOf(callTool("add_sticky_note", { text: "x", ttl_seconds: 0 })),
          "VALIDATION_ERROR",
        )
        assert.strictEqual(yield* outcomeOf(callTool("add_sticky_note", { text: "" })), "VALIDATION_ERROR")
        const b = (yield* call("add_sticky_note", { text: "c" })).note
        assert.strictEqual(
          yield* outcomeOf(callTool("remove_sticky_note", { id: b.id, expected_revision: 2 })),
          "CONFLICT",
        )
      }),
    ),
  )
})

describe("session summaries", () => {
  it.effect("lists newest first, filters by age, and archiving into a milestone removes them from the list", () =>
    withEngine(
      Effect.gen(function* () {
        const old = (yield* call("add_session_summary", { summary: "built the WAL", next_steps: ["fuzz it"] })).summary
        yield* TestClock.adjust(seconds(20 * 24 * 3600))
        const recent = (yield* call("add_session_summary", { summary: "added checkpoints" })).summary
        assert.strictEqual(old.agent, "tester/1 via test")
        const ids = (result: Json) => result.summaries.map((s: Json) => s.id)
        assert.deepStrictEqual(ids(yield* call("list_session_summaries", {})), [recent.id, old.id])
        assert.deepStrictEqual(ids(yield* call("list_session_summaries", { older_than_days: 14 })), [old.id])
        const milestone = (yield* call("add_milestone", { title: "Retrospective", retrospective: "WAL done" }))
          .milestone
        const archived = yield* call("archive_session_summaries", { ids: [old.id], milestone_id: milestone.id })
        assert.deepStrictEqual(archived.archived, [old.id])
        assert.deepStrictEqual(ids(yield* call("list_session_summaries", {})), [recent.id])
        const all = (yield* call("list_session_summaries", { include_archived: true })).summaries
        assert.strictEqual(all[1].archivedInto, milestone.id)
        assert.strictEqual(all[1].archivedAt, new Date(seconds(20 * 24 * 3600)).toISOString())
      }),
    ),
  )

  it.effect("archiving needs an existing milestone and existing summaries", () =>
    withEngine(
      Effect.gen(function* () {
        const summary = (yield* call("add_session_summary", { summary: "s" })).summary
        assert.strictEqual(
          yield* outcomeOf(callTool("archive_session_summaries", { ids: [summary.id], milestone_id: "nope" })),
          "NOT_FOUND",
        )
        const milestone = (yield* call("add_milestone", { title: "m" })).milestone
        assert.strictEqual(
          yield* outcomeOf(
            callTool("archive_session_summaries", { ids: [summary.id, "nope"], milestone_id: milestone.id }),
          ),
          "NOT_FOUND",
        )
        assert.strictEqual((yield* call("list_session_summaries", {})).summaries.length, 1, "all or nothing")
        assert.strictEqual(
          yield* outcomeOf(callTool("archive_session_summaries", { ids: [], milestone_id: milestone.id })),
          "VALIDATION_ERROR",
        )
        assert.strictEqual(yield* outcomeOf(callTool("add_session_summary", {})), "VALIDATION_ERROR")
      }),
    ),
  )
})

describe("handoffs", () => {
  it.effect("a handoff is open until the receiver acknowledges it, once", () =>
    withEngine(
      Effect.gen(function* () {
        const sender = testCaller({ client: "agent-a" })
        const receiver = testCaller({ client: "agent-b" })
        const { handoff } = yield* call(
          "add_handoff",
          { to_agent: "agent-b", summary: "parser half done", open_tasks: ["t1"], files: ["src/parser.ts"] },
          sender,
        )
        assert.strictEqual(handoff.fromAgent, "agent-a")
        assert.strictEqual(handoff.status, "open")
        const open = yield* call("list_handoffs", { status: "open", to_agent: "agent-b" })
        assert.deepStrictEqual(
          open.handoffs.map((h: Json) => h.id),
          [handoff.id],
        )
        yield* TestClock.adjust(seconds(5))
        const acked = (yield* call("acknowledge_handoff", { id: handoff.id, note: "on it" }, receiver)).handoff
        assert.strictEqual(acked.status, "acknowledged")
        assert.strictEqual(acked.acknowledgedBy, "agent-b")
        assert.strictEqual(acked.acknowledgedAt, new Date(seconds(5)).toISOString())
        assert.strictEqual(acked.acknowledgementNote, "on it")
        assert.strictEqual(yield* outcomeOf(callTool("acknowledge_handoff", { id: handoff.id }, receiver)), "CONFLICT")
        assert.strictEqual((yield* call("list_handoffs", { status: "open" })).handoffs.length, 0)
        assert.strictEqual((yield* call("list_handoffs", { from_agent: "agent-a" })).handoffs.length, 1)
        assert.strictEqual(yield* outcomeOf(callTool("acknowledge_handoff", { id: "nope" })), "NOT_FOUND")
        assert.strictEqual(yield* outcomeOf(callTool("add_handoff", { summary: "x" })), "VALIDATION_ERROR")
      }),
    ),
  )

  it.effect("two agents acknowledging at once: exactly one succeeds", () =>
    withEngine(
      Effect.gen(function* () {
        const { handoff } = yield* call("add_handoff", { to_agent: "anyone", summary: "take this" })
        const outcomes = yield* Effect.all(
          ["x", "y", "z"].map((client) =>
            outcomeOf(callTool("acknowledge_handoff", { id: handoff.id }, testCaller({ client }))),
          ),
          { concurrency: "unbounded" },
        )
        assert.deepStrictEqual([...outcomes].sort(), ["CONFLICT", "CONFLICT", "ok"])
      }),
    ),
  )
})

describe("context workspaces and pinned files", () => {
  it.effect("save captures pins, live notes and open tasks; load re-pins and resolves them as they are now", () =>
    withEngine(
      Effect.gen(function* () {
        yield* call("pin_file", { path: "src/a.ts", note: "entry point" })
        yield* call("pin_file", { path: "src/b.ts" })
        const note = (yield* call("add_sticky_note", { text: "remember b" })).note
        const open = (yield* call("add_task", { title: "open one" })).task
        const done = (yield* call("add_task", { title: "done one", status: "done" })).task
        const { workspace } = yield* call("save_context_workspace", { name: "parser", description: "parser work" })
        assert.deepStrictEqual(workspace.pinnedFiles, [{ path: "src/a.ts", note: "entry point" }, { path: "src/b.ts" }])
        assert.deepStrictEqual(workspace.notes, [note.id])
        assert.deepStrictEqual(workspace.tasks, [open.id])
        assert.notInclude(workspace.tasks, done.id)

        yield* call("unpin_file", { path: "src/a.ts" })
        yield* call("complete_task", { id: open.id })
        const loaded = yield* call("load_context_workspace", { name: "parser" })
        assert.deepStrictEqual(loaded.repinned, ["src/a.ts"])
        assert.strictEqual(loaded.tasks[0].status, "done")
        assert.strictEqual(loaded.notes[0].text, "remember b")
        const pins = (yield* call("list_engineering_records", { kind: "pinned_file" })).records
        assert.sameMembers(
          pins.map((pin: Json) => pin.path),
          ["src/a.ts", "src/b.ts"],
        )
        const listing = yield* call("load_context_workspace", {})
        assert.deepStrictEqual(
          listing.workspaces.map((w: Json) => w.name),
          ["parser"],
        )
      }),
    ),
  )

  it.effect("saving a name again replaces it; explicit lists win; unknown names and paths are NOT_FOUND", () =>
    withEngine(
      Effect.gen(function* () {
        const first = (yield* call("save_context_workspace", { name: "w", pinned_files: ["x.ts"] })).workspace
        const second = (yield* call("save_context_workspace", { name: "w", pinned_files: ["y.ts"], task_ids: [] }))
          .workspace
        assert.strictEqual(second.id, first.id)
        assert.strictEqual(second.revision, 2)
        assert.deepStrictEqual(second.pinnedFiles, [{ path: "y.ts" }])
        const loaded = yield* call("load_context_workspace", { name: "w", restore_pins: false })
        assert.deepStrictEqual(loaded.repinned, [])
        assert.strictEqual((yield* call("list_engineering_records", { kind: "pinned_file" })).records.length, 0)
        assert.strictEqual(yield* outcomeOf(callTool("load_context_workspace", { name: "nope" })), "NOT_FOUND")
        assert.strictEqual(yield* outcomeOf(callTool("unpin_file", { path: "never-pinned.ts" })), "NOT_FOUND")
        assert.strictEqual(yield* outcomeOf(callTool("save_context_workspace", { name: "" })), "VALIDATION_ERROR")
        assert.strictEqual(yield* outcomeOf(callTool("pin_file", {})), "VALIDATION_ERROR")
      }),
    ),
  )

  it.effect("pinning a path again updates its note instead of pinning twice", () =>
    withEngine(
      Effect.gen(function* () {
        const first = (yield* call("pin_file", { path: "a.ts" })).pinned
        const again = (yield* call("pin_file", { path: "a.ts", note: "hot path" })).pinned
        assert.strictEqual(again.id, first.id)
        assert.strictEqual(again.note, "hot path")
        assert.strictEqual((yield* call("list_engineering_records", { kind: "pinned_file" })).records.length, 1)
      }),
    ),
  )
})
