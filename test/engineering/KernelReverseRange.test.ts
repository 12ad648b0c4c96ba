/**
 * `KeyRange` says `start` is inclusive and `end` exclusive whatever the direction. lmdb-js walks a
 * reverse range from a high `start` down to `end`, so the checkpoint's view translates; before it
 * did, a reverse read returned the right keys while changes were pending and none once LMDB had
 * committed them.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { openCheckpoint } from "../../src/stores/checkpoint/Checkpoint.ts"

const dir = mkdtempSync(join(tmpdir(), "mnemos-reverse-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe("Checkpoint view, reverse ranges", () => {
  it.live("a committed reverse range read returns the range's keys, last first, start inclusive, end exclusive", () =>
    Effect.gen(function* () {
      const checkpoint = yield* openCheckpoint(join(dir, "lmdb"))
      yield* Effect.promise(() =>
        checkpoint.commit(
          [
            ["k1", 1],
            ["k2", 2],
            ["k3", 3],
          ],
          3,
          7,
        ),
      )
      const keys = [...checkpoint.view.getRange({ start: "k", end: "l", reverse: true })].map((entry) => entry.key)
      const bounded = [...checkpoint.view.getRange({ start: "k1", end: "k3", reverse: true })].map((entry) => entry.key)
      const limited = [...checkpoint.view.getRange({ start: "k", end: "l", reverse: true, limit: 2 })].map(
        (entry) => entry.key,
      )
      yield* Effect.promise(() => checkpoint.close())
      assert.deepStrictEqual(keys, ["k3", "k2", "k1"])
      assert.deepStrictEqual(bounded, ["k2", "k1"])
      assert.deepStrictEqual(limited, ["k3", "k2"])
    }),
  )
})
