/**
 * An LMDB file grown from nothing in one run is mapped once, and each of its pages is resident at
 * most once (src/stores/checkpoint/LmdbMap.ts): lmdb-js's default map grows by mapping the file again
 * and keeps the earlier maps, with the pages read through them, resident. Read from /proc/self/smaps:
 * this process's own maps of the file.
 */
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import { afterAll, assert, describe, it } from "vitest"
import { openLmdbPersistence } from "../../src/search/persistence/SearchPersistence.ts"
import { openCheckpoint } from "../../src/stores/checkpoint/Checkpoint.ts"
import { lmdbMapBytes } from "../../src/stores/checkpoint/LmdbMap.ts"

const dirs: Array<string> = []
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

/** Each map of `file` in this process: its size and resident bytes. */
const mapsOf = (file: string): Array<{ readonly bytes: number; readonly resident: number }> => {
  const maps: Array<{ bytes: number; resident: number }> = []
  let current: { bytes: number; resident: number } | undefined
  for (const line of readFileSync("/proc/self/smaps", "utf8").split("\n")) {
    const header = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$/.exec(line)
    if (header !== null) {
      current =
        header[3] === file
          ? { bytes: Number.parseInt(header[2]!, 16) - Number.parseInt(header[1]!, 16), resident: 0 }
          : undefined
      if (current !== undefined) maps.push(current)
    } else if (current !== undefined) {
      const rss = /^Rss:\s+(\d+) kB$/.exec(line)
      if (rss !== null) current.resident += Number(rss[1]) * 1024
    }
  }
  return maps
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
    const file = join(dir, "data.mdb")
    const fileBytes = statSync(file).size
    assert.isAbove(fileBytes, 20 * 1024 * 1024)
    const maps = mapsOf(file)
    assert.deepStrictEqual(
      maps.map((map) => map.bytes),
      [lmdbMapBytes],
      "one map, reserved at open",
    )
    assert.isAtMost(maps[0]!.resident, fileBytes, "each page resident once")
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
    const file = join(dir, "lmdb", "data.mdb")
    const fileBytes = statSync(file).size
    assert.isAbove(fileBytes, 5 * 1024 * 1024)
    const maps = mapsOf(file)
    assert.deepStrictEqual(
      maps.map((map) => map.bytes),
      [lmdbMapBytes],
    )
    assert.isAtMost(maps[0]!.resident, fileBytes)
    await persistence.close()
  })
})
