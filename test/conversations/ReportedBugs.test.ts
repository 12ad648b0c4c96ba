/**
 * Regression tests for two kernel bugs found while building the conversations store (both fixed):
 *
 * 1. LMDB keys with U+0000..U+0004 (src/stores/checkpoint/Checkpoint.ts + src/graph/GraphKeys.ts). lmdb-js's
 *    key encoding (ordered-binary 1.6) escapes characters <= U+0004 in string keys shorter than 64
 *    characters but writes longer keys raw, so a long key sorts before the short range bounds
 *    built from its own prefix, and comes back from LMDB as an array. The graph store joins key
 *    parts with U+0000: once in LMDB, a relation whose key is 64+ characters long is missed by
 *    every prefix range — open_nodes (and search_nodes, delete cascades, graph_neighbors) lose it.
 * 2. Reverse ranges (src/stores/checkpoint/Checkpoint.ts `dataView`). `KeyRange` says `start` inclusive, `end`
 *    exclusive, `reverse` = descending order, and PendingView/Overlay implement that; the LMDB
 *    view passes `reverse` to lmdb-js unchanged, which reads `start`/`end` the other way round
 *    (iteration starts at `start`), so a reverse range over committed keys is empty.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { openCheckpoint } from "../../src/stores/checkpoint/Checkpoint.ts"
import { openEngine, removeTempDirs } from "./engine.ts"

afterAll(removeTempDirs)

describe("reported bugs (outside src/conversations)", () => {
  it("graph: a relation between two 40-character names survives a restart in open_nodes", async () => {
    const first = await openEngine()
    const from = "A".repeat(40)
    const to = "B".repeat(40)
    await first.ok("create_entities", {
      entities: [
        { name: from, entityType: "thing", observations: [] },
        { name: to, entityType: "thing", observations: [] },
      ],
    })
    await first.ok("create_relations", { relations: [{ from, to, relationType: "knows" }] })
    await first.close()
    const again = await openEngine(first.dir)
    try {
      const opened = (await again.ok("open_nodes", { names: [from] })).structured as { relations: Array<unknown> }
      expect(opened.relations).toEqual([{ from, to, relationType: "knows" }])
    } finally {
      await again.close()
    }
  })

  it("checkpoint: a reverse range returns committed keys in descending order", async () => {
    const dir = mkdtempSync(join(tmpdir(), "mnemos-reverse-"))
    try {
      const checkpoint = await Effect.runPromise(openCheckpoint(join(dir, "lmdb")))
      await checkpoint.commit(
        ["a", "b", "c"].map((key) => [key, 1] as const),
        1,
        1,
      )
      const keys = [...checkpoint.view.getRange({ start: "a", end: "c", reverse: true })].map((entry) => entry.key)
      await checkpoint.close()
      expect(keys).toEqual(["b", "a"])
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
