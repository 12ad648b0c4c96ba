/**
 * The state schemas a full archive import checks entries against (stores/StateSchema.ts and each
 * domain's) accept everything mnemos itself writes: a data directory that used every kind of key
 * — deleted and merged entities, message relations and tombstones, a conversations import (which
 * switches generations), numbered ADRs, expiring notes, unique keys (gates, pinned files), a
 * consumed gate, retry keys of a client with a stable identity, the audit ledger — exports an
 * archive whose every entry passes, and restores. Every domain store has a schema.
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, assert, describe, it } from "vitest"
import { exportCommand, importCommand } from "../../src/cli/TransferCommands.ts"
import { domainStates, domainStores } from "../../src/Engine.ts"
import { idempotencyStateKey } from "../../src/stores/Idempotency.ts"
import { withKernelKeys } from "../../src/stores/StateSchema.ts"
import { openTestEngine, removeTempDirs, runCommand, tempDir } from "./support.ts"

afterAll(removeTempDirs)

/** The first two components of a key, whichever separator its store uses (U+0000, U+0005, U+001F). */
const keyHead = (key: string) =>
  [..."\u0000\u0005\u001f"]
    .reduce((text, separator) => text.split(separator).join("/"), key)
    .split("/")
    .slice(0, 2)
    .join("/")

/** A data directory where every kind of key of every store was written. */
const everyKindOfKey = async (): Promise<string> => {
  const dir = tempDir("mnemos-data-")
  const engine = await openTestEngine(dir, { clientId: "archive-states-client" })
  try {
    await engine.ok("create_entities", {
      entities: ["Ada", "Grace", "Alan", "Temp"].map((name) => ({ name, entityType: "person", observations: [name] })),
    })
    await engine.ok("create_relations", {
      relations: [
        { from: "Ada", to: "Grace", relationType: "knows" },
        { from: "Alan", to: "Ada", relationType: "cites" },
      ],
    })
    await engine.ok("add_observations", { observations: [{ entityName: "Ada", contents: ["born 1815"] }] })
    await engine.ok("delete_observations", { deletions: [{ entityName: "Ada", observations: ["Ada"] }] })
    await engine.ok("delete_relations", { relations: [{ from: "Ada", to: "Grace", relationType: "knows" }] })
    await engine.ok("merge_entities", { target: "Ada", sources: ["Temp"] })
    await engine.ok("delete_entities", { entityNames: ["Grace"] })
    const written = (reply: { text: string }) => (JSON.parse(reply.text) as { message: { message_id: string } }).message
    const first = written(await engine.ok("write_message", { session_id: "s1", role: "user", content: "first" }))
    const second = written(
      await engine.ok("write_message", {
        session_id: "s1",
        role: "assistant",
        content: "second",
        metadata_json: JSON.stringify({ relations: [{ type: "depends_on", message_id: first.message_id }] }),
      }),
    )
    await engine.ok("write_message", { session_id: "s2", role: "user", content: "third" })
    await engine.ok("update_message", { message_id: second.message_id, content: "second, edited" })
    await engine.ok("delete_message", { message_id: first.message_id })
    for (const [name, args] of [
      ["add_task", { title: "ship" }],
      ["record_adr", { title: "Use LMDB", decision: "yes", context: "fast reads" }],
      ["record_adr", { title: "Use a WAL", decision: "yes", context: "durability" }],
      ["add_sticky_note", { text: "expires", ttl_seconds: 3600 }],
      ["add_session_summary", { summary: "did things" }],
      ["pin_file", { path: "src/a.ts" }],
      ["log_code_change", { summary: "changed a" }],
      ["gate_set", { action: "push", status: "authorized" }],
      ["gate_verify", { action: "push", consume: true }],
    ] as const)
      await engine.ok(name, args)
  } finally {
    await engine.close()
  }
  // A conversations import switches the store to a new generation.
  const files = tempDir("mnemos-files-")
  const backup = join(files, "conversations.jsonl")
  assert.isTrue((await runCommand(exportCommand, [backup, "--data-dir", dir])).ok)
  const imported = await runCommand(importCommand, [backup, "--data-dir", dir, "--policy", "overwrite"])
  assert.isTrue(imported.ok, `${imported.stderr} ${imported.error?.message}`)
  return dir
}

describe("state schemas", () => {
  it("every domain store has one", () => {
    assert.deepStrictEqual(
      domainStores.map((store) => store.name).filter((name) => !domainStates.has(name)),
      [],
    )
  })

  it("every entry mnemos writes passes, and the archive restores", async () => {
    const source = await everyKindOfKey()
    const archive = join(tempDir("mnemos-files-"), "all.jsonl")
    const exported = await runCommand(exportCommand, [archive, "--all", "--data-dir", source])
    assert.isTrue(exported.ok, exported.stderr)
    const entries = readFileSync(archive, "utf8")
      .trimEnd()
      .split("\n")
      .slice(1, -1)
      .map((line) => JSON.parse(line) as { s: string; k: string; v: unknown })
    const kinds = new Set<string>()
    for (const entry of entries) {
      const problem = domainStates.get(entry.s)!.problem(entry.k, entry.v)
      assert.isUndefined(problem, `${entry.s} ${JSON.stringify(entry.k)} = ${JSON.stringify(entry.v)}`)
      kinds.add(`${entry.s}:${keyHead(entry.k)}`)
    }
    // The walk met the kinds of keys that are easy to get wrong.
    for (const kind of [
      "graph:ri/default",
      "tasks:d/default",
      "adrs:n/default",
      "notes:x",
      "gates:u/default",
      "audit:e",
    ])
      assert.isTrue(
        [...kinds].some((seen) => seen.startsWith(kind)),
        `no ${kind} key in ${[...kinds].join(", ")}`,
      )
    assert.isTrue(
      entries.some((entry) => entry.k.startsWith(idempotencyStateKey(""))),
      "retry keys were written",
    )
    assert.isTrue(
      entries.some((entry) => entry.s === "conversations" && entry.k === "switches"),
      "a generation switch",
    )
    const restored = await runCommand(importCommand, [archive, "--data-dir", tempDir("mnemos-data-")])
    assert.isTrue(restored.ok, `${restored.stderr} ${restored.error?.message}`)
  })

  it("a retry key's record must hold its key", () => {
    const state = withKernelKeys({ problem: () => "no own keys" })
    const key = idempotencyStateKey("client:abc")
    assert.isUndefined(state.problem(key, { key: "client:abc", reply: { any: "thing" }, at: 1 }))
    assert.include(state.problem(key, { key: "client:other", reply: null, at: 1 }) ?? "", "its key says")
    assert.include(state.problem(key, { key: "client:abc", at: "yesterday" }) ?? "", "at")
    assert.strictEqual(state.problem("x", 1), "no own keys")
  })
})
