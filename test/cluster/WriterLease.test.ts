/**
 * One writer per store (src/cluster/WriterLeases.ts), from outside, on a real 3-node JetStream
 * cluster (R3): three `mnemos serve --nats` daemons agree on who holds each store's writer lease
 * (the daemon rendezvous hashing prefers), the others forward their writes to it — no append is
 * refused as stale, and each daemon reads its own writes. Then the faults: the holder of the notes
 * store killed (-9) while forwards to it are in flight, and the holder cut off from NATS while the
 * others are not. Every acknowledged write is kept, none is applied twice, writes resume on the
 * other daemons once the lease is taken over, and the failover gap is printed.
 *
 * The daemons' ids are chosen (each data directory's membership is written before its first
 * start) so that the daemon to be killed is the one the notes store's lease prefers.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import type { StoreHealth } from "../../src/actors/StoreActor.ts"
import { preferredDaemon } from "../../src/cluster/WriterLeases.ts"
import { writeMembership } from "../../src/stores/shared/SharedMemory.ts"
import { type NatsCluster, startNatsCluster } from "../support/NatsCluster.ts"
import {
  apiGet,
  callTool,
  cleanup,
  connectClient,
  type DaemonProcess,
  startDaemon,
  tempDir,
  waitFor,
} from "../transports/harness.ts"

let cluster: NatsCluster
beforeAll(async () => {
  // Clients reach only the nodes they are given: a daemon can be cut off from NATS alone.
  cluster = await startNatsCluster(3, { noAdvertise: true })
}, 60_000)
afterAll(async () => {
  await cleanup()
  await cluster?.stop()
})

// The default lease: a shorter one lapses on a machine loaded by the rest of the suite (a holder
// starved of CPU for longer than it cannot renew), and the leases then keep moving.
const leaseMs = 3000

/** Some of the daemon's stores (src/Engine.ts has them all). */
const someStores = ["graph", "conversations", "notes", "tasks", "audit"]

/**
 * Three daemon ids of which `ids[0]` is the one the `store` lease prefers among the three, and that
 * spread the leases (rendezvous hashing could, rarely, give one daemon every store).
 */
const idsPreferring = (tag: string, store: string): [string, string, string] => {
  for (let n = 0; ; n++) {
    const ids: [string, string, string] = [`${tag}-a${n}`, `${tag}-b${n}`, `${tag}-c${n}`]
    const spread = new Set(someStores.map((name) => preferredDaemon(name, ids))).size > 1
    if (preferredDaemon(store, ids) === ids[0] && spread) return ids
  }
}

/** A daemon of the memory `prefix` with id `daemonId`, on the given NATS nodes. */
const startMember = (prefix: string, daemonId: string, nodes: ReadonlyArray<number>) => {
  const servers = nodes.map((node) => cluster.urls[node]!)
  const dataDir = tempDir("mnemos-lease-")
  writeMembership(dataDir, { prefix, servers, daemonId, joinedAt: new Date().toISOString() })
  return startDaemon({
    dataDir,
    args: ["--nats", servers.join(","), "--nats-prefix", prefix, "--nats-lease-ms", String(leaseMs)],
  })
}

const storesOf = async (daemon: DaemonProcess): Promise<ReadonlyArray<StoreHealth>> =>
  (await apiGet<{ stores: ReadonlyArray<StoreHealth> }>(daemon, "/api/stats")).stores

/** Waits until every daemon names the preferred daemon as every store's writer. */
const settled = async (daemons: ReadonlyArray<DaemonProcess>, ids: ReadonlyArray<string>) => {
  let last = ""
  try {
    return await waitFor(
      "every store's writer lease held by its preferred daemon, as every daemon sees it",
      async () => {
        const views = await Promise.all(daemons.map(storesOf))
        last = views
          .map((stores, index) =>
            stores
              .map(
                (store) =>
                  `${ids[index]} ${store.name}: ${store.state}, writer ${store.writer?.holder}${store.state === "running" ? "" : ` (${store.lastError}; log ${JSON.stringify(store.wal)})`}`,
              )
              .join("; "),
          )
          .join("\n")
        for (const stores of views)
          for (const store of stores)
            if (store.writer?.holder !== preferredDaemon(store.name, ids) || store.state !== "running") return undefined
        return views
      },
      90_000,
    )
  } catch (error) {
    throw new Error(`${error instanceof Error ? error.message : String(error)}; last seen:\n${last}`)
  }
}

interface Timed {
  readonly text: string
  readonly startedAt: number
  readonly ackedAt: number
}

/** Writers adding sticky notes through `client`, one call at a time each, until `stop()`. */
const noteWriters = (
  client: Client,
  tag: string,
  acked: Array<Timed>,
  failures: Array<string>,
  stop: () => boolean,
  writers = 4,
) =>
  Promise.all(
    Array.from({ length: writers }, async (_, writer) => {
      for (let i = 0; !stop(); i++) {
        const text = `${tag} note ${writer}-${i}`
        const startedAt = performance.now()
        try {
          const result = await callTool(client, "add_sticky_note", { text })
          if (result.isError) failures.push(`${text}: ${result.text}`)
          else acked.push({ text, startedAt, ackedAt: performance.now() })
        } catch (error) {
          failures.push(`${text}: ${error instanceof Error ? error.message : String(error)}`)
        }
      }
    }),
  )

/** Every sticky note's text, through `client` (every page). */
const noteTexts = async (client: Client): Promise<Array<string>> => {
  const texts: Array<string> = []
  let cursor: string | undefined
  do {
    const result = await callTool(client, "list_sticky_notes", { limit: 100, ...(cursor ? { cursor } : {}) })
    assert.isFalse(result.isError, result.text)
    const page = JSON.parse(result.text) as { notes: Array<{ text: string }>; nextCursor?: string }
    texts.push(...page.notes.map((note) => note.text))
    cursor = page.nextCursor
  } while (cursor !== undefined)
  return texts
}

/** Each acknowledged note exactly once, and no note twice, on every client. */
const assertExactlyOnce = async (clients: ReadonlyArray<Client>, acked: ReadonlyArray<Timed>) => {
  for (const client of clients) {
    const texts = await noteTexts(client)
    const counts = new Map<string, number>()
    for (const text of texts) counts.set(text, (counts.get(text) ?? 0) + 1)
    const twice = [...counts].filter(([, count]) => count > 1)
    assert.deepStrictEqual(twice, [], "no write applied twice")
    const missing = acked.filter((write) => !counts.has(write.text)).map((write) => write.text)
    assert.deepStrictEqual(missing, [], "every acknowledged write kept")
  }
}

/** The failover gap: the last acknowledgement before `from` to the first of a write started after `to`. */
const gapAround = (acked: ReadonlyArray<Timed>, from: number, to: number) => {
  const before = Math.max(...acked.filter((write) => write.ackedAt <= from).map((write) => write.ackedAt))
  const after = Math.min(...acked.filter((write) => write.startedAt > to).map((write) => write.ackedAt))
  return after - before
}

describe("writer leases on a 3-node JetStream cluster", () => {
  it("one writer per store, spread over the daemons; the others forward: no append refused as stale, every daemon reads its own writes at once", async () => {
    const prefix = `lease${Date.now() % 100_000}`
    const ids = idsPreferring(`l${Date.now() % 1000}`, "graph")
    const daemons = await Promise.all(ids.map((id, index) => startMember(prefix, id, [index, (index + 1) % 3])))
    const clients = await Promise.all(daemons.map((daemon) => connectClient("streamable-http", daemon.url)))
    const views = await settled(daemons, ids)
    const holders = new Set(views[0]!.map((store) => store.writer!.holder))
    assert.isAbove(holders.size, 1, "the leases are spread over the daemons, not all on one")
    // The dashboard's cluster view names each store's writer.
    const cluster = await apiGet<{ writers: ReadonlyArray<{ store: string; holder?: string }> }>(
      daemons[1]!,
      "/api/cluster",
    )
    assert.deepStrictEqual(
      cluster.writers.map((writer) => [writer.store, writer.holder]),
      views[0]!.map((store) => [store.name, preferredDaemon(store.name, ids)]),
    )

    const failures: Array<string> = []
    const unreadable: Array<string> = []
    await Promise.all(
      clients.flatMap((client, index) =>
        Array.from({ length: 4 }, async (_, writer) => {
          for (let i = 0; i < 20; i++) {
            const name = `d${index}-w${writer}-${i}`
            const created = await callTool(client, "create_entities", {
              entities: [{ name, entityType: "thing", observations: [`made on daemon ${index}`] }],
            })
            if (created.isError) failures.push(`${name}: ${created.text}`)
            // Read your writes: the daemon that answered has applied it, wherever it was decided.
            else if (!(await callTool(client, "open_nodes", { names: [name] })).text.includes(name))
              unreadable.push(name)
            const note = await callTool(client, "add_sticky_note", { text: `note ${name}` })
            if (note.isError) failures.push(`note ${name}: ${note.text}`)
          }
        }),
      ),
    )
    if (failures.length > 0 || unreadable.length > 0) {
      // What each daemon's graph and notes stores say, to tell a stuck replica from a slow one.
      const states = await Promise.all(daemons.map(storesOf))
      console.log(
        JSON.stringify(
          states.map((stores) =>
            stores
              .filter((store) => store.name === "graph" || store.name === "notes")
              .map(({ name, state, lastError, wal, writer, mailboxDepth }) => ({
                name,
                state,
                lastError,
                wal,
                writer,
                mailboxDepth,
              })),
          ),
          null,
          1,
        ),
      )
    }
    assert.deepStrictEqual(failures, [])
    assert.deepStrictEqual(unreadable, [], "each daemon reads its own writes at once")

    const after = await Promise.all(daemons.map(storesOf))
    const refused = after.flat().reduce((sum, store) => sum + (store.wal?.refused ?? 0), 0)
    assert.strictEqual(refused, 0, "no append refused as stale: one writer per store")
    for (const [index, stores] of after.entries()) {
      const graph = stores.find((store) => store.name === "graph")!
      if (index === 0) assert.isAbove(graph.writer!.served, 0, "the graph's writer decided the others' writes")
      else assert.isAbove(graph.writer!.forwarded, 0, `daemon ${index} forwarded its graph writes`)
      assert.strictEqual(graph.writer!.self, index === 0)
    }
    await assertExactlyOnce(clients, [])
    const graphs = await Promise.all(clients.map((client) => callTool(client, "read_graph", {})))
    const counts = graphs.map((graph) => (JSON.parse(graph.text) as { entities: Array<unknown> }).entities.length)
    assert.deepStrictEqual(counts, [240, 240, 240])

    // The audit ledger: each event audited once, by the daemon that decided it, and no gap.
    const graphAudit = await waitFor(
      "every graph event in the audit ledger",
      async () => {
        const result = await callTool(clients[1]!, "query_audit", { store: "graph", project: "*", limit: 500 })
        const entries = (
          JSON.parse(result.text) as { entries: Array<{ sourceSeq: number; origin?: string; originSeq?: number }> }
        ).entries
        return entries.length >= 240 ? entries : undefined
      },
      30_000,
    )
    assert.strictEqual(new Set(graphAudit.map((entry) => entry.sourceSeq)).size, graphAudit.length)
    assert.strictEqual(graphAudit.length, 240)
    assert.deepStrictEqual(
      [...new Set(graphAudit.map((entry) => entry.origin))],
      [ids[0]],
      "audited by the graph's writer, which decided them",
    )
    assert.deepStrictEqual(
      graphAudit.map((entry) => entry.originSeq).sort((a, b) => a! - b!),
      Array.from({ length: 240 }, (_, index) => index + 1),
      "numbered 1..240 among its writer's events",
    )
    const gaps = await callTool(clients[2]!, "query_audit", { tool: "audit", project: "*" })
    assert.deepStrictEqual((JSON.parse(gaps.text) as { entries: Array<unknown> }).entries, [], "no gap in the ledger")
  }, 240_000)

  it("kill -9 of a store's writer while forwards to it are in flight: writes on the others resume once its lease lapses, every acknowledged write kept, none applied twice", async () => {
    const prefix = `lkill${Date.now() % 100_000}`
    const ids = idsPreferring(`k${Date.now() % 1000}`, "notes")
    const daemons = await Promise.all(ids.map((id, index) => startMember(prefix, id, [index, (index + 1) % 3])))
    const clients = await Promise.all(daemons.map((daemon) => connectClient("streamable-http", daemon.url)))
    await settled(daemons, ids)

    const acked: Array<Timed> = []
    const failures: Array<string> = []
    let stop = false
    const writing = Promise.all([
      noteWriters(clients[1]!, "b", acked, failures, () => stop),
      noteWriters(clients[2]!, "c", acked, failures, () => stop),
    ])
    await waitFor("forwarded writes acknowledged", async () => (acked.length >= 40 ? true : undefined), 30_000)
    const killedAt = performance.now()
    await daemons[0]!.stop("SIGKILL")
    const killDoneAt = performance.now()
    const ackedBeforeKill = acked.length
    await waitFor(
      "writes acknowledged after the kill",
      async () => (acked.length >= ackedBeforeKill + 40 ? true : undefined),
      60_000,
    )
    stop = true
    await writing
    assert.deepStrictEqual(failures, [], "no write on the other daemons fails")
    const inFlight = acked.filter((write) => write.startedAt < killedAt && write.ackedAt > killedAt)
    assert.isAbove(inFlight.length, 0, "some writes were on their way to the killed writer and were answered")
    console.log(
      `failover: gap ${Math.round(gapAround(acked, killedAt, killDoneAt))} ms (lease ${leaseMs} ms), ${inFlight.length} write(s) in flight at the kill`,
    )
    const survivors = await Promise.all(daemons.slice(1).map(storesOf))
    for (const stores of survivors)
      assert.include(ids.slice(1), stores.find((store) => store.name === "notes")!.writer?.holder)
    await assertExactlyOnce(clients.slice(1), acked)
  }, 240_000)

  it("the writer cut off from NATS while the others are not: it stops acknowledging, another daemon takes the lease, every write it acknowledged is kept", async () => {
    const prefix = `lcut${Date.now() % 100_000}`
    const ids = idsPreferring(`c${Date.now() % 1000}`, "notes")
    // The writer reaches NATS through node 0 only; the others through nodes 1 and 2.
    const daemons = await Promise.all([
      startMember(prefix, ids[0], [0]),
      startMember(prefix, ids[1], [1, 2]),
      startMember(prefix, ids[2], [2, 1]),
    ])
    const clients = await Promise.all(daemons.map((daemon) => connectClient("streamable-http", daemon.url)))
    await settled(daemons, ids)

    const cutAcked: Array<Timed> = []
    const othersAcked: Array<Timed> = []
    const cutFailures: Array<string> = []
    const failures: Array<string> = []
    let stop = false
    const writing = Promise.all([
      noteWriters(clients[0]!, "a", cutAcked, cutFailures, () => stop, 2),
      noteWriters(clients[1]!, "b", othersAcked, failures, () => stop),
      noteWriters(clients[2]!, "c", othersAcked, failures, () => stop),
    ])
    await waitFor("writes acknowledged", async () => (othersAcked.length >= 40 ? true : undefined), 30_000)
    const cutAt = performance.now()
    await cluster.nodes[0]!.stop("SIGKILL")
    const cutDoneAt = performance.now()
    const before = othersAcked.length
    await waitFor(
      "writes acknowledged on the others after the cut",
      async () => (othersAcked.length >= before + 40 ? true : undefined),
      60_000,
    )
    stop = true
    await writing
    if (failures.length > 0) {
      // What the daemons' notes stores were doing (a replica once stayed at position 0 under load).
      const views = await Promise.all(daemons.slice(1).map(storesOf))
      console.log(
        JSON.stringify(
          views.map((stores) => stores.find((store) => store.name === "notes")),
          null,
          1,
        ),
      )
    }
    assert.deepStrictEqual(failures, [], "no write on the daemons that reach NATS fails")
    assert.isAbove(cutFailures.length, 0, "the cut-off daemon refuses writes while it cannot reach NATS")
    console.log(`cut-off writer: gap ${Math.round(gapAround(othersAcked, cutAt, cutDoneAt))} ms (lease ${leaseMs} ms)`)
    const survivors = await Promise.all(daemons.slice(1).map(storesOf))
    for (const stores of survivors)
      assert.include(ids.slice(1), stores.find((store) => store.name === "notes")!.writer?.holder)
    await assertExactlyOnce(clients.slice(1), [...cutAcked, ...othersAcked])

    // Back on NATS, the cut-off daemon catches up to the same notes.
    await cluster.nodes[0]!.start()
    const expected = (await noteTexts(clients[1]!)).sort()
    await waitFor(
      "the cut-off daemon caught up",
      async () => {
        const texts = (await noteTexts(clients[0]!)).sort()
        return texts.length === expected.length ? texts : undefined
      },
      60_000,
    )
    assert.deepStrictEqual((await noteTexts(clients[0]!)).sort(), expected)
  }, 240_000)
})
