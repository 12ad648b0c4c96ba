/**
 * The same MCP conversation over every transport gives the same answers: stdio (embedded
 * `serve --stdio`, and the `mnemos mcp` shim), Streamable HTTP, legacy SSE and WebSocket, each
 * driven by the SDK client. Each client offers a different root, so each works in its own
 * project of the one daemon (which also proves server→client requests — roots/list — over every
 * transport), and the transcripts must be identical byte for byte.
 */

import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { ListRootsRequestSchema, ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  apiGet,
  authHeaders,
  callTool,
  cleanup,
  clientTransport,
  type DaemonProcess,
  getJson,
  networkTransports,
  startDaemon,
  tempDir,
  waitFor,
} from "./harness.ts"

type Kind = "stdio-embedded" | "stdio-shim" | "streamable-http" | "sse" | "ws"
const kinds: ReadonlyArray<Kind> = ["stdio-embedded", "stdio-shim", ...networkTransports]

let daemon: DaemonProcess
const clients = new Map<Kind, Client>()
const updates = new Map<Kind, Array<string>>()

/** Offers a root named after the transport, so each client works in its own project. */
const offerRoot = (client: Client, kind: Kind) => {
  client.setRequestHandler(ListRootsRequestSchema, async () => ({
    roots: [{ uri: `file:///tmp/parity-${kind}`, name: `parity-${kind}` }],
  }))
  const seen: Array<string> = []
  updates.set(kind, seen)
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (notification) => {
    seen.push(notification.params.uri)
  })
}

const connect = async (kind: Kind): Promise<Client> => {
  const capabilities = { capabilities: { roots: { listChanged: true } } }
  if (kind === "stdio-embedded" || kind === "stdio-shim") {
    // The harness's stdio clients have no roots; build these by hand with the same transport.
    const { StdioClientTransport } = await import("@modelcontextprotocol/sdk/client/stdio.js")
    const { cliArgs, repoRoot } = await import("./harness.ts")
    const args =
      kind === "stdio-embedded"
        ? cliArgs("serve", "--stdio", "--data-dir", tempDir())
        : cliArgs("mcp", "--data-dir", daemon.dataDir, "--port", String(daemon.port))
    const client = new Client({ name: `parity-${kind}`, version: "1.0.0" }, capabilities)
    offerRoot(client, kind)
    await client.connect(new StdioClientTransport({ command: process.execPath, args, cwd: repoRoot, stderr: "pipe" }))
    return client
  }
  const client = new Client({ name: `parity-${kind}`, version: "1.0.0" }, capabilities)
  offerRoot(client, kind)
  await client.connect(await clientTransport(kind, daemon.url))
  return client
}

beforeAll(async () => {
  daemon = await startDaemon()
  for (const kind of kinds) clients.set(kind, await connect(kind))
})
afterAll(async () => {
  await Promise.all([...clients.values()].map((client) => client.close().catch(() => undefined)))
  await cleanup()
})

/** One conversation: every official tool, a failure, a validation error and the graph at the end. */
const conversation = async (client: Client) => {
  const steps: Array<[string, Record<string, unknown>]> = [
    [
      "create_entities",
      {
        entities: [
          { name: "Ada", entityType: "person", observations: ["wrote the first program"] },
          { name: "Engine", entityType: "machine", observations: ["analytical"] },
          { name: "Babbage", entityType: "person", observations: [] },
        ],
      },
    ],
    [
      "create_relations",
      {
        relations: [
          { from: "Ada", to: "Engine", relationType: "programmed" },
          { from: "Babbage", to: "Engine", relationType: "designed" },
        ],
      },
    ],
    ["add_observations", { observations: [{ entityName: "Ada", contents: ["born 1815", "wrote the first program"] }] }],
    ["add_observations", { observations: [{ entityName: "Nobody", contents: ["x"] }] }],
    ["create_entities", { entities: [{ name: 42 }] }],
    ["search_nodes", { query: "PERSON" }],
    ["open_nodes", { names: ["Ada", "Engine", "Missing"] }],
    ["delete_observations", { deletions: [{ entityName: "Ada", observations: ["born 1815"] }] }],
    ["delete_relations", { relations: [{ from: "Babbage", to: "Engine", relationType: "designed" }] }],
    ["delete_entities", { entityNames: ["Babbage"] }],
    ["read_graph", {}],
  ]
  const transcript: Array<unknown> = []
  for (const [name, args] of steps) transcript.push({ name, ...(await callTool(client, name, args)) })
  return transcript
}

describe("every transport answers the same", () => {
  it("tools/list is identical over stdio, Streamable HTTP, SSE and WebSocket", async () => {
    const lists = await Promise.all(kinds.map(async (kind) => (await clients.get(kind)!.listTools()).tools))
    expect(lists[0]!.length).toBeGreaterThanOrEqual(9)
    for (const list of lists.slice(1)) expect(list).toEqual(lists[0])
  })

  it("the same tool calls give the same answers, byte for byte, each in its own project", async () => {
    const transcripts = await Promise.all(kinds.map((kind) => conversation(clients.get(kind)!)))
    for (const [index, transcript] of transcripts.entries()) {
      expect(JSON.stringify(transcript), `${kinds[index]} differs from ${kinds[0]}`).toBe(
        JSON.stringify(transcripts[0]),
      )
    }
    // The expected outcomes, so that "identical" cannot mean "identically broken".
    const outcomes = (transcripts[0] as Array<{ name: string; isError: boolean }>).map((step) => step.isError)
    expect(outcomes).toEqual([false, false, false, true, true, false, false, false, false, false, false])
    const graph = (transcripts[0] as Array<{ structured: unknown }>).at(-1)!.structured
    expect(graph).toEqual({
      entities: [
        { name: "Ada", entityType: "person", observations: ["wrote the first program"] },
        { name: "Engine", entityType: "machine", observations: ["analytical"] },
      ],
      relations: [{ from: "Ada", to: "Engine", relationType: "programmed" }],
    })
    // Each transport wrote into its own project (its root), not into "default".
    const stats = await apiGet<{ projects: Array<{ project: string }> }>(daemon, "/api/stats")
    expect(stats.projects.map((entry) => entry.project).sort()).toEqual(
      kinds
        .filter((kind) => kind !== "stdio-embedded")
        .map((kind) => `parity-${kind}`)
        .sort(),
    )
  })

  it("resource subscriptions notify over every transport (the Streamable HTTP GET stream included)", async () => {
    for (const kind of kinds) {
      const client = clients.get(kind)!
      const before = updates.get(kind)!.length
      await client.subscribeResource({ uri: "memory://knowledge-graph" })
      await callTool(client, "create_entities", {
        entities: [{ name: `notify-${kind}`, entityType: "t", observations: [] }],
      })
      await waitFor(`resources/updated over ${kind}`, () =>
        updates.get(kind)!.slice(before).includes("memory://knowledge-graph") ? true : undefined,
      )
      const read = await client.readResource({ uri: "memory://knowledge-graph" })
      expect((read.contents[0] as { text: string }).text).toContain(`notify-${kind}`)
    }
  })

  it("the daemon lists the telemetry resources beside the graph; embedded stdio lists only the graph", async () => {
    for (const kind of kinds) {
      const uris = (await clients.get(kind)!.listResources()).resources.map((resource) => resource.uri)
      expect(uris).toEqual(
        kind === "stdio-embedded"
          ? ["memory://knowledge-graph"]
          : ["memory://knowledge-graph", "memory://terminal/recent", "memory://editor/active"],
      )
    }
  })

  it("roots are asked for on a session's very first call, before the Streamable HTTP GET stream is open", async () => {
    // The server's roots/list must travel with the call that needs it (on that POST's response
    // stream): sent to the standalone GET stream, it is lost while that stream is not open yet,
    // and the call would silently land in the "default" project after a 5 s timeout.
    const firstCallers = await Promise.all(
      [0, 1, 2, 3, 4].map(async (index) => {
        const client = new Client({ name: `first-call-${index}`, version: "1.0.0" }, { capabilities: { roots: {} } })
        client.setRequestHandler(ListRootsRequestSchema, async () => ({
          roots: [{ uri: `file:///tmp/first-call-${index}`, name: `first-call-${index}` }],
        }))
        await client.connect(await clientTransport("streamable-http", daemon.url))
        return client
      }),
    )
    await Promise.all(
      firstCallers.map((client) =>
        callTool(client, "create_entities", { entities: [{ name: "first", entityType: "t", observations: [] }] }),
      ),
    )
    const stats = await apiGet<{ projects: Array<{ project: string }> }>(daemon, "/api/stats")
    const projects = stats.projects.map((entry) => entry.project)
    expect(projects).not.toContain("default")
    // Each call landed in its client's root: the roots/list answer came back with the call, not
    // after the timeout that falls back to "default".
    for (const index of [0, 1, 2, 3, 4]) expect(projects).toContain(`first-call-${index}`)
    await Promise.all(firstCallers.map((client) => client.close()))
  })

  it("Streamable HTTP: DELETE ends the session; its id then answers 404 (start a new session)", async () => {
    const transport = (await clientTransport("streamable-http", daemon.url)) as StreamableHTTPClientTransport
    const client = new Client({ name: "parity-delete", version: "1.0.0" })
    await client.connect(transport)
    const sessionId = transport.sessionId
    expect(sessionId).toBeDefined()
    expect((await callTool(client, "search_nodes", { query: "x" })).isError).toBe(false)
    await transport.terminateSession()
    const after = await getJson(`${daemon.url}/mcp`, {
      method: "POST",
      headers: {
        ...authHeaders(daemon.dataDir),
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-session-id": sessionId!,
        "mcp-protocol-version": "2025-06-18",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }),
    })
    expect(after.status).toBe(404)
    await client.close()
  })
})
