/**
 * Deleted is gone, for every kind of record that can be deleted, on a real daemon: a marker text
 * is written into the body of each (a conversation message, a graph observation, the observation
 * of a deleted entity, a removed sticky note, a sticky note that expires by its ttl, the note of an
 * unpinned file), each is deleted, and after `mnemos compact` alone no file of the data directory
 * holds any marker — not a store's log or LMDB file, not search's, not the audit ledger, not a
 * `pre-join-*` copy left by an earlier join — and `query_audit` answers no marker either. Live records written next to them still read back.
 */
import { cpSync, existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { join } from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { authHeaders, callTool, cleanup, connectClient, runCli, startDaemon } from "../transports/harness.ts"

afterAll(cleanup)

/** Files under `dir` whose raw bytes hold `marker`. */
const filesHolding = (dir: string, marker: string): Array<string> =>
  readdirSync(dir, { recursive: true, encoding: "utf8" })
    .map((name) => join(dir, name))
    .filter((path) => statSync(path).isFile() && readFileSync(path).includes(marker))

/** A text no other write contains. */
const markerOf = (kind: string) => `deleted-${kind}-${"q".repeat(12)}-${Math.random().toString(36).slice(2, 10)}`

describe("deleted is gone in every store", () => {
  it("after deleting a record of each kind (and a ttl expiry), mnemos compact leaves its text in no file and in no audit entry", async () => {
    const daemon = await startDaemon()
    const client = await connectClient("ws", daemon.url, {
      headers: authHeaders(daemon.dataDir),
      clientId: "deleted-is-gone-client",
    })
    const ok = async (tool: string, args: Record<string, unknown>) => {
      const reply = await callTool(client, tool, args)
      assert.isFalse(reply.isError, `${tool}: ${reply.text}`)
      return reply.text
    }
    const markers = {
      message: markerOf("message"),
      observation: markerOf("observation"),
      entity: markerOf("entity-observation"),
      note: markerOf("sticky-note"),
      expired: markerOf("expired-note"),
      pin: markerOf("pin-note"),
    }

    const written = await ok("write_message", { session_id: "s1", role: "user", content: markers.message })
    await ok("write_message", { session_id: "s1", role: "user", content: "the standup moved to ten" })
    const messageId = (JSON.parse(written) as { message: { message_id: string } }).message.message_id
    await ok("delete_message", { message_id: messageId })

    await ok("create_entities", {
      entities: [
        { name: "Billing", entityType: "service", observations: [markers.observation, "owned by team blue"] },
        { name: "Ledger", entityType: "service", observations: [markers.entity] },
      ],
    })
    await ok("create_relations", { relations: [{ from: "Billing", to: "Ledger", relationType: "writes to" }] })
    await ok("delete_observations", { deletions: [{ entityName: "Billing", observations: [markers.observation] }] })
    await ok("delete_entities", { entityNames: ["Ledger"] })

    const note = JSON.parse(await ok("add_sticky_note", { text: markers.note })) as { note: { id: string } }
    await ok("remove_sticky_note", { id: note.note.id })
    await ok("add_sticky_note", { text: markers.expired, ttl_seconds: 1 })
    await ok("add_sticky_note", { text: "keep this note" })

    await ok("pin_file", { path: "src/billing.ts", note: markers.pin })
    await ok("unpin_file", { path: "src/billing.ts" })

    // The expiring note runs out, and LMDB and search persist what they hold (within a second).
    await new Promise((resolve) => setTimeout(resolve, 2000))
    for (const [kind, marker] of Object.entries(markers))
      assert.isAbove(filesHolding(daemon.dataDir, marker).length, 0, `the ${kind} marker is on disk before`)

    // A copy an earlier `mnemos cluster join` set aside (this directory left the memory since).
    const preJoin = join(daemon.dataDir, "pre-join-2026-01-01T00-00-00-000Z")
    cpSync(join(daemon.dataDir, "stores"), join(preJoin, "stores"), { recursive: true })

    const compacted = await runCli(["compact", "--data-dir", daemon.dataDir], 120_000)
    assert.strictEqual(compacted.code, 0, compacted.output)
    assert.isFalse(existsSync(preJoin), "compact removes a local data directory's pre-join copies")
    const audit = await ok("query_audit", { project: "*", limit: 200 })
    assert.include(audit, "unpin_file", "the ledger names what was done")
    const left = Object.entries(markers).map(([kind, marker]) => ({
      kind,
      files: filesHolding(daemon.dataDir, marker).map((file) => file.slice(daemon.dataDir.length + 1)),
      inAudit: audit.includes(marker),
    }))
    assert.deepStrictEqual(
      left,
      Object.keys(markers).map((kind) => ({ kind, files: [], inAudit: false })),
      "mnemos compact leaves no deleted text in any file, and the audit ledger holds none",
    )

    // Live records read back.
    assert.include(await ok("read_messages", { view: "history", session_id: "s1" }), "the standup moved to ten")
    assert.include(await ok("open_nodes", { names: ["Billing"] }), "owned by team blue")
    assert.include(await ok("list_sticky_notes", {}), "keep this note")
    await client.close()
    await daemon.stop()
  })
})
