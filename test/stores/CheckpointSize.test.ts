/**
 * A checkpoint's size is the pages its data uses: what `conversations_compact` reports before and
 * after, and the dashboard's disk figure. (The root database's own statistics count only the page
 * naming the others.)
 */
import { mkdtempSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import { afterAll, assert, describe, it } from "vitest"
import { openCheckpoint } from "../../src/stores/checkpoint/Checkpoint.ts"

const dirs: Array<string> = []
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

describe("Checkpoint.sizeBytes", () => {
  it("counts the pages of the data it holds, and less once the data is deleted", async () => {
    const dir = mkdtempSync(join(tmpdir(), "mnemos-checkpoint-size-"))
    dirs.push(dir)
    const checkpoint = await Effect.runPromise(openCheckpoint(dir))
    const empty = checkpoint.sizeBytes()
    const text = "x".repeat(1000)
    const changes = Array.from({ length: 2000 }, (_, i) => [`kv:${String(i).padStart(5, "0")}`, { text }] as const)
    await checkpoint.commit(changes, 1, 1)
    const full = checkpoint.sizeBytes()
    // 2,000 values of 1 kB each: at least 2 MB of pages, and no more than the file holds.
    assert.isAtLeast(full - empty, 2_000_000)
    assert.isAtMost(full, statSync(join(dir, "data.mdb")).size)
    await checkpoint.commit(
      changes.map(([key]) => [key, undefined] as const),
      2,
      1,
    )
    assert.isBelow(checkpoint.sizeBytes(), full / 10)
    await checkpoint.close()
  })
})
