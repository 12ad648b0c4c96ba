/**
 * Deleted is gone in a shared memory too (src/stores/shared/StoreGenerations.ts): on a real 3-node
 * JetStream cluster (R3) with three `mnemos serve --nats` daemons, a marker text is written into the
 * body of each kind of record that can be deleted (through two different daemons, so some are
 * forwarded to the writer), each is deleted, and one daemon is stopped. Then `mnemos compact` on one
 * daemon compacts every store at its writer: each store's stream is replaced by a new one holding
 * the live state, the old one is deleted once the running daemons have switched. Afterwards no file
 * of the running daemons' data directories and no file of any NATS server's store directory holds a
 * marker; the stopped daemon, started again, rebuilds its copy from the new streams and holds none
 * either. Live records read back everywhere, and writes go on on every daemon. Last, a compaction
 * cut short after its seal: the writer finds its stream sealed and finishes it, and writes resume.
 */
import { readdirSync, readFileSync, statSync } from "node:fs"
import { join } from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { jetstreamManager } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import type { StoreHealth } from "../../src/actors/StoreActor.ts"
import { writeMembership } from "../../src/stores/shared/SharedMemory.ts"
import { streamNameOf } from "../../src/stores/shared/StoreGenerations.ts"
import { type NatsCluster, startNatsCluster } from "../support/NatsCluster.ts"
import {
  apiGet,
  callTool,
  cleanup,
  connectClient,
  type DaemonProcess,
  runCli,
  startDaemon,
  tempDir,
  waitFor,
} from "../transports/harness.ts"

let cluster: NatsCluster
beforeAll(async () => {
  cluster = await startNatsCluster(3)
}, 60_000)
afterAll(async () => {
  await cleanup()
  await cluster?.stop()
})

/** Files under `dir` whose raw bytes hold `marker` (a file removed while looking is skipped). */
const filesHolding = (dir: string, marker: string): Array<string> =>
  readdirSync(dir, { recursive: true, encoding: "utf8" })
    .map((name) => join(dir, name))
    .filter((path) => {
      try {
        return statSync(path).isFile() && readFileSync(path).includes(marker)
      } catch {
        return false
      }
    })

/** A text no other write contains. */
const markerOf = (kind: string) => `gone-${kind}-${"z".repeat(12)}-${Math.random().toString(36).slice(2, 10)}`

const storesOf = async (daemon: DaemonProcess): Promise<ReadonlyArray<StoreHealth>> =>
  (await apiGet<{ stores: ReadonlyArray<StoreHealth> }>(daemon, "/api/stats")).stores

describe("compacting a shared memory", () => {
  it("replaces each store's stream: no deleted text is left in any daemon's files or any NATS server's, a daemon away meanwhile rebuilds, writes go on", async () => {
    const prefix = `compact${Date.now() % 100_000}`
    const start = (daemonId: string, dataDir = tempDir("mnemos-compact-")) => {
      writeMembership(dataDir, { prefix, servers: cluster.urls, daemonId, joinedAt: new Date().toISOString() })
      return startDaemon({ dataDir, args: ["--nats", cluster.urls.join(","), "--nats-prefix", prefix] })
    }
    const ids = ["cmp-a", "cmp-b", "cmp-c"]
    let [a, b, c] = await Promise.all(ids.map((id) => start(id)))
    const clients: Array<Client> = await Promise.all(
      [a!, b!, c!].map((daemon) => connectClient("streamable-http", daemon.url)),
    )
    const [onA, onB] = clients as [Client, Client, Client]
    // Every store open, with a writer every daemon agrees on.
    await waitFor(
      "every store's writer lease taken, as every daemon sees it",
      async () => {
        const views = await Promise.all([a!, b!, c!].map(storesOf))
        const holders = views.map((stores) => stores.map((store) => store.writer?.holder ?? "").join(","))
        return views.every((stores) => stores.every((store) => store.state === "running" && store.writer?.holder)) &&
          new Set(holders).size === 1
          ? true
          : undefined
      },
      90_000,
    )

    const ok = async (client: Client, tool: string, args: Record<string, unknown>) => {
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
    const written = await ok(onA, "write_message", { session_id: "s1", role: "user", content: markers.message })
    await ok(onA, "write_message", { session_id: "s1", role: "user", content: "the standup moved to ten" })
    const messageId = (JSON.parse(written) as { message: { message_id: string } }).message.message_id
    await ok(onB, "delete_message", { message_id: messageId })

    await ok(onB, "create_entities", {
      entities: [
        { name: "Billing", entityType: "service", observations: [markers.observation, "owned by team blue"] },
        { name: "Ledger", entityType: "service", observations: [markers.entity] },
      ],
    })
    await ok(onA, "delete_observations", {
      deletions: [{ entityName: "Billing", observations: [markers.observation] }],
    })
    await ok(onA, "delete_entities", { entityNames: ["Ledger"] })

    const note = JSON.parse(await ok(onB, "add_sticky_note", { text: markers.note })) as { note: { id: string } }
    await ok(onA, "remove_sticky_note", { id: note.note.id })
    await ok(onA, "add_sticky_note", { text: markers.expired, ttl_seconds: 1 })
    await ok(onB, "add_sticky_note", { text: "keep this note" })
    await ok(onB, "pin_file", { path: "src/billing.ts", note: markers.pin })
    await ok(onA, "unpin_file", { path: "src/billing.ts" })

    // Every daemon has it all (the third one too), then the third stops: it is away during the compaction.
    await waitFor(
      "the third daemon has applied the writes",
      async () =>
        (await callTool(clients[2]!, "list_sticky_notes", {})).text.includes("keep this note") ? true : undefined,
      30_000,
    )
    await new Promise((resolve) => setTimeout(resolve, 2000)) // the note's ttl runs out; LMDB and search persist
    for (const [kind, marker] of Object.entries(markers))
      assert.isAbove(
        filesHolding(cluster.dir, marker).length,
        0,
        `the ${kind} marker is in the NATS servers' files before`,
      )
    await clients[2]!.close()
    const cDir = c!.dataDir
    await c!.stop()

    const compacted = await runCli(["compact", "--data-dir", a!.dataDir], 240_000)
    assert.strictEqual(compacted.code, 0, compacted.output)

    // Every store moved to a new generation, on both running daemons.
    for (const daemon of [a!, b!])
      await waitFor(
        `${daemon.dataDir}: every store on its new stream`,
        async () => ((await storesOf(daemon)).every((store) => (store.wal?.generation ?? 0) >= 1) ? true : undefined),
        60_000,
      )
    const leftIn = async (where: ReadonlyArray<string>) => {
      const audit = await ok(onA, "query_audit", { project: "*", limit: 200 })
      return Object.entries(markers)
        .map(([kind, marker]) => ({
          kind,
          files: where.flatMap((dir) => filesHolding(dir, marker)),
          inAudit: audit.includes(marker),
        }))
        .filter((left) => left.files.length > 0 || left.inAudit)
    }
    // Search's files on the other daemon are rewritten a moment after it switched.
    let left: Awaited<ReturnType<typeof leftIn>> = []
    await waitFor(
      "no marker in any daemon's or NATS server's files",
      async () => {
        left = await leftIn([a!.dataDir, b!.dataDir, cluster.dir])
        return left.length === 0 ? true : undefined
      },
      60_000,
    ).catch(() => assert.deepStrictEqual(left, [], "deleted text left after the shared compaction"))

    // The daemon that was away rebuilds its copy from the new streams.
    c = await start("cmp-c", cDir)
    const onC = await connectClient("streamable-http", c.url)
    await waitFor(
      "the restarted daemon serves the compacted memory",
      async () => ((await callTool(onC, "list_sticky_notes", {})).text.includes("keep this note") ? true : undefined),
      60_000,
    )
    await waitFor(
      "no marker in the restarted daemon's files",
      async () => {
        left = await leftIn([cDir])
        return left.length === 0 ? true : undefined
      },
      60_000,
    ).catch(() => assert.deepStrictEqual(left, [], "deleted text left in the rebuilt replica"))

    // Live records read back on every daemon, and writes go on everywhere.
    for (const client of [onA, onB, onC]) {
      assert.include(
        await ok(client, "read_messages", { view: "history", session_id: "s1" }),
        "the standup moved to ten",
      )
      assert.include(await ok(client, "open_nodes", { names: ["Billing"] }), "owned by team blue")
    }
    for (const [index, client] of [onA, onB, onC].entries()) {
      await ok(client, "add_sticky_note", { text: `after the compaction ${index}` })
      assert.include(await ok(client, "list_sticky_notes", {}), `after the compaction ${index}`, "read your writes")
    }
    for (const [index, client] of [onA, onB, onC].entries())
      await waitFor(
        `daemon ${index} has every daemon's write after the compaction`,
        async () => {
          const notes = await ok(client, "list_sticky_notes", {})
          return [0, 1, 2].every((n) => notes.includes(`after the compaction ${n}`)) ? true : undefined
        },
        30_000,
      )

    // A compaction cut short after its seal (its writer killed then): the notes store's stream is
    // sealed and nothing can be appended; the lease's holder finds it so and finishes the compaction,
    // and writes go on by themselves.
    const connection = await connect({ servers: [...cluster.urls] })
    try {
      const manager = await jetstreamManager(connection)
      const notesStream = streamNameOf(prefix, "notes", 1)
      const info = await manager.streams.info(notesStream)
      const sealedConfig = { ...info.config, sealed: true }
      await manager.streams.update(notesStream, sealedConfig)
    } finally {
      await connection.close()
    }
    let refusedWhileSealed = 0
    await waitFor(
      "writes to the sealed store resume without anyone compacting it",
      async () => {
        const reply = await callTool(onB, "add_sticky_note", { text: "after the seal" })
        if (reply.isError) refusedWhileSealed++
        return reply.isError ? undefined : true
      },
      90_000,
    )
    const notes = (await storesOf(b!)).find((store) => store.name === "notes")
    assert.isAtLeast(notes?.wal?.generation ?? 0, 2, "the cut-short compaction was finished: a newer stream")
    console.log(`writes refused while the notes stream stayed sealed: ${refusedWhileSealed}`)
    for (const client of [onA, onB, onC]) await client.close()
  }, 420_000)
})
