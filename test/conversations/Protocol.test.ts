/**
 * The conversation tools at the protocol level: the SDK client over stdio against a real
 * `mnemos serve --stdio` process. Everything survives a restart (SIGTERM) and a kill -9 after the
 * acknowledgement; a corrupted log makes the conversations store answer CORRUPT_STORE (and health
 * DEGRADED) while the graph keeps serving.
 */
import { readdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { ResultSchema } from "@modelcontextprotocol/sdk/types.js"
import { afterAll, describe, expect, it } from "vitest"
import { call, callOk, cleanup, kill, type McpServerProcess, restartMnemos, startMnemos } from "../support/mcpClient.ts"

afterAll(cleanup)

const write = async (server: McpServerProcess, session: string, content: string, metadata: object = {}) =>
  (
    await callOk(server.client, "write_message", {
      session_id: session,
      role: "user",
      content,
      metadata_json: JSON.stringify(metadata),
    })
  ).json as { message: { message_id: string } }

/** What a reader sees: sessions, every history, a search and the counts of health. */
const observe = async (server: McpServerProcess) => {
  const sessions = (await callOk(server.client, "read_messages", { view: "sessions" })).json as {
    sessions: Array<{ session_id: string }>
  }
  const histories = await Promise.all(
    sessions.sessions.map(
      async (session) => (await callOk(server.client, "read_messages", { session_id: session.session_id })).json,
    ),
  )
  const search = (await callOk(server.client, "search_messages", { query: "durable", context_size: 1 })).json
  const health = (await callOk(server.client, "get_system_health", {})).json as Record<string, unknown>
  return {
    sessions,
    histories,
    search,
    counts: [health.active_messages, health.deleted_messages, health.update_records],
  }
}

describe("over stdio", () => {
  it("lists the seven tools and answers with JSON text, structured content and the error envelope", async () => {
    const server = await startMnemos()
    const { tools } = (await server.client.request({ method: "tools/list" }, ResultSchema)) as unknown as {
      tools: Array<{ name: string }>
    }
    const names = tools.map((tool) => tool.name)
    for (const name of [
      "write_message",
      "read_messages",
      "search_messages",
      "update_message",
      "delete_message",
      "rebuild_index",
      "get_system_health",
    ])
      expect(names).toContain(name)
    const written = await callOk(server.client, "write_message", {
      session_id: "stdio",
      role: "user",
      content: "over the wire",
    })
    expect(written.structured).toEqual(written.json)
    expect(written.text).toBe(JSON.stringify(written.json))
    const failed = await call(server.client, "update_message", {
      message_id: "01ARZ3NDEKTSV4RRFFQ69G5FAV",
      content: "x",
    })
    expect(failed.isError).toBe(true)
    expect(failed.json).toMatchObject({ status: "ERROR", error: { code: "NOT_FOUND" } })
    const invalid = await call(server.client, "write_message", { session_id: "stdio", role: "nobody", content: "x" })
    expect(invalid.json).toMatchObject({ status: "ERROR", error: { code: "VALIDATION_ERROR" } })
  })

  it("everything survives a restart: messages, updates, deletes, rebuilds, sessions, search and counts", async () => {
    let server = await startMnemos()
    const first = await write(server, "life", "a durable message", { tags: ["keep"], importance: 70 })
    const second = await write(server, "life", "another durable message", {
      relations: [{ type: "derived_from", message_id: first.message.message_id }],
    })
    const doomed = await write(server, "life", "a durable message to delete")
    await write(server, "other", "durable elsewhere")
    await callOk(server.client, "update_message", {
      message_id: second.message.message_id,
      content: "an updated durable message",
    })
    await callOk(server.client, "delete_message", { message_id: doomed.message.message_id })
    const before = await observe(server)
    server = await restartMnemos(server)
    expect(await observe(server)).toEqual(before)
    await callOk(server.client, "rebuild_index", {})
    const rebuilt = await observe(server)
    server = await restartMnemos(server)
    expect(await observe(server)).toEqual(rebuilt)
    expect(rebuilt.counts).toEqual([3, 0, 1])
  })

  it("an acknowledged write survives kill -9", async () => {
    let server = await startMnemos()
    const written = await write(server, "kill", "durable before the kill")
    server = await restartMnemos(server, "SIGKILL")
    const history = (await callOk(server.client, "read_messages", { session_id: "kill" })).json as {
      history: Array<unknown>
    }
    expect(history.history).toEqual([written.message])
  })

  it("a corrupted log: the conversations store answers CORRUPT_STORE and health DEGRADED; the graph keeps serving", async () => {
    const server = await startMnemos()
    await write(server, "corrupt", "MARKER-OF-THE-FIRST-RECORD")
    await write(server, "corrupt", "a valid record after it")
    await write(server, "corrupt", "and another")
    await kill(server, "SIGKILL")
    const walDir = join(server.location, "stores", "conversations", "wal")
    const segment = readdirSync(walDir)
      .map((name) => join(walDir, name))
      .find((file) => readFileSync(file).includes("MARKER-OF-THE-FIRST-RECORD"))!
    const bytes = readFileSync(segment)
    bytes[bytes.indexOf("MARKER-OF-THE-FIRST-RECORD")] ^= 0x20
    writeFileSync(segment, bytes)
    const restarted = await startMnemos(server.location)
    const refused = await call(restarted.client, "write_message", { session_id: "corrupt", role: "user", content: "x" })
    expect(refused.json).toMatchObject({ status: "ERROR", error: { code: "CORRUPT_STORE" } })
    expect((await call(restarted.client, "read_messages", { session_id: "corrupt" })).json).toMatchObject({
      error: { code: "CORRUPT_STORE" },
    })
    const health = (await callOk(restarted.client, "get_system_health", {})).json
    expect(health).toMatchObject({ status: "DEGRADED", snapshot_valid: false })
    expect((health as { last_error: string }).last_error).toMatch(/wal-\d+\.log/)
    await callOk(restarted.client, "create_entities", {
      entities: [{ name: "still", entityType: "serving", observations: [] }],
    })
  })
})
