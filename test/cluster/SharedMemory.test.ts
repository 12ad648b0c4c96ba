/**
 * Several daemons, one memory, on a real 3-node JetStream cluster (R3), from outside: three
 * `mnemos serve --nats` processes take concurrent writes over MCP, on distinct entities and on the
 * same one. Mid-run one daemon is killed (-9) and one NATS node too; the surviving daemons must not
 * fail a single write. Then every acknowledged write is on every daemon, their graphs are identical,
 * and the restarted daemon caught up from its checkpoint's position, not from the stream's start.
 * Separately: with NATS unreachable, writes fail at once with `Unavailable` naming the servers, reads
 * go on, health says degraded, and writes come back with NATS.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import type { StoreHealth } from "../../src/actors/StoreActor.ts"
import { type NatsCluster, startNatsCluster } from "../support/NatsCluster.ts"
import {
  apiGet,
  callTool,
  cleanup,
  connectClient,
  type DaemonProcess,
  runCli,
  sleep,
  startDaemon,
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

const natsArgs = (prefix: string, first: number) => [
  "--nats",
  [...cluster.urls.slice(first), ...cluster.urls.slice(0, first)].join(","),
  "--nats-prefix",
  prefix,
]

/** A client of `daemon` (with its data directory's token, as connectClient sends it). */
const clientOf = (daemon: DaemonProcess): Promise<Client> => connectClient("streamable-http", daemon.url)

interface Graph {
  readonly entities: ReadonlyArray<{ readonly name: string; readonly observations: ReadonlyArray<string> }>
  readonly relations: ReadonlyArray<unknown>
}

const graphOf = async (client: Client): Promise<Graph> => {
  const result = await callTool(client, "read_graph", {})
  assert.isFalse(result.isError, result.text)
  return JSON.parse(result.text) as Graph
}

/** A canonical form: entities by name, observations sorted (their order is each replica's own). */
const canonical = (graph: Graph) =>
  [...graph.entities]
    .map((entity) => ({ ...entity, observations: [...entity.observations].sort() }))
    .sort((a, b) => (a.name < b.name ? -1 : 1))

const graphStore = async (daemon: DaemonProcess): Promise<StoreHealth> =>
  (await apiGet<{ stores: ReadonlyArray<StoreHealth> }>(daemon, "/api/stats")).stores.find(
    (store) => store.name === "graph",
  )!

/** Writers on one daemon: each creates entities and adds observations to the shared one, one call at a time. */
const writers = (
  client: Client,
  tag: string,
  count: number,
  acked: Set<string>,
  failures: Array<string>,
  until: () => boolean = () => false,
) =>
  Promise.all(
    Array.from({ length: 4 }, async (_, writer) => {
      for (let i = writer; i < count && !until(); i += 4) {
        try {
          const name = `${tag}-${i}`
          const created = await callTool(client, "create_entities", {
            entities: [{ name, entityType: "note", observations: [`made on ${tag}`] }],
          })
          if (created.isError) failures.push(`${name}: ${created.text}`)
          else acked.add(name)
          const observation = `${tag} says ${i}`
          const added = await callTool(client, "add_observations", {
            observations: [{ entityName: "Shared", contents: [observation] }],
          })
          if (added.isError) failures.push(`${observation}: ${added.text}`)
          else acked.add(`Shared:${observation}`)
        } catch (error) {
          failures.push(`${tag}-${i}: ${error instanceof Error ? error.message : String(error)}`)
        }
      }
    }),
  )

/** `GET /api/cluster` (src/cluster/Presence.ts). */
interface ClusterApi {
  readonly shared: boolean
  readonly prefix: string
  readonly self: string
  readonly daemons: ReadonlyArray<{
    readonly daemonId: string
    readonly self: boolean
    readonly live: boolean
    readonly stores: ReadonlyArray<{ readonly name: string; readonly behind?: number }>
  }>
}

describe("three daemons on a 3-node JetStream cluster", () => {
  it("concurrent writers on every daemon, also on one entity; kill -9 of a daemon and of a NATS node mid-run: no write fails on the survivors, every acked write is on every daemon, graphs identical, the restarted daemon catches up from its checkpoint", async () => {
    const prefix = `team${Date.now() % 100_000}`
    const daemons = await Promise.all([0, 1, 2].map((first) => startDaemon({ args: natsArgs(prefix, first) })))
    const clients = await Promise.all(daemons.map(clientOf))
    const seed = await callTool(clients[0]!, "create_entities", {
      entities: [{ name: "Shared", entityType: "topic", observations: ["the shared entity"] }],
    })
    assert.isFalse(seed.isError, seed.text)

    // Round one: everyone writes at once.
    const acked = new Set<string>(["Shared:the shared entity", "Shared"])
    const failures: Array<string> = []
    await Promise.all(clients.map((client, index) => writers(client, `r1d${index}`, 40, acked, failures)))
    assert.deepStrictEqual(failures, [])
    // Every daemon sees the three live in the shared memory's presence list (the dashboard's panel).
    const presence = await waitFor(
      "three live daemons in the presence list",
      async () => {
        const view = await apiGet<ClusterApi>(daemons[0]!, "/api/cluster")
        return view.daemons.filter((daemon) => daemon.live).length === 3 ? view : undefined
      },
      20_000,
    )
    assert.strictEqual(presence.prefix, prefix)
    assert.isTrue(presence.daemons[0]!.self)
    const doomedId = (await apiGet<ClusterApi>(daemons[2]!, "/api/cluster")).self

    // Round two: the faults, while everyone writes.
    const survivorFailures: Array<string> = []
    const doomedFailures: Array<string> = []
    let doomedDown = false
    const round = Promise.all([
      writers(clients[0]!, "r2d0", 120, acked, survivorFailures),
      writers(clients[1]!, "r2d1", 120, acked, survivorFailures),
      writers(clients[2]!, "r2d2", 120, acked, doomedFailures, () => doomedDown),
    ])
    await sleep(1500)
    // What the doomed daemon's LMDB holds (it only grows until the kill): a restart replays the rest.
    const appliedBeforeKill = (await graphStore(daemons[2]!)).appliedSeq
    await daemons[2]!.stop("SIGKILL")
    doomedDown = true
    await cluster.nodes[0]!.stop("SIGKILL")
    await round
    assert.deepStrictEqual(survivorFailures, [], "losing one daemon and one NATS node fails no write on the others")
    await waitFor(
      "the killed daemon shown silent",
      async () => {
        const view = await apiGet<ClusterApi>(daemons[0]!, "/api/cluster")
        console.log(
          JSON.stringify(view.daemons.map((d) => [d.daemonId, d.live, (d as { silentMs?: number }).silentMs])),
          doomedId,
        )
        return view.daemons.some((daemon) => daemon.daemonId === doomedId && !daemon.live) ? true : undefined
      },
      30_000,
    )

    // The killed daemon comes back on the same data directory and catches up.
    await cluster.nodes[0]!.start()
    const restarted = await startDaemon({ dataDir: daemons[2]!.dataDir, args: natsArgs(prefix, 2) })
    const restartedClient = await clientOf(restarted)
    const recovery = (await graphStore(restarted)).recovery
    // Every daemon converges on every acknowledged write.
    const live = [clients[0]!, clients[1]!, restartedClient]
    const last = async () =>
      Math.max(
        ...(await Promise.all([daemons[0]!, daemons[1]!, restarted].map(graphStore))).map(
          (store) => store.wal?.position ?? 0,
        ),
      )
    const end = await last()
    await waitFor(
      "every daemon caught up",
      async () => {
        const positions = await Promise.all([daemons[0]!, daemons[1]!, restarted].map(graphStore))
        return positions.every((store) => (store.wal?.position ?? 0) >= end) ? true : undefined
      },
      60_000,
    )
    // Back in the presence list, and nobody behind on the graph.
    await waitFor(
      "three live daemons, none behind",
      async () => {
        const view = await apiGet<ClusterApi>(daemons[0]!, "/api/cluster")
        const graphBehind = view.daemons.map((daemon) => daemon.stores.find((store) => store.name === "graph")?.behind)
        return view.daemons.filter((daemon) => daemon.live).length === 3 && graphBehind.every((behind) => behind === 0)
          ? true
          : undefined
      },
      30_000,
    )
    // The restarted daemon replayed only what its LMDB did not hold when it was killed.
    const totalRecords = ((await graphStore(daemons[0]!)).wal?.nextSeq ?? 1) - 1
    assert.isAbove(appliedBeforeKill, 0)
    assert.isAtMost(
      recovery?.records ?? Number.POSITIVE_INFINITY,
      totalRecords - appliedBeforeKill,
      "it replays from its checkpoint's position, not from the stream's start",
    )
    const graphs = await Promise.all(live.map(graphOf))
    for (const graph of graphs.slice(1)) assert.deepStrictEqual(canonical(graph), canonical(graphs[0]!))
    const names = new Set(graphs[0]!.entities.map((entity) => entity.name))
    const shared = new Set(graphs[0]!.entities.find((entity) => entity.name === "Shared")!.observations)
    for (const write of acked) {
      if (write.startsWith("Shared:")) assert.isTrue(shared.has(write.slice("Shared:".length)), write)
      else assert.isTrue(names.has(write), write)
    }
  }, 300_000)

  it("NATS unreachable: writes fail at once with Unavailable naming the servers, reads go on, health says degraded; writes resume when NATS is back", async () => {
    const prefix = `down${Date.now() % 100_000}`
    const daemon = await startDaemon({ args: natsArgs(prefix, 0) })
    const client = await clientOf(daemon)
    const before = await callTool(client, "create_entities", {
      entities: [{ name: "Before", entityType: "t", observations: ["written while NATS was up"] }],
    })
    assert.isFalse(before.isError, before.text)

    await Promise.all(cluster.nodes.map((node) => node.stop("SIGKILL")))
    await sleep(3000) // longer than the daemon waits for a reconnection before failing fast
    const started = Date.now()
    const refused = await callTool(client, "create_entities", {
      entities: [{ name: "During", entityType: "t", observations: ["x"] }],
    })
    assert.isTrue(refused.isError)
    assert.include(refused.text, "unreachable")
    assert.include(refused.text, cluster.urls[0]!)
    assert.isBelow(Date.now() - started, 5000, "a write fails fast instead of waiting out the retries")
    const read = await callTool(client, "open_nodes", { names: ["Before"] })
    assert.include(read.text, "written while NATS was up")
    const health = await graphStore(daemon)
    assert.strictEqual(health.state, "degraded")
    assert.include(health.lastError ?? "", "unreachable")
    const doctor = await runCli(["doctor", "--data-dir", daemon.dataDir])
    assert.include(doctor.output, "NATS")

    await Promise.all(cluster.nodes.map((node) => node.start()))
    const after = await waitFor(
      "a write after NATS is back",
      async () => {
        const result = await callTool(client, "create_entities", {
          entities: [{ name: "After", entityType: "t", observations: ["written once NATS was back"] }],
        })
        return result.isError ? undefined : result
      },
      60_000,
    )
    assert.isFalse(after.isError)
    assert.strictEqual((await graphStore(daemon)).state, "running")
  }, 180_000)
})
