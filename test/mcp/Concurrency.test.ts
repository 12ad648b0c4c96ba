/**
 * Concurrent tool calls on ONE MCP connection (the SDK client pipelines them over stdio and the
 * server handles them concurrently): no acknowledged write may be lost or applied twice, and
 * every caller must get the answer to its own call.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { callOk, cleanup, type McpServerProcess, readGraph, startMnemos } from "../support/mcpClient.ts"

let server: McpServerProcess

beforeAll(async () => {
  server = await startMnemos()
})
afterAll(cleanup)

const range = (count: number) => Array.from({ length: count }, (_, index) => index)

describe("concurrent calls on one connection", () => {
  it("20 concurrent create_entities calls all create their entity", async () => {
    const results = await Promise.all(
      range(20).map((index) =>
        callOk(server.client, "create_entities", {
          entities: [{ name: `concurrent-${index}`, entityType: "test", observations: [`created by call ${index}`] }],
        }),
      ),
    )
    // Each call answers with exactly its own entity.
    for (const [index, result] of results.entries())
      expect(result.structured).toEqual({
        entities: [{ name: `concurrent-${index}`, entityType: "test", observations: [`created by call ${index}`] }],
      })
    const graph = await readGraph(server.client)
    const created = graph.entities.filter((entity) => entity.name.startsWith("concurrent-"))
    expect(created.map((entity) => entity.name).sort()).toEqual(
      range(20)
        .map((index) => `concurrent-${index}`)
        .sort(),
    )
    for (const entity of created)
      expect(entity.observations).toEqual([`created by call ${entity.name.slice("concurrent-".length)}`])
  })

  it("20 concurrent add_observations calls to one entity all land", async () => {
    await callOk(server.client, "create_entities", {
      entities: [{ name: "hub", entityType: "test", observations: [] }],
    })
    const results = await Promise.all(
      range(20).map((index) =>
        callOk(server.client, "add_observations", {
          observations: [{ entityName: "hub", contents: [`observation ${index}`, `second observation ${index}`] }],
        }),
      ),
    )
    for (const [index, result] of results.entries())
      expect(result.structured).toEqual({
        results: [{ entityName: "hub", addedObservations: [`observation ${index}`, `second observation ${index}`] }],
      })
    const hub = (await readGraph(server.client)).entities.find((entity) => entity.name === "hub")
    expect(hub?.observations).toHaveLength(40)
    expect([...(hub?.observations ?? [])].sort()).toEqual(
      range(20)
        .flatMap((index) => [`observation ${index}`, `second observation ${index}`])
        .sort(),
    )
    // Each call's contents are stored together, in the order the call gave them.
    for (const index of range(20)) {
      const first = hub!.observations.indexOf(`observation ${index}`)
      expect(hub!.observations[first + 1]).toBe(`second observation ${index}`)
    }
  })

  it("20 concurrent create_entities calls of the same name create it exactly once", async () => {
    const results = await Promise.all(
      range(20).map((index) =>
        callOk(server.client, "create_entities", {
          entities: [{ name: "contested", entityType: `type ${index}`, observations: [] }],
        }),
      ),
    )
    const winners = results.flatMap(
      (result) => (result.structured as { entities: Array<{ entityType: string }> }).entities,
    )
    expect(winners).toHaveLength(1)
    const stored = (await readGraph(server.client)).entities.filter((entity) => entity.name === "contested")
    expect(stored).toEqual([{ name: "contested", entityType: winners[0]!.entityType, observations: [] }])
  })

  it("20 concurrent add_observations of the same content add it exactly once", async () => {
    await callOk(server.client, "create_entities", {
      entities: [{ name: "once", entityType: "test", observations: [] }],
    })
    const results = await Promise.all(
      range(20).map(() =>
        callOk(server.client, "add_observations", { observations: [{ entityName: "once", contents: ["same"] }] }),
      ),
    )
    const added = results.flatMap(
      (result) =>
        (result.structured as { results: Array<{ addedObservations: Array<string> }> }).results[0]!.addedObservations,
    )
    expect(added).toEqual(["same"])
    const once = (await readGraph(server.client)).entities.find((entity) => entity.name === "once")
    expect(once?.observations).toEqual(["same"])
  })
})
