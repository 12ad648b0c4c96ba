/**
 * `mnemos serve` as a process: what it does when its port is taken, that /ping answers before
 * the search index is warm, and that SIGTERM answers the requests already received (provably in
 * flight: each is parked on a roots/list request the server sent back to its client), refuses
 * new ones, flushes and exits 0 — with every acknowledged write there after a restart.
 */
import { createSocket } from "node:dgram"
import { createServer, type Server } from "node:net"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { ListRootsRequestSchema } from "@modelcontextprotocol/sdk/types.js"
import { afterAll, describe, expect, it } from "vitest"
import {
  apiGet,
  callTool,
  cleanup,
  clientTransport,
  connectClient,
  freePort,
  getJson,
  runCli,
  startDaemon,
  tempDir,
  waitFor,
} from "./harness.ts"

afterAll(cleanup)

const range = (count: number) => Array.from({ length: count }, (_, index) => index)

describe("mnemos serve and its port", () => {
  it("a port held by the daemon of the same data directory: says so and exits 0", async () => {
    const daemon = await startDaemon()
    const second = await runCli(["serve", "--data-dir", daemon.dataDir, "--port", String(daemon.port)])
    expect(second.code).toBe(0)
    expect(second.output).toContain(`already serves ${daemon.dataDir}`)
    expect(second.output).toContain(`pid ${daemon.pid}`)
    expect((await getJson(`${daemon.url}/ping`)).status).toBe(200)
  })

  it("a port held by the daemon of another data directory: exits 1 naming it", async () => {
    const daemon = await startDaemon()
    const other = tempDir()
    const second = await runCli(["serve", "--data-dir", other, "--port", String(daemon.port)])
    expect(second.code).toBe(1)
    expect(second.output).toMatch(new RegExp(`port ${daemon.port} .*in use by the mnemos daemon of ${daemon.dataDir}`))
  })

  it("a port held by another program: exits non-zero with a clear message", async () => {
    const port = await freePort()
    const squatter: Server = createServer((socket) => socket.destroy())
    await new Promise<void>((resolve) => squatter.listen(port, "127.0.0.1", resolve))
    try {
      const result = await runCli(["serve", "--data-dir", tempDir(), "--port", String(port)])
      expect(result.code).not.toBe(0)
      expect(result.output).toContain(`port ${port} on 127.0.0.1 is in use by another program`)
      expect(result.output).not.toContain("internal error")
    } finally {
      await new Promise((resolve) => squatter.close(resolve))
    }
  })

  it("a UDP port already taken: the daemon serves without editor focus and says so", async () => {
    const port = await freePort()
    const squatter = createSocket("udp4")
    await new Promise<void>((resolve) => squatter.bind(port + 1, "127.0.0.1", resolve))
    try {
      const daemon = await startDaemon({ port })
      expect(daemon.output()).toMatch(/editor focus: +disabled \(cannot bind 127\.0\.0\.1:\d+: .*EADDRINUSE/)
      const stats = await apiGet<{ telemetry: { udp: { port: number | null } } }>(daemon, "/api/stats")
      expect(stats.telemetry.udp.port).toBeNull()
      const client = await connectClient("ws", daemon.url)
      expect((await callTool(client, "search_nodes", { query: "x" })).isError).toBe(false)
    } finally {
      squatter.close()
    }
  })

  it("/ping answers before the search index is warm", async () => {
    const first = await startDaemon()
    const writer = await connectClient("ws", first.url)
    await callTool(writer, "create_entities", {
      entities: range(2_000).map((index) => ({ name: `warm-${index}`, entityType: "t", observations: [`o ${index}`] })),
    })
    await writer.close()
    expect((await first.stop("SIGTERM")).code).toBe(0)
    const again = await startDaemon({ dataDir: first.dataDir, port: first.port })
    // The first answer the daemon gives, before anything searched: the index is still cold.
    const ping = await getJson(`${again.url}/ping`)
    expect(ping.status).toBe(200)
    const cold = await apiGet<{ search: { entitiesIndexed: number } }>(again, "/api/stats")
    expect(cold.search.entitiesIndexed).toBe(0)
    const reader = await connectClient("ws", again.url)
    const found = (await callTool(reader, "search_nodes", { query: "warm-1999" })).structured as {
      entities: Array<unknown>
    }
    expect(found.entities).toHaveLength(1)
    const warm = await apiGet<{ search: { entitiesIndexed: number } }>(again, "/api/stats")
    expect(warm.search.entitiesIndexed).toBe(2_000)
  })
})

describe("SIGTERM", () => {
  it("answers every request already received, refuses new ones, flushes and exits 0", async () => {
    const daemon = await startDaemon()
    const agents = 20
    let releaseRoots!: () => void
    const rootsReleased = new Promise<void>((resolve) => {
      releaseRoots = resolve
    })
    let parked = 0
    // Each client's first tool call makes the server ask it for its roots; the client holds that
    // answer back, so the tool call is provably received and not yet answered.
    const clients = await Promise.all(
      range(agents).map(async (index) => {
        const client = new Client({ name: `drain-${index}`, version: "1" }, { capabilities: { roots: {} } })
        client.setRequestHandler(ListRootsRequestSchema, async () => {
          parked++
          await rootsReleased
          return { roots: [{ uri: "file:///tmp/drain-test", name: "drain-test" }] }
        })
        await client.connect(await clientTransport(index % 2 === 0 ? "ws" : "streamable-http", daemon.url))
        return client
      }),
    )
    const calls = clients.map((client, index) =>
      callTool(client, "create_entities", {
        entities: [{ name: `drained-${index}`, entityType: "t", observations: [`in flight at SIGTERM`] }],
      }),
    )
    await waitFor("every call to be parked on roots/list", () => (parked === agents ? true : undefined))

    const exited = daemon.stop("SIGTERM", 30_000)
    await waitFor("the daemon to begin shutting down", () =>
      daemon.output().includes("SIGTERM: shutting down") ? true : undefined,
    )
    // A request that arrives now is not taken on: the connection closes under it.
    const late = callTool(clients[0]!, "create_entities", {
      entities: [{ name: "too-late", entityType: "t", observations: [] }],
    }).then(
      () => "answered",
      (error: unknown) => String(error),
    )
    await new Promise((resolve) => setTimeout(resolve, 200))
    releaseRoots()

    const results = await Promise.all(calls)
    for (const [index, result] of results.entries()) {
      expect(result.isError, result.text).toBe(false)
      expect(result.structured).toEqual({
        entities: [{ name: `drained-${index}`, entityType: "t", observations: ["in flight at SIGTERM"] }],
      })
    }
    expect(await exited).toEqual({ code: 0, signal: null })
    expect(await late).toMatch(/Connection closed|fetch failed|ECONNREFUSED|SSE stream disconnected/i)

    const restarted = await startDaemon({ dataDir: daemon.dataDir, port: daemon.port })
    const checker = new Client({ name: "drain-check", version: "1" }, { capabilities: { roots: {} } })
    checker.setRequestHandler(ListRootsRequestSchema, async () => ({
      roots: [{ uri: "file:///tmp/drain-test", name: "drain-test" }],
    }))
    await checker.connect(await clientTransport("ws", restarted.url))
    const graph = (await callTool(checker, "read_graph", {})).structured as { entities: Array<{ name: string }> }
    expect(graph.entities.map((entity) => entity.name).sort()).toEqual(
      range(agents)
        .map((index) => `drained-${index}`)
        .sort(),
    )
    await checker.close()
  })
})
