/**
 * The task tools through the real stack (engine, MCP session, SDK client): add_task,
 * update_task, complete_task and list_tasks — their success shapes, filters and paging, and the
 * errors a caller can cause (VALIDATION_ERROR, NOT_FOUND, CONFLICT).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { codeOf, openEngine, removeTempDirs, type TestEngine } from "./harness.ts"

let engine: TestEngine
beforeAll(async () => {
  engine = await openEngine(undefined, { clientName: "planner" })
})
afterAll(async () => {
  await engine.close()
  removeTempDirs()
})

const ulid = /^[0-7][0-9A-HJKMNP-TV-Z]{25}$/
const iso = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

describe("add_task", () => {
  it("creates a todo/medium task at revision 1 with id, project, times and author", async () => {
    const { structured } = await engine.ok("add_task", { title: "Write the WAL fuzzer", project: "p-add" })
    const task = structured.task
    expect(task.id).toMatch(ulid)
    expect(task).toMatchObject({
      title: "Write the WAL fuzzer",
      status: "todo",
      priority: "medium",
      project: "p-add",
      revision: 1,
      createdBy: "planner/1 via test",
      updatedBy: "planner/1 via test",
    })
    expect(task.createdAt).toMatch(iso)
    expect(task.updatedAt).toBe(task.createdAt)
  })

  it("keeps every optional field", async () => {
    const { structured } = await engine.ok("add_task", {
      title: "Ship",
      description: "the 1.0",
      status: "doing",
      priority: "urgent",
      assignee: "agent-b",
      due: "2030-01-31",
      links: ["WAL", "Checkpoint"],
      tags: ["release"],
      project: "p-add",
    })
    expect(structured.task).toMatchObject({
      description: "the 1.0",
      status: "doing",
      priority: "urgent",
      assignee: "agent-b",
      due: "2030-01-31",
      links: ["WAL", "Checkpoint"],
      tags: ["release"],
    })
  })

  it("acts in the connection's project when none is named", async () => {
    const { structured } = await engine.ok("add_task", { title: "default project" })
    expect(structured.task.project).toBe("default")
  })

  it.each<[object, string]>([
    [{}, "missing title"],
    [{ title: "" }, "empty title"],
    [{ title: "x", status: "started" }, "unknown status"],
    [{ title: "x", priority: "p0" }, "unknown priority"],
    [{ title: "x", due: "next tuesday" }, "due is not ISO 8601"],
    [{ title: "x", due: "2030-02-31T99:00:00Z" }, "due is not a real time"],
    [{ title: "x".repeat(1025) }, "title over 1 KiB"],
    [{ title: "x", links: Array.from({ length: 1001 }, (_, i) => `e${i}`) }, "too many links"],
    [{ title: "x", project: "" }, "empty project"],
  ])("refuses %j (%s) with VALIDATION_ERROR and stores nothing", async (args) => {
    const before = (await engine.ok("list_tasks", { project: "p-invalid" })).structured.tasks.length
    const reply = await engine.call("add_task", { project: "p-invalid", ...args })
    expect(codeOf(reply)).toBe("VALIDATION_ERROR")
    expect(reply.json.status).toBe("ERROR")
    expect((await engine.ok("list_tasks", { project: "p-invalid" })).structured.tasks.length).toBe(before)
  })
})

describe("update_task", () => {
  it("changes only the given fields, bumps the revision and records who", async () => {
    const { task } = (await engine.ok("add_task", { title: "t", assignee: "a", project: "p-up" })).structured
    const { structured } = await engine.ok("update_task", { id: task.id, status: "blocked", project: "p-up" })
    expect(structured.task).toMatchObject({ title: "t", assignee: "a", status: "blocked", revision: 2 })
  })

  it("empties the fields named in clear", async () => {
    const { task } = (await engine.ok("add_task", { title: "t", assignee: "a", due: "2030-01-01", project: "p-up" }))
      .structured
    const { structured } = await engine.ok("update_task", { id: task.id, clear: ["assignee", "due"], project: "p-up" })
    expect(structured.task.assignee).toBeUndefined()
    expect(structured.task.due).toBeUndefined()
    expect(structured.task.revision).toBe(2)
  })

  it("writes nothing when nothing changes (same revision)", async () => {
    const { task } = (await engine.ok("add_task", { title: "same", project: "p-up" })).structured
    const { structured } = await engine.ok("update_task", { id: task.id, title: "same", project: "p-up" })
    expect(structured.task.revision).toBe(1)
  })

  it("fails with CONFLICT when expected_revision is stale, and changes nothing", async () => {
    const { task } = (await engine.ok("add_task", { title: "race", project: "p-up" })).structured
    await engine.ok("update_task", { id: task.id, status: "doing", expected_revision: 1, project: "p-up" })
    const stale = await engine.call("update_task", {
      id: task.id,
      status: "done",
      expected_revision: 1,
      project: "p-up",
    })
    expect(codeOf(stale)).toBe("CONFLICT")
    expect(stale.json.error.message).toContain("revision 2")
    const [current] = (await engine.ok("list_tasks", { query: "race", project: "p-up" })).structured.tasks
    expect(current).toMatchObject({ status: "doing", revision: 2 })
  })

  it("of two concurrent updates with the same expected_revision exactly one wins", async () => {
    const { task } = (await engine.ok("add_task", { title: "contended", project: "p-up" })).structured
    const replies = await Promise.all(
      ["doing", "blocked", "done"].map((status) =>
        engine.call("update_task", { id: task.id, status, expected_revision: 1, project: "p-up" }),
      ),
    )
    expect(replies.filter((reply) => !reply.isError)).toHaveLength(1)
    expect(replies.filter((reply) => codeOf(reply) === "CONFLICT")).toHaveLength(2)
  })

  it("fails with NOT_FOUND for an unknown id or another project's task", async () => {
    expect(codeOf(await engine.call("update_task", { id: "01J00000000000000000000000", title: "x" }))).toBe("NOT_FOUND")
    const { task } = (await engine.ok("add_task", { title: "mine", project: "p-a" })).structured
    expect(codeOf(await engine.call("update_task", { id: task.id, title: "x", project: "p-b" }))).toBe("NOT_FOUND")
  })

  it("fails with VALIDATION_ERROR when no field is given or a value is invalid", async () => {
    const { task } = (await engine.ok("add_task", { title: "v", project: "p-up" })).structured
    expect(codeOf(await engine.call("update_task", { id: task.id, project: "p-up" }))).toBe("VALIDATION_ERROR")
    expect(codeOf(await engine.call("update_task", { id: task.id, status: "nope", project: "p-up" }))).toBe(
      "VALIDATION_ERROR",
    )
    expect(codeOf(await engine.call("update_task", { id: task.id, title: null, project: "p-up" }))).toBe(
      "VALIDATION_ERROR",
    )
    expect(codeOf(await engine.call("update_task", { id: task.id, clear: ["title"], project: "p-up" }))).toBe(
      "VALIDATION_ERROR",
    )
  })
})

describe("complete_task", () => {
  it("marks the task done with completedAt and the note; moving it back clears completedAt", async () => {
    const { task } = (await engine.ok("add_task", { title: "finish me", project: "p-done" })).structured
    const done = (await engine.ok("complete_task", { id: task.id, note: "merged", project: "p-done" })).structured.task
    expect(done).toMatchObject({ status: "done", completionNote: "merged", revision: 2 })
    expect(done.completedAt).toMatch(iso)
    const again = (await engine.ok("update_task", { id: task.id, status: "doing", project: "p-done" })).structured.task
    expect(again.completedAt).toBeUndefined()
  })

  it("fails with NOT_FOUND, CONFLICT and VALIDATION_ERROR as the arguments call for", async () => {
    expect(codeOf(await engine.call("complete_task", { id: "01J00000000000000000000000" }))).toBe("NOT_FOUND")
    const { task } = (await engine.ok("add_task", { title: "c", project: "p-done" })).structured
    expect(codeOf(await engine.call("complete_task", { id: task.id, expected_revision: 7, project: "p-done" }))).toBe(
      "CONFLICT",
    )
    expect(codeOf(await engine.call("complete_task", { project: "p-done" }))).toBe("VALIDATION_ERROR")
  })
})

describe("list_tasks", () => {
  it("filters by status, open_only, assignee, priority, link and text, oldest first", async () => {
    const project = "p-list"
    const add = async (args: object) => (await engine.ok("add_task", { project, ...args })).structured.task
    const a = await add({ title: "alpha", status: "todo", assignee: "x", priority: "low", links: ["Parser"] })
    const b = await add({ title: "beta", status: "doing", assignee: "y", priority: "high" })
    const c = await add({ title: "gamma", status: "done", assignee: "x", priority: "high", description: "Parser bug" })
    const ids = async (args: object) =>
      (await engine.ok("list_tasks", { project, ...args })).structured.tasks.map((task: { id: string }) => task.id)
    expect(await ids({})).toEqual([a.id, b.id, c.id])
    expect(await ids({ status: "doing" })).toEqual([b.id])
    expect(await ids({ open_only: true })).toEqual([a.id, b.id])
    expect(await ids({ assignee: "x" })).toEqual([a.id, c.id])
    expect(await ids({ priority: "high" })).toEqual([b.id, c.id])
    expect(await ids({ link: "Parser" })).toEqual([a.id])
    expect(await ids({ query: "PARSER" })).toEqual([a.id, c.id])
  })

  it("pages with limit and nextCursor, without losing or repeating a task", async () => {
    const project = "p-page"
    const made: Array<string> = []
    for (let i = 0; i < 7; i++) made.push((await engine.ok("add_task", { title: `t${i}`, project })).structured.task.id)
    const seen: Array<string> = []
    let cursor: string | undefined
    let pages = 0
    do {
      const { structured } = await engine.ok("list_tasks", { project, limit: 3, ...(cursor ? { cursor } : {}) })
      seen.push(...structured.tasks.map((task: { id: string }) => task.id))
      cursor = structured.nextCursor
      pages++
    } while (cursor !== undefined)
    expect(seen).toEqual(made)
    expect(pages).toBe(3)
  })

  it("refuses a limit out of range", async () => {
    expect(codeOf(await engine.call("list_tasks", { limit: 0 }))).toBe("VALIDATION_ERROR")
    expect(codeOf(await engine.call("list_tasks", { limit: 501 }))).toBe("VALIDATION_ERROR")
  })
})
