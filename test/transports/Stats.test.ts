/**
 * `GET /api/stats` counts what seed 002's stats count: entities, relations, tasks and tech debt,
 * per project (a task done is still a task); and reports the daemon's main-thread heap and where
 * search's index runs (a small memory's: the main thread).
 */
import { describe, expect, it } from "vitest"
import { apiGet, callTool, connectClient, sharedDaemon } from "./harness.ts"

const daemon = sharedDaemon()

interface Stats {
  readonly projects: ReadonlyArray<{
    readonly project: string
    readonly entities: number
    readonly relations: number
    readonly tasks: number
    readonly techDebt: number
  }>
  readonly mainThread: { readonly heapUsedBytes: number; readonly heapTotalBytes: number }
  readonly omniSearch: { readonly thread: string }
}

describe("/api/stats", () => {
  it("counts entities, relations, tasks and tech debt per project", async () => {
    const client = await connectClient("streamable-http", daemon().url)
    const ok = async (name: string, args: Record<string, unknown>) => {
      const result = await callTool(client, name, args)
      expect(result.isError, result.text).toBe(false)
      return result.structured as Record<string, { id: string }>
    }
    await ok("create_entities", { entities: [{ name: "billing", entityType: "service", observations: [] }] })
    await ok("add_task", { title: "retry the export" })
    await ok("complete_task", { id: (await ok("add_task", { title: "done already" })).task!.id })
    await ok("log_tech_debt", { description: "no backoff", severity: "low", location: "export.ts:12" })
    await ok("add_task", { title: "elsewhere", project: "other" })
    const stats = await apiGet<Stats>(daemon(), "/api/stats")
    expect(stats.projects.find((entry) => entry.project === "default")).toEqual({
      project: "default",
      entities: 1,
      relations: 0,
      tasks: 2,
      techDebt: 1,
    })
    expect(stats.projects.find((entry) => entry.project === "other")).toEqual({
      project: "other",
      entities: 0,
      relations: 0,
      tasks: 1,
      techDebt: 0,
    })
    expect(stats.mainThread.heapUsedBytes).toBeGreaterThan(0)
    expect(stats.mainThread.heapTotalBytes).toBeGreaterThanOrEqual(stats.mainThread.heapUsedBytes)
    expect(stats.omniSearch.thread).toBe("main")
  }, 60_000)
})
