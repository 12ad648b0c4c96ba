/**
 * A retried request is applied once, and only a retry is: the daemon remembers a reply under
 * (stable client id, request id, the request itself), so a client that reconnects with the same
 * `?client=` id and starts its request ids at 1 again (a restarted agent) has its new writes
 * stored — entities, and tasks across a daemon restart — while an identical resend of a request
 * (the same id, tool and arguments) is still answered with the first reply and applied once.
 */
import { describe, expect, it } from "vitest"
import { openRawWs, type RawAnswer, sharedDaemon, startDaemon, tempDir } from "./harness.ts"

const daemon = sharedDaemon()

const call = (name: string, args: Record<string, unknown>) => ({ name, arguments: args })
const structured = (answer: RawAnswer) => {
  expect(answer.error, JSON.stringify(answer)).toBeUndefined()
  expect(answer.result?.isError ?? false, JSON.stringify(answer)).toBe(false)
  return answer.result?.structuredContent as Record<string, unknown>
}
const entity = (name: string) => ({ entities: [{ name, entityType: "test", observations: [`about ${name}`] }] })

describe("retry keys over WebSocket with a stable ?client= id", () => {
  it("a restarted client reusing request ids has its new entities stored", async () => {
    const clientId = "restarting-agent-1"
    const roots = ["file:///work/restarting"]
    const first = await openRawWs(daemon().url, { clientId, dataDir: daemon().dataDir, roots })
    expect(structured(await first.request(1, "tools/call", call("create_entities", entity("first-run"))))).toEqual(
      entity("first-run"),
    )
    await first.close()

    // The agent restarts: same client id, request ids from 1 again, a different write.
    const second = await openRawWs(daemon().url, { clientId, dataDir: daemon().dataDir, roots })
    expect(structured(await second.request(1, "tools/call", call("create_entities", entity("second-run"))))).toEqual(
      entity("second-run"),
    )
    const graph = structured(await second.request(2, "tools/call", call("read_graph", {}))) as {
      entities: Array<{ name: string }>
    }
    expect(graph.entities.map((item) => item.name).sort()).toEqual(["first-run", "second-run"])
    await second.close()
  })

  it("an identical resend under the same id is a retry: the first reply, applied once", async () => {
    const clientId = "retrying-agent-1"
    const add = call("add_task", { title: "write the report" })
    const roots = ["file:///work/retrying"]
    const first = await openRawWs(daemon().url, { clientId, dataDir: daemon().dataDir, roots })
    const reply = structured(await first.request(7, "tools/call", add))
    await first.close()
    const again = await openRawWs(daemon().url, { clientId, dataDir: daemon().dataDir, roots })
    // Arguments in another key order are the same request.
    expect(structured(await again.request(7, "tools/call", { arguments: add.arguments, name: add.name }))).toEqual(
      reply,
    )
    const listed = structured(await again.request(8, "tools/call", call("list_tasks", {}))) as {
      tasks: Array<{ title: string }>
    }
    expect(listed.tasks.map((task) => task.title)).toEqual(["write the report"])
    await again.close()
  })

  it("tasks: a client restarted after a daemon restart, ids from 1 again, has its new task stored", async () => {
    const dataDir = tempDir()
    const clientId = "restarting-agent-2"
    const first = await startDaemon({ dataDir })
    const before = await openRawWs(first.url, { clientId, dataDir })
    structured(await before.request(1, "tools/call", call("add_task", { title: "before the restart" })))
    await before.close()
    await first.stop()

    const restarted = await startDaemon({ dataDir, port: first.port })
    const after = await openRawWs(restarted.url, { clientId, dataDir })
    const created = structured(await after.request(1, "tools/call", call("add_task", { title: "after the restart" })))
    expect((created.task as { title: string }).title).toBe("after the restart")
    const listed = structured(await after.request(2, "tools/call", call("list_tasks", {}))) as {
      tasks: Array<{ title: string }>
    }
    expect(listed.tasks.map((task) => task.title)).toEqual(["before the restart", "after the restart"])
    await after.close()
  })

  it("the same id and arguments in another project (from the client's roots) is another request", async () => {
    const clientId = "two-projects-agent"
    const add = call("add_task", { title: "shared title" })
    const alpha = await openRawWs(daemon().url, { clientId, dataDir: daemon().dataDir, roots: ["file:///work/alpha"] })
    structured(await alpha.request(1, "tools/call", add))
    await alpha.close()
    const beta = await openRawWs(daemon().url, { clientId, dataDir: daemon().dataDir, roots: ["file:///work/beta"] })
    structured(await beta.request(1, "tools/call", add))
    const listed = structured(await beta.request(2, "tools/call", call("list_tasks", {}))) as {
      tasks: Array<{ title: string; project: string }>
    }
    expect(listed.tasks.map((task) => [task.project, task.title])).toEqual([["beta", "shared title"]])
    await beta.close()
  })
})
