/**
 * The error codes a caller cannot cause by its arguments: IO_ERROR (a failed fdatasync on a
 * simulated disk; the write is not applied, the store restarts and health turns DEGRADED), BUSY
 * (a store that is shutting down), INTERNAL_ERROR (a defect: the conversations store missing from
 * the engine), and how every store and domain failure maps to the seed's codes. CORRUPT_STORE is
 * shown on a real corrupted log in Protocol.test.ts.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type Context, Effect, Exit, Layer, Schema, Scope } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import * as Router from "../../src/actors/Router.ts"
import { healthReport } from "../../src/conversations/ConversationHealth.ts"
import { conversationStore, MessageRejected } from "../../src/conversations/ConversationStore.ts"
import { GenerationRefused } from "../../src/conversations/Generations.ts"
import { graphStore } from "../../src/graph/GraphStore.ts"
import * as EventBus from "../../src/stores/EventBus.ts"
import { StoreError } from "../../src/stores/StoreError.ts"
import { conversationTools, toConversationToolError } from "../../src/tools/ConversationTools.ts"
import type { ToolCaller, ToolError, ToolOutput } from "../../src/tools/Tool.ts"
import * as Sim from "../support/SimulatedDisk.ts"
import { openEngine, removeTempDirs } from "./engine.ts"

afterAll(removeTempDirs)

const caller: ToolCaller = { project: "default", client: "failures-test" }

/** Runs a tool's handler directly (as the MCP session does after decoding its arguments). */
const runTool = (name: string, args: unknown) => {
  const tool = conversationTools.find((candidate) => candidate.definition.name === name)!
  const decoded = Schema.decodeUnknownSync(tool.args)(args)
  return Effect.exit(tool.run(decoded as never, caller))
}
const codeOf = (exit: Exit.Exit<ToolOutput, ToolError>): string => {
  if (Exit.isSuccess(exit)) return "OK"
  const reason = exit.cause.reasons.find((item) => item._tag === "Fail")
  return reason !== undefined && reason._tag === "Fail" ? reason.error.code : `defect: ${String(exit.cause)}`
}

describe("IO_ERROR", () => {
  it("a failed fdatasync answers IO_ERROR, applies nothing, and leaves health DEGRADED while the store serves on", async () => {
    const dir = mkdtempSync(join(tmpdir(), "mnemos-conv-io-"))
    const disk = new Sim.SimulatedDisk({ seed: 7 })
    const scope = Effect.runSync(Scope.make())
    try {
      const layer = Router.layer({
        dataDir: dir,
        stores: [conversationStore],
        storeOptions: { restartBackoffMsBase: 1, restartBackoffMsMax: 5 },
      }).pipe(Layer.provide(Layer.merge(EventBus.layer, Sim.layer(disk))))
      const context: Context.Context<Router.Router> = await Effect.runPromise(Layer.buildWithScope(layer, scope))
      const run = <A, E>(effect: Effect.Effect<A, E, Router.Router>) =>
        Effect.runPromise(Effect.provideContext(effect, context))
      const write = (content: string) => run(runTool("write_message", { session_id: "io", role: "user", content }))

      expect(codeOf(await write("before the fault"))).toBe("OK")
      disk.failAfter(0, { op: "fdatasync" })
      const failed = await write("lost to the fault")
      expect(codeOf(failed)).toBe("IO_ERROR")
      expect(codeOf(await write("after the restart"))).toBe("OK")

      const history = await run(runTool("read_messages", { session_id: "io" }))
      expect(Exit.isSuccess(history)).toBe(true)
      const contents = (
        Exit.isSuccess(history) ? (history.value.structured.history as Array<{ content: string }>) : []
      ).map((message) => message.content)
      expect(contents).toEqual(["before the fault", "after the restart"])
      const health = await run(runTool("get_system_health", {}))
      const report = Exit.isSuccess(health) ? health.value.structured : {}
      expect(report).toMatchObject({ status: "DEGRADED", active_messages: 2, snapshot_valid: true })
      expect(report.last_error).toMatch(/Fsync|fdatasync|Io/i)
    } finally {
      await Effect.runPromise(Scope.close(scope, Exit.void))
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe("BUSY", () => {
  it("a call to a store that is shutting down answers BUSY", async () => {
    const engine = await openEngine()
    await engine.ok("write_message", { session_id: "busy", role: "user", content: "hello" })
    await engine.close()
    expect(
      codeOf(await engine.run(runTool("write_message", { session_id: "busy", role: "user", content: "late" }))),
    ).toBe("BUSY")
    expect(codeOf(await engine.run(runTool("read_messages", { session_id: "busy" })))).toBe("BUSY")
  })
})

describe("INTERNAL_ERROR", () => {
  it("a defect (here: an engine without the conversations store) is answered with the envelope and INTERNAL_ERROR", async () => {
    const engine = await openEngine(undefined, [graphStore])
    try {
      const reply = await engine.call("write_message", { session_id: "x", role: "user", content: "y" })
      expect(reply.isError).toBe(true)
      expect(reply.json).toEqual({
        status: "ERROR",
        error: { code: "INTERNAL_ERROR", message: "internal error: the call failed unexpectedly" },
      })
    } finally {
      await engine.close()
    }
  })
})

describe("error mapping", () => {
  it("maps every store and domain failure to the seed's code", () => {
    const store = (reason: StoreError["reason"]) => new StoreError({ store: "conversations", reason, message: reason })
    expect(toConversationToolError(store("Corrupt")).code).toBe("CORRUPT_STORE")
    expect(toConversationToolError(store("WriteFailed")).code).toBe("IO_ERROR")
    expect(toConversationToolError(store("Unavailable")).code).toBe("BUSY")
    expect(toConversationToolError(store("ShuttingDown")).code).toBe("BUSY")
    expect(toConversationToolError(new MessageRejected({ reason: "NotFound", message: "" })).code).toBe("NOT_FOUND")
    expect(toConversationToolError(new MessageRejected({ reason: "Conflict", message: "" })).code).toBe("CONFLICT")
    expect(toConversationToolError(new MessageRejected({ reason: "Invalid", message: "" })).code).toBe(
      "VALIDATION_ERROR",
    )
    expect(toConversationToolError(new GenerationRefused({ reason: "Busy", message: "" })).code).toBe("BUSY")
    expect(toConversationToolError(new GenerationRefused({ reason: "Invalid", message: "" })).code).toBe(
      "VALIDATION_ERROR",
    )
  })

  it("health is DEGRADED with any error on record or a store that is not running", () => {
    const running = {
      name: "conversations",
      state: "running" as const,
      restarts: 0,
      appliedSeq: 3,
      mailboxDepth: 0,
      mappedPagesReleased: 0,
    }
    expect(healthReport(running, undefined, undefined, 0).status).toBe("DEGRADED")
    expect(healthReport({ ...running, lastError: "boom" }, undefined, undefined, 0)).toMatchObject({
      status: "DEGRADED",
      last_error: "boom",
    })
    expect(
      healthReport({ ...running, state: "corrupt", lastError: "bad record" }, undefined, undefined, 0),
    ).toMatchObject({
      status: "DEGRADED",
      snapshot_valid: false,
    })
  })
})
