/**
 * A session subscribed to the knowledge graph is told of changes by `notifications/resources/updated`
 * at most one at a time (tools/McpSession.ts `tellUpdated`): while one cannot go out (a client that
 * does not read its stream), the writes made meanwhile are told by one more once it is out, not by
 * one each, and the session's bus subscription keeps being drained.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js"
import type { Transport, TransportSendOptions } from "@modelcontextprotocol/sdk/shared/transport.js"
import {
  type CallToolResult,
  type JSONRPCMessage,
  type MessageExtraInfo,
  ResourceUpdatedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js"
import { Effect, Exit, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { catalogue } from "../../src/tools/Catalogue.ts"
import { knowledgeGraphUri, startSession } from "../../src/tools/McpSession.ts"
import { openEngineClient, type TestEngine } from "../support/engineClient.ts"

let engine: TestEngine
let dir: string
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "mnemos-resource-updates-"))
  engine = await openEngineClient(dir, { clientName: "resource-updates", clientVersion: "1" })
})
afterAll(async () => {
  await engine.close()
  rmSync(dir, { recursive: true, force: true })
})

/** The server's side of a connection whose resource notifications wait until released. */
class HeldNotifications implements Transport {
  onclose?: () => void
  onerror?: (error: Error) => void
  onmessage?: <T extends JSONRPCMessage>(message: T, extra?: MessageExtraInfo) => void
  /** Notifications sent, each released by its function. */
  readonly held: Array<() => void> = []

  constructor(private readonly inner: Transport) {
    inner.onmessage = (message, extra) => this.onmessage?.(message, extra)
    inner.onclose = () => this.onclose?.()
    inner.onerror = (error) => this.onerror?.(error)
  }

  start(): Promise<void> {
    return this.inner.start()
  }

  async send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    if ("method" in message && message.method === "notifications/resources/updated")
      await new Promise<void>((resolve) => this.held.push(resolve))
    return this.inner.send(message, options)
  }

  close(): Promise<void> {
    return this.inner.close()
  }
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 300))

describe("a session subscribed to the knowledge graph", () => {
  it("has one update notification on its way at a time, and one more for the writes made meanwhile", async () => {
    const scope = Effect.runSync(Scope.make())
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair()
    const held = new HeldNotifications(serverSide)
    await engine.run(startSession(held, { tools: catalogue, transport: "test" }).pipe(Scope.provide(scope)))
    const client = new Client({ name: "resource-updates", version: "1" })
    let told = 0
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, () => {
      told++
    })
    await client.connect(clientSide)
    try {
      await client.subscribeResource({ uri: knowledgeGraphUri })
      const write = async (name: string) => {
        const result = (await client.callTool({
          name: "create_entities",
          arguments: { entities: [{ name, entityType: "test", observations: ["written"] }] },
        })) as CallToolResult
        expect(result.isError).not.toBe(true)
      }
      for (let n = 0; n < 30; n++) await write(`while held ${n}`)
      await settle()
      // Thirty writes, one notification on its way (held), none told yet.
      expect(held.held).toHaveLength(1)
      expect(told).toBe(0)
      held.held[0]!()
      await settle()
      // Out: the client is told, and one more goes for the writes made while it was held.
      expect(told).toBe(1)
      expect(held.held).toHaveLength(2)
      held.held[1]!()
      await settle()
      expect(told).toBe(2)
      expect(held.held).toHaveLength(2)
      // A later write is told again.
      await write("after")
      await settle()
      expect(held.held).toHaveLength(3)
      held.held[2]!()
      await settle()
      expect(told).toBe(3)
    } finally {
      for (const release of held.held) release()
      await client.close()
      await Effect.runPromise(Scope.close(scope, Exit.void))
    }
  })
})
