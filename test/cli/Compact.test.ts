/**
 * Deleted means gone, end to end, on a real daemon: a deleted message's body and a deleted
 * observation are in files of the data directory until `rebuild_index` (conversations) and
 * `mnemos compact` (every store) run; afterwards no file holds them, live data still reads back,
 * and the daemon keeps serving. Writes go over WebSocket with a client id, so the daemon also keeps
 * idempotency records, whose remembered replies quote the written text.
 */
import { readdirSync, readFileSync, statSync } from "node:fs"
import { join } from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { authHeaders, callTool, cleanup, connectClient, runCli, startDaemon } from "../transports/harness.ts"

afterAll(cleanup)

/** Files of the data directory that hold `marker` (every file, every store, search, anything). */
const filesHolding = (dir: string, marker: string): Array<string> =>
  readdirSync(dir, { recursive: true, encoding: "utf8" })
    .map((name) => join(dir, name))
    .filter((path) => statSync(path).isFile() && readFileSync(path).includes(marker))

describe("deleted means gone", () => {
  it("after delete_message and rebuild_index, and delete_observations and mnemos compact, no file of the data directory holds the deleted text", async () => {
    const daemon = await startDaemon()
    const client = await connectClient("ws", daemon.url, {
      headers: authHeaders(daemon.dataDir),
      clientId: "compaction-test-client",
    })
    const secretBody = `the launch code is ZEBRA-${"7".repeat(24)}`
    const keptBody = `the standup moved to ten ${"k".repeat(24)}`
    const written = await callTool(client, "write_message", { session_id: "s1", role: "user", content: secretBody })
    assert.isFalse(written.isError, written.text)
    const kept = await callTool(client, "write_message", { session_id: "s1", role: "user", content: keptBody })
    assert.isFalse(kept.isError, kept.text)
    const messageId = (JSON.parse(written.text) as { message: { message_id: string } }).message.message_id
    const deleted = await callTool(client, "delete_message", { message_id: messageId })
    assert.include(deleted.text, "OK")

    const secretObservation = `api host is internal-${"9".repeat(24)}.example`
    await callTool(client, "create_entities", {
      entities: [{ name: "Billing", entityType: "service", observations: [secretObservation, "owned by team blue"] }],
    })
    await callTool(client, "delete_observations", {
      deletions: [{ entityName: "Billing", observations: [secretObservation] }],
    })
    // Let LMDB and search persist what they hold (they commit within a second).
    await new Promise((resolve) => setTimeout(resolve, 1500))
    assert.isAbove(filesHolding(daemon.dataDir, secretBody).length, 0, "the deleted body is on disk before")
    assert.isAbove(filesHolding(daemon.dataDir, secretObservation).length, 0, "the observation is on disk before")

    const rebuilt = await callTool(client, "rebuild_index", {})
    assert.isFalse(rebuilt.isError, rebuilt.text)
    assert.deepStrictEqual(filesHolding(daemon.dataDir, secretBody), [], "rebuild_index leaves the body nowhere")

    const compacted = await runCli(["compact", "--data-dir", daemon.dataDir], 120_000)
    assert.strictEqual(compacted.code, 0, compacted.output)
    assert.include(compacted.output, "through the daemon")
    assert.deepStrictEqual(filesHolding(daemon.dataDir, secretObservation), [], "mnemos compact leaves it nowhere")

    // Live data reads back, and the daemon takes writes.
    const history = await callTool(client, "read_messages", { view: "history", session_id: "s1" })
    assert.include(history.text, keptBody)
    assert.notInclude(history.text, secretBody)
    const billing = await callTool(client, "open_nodes", { names: ["Billing"] })
    assert.include(billing.text, "owned by team blue")
    assert.notInclude(billing.text, secretObservation)
    const after = await callTool(client, "add_observations", {
      observations: [{ entityName: "Billing", contents: ["moved to region west"] }],
    })
    assert.isFalse(after.isError, after.text)

    // Without a daemon, `mnemos compact` opens the data directory itself.
    await client.close()
    await daemon.stop()
    const offline = await runCli(["compact", "--data-dir", daemon.dataDir], 120_000)
    assert.strictEqual(offline.code, 0, offline.output)
    assert.include(offline.output, "opened here")
    assert.include(offline.output, "graph")
  })
})
