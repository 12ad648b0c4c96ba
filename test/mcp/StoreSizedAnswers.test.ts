/**
 * Answers that grow with the store (`read_graph`) are made at most `storeSizedAnswersMax` at a
 * time in the whole process, whatever the sessions asking (tools/McpSession.ts): the others wait
 * their turn and are all answered; other tools are not held.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js"
import { Effect, Exit, Schema, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { catalogue } from "../../src/tools/Catalogue.ts"
import { startSession, storeSizedAnswersMax } from "../../src/tools/McpSession.ts"
import { makeTool, type SessionServices, type Tool } from "../../src/tools/Tool.ts"
import { openEngineClient, type TestEngine } from "../support/engineClient.ts"

let engine: TestEngine
let dir: string
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "mnemos-store-sized-"))
  engine = await openEngineClient(dir, { clientName: "store-sized", clientVersion: "1" })
})
afterAll(async () => {
  await engine.close()
  rmSync(dir, { recursive: true, force: true })
})

/** A tool whose calls wait at a gate, counting how many run at once. */
const gatedTool = (name: string, answerScalesWithStore: boolean) => {
  const state: { running: number; most: number; release: () => void } = {
    running: 0,
    most: 0,
    release: () => undefined,
  }
  const gate = new Promise<void>((resolve) => {
    state.release = resolve
  })
  const tool = makeTool({
    definition: { name, description: name, inputSchema: { type: "object", properties: {} } },
    toolset: "graph",
    errorFormat: "plain",
    args: Schema.Struct({}),
    answerScalesWithStore,
    run: () =>
      Effect.promise(async () => {
        state.running++
        state.most = Math.max(state.most, state.running)
        await gate
        state.running--
        return { structured: { ok: true } }
      }),
  })
  // A tool list holds tools of any arguments (as the catalogue does).
  return { tool: tool as unknown as Tool<never, SessionServices>, state }
}

/** `count` clients on sessions of their own, each calling `name` once, at once. */
const callAtOnce = async (tools: ReadonlyArray<Tool<never, SessionServices>>, name: string, count: number) => {
  const scope = Effect.runSync(Scope.make())
  const clients = await Promise.all(
    Array.from({ length: count }, async () => {
      const [clientSide, serverSide] = InMemoryTransport.createLinkedPair()
      await engine.run(startSession(serverSide, { tools, transport: "test" }).pipe(Scope.provide(scope)))
      const client = new Client({ name: "store-sized", version: "1" })
      await client.connect(clientSide)
      return client
    }),
  )
  const calls = clients.map((client) => client.callTool({ name, arguments: {} }))
  return {
    calls,
    close: async () => {
      for (const client of clients) await client.close()
      await Effect.runPromise(Scope.close(scope, Exit.void))
    },
  }
}

const settle = async () => {
  for (let turn = 0; turn < 10; turn++) await new Promise((resolve) => setTimeout(resolve, 10))
}

describe("answers that grow with the store", () => {
  it("read_graph says its answer grows with the store", () => {
    expect(catalogue.find((tool) => tool.definition.name === "read_graph")?.answerScalesWithStore).toBe(true)
  })

  it("are made a few at a time across sessions, and every one is answered", async () => {
    const { tool, state } = gatedTool("whole_store", true)
    const { calls, close } = await callAtOnce([tool], "whole_store", 6)
    await settle()
    expect(state.running).toBe(storeSizedAnswersMax)
    state.release()
    const answers = await Promise.all(calls)
    expect(answers.every((answer) => answer.isError !== true)).toBe(true)
    expect(state.most).toBe(storeSizedAnswersMax)
    await close()
  })

  it("do not hold other tools back", async () => {
    const { tool, state } = gatedTool("small_answer", false)
    const { calls, close } = await callAtOnce([tool], "small_answer", 6)
    await settle()
    expect(state.running).toBe(6)
    state.release()
    await Promise.all(calls)
    await close()
  })
})
