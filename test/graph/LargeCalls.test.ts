/**
 * One graph call at the documented limits must not freeze the daemon: while a delete_entities or
 * merge_entities over thousands of linked entities runs, /ping and another client's calls to
 * another store keep being answered — several of them, one after another, before the large call's
 * own answer. The store actor decides and applies such a call as bounded events and lets the event
 * loop in between them; before, the cascade ran as one synchronous block of several seconds
 * (superlinear in its size), and everything else waited behind it. This asserts order, not time.
 */
import { afterAll, describe, expect, it } from "vitest"
import { callTool, cleanup, connectClient, getJson, startDaemon } from "../transports/harness.ts"

afterAll(cleanup)

const entityCount = 5000
const relationsPerEntity = 4
/** Calls of each kind that must be answered, one after another, before the large call is. */
const answersBeforeMin = 5

const names = Array.from({ length: entityCount }, (_, index) => `entity-${index}`)

/** Creates the linked graph in the connection's project (`default`): every entity with `relationsPerEntity` outgoing relations. */
const load = async (client: Awaited<ReturnType<typeof connectClient>>) => {
  for (let start = 0; start < entityCount; start += 1000) {
    const entities = names
      .slice(start, start + 1000)
      .map((name) => ({ name, entityType: "thing", observations: [`about ${name}`] }))
    expect((await callTool(client, "create_entities", { entities })).isError).toBe(false)
  }
  const relations = Array.from({ length: entityCount * relationsPerEntity }, (_, index) => ({
    from: names[index % entityCount]!,
    to: names[(index * 7919 + 13) % entityCount]!,
    relationType: `kind-${index % relationsPerEntity}`,
  }))
  for (let start = 0; start < relations.length; start += 5000)
    expect(
      (await callTool(client, "create_relations", { relations: relations.slice(start, start + 5000) })).isError,
    ).toBe(false)
}

/**
 * Runs `large` and, meanwhile, pings and list_tasks calls back to back; the order in which all of
 * them were answered.
 */
const answeredDuring = async (
  url: string,
  other: Awaited<ReturnType<typeof connectClient>>,
  large: () => Promise<unknown>,
) => {
  const order: Array<"ping" | "tasks" | "large"> = []
  let done = false
  const largeCall = large().finally(() => {
    order.push("large")
    done = true
  })
  // A call that fails (the daemon timed it out, say) is not an answer: it is simply not counted.
  const pings = (async () => {
    while (!done) {
      const answered = await getJson(`${url}/ping`).then(
        ({ status }) => status === 200,
        () => false,
      )
      if (answered && !done) order.push("ping")
    }
  })()
  const tasks = (async () => {
    while (!done) {
      const answered = await callTool(other, "list_tasks", { project: "elsewhere" }).then(
        (reply) => !reply.isError,
        () => false,
      )
      if (answered && !done) order.push("tasks")
    }
  })()
  await Promise.all([largeCall, pings, tasks])
  return order
}

describe("a graph call at the limits", () => {
  it("leaves /ping and other stores answering while delete_entities and merge_entities cascade", async () => {
    const daemon = await startDaemon()
    const client = await connectClient("streamable-http", daemon.url, { name: "big" })
    const other = await connectClient("streamable-http", daemon.url, { name: "other" })
    expect((await callTool(other, "add_task", { project: "elsewhere", title: "keep answering" })).isError).toBe(false)

    await load(client)
    const deleting = await answeredDuring(daemon.url, other, () =>
      callTool(client, "delete_entities", { entityNames: names }, 600_000),
    )
    const graph = await callTool(client, "read_graph_summary", { project: "default" })
    expect(graph.structured).toMatchObject({ entityCount: 0, relationCount: 0 })
    expect(deleting.filter((kind) => kind === "ping").length).toBeGreaterThanOrEqual(answersBeforeMin)
    expect(deleting.filter((kind) => kind === "tasks").length).toBeGreaterThanOrEqual(answersBeforeMin)

    await load(client)
    const merging = await answeredDuring(daemon.url, other, () =>
      callTool(client, "merge_entities", { project: "default", target: names[0], sources: names.slice(1) }, 600_000),
    )
    const merged = await callTool(client, "read_graph_summary", { project: "default" })
    expect(merged.structured).toMatchObject({ entityCount: 1 })
    expect(merging.filter((kind) => kind === "ping").length).toBeGreaterThanOrEqual(answersBeforeMin)
    expect(merging.filter((kind) => kind === "tasks").length).toBeGreaterThanOrEqual(answersBeforeMin)
  }, 900_000)
})
