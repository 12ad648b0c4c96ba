/**
 * Moving a memory into a shared one and out, with the documented commands, on a real JetStream
 * server: a local memory refuses to start replicating by a flag; `mnemos cluster join` moves it in
 * (another daemon then sees it); `mnemos cluster leave` keeps a local copy that has everything the
 * shared memory had, and writes its own log from then on. Nothing is lost on the way.
 */
import { existsSync, readdirSync } from "node:fs"
import { join } from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { type NatsCluster, startNatsCluster } from "../support/NatsCluster.ts"
import {
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
  cluster = await startNatsCluster(1)
}, 60_000)
afterAll(async () => {
  await cleanup()
  await cluster?.stop()
})

/** A client of `daemon` (with its data directory's token, as connectClient sends it). */
const clientOf = (daemon: DaemonProcess): Promise<Client> => connectClient("streamable-http", daemon.url)

const names = async (client: Client): Promise<ReadonlyArray<string>> => {
  const graph = await callTool(client, "read_graph", {})
  return (JSON.parse(graph.text) as { entities: ReadonlyArray<{ name: string }> }).entities
    .map((entity) => entity.name)
    .sort()
}

const create = async (client: Client, name: string) => {
  const result = await callTool(client, "create_entities", {
    entities: [{ name, entityType: "note", observations: [`about ${name}`] }],
  })
  assert.isFalse(result.isError, result.text)
}

describe("moving a memory into a shared one and out", () => {
  it("a local memory is moved in by mnemos cluster join (never by a flag alone), other daemons see it, and mnemos cluster leave keeps a full local copy", async () => {
    const prefix = `move${Date.now() % 100_000}`
    const nats = ["--nats", cluster.urls.join(","), "--nats-prefix", prefix]
    const dir = tempDir("mnemos-move-")

    // A local memory with some history.
    const local = await startDaemon({ dataDir: dir })
    const localClient = await clientOf(local)
    for (const name of ["Alpha", "Beta", "Gamma"]) await create(localClient, name)
    const written = await callTool(localClient, "write_message", {
      session_id: "s",
      role: "user",
      content: "kept across the move",
    })
    assert.isFalse(written.isError, written.text)
    await localClient.close()
    await local.stop()

    // A flag alone never mixes a local history into a shared one.
    const refused = await runCli(["serve", "--data-dir", dir, "--port", "0", ...nats])
    assert.notStrictEqual(refused.code, 0)
    assert.include(refused.output, "mnemos cluster join")

    const joined = await runCli(["cluster", "join", "--data-dir", dir, ...nats])
    assert.strictEqual(joined.code, 0, joined.output)
    assert.include(joined.output, "graph")
    assert.isTrue(
      readdirSync(dir).some((name) => name.startsWith("pre-join-")),
      "the local stores are kept aside",
    )
    assert.isFalse(existsSync(join(dir, "stores", "graph", "wal", "wal-00000000000000000001.log")))

    // The data directory is a replica now: started without flags, it is in the shared memory.
    const first = await startDaemon({ dataDir: dir })
    const firstClient = await clientOf(first)
    assert.deepStrictEqual(await names(firstClient), ["Alpha", "Beta", "Gamma"])
    const history = await callTool(firstClient, "read_messages", { view: "history", session_id: "s" })
    assert.include(history.text, "kept across the move")

    // Another daemon joins empty and sees it; its writes reach the first.
    const second = await startDaemon({ args: nats })
    const secondClient = await clientOf(second)
    assert.deepStrictEqual(await names(secondClient), ["Alpha", "Beta", "Gamma"])
    await create(secondClient, "Delta")
    await waitFor("Delta on the first daemon", async () =>
      (await names(firstClient)).includes("Delta") ? true : undefined,
    )

    // Leaving keeps a local copy with everything, then the copy goes its own way.
    await firstClient.close()
    await first.stop()
    const left = await runCli(["cluster", "leave", "--data-dir", dir])
    assert.strictEqual(left.code, 0, left.output)
    const alone = await startDaemon({ dataDir: dir })
    const aloneClient = await clientOf(alone)
    assert.deepStrictEqual(await names(aloneClient), ["Alpha", "Beta", "Delta", "Gamma"])
    await create(aloneClient, "LocalOnly")
    assert.include(await names(aloneClient), "LocalOnly")
    assert.notInclude(await names(secondClient), "LocalOnly")
    const status = await runCli(["cluster", "status", "--data-dir", dir])
    assert.include(status.output, "a local memory")
  }, 240_000)
})
