/**
 * Store keys join their parts with U+0000 (src/graph/GraphKeys.ts). lmdb-js's default
 * "ordered-binary" string keys decode a key that contains 0x00 bytes and is longer than about 62
 * bytes as an array of its parts; the checkpoint therefore stores keys as bytes it encodes itself
 * (src/stores/checkpoint/KeyCodec.ts). Found by the secret corpus test: `delete_entities` of an entity with a
 * long name and a relation used to crash the graph store on every retry.
 */
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js"
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import { type Context, Effect, Exit, Layer, Scope } from "effect"
import { assert, describe, it } from "vitest"
import * as Engine from "../../src/Engine.ts"
import { openCheckpoint } from "../../src/stores/checkpoint/Checkpoint.ts"
import { catalogue } from "../../src/tools/Catalogue.ts"
import { startSession } from "../../src/tools/McpSession.ts"
import type { SessionServices } from "../../src/tools/Tool.ts"

describe("long store keys containing U+0000", () => {
  it("come back from the checkpoint as the same strings, lone surrogates included", async () => {
    const checkpoint = await Effect.runPromise(openCheckpoint(mkdtempSync(join(tmpdir(), "mnemos-lmdb-"))))
    const keys = [
      `e\u0000default\u0000${"x".repeat(60)}`,
      `r\u0000p\u0000${"\ud83d".repeat(3)}\u0000${"y".repeat(80)}\u0000t`,
    ]
    checkpoint.commitWith(
      (writer) => {
        for (const [index, key] of keys.entries()) writer.put(key, index)
      },
      1,
      1,
    )
    const entries = [...checkpoint.view.getRange({ start: "\u0000", end: "\uffff" })]
    await checkpoint.close()
    assert.deepStrictEqual(
      entries.map((entry) => entry.key),
      [...keys].sort(),
    )
  })

  it("delete_entities of an entity with a 60-character name and an incoming relation succeeds", async () => {
    const dir = mkdtempSync(join(tmpdir(), "mnemos-longkeys-"))
    const scope = Effect.runSync(Scope.make())
    const context = (await Effect.runPromise(
      Layer.buildWithScope(
        Layer.fresh(Engine.layer({ dataDir: dir, command: "test", search: { thread: false } })),
        scope,
      ),
    )) as Context.Context<SessionServices>
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair()
    await Effect.runPromise(
      startSession(serverSide, { tools: catalogue, transport: "test" }).pipe(
        Scope.provide(scope),
        Effect.provideContext(context),
      ),
    )
    const client = new Client({ name: "long-keys", version: "0" })
    await client.connect(clientSide)
    const call = async (name: string, args: Record<string, unknown>) =>
      (await client.callTool({ name, arguments: args })) as CallToolResult
    try {
      const long = "an entity whose name is long enough to make a long store key"
      await call("create_entities", {
        entities: [
          { name: long, entityType: "t", observations: [] },
          { name: "b", entityType: "t", observations: [] },
        ],
      })
      await call("create_relations", { relations: [{ from: "b", to: long, relationType: "knows" }] })
      // Let the acknowledged writes reach LMDB (until then reads see them from memory, as strings).
      await new Promise((resolve) => setTimeout(resolve, 500))
      const deleted = await call("delete_entities", { entityNames: [long] })
      assert.isFalse(deleted.isError === true, JSON.stringify(deleted.content))
    } finally {
      await client.close().catch(() => undefined)
      await Effect.runPromise(Scope.close(scope, Exit.void))
    }
  }, 60_000)
})
