/**
 * A data directory that is a replica of a shared memory opens only in it: a command that would open
 * its stores alone (import, export, compact, gate) is refused with a message naming the shared memory,
 * before anything in the directory changes.
 */
import { mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer } from "effect"
import { storesLayer } from "../../src/Engine.ts"
import { DataDirError } from "../../src/stores/datadir/DataDir.ts"
import { writeMembership } from "../../src/stores/shared/SharedMemory.ts"

describe("a replica's data directory alone", () => {
  it("is not opened without its shared memory", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "mnemos-member-"))
    try {
      writeMembership(dataDir, {
        prefix: "team",
        servers: ["nats://127.0.0.1:4222"],
        daemonId: "laptop-1",
        joinedAt: new Date().toISOString(),
      })
      const before = readdirSync(dataDir).sort()
      const exit = await Effect.runPromiseExit(
        Effect.scoped(Layer.build(storesLayer({ dataDir, command: "mnemos export" }))),
      )
      assert.isTrue(Exit.isFailure(exit))
      const error = Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined
      assert.instanceOf(error, DataDirError)
      assert.include((error as DataDirError).message, 'shared memory "team"')
      assert.include((error as DataDirError).message, "mnemos cluster leave")
      assert.deepStrictEqual(readdirSync(dataDir).sort(), before)
    } finally {
      rmSync(dataDir, { recursive: true, force: true })
    }
  })
})
