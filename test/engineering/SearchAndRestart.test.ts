/**
 * The engineering records on the full engine: they appear in omni_search (each store, by its
 * words), leave it when deleted or when their TTL runs out (the expiry sweeper), and everything —
 * records, revisions, numbers, unique keys, gates, search — survives a restart.
 */
import { Effect } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { RecordExpiry } from "../../src/engineering/RecordExpiry.ts"
import { openEngine, removeTempDirs, type TestEngine, tempDir } from "./harness.ts"

afterAll(removeTempDirs)

// biome-ignore lint/suspicious/noExplicitAny: tests read the tools' JSON answers
type Json = any

/** The ids omni_search finds for `query` (by words only, so the answer does not depend on a model). */
const found = async (engine: TestEngine, query: string): Promise<Array<string>> =>
  (await engine.ok("omni_search", { query, mode: "lexical", limit: 50 })).structured.results.map(
    (result: Json) => `${result.store}/${result.type}/${result.id}`,
  )

/** Writes one record of each searchable kind; answers their ids by label. */
const writeEverything = async (engine: TestEngine) => {
  const task = (await engine.ok("add_task", { title: "Quokka migration task", priority: "urgent" })).structured.task
  const adr = (await engine.ok("record_adr", { title: "Quokka storage decision", context: "c", decision: "d" }))
    .structured.adr
  const note = (await engine.ok("add_sticky_note", { text: "quokka sticky reminder" })).structured.note
  const summary = (await engine.ok("add_session_summary", { summary: "quokka session recap" })).structured.summary
  const fix = (await engine.ok("log_error_fix", { error_signature: "QuokkaError: boom", fix: "retry" })).structured
    .errorFix
  const snippet = (await engine.ok("add_snippet", { title: "quokka helper", code: "quokka()" })).structured.snippet
  const gate = (await engine.ok("gate_set", { action: "push", status: "authorized" })).structured.gate
  return { task, adr, note, summary, fix, snippet, gate }
}

describe("engineering records on the full engine", () => {
  it("appear in omni_search, leave it when deleted, and everything survives a restart", async () => {
    const dir = tempDir()
    const first = await openEngine(dir)
    const made = await writeEverything(first)
    const expected = [
      `tasks/task/${made.task.id}`,
      `adrs/adr/${made.adr.id}`,
      `notes/sticky_note/${made.note.id}`,
      `notes/session_summary/${made.summary.id}`,
      `engineering/error_fix/${made.fix.id}`,
      `engineering/snippet/${made.snippet.id}`,
    ]
    expect((await found(first, "quokka")).sort()).toEqual([...expected].sort())

    await first.ok("remove_sticky_note", { id: made.note.id })
    expect(await found(first, "quokka")).not.toContain(`notes/sticky_note/${made.note.id}`)
    await first.ok("update_task", { id: made.task.id, status: "doing" })
    const tasksBefore = (await first.ok("list_tasks", {})).structured.tasks
    const auditBefore = (await first.ok("query_audit", { limit: 500 })).structured.entries
    await first.close()

    const second = await openEngine(dir)
    expect((await second.ok("list_tasks", {})).structured.tasks).toEqual(tasksBefore)
    expect((await second.ok("list_adrs", {})).structured.adrs[0]).toMatchObject({ id: made.adr.id, number: 1 })
    expect((await second.ok("list_sticky_notes", {})).structured.notes).toEqual([])
    expect((await second.ok("gate_verify", { action: "push" })).structured.status).toBe("authorized")
    expect((await second.ok("query_audit", { limit: 500 })).structured.entries).toEqual(auditBefore)
    const next = (await second.ok("record_adr", { title: "second", context: "c", decision: "d" })).structured.adr
    expect(next.number).toBe(2)
    await second.close()
  })

  /**
   * Search documents are keyed `store \0 group \0 id`; an engineering record's key is 65
   * characters long. Regression: lmdb-js string keys came back as arrays at that length, the
   * warm-up died and the index stayed cold after every restart (keys are bytes now, KeyCodec.ts).
   */
  it("engineering records are found by omni_search after a restart", async () => {
    const dir = tempDir()
    const first = await openEngine(dir)
    const { snippet } = (await first.ok("add_snippet", { title: "numbat helper", code: "numbat()" })).structured
    expect(await found(first, "numbat")).toEqual([`engineering/snippet/${snippet.id}`])
    await first.close()
    const second = await openEngine(dir)
    try {
      // The index warms in the background after a restart; wait (bounded) until it says it is warm.
      for (let attempt = 0; attempt < 200; attempt++) {
        if ((await second.ok("omni_search", { query: "numbat", mode: "lexical" })).structured.warm === true) break
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
      expect(await found(second, "numbat")).toEqual([`engineering/snippet/${snippet.id}`])
    } finally {
      await second.close()
    }
  })

  it("a sticky note whose TTL ran out is swept: it leaves omni_search and the ledger says so", async () => {
    const engine = await openEngine()
    const { note } = (await engine.ok("add_sticky_note", { text: "ephemeral wombat note", ttl_seconds: 1 })).structured
    expect(await found(engine, "wombat")).toEqual([`notes/sticky_note/${note.id}`])
    await new Promise((resolve) => setTimeout(resolve, 1_100))
    expect((await engine.ok("list_sticky_notes", {})).structured.notes).toEqual([])
    const sweep = Effect.gen(function* () {
      return yield* (yield* RecordExpiry).sweep
    })
    await engine.run(sweep as Effect.Effect<number>)
    expect(await found(engine, "wombat")).toEqual([])
    const [entry] = (await engine.ok("query_audit", { record_id: note.id, tool: "ttl_expiry" })).structured.entries
    expect(entry).toMatchObject({ who: "mnemos", action: "deleted", store: "notes" })
    await engine.close()
  })
})
