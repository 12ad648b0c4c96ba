/**
 * An LMDB file grown from nothing in one run is mapped once, and each of its pages is resident at
 * most once (src/stores/checkpoint/LmdbMap.ts): lmdb-js's default map grows by mapping the file again
 * and keeps the earlier maps, with the pages read through them, resident. Read from /proc/self/smaps:
 * this process's own maps of the file.
 */
import { mkdtempSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import { afterAll, assert, describe, it } from "vitest"
import { openLmdbPersistence } from "../../src/search/persistence/SearchPersistence.ts"
import { openCheckpoint } from "../../src/stores/checkpoint/Checkpoint.ts"
import { lmdbMapBytes } from "../../src/stores/checkpoint/LmdbMap.ts"
import { mapsOf } from "../support/Smaps.ts"

const dirs: Array<string> = []
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

/** `file` is one map, of `lmdbMapBytes` reserved at open, holding each of its pages at most once. */
const assertOneMap = (file: string) => {
  const fileBytes = statSync(file).size
  const maps = mapsOf(file)
  assert.deepStrictEqual(
    maps.map((map) => map.bytes),
    [lmdbMapBytes],
    "one map, reserved at open",
  )
  assert.isAtMost(maps[0]!.resident, fileBytes, "each page resident once")
  return fileBytes
}

/** A pseudo-random key order, so writes land all over the tree as entity ids do. */
const scattered = (i: number) => ((i * 2_654_435_761) % 4_294_967_296).toString(36).padStart(7, "0")

describe("an LMDB file's map", () => {
  it("is one map however much the checkpoint grows in this run, its pages resident once", async () => {
    const dir = mkdtempSync(join(tmpdir(), "mnemos-lmdb-map-"))
    dirs.push(dir)
    const checkpoint = await Effect.runPromise(openCheckpoint(dir))
    const text = "y".repeat(600)
    // 150 transactions of 200 values: the file grows from 8 KiB past 20 MiB, about 8 doublings of lmdb-js's own map.
    for (let batch = 0; batch < 150; batch++)
      await checkpoint.commit(
        Array.from({ length: 200 }, (_, i) => [`kv:${scattered(batch * 200 + i)}`, { text, batch }] as const),
        batch + 1,
        1,
      )
    let read = 0
    for (const _ of checkpoint.view.getRange({ start: "kv:", end: "kv;" })) read++
    assert.strictEqual(read, 30_000)
    assert.isAbove(assertOneMap(join(dir, "data.mdb")), 20 * 1024 * 1024)
    await checkpoint.close()
  })

  it("is one map for search's persisted index too", async () => {
    const dir = mkdtempSync(join(tmpdir(), "mnemos-lmdb-map-search-"))
    dirs.push(dir)
    const persistence = openLmdbPersistence(join(dir, "lmdb"))
    const text = "z".repeat(400)
    for (let batch = 0; batch < 60; batch++) {
      for (let i = 0; i < 200; i++) {
        const id = scattered(batch * 200 + i)
        persistence.putDocument("g", { id, store: "s", project: "p", kind: "note", title: id, text, at: 1, fields: {} })
      }
      await persistence.committed()
    }
    assert.strictEqual(persistence.groupDocumentIds("s", "g").length, 12_000)
    assert.isAbove(assertOneMap(join(dir, "lmdb", "data.mdb")), 5 * 1024 * 1024)
    await persistence.close()
  })
})
