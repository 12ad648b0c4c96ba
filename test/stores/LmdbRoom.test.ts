/**
 * The room a checkpoint commit asks of its disk (src/stores/checkpoint/LmdbRoom.ts) bounds what
 * the commit really adds to LMDB's file: random transactions (small, inline-sized and overflow
 * values, updates and removals, over a tree that grows to several levels) into an environment
 * opened as the checkpoint opens its own, each file's growth measured against the bound computed
 * before it. A bound below a real growth would let LMDB meet a full disk mid-write, where lmdb-js
 * corrupts its heap.
 */
import { execFileSync } from "node:child_process"
import { mkdtempSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import fc from "fast-check"
import { asBinary, open } from "lmdb"
import { afterAll, assert, describe, it } from "vitest"
import { keyEncoder } from "../../src/stores/checkpoint/KeyCodec.ts"
import { lmdbMapOptions } from "../../src/stores/checkpoint/LmdbMap.ts"
import { freeBytes, noRoomFor, type TreeShape, transactionGrowthBound } from "../../src/stores/checkpoint/LmdbRoom.ts"

const dirs: Array<string> = []
const tempDir = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  dirs.push(dir)
  return dir
}
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

const seed = Number(process.env.MNEMOS_FC_SEED ?? Date.now() % 1_000_000)
console.log(`LmdbRoom fast-check seed: ${seed} (replay with MNEMOS_FC_SEED=${seed})`)

/** One write: a key out of a few thousand (so updates and removals hit), and a value's length, or a removal. */
const write = fc.record({
  key: fc.integer({ min: 0, max: 5_000 }),
  valueBytes: fc.oneof(
    { weight: 8, arbitrary: fc.integer({ min: 1, max: 300 }) },
    { weight: 3, arbitrary: fc.integer({ min: 300, max: 3_000 }) },
    { weight: 1, arbitrary: fc.integer({ min: 3_000, max: 120_000 }) },
    { weight: 3, arbitrary: fc.constant(undefined) },
  ),
})

/** A pseudo-random key order, so writes land all over the tree as entity ids do. */
const keyOf = (index: number) => `entity\u0000${((index * 2_654_435_761) % 4_294_967_296).toString(36)}`

describe("the room a checkpoint commit asks for", () => {
  it("is at least what each commit adds to the LMDB file", async () => {
    const dir = tempDir("mnemos-lmdb-room-")
    const env = open({ path: dir, maxDbs: 4, compression: false, ...lmdbMapOptions() })
    const data = env.openDB<unknown, string>({ name: "data", encoding: "json", keyEncoder } as never)
    const meta = env.openDB<number, string>({ name: "meta" })
    const file = join(dir, "data.mdb")
    let commits = 0
    let largest = 0
    // A reader held from the start: LMDB reuses no page freed after it, so each commit's every
    // dirty page is new to the file, the most a commit can add.
    const reader = env.useReadTransaction()
    try {
      await fc.assert(
        fc.asyncProperty(fc.array(write, { minLength: 1, maxLength: 600, size: "max" }), async (writes) => {
          const encoded = writes.map(({ key, valueBytes }) => ({
            key: keyOf(key),
            value: valueBytes === undefined ? undefined : Buffer.from(JSON.stringify("v".repeat(valueBytes))),
          }))
          const bound = transactionGrowthBound(
            data.getStats() as TreeShape,
            encoded.map(({ key, value }) => ({ keyBytes: 2 * Buffer.byteLength(key) + 4, valueBytes: value?.length })),
          )
          const before = statSync(file).size
          const done = encoded.map(({ key, value }) =>
            value === undefined ? data.remove(key) : data.put(key, asBinary(value)),
          )
          done.push(meta.put("appliedSeq", ++commits))
          await Promise.all(done)
          const grown = statSync(file).size - before
          largest = Math.max(largest, grown)
          assert.isAtMost(grown, bound, `commit ${commits} of ${writes.length} writes`)
        }),
        { seed, numRuns: 60 },
      )
      const tree = data.getStats() as TreeShape
      assert.isAbove(tree.treeDepth, 1, "the tree grew branch pages")
      assert.isAbove(largest, 1024 * 1024, "some commits grew the file by more than a MiB")
    } finally {
      reader.done()
      await env.close()
    }
  })

  it("bounds a bulk commit of 4,096 small writes scattered over a large tree", async () => {
    const dir = tempDir("mnemos-lmdb-room-bulk-")
    const env = open({ path: dir, maxDbs: 4, compression: false, ...lmdbMapOptions() })
    const data = env.openDB<unknown, string>({ name: "data", encoding: "json", keyEncoder } as never)
    const file = join(dir, "data.mdb")
    try {
      for (let round = 0; round < 5; round++) {
        const writes = Array.from({ length: 4096 }, (_, index) => ({
          key: keyOf(round * 4096 + index),
          value: Buffer.from(JSON.stringify({ name: `entity ${index}`, observations: ["o".repeat(200)] })),
        }))
        const bound = transactionGrowthBound(
          data.getStats() as TreeShape,
          writes.map(({ key, value }) => ({ keyBytes: 2 * Buffer.byteLength(key) + 4, valueBytes: value.length })),
        )
        const before = statSync(file).size
        await Promise.all(writes.map(({ key, value }) => data.put(key, asBinary(value))))
        assert.isAtMost(statSync(file).size - before, bound, `round ${round}`)
        // Within a small multiple of the growth: a bound far above it refuses writes on a disk with room.
        assert.isAtMost(bound, 4 * (statSync(file).size - before) + 8 * 1024 * 1024, `round ${round}`)
      }
    } finally {
      await env.close()
    }
  })
})

const repoRoot = join(import.meta.dirname, "..", "..")
const moduleUrl = (...parts: Array<string>) => JSON.stringify(join(repoRoot, "src", ...parts))

/**
 * Runs `script` (an ES module) with node and tsx in a private mount namespace whose `dir` is a
 * tmpfs of `mib` MiB; returns the last line it prints, parsed.
 */
const onSmallDisk = (dir: string, mib: number, script: string): unknown => {
  const mountAndRun = `mount -t tmpfs -o size=${mib}m tmpfs "$0" && exec "$@"`
  const output = execFileSync(
    "unshare",
    [
      "--user",
      "--map-root-user",
      "--mount",
      "sh",
      "-c",
      mountAndRun,
      dir,
      process.execPath,
      "--import",
      "tsx",
      "--input-type=module",
      "-e",
      script,
    ],
    { cwd: repoRoot, encoding: "utf8" },
  )
  return JSON.parse(output.trim().split("\n").pop()!)
}

describe("a checkpoint commit on a disk without room for it", () => {
  it("is refused as a full disk before LMDB writes anything, keeps what the checkpoint had, and goes through once there is room", () => {
    const dir = tempDir("mnemos-lmdb-room-refused-")
    const result = onSmallDisk(
      dir,
      8,
      `
      const Checkpoint = await import(${moduleUrl("stores", "checkpoint", "Checkpoint.ts")})
      const { Effect } = await import("effect")
      const { statSync, writeFileSync, rmSync } = await import("node:fs")
      const dir = ${JSON.stringify(dir)}
      const checkpoint = await Effect.runPromise(Checkpoint.openCheckpoint(dir + "/lmdb"))
      await checkpoint.commit([["kept", { n: 1 }]], 1, 7)
      // 3 MiB of ballast: about 5 MiB left, less than a 2 MiB value's bound and the 4 MiB reserve.
      writeFileSync(dir + "/ballast", Buffer.alloc(3 * 1024 * 1024))
      const size = () => statSync(dir + "/lmdb/data.mdb").size
      const before = size()
      const refused = await checkpoint.commit([["big", "x".repeat(2 * 1024 * 1024)]], 2, 7).then(() => undefined, (error) => error)
      const after = size()
      const state = { appliedSeq: checkpoint.appliedSeq(), kept: checkpoint.view.get("kept"), big: checkpoint.view.get("big") }
      rmSync(dir + "/ballast")
      await checkpoint.commit([["big", "x".repeat(2 * 1024 * 1024)]], 2, 7)
      const later = { appliedSeq: checkpoint.appliedSeq(), bigBytes: checkpoint.view.get("big")?.length }
      await checkpoint.close()
      console.log(JSON.stringify({ refusedAs: refused?._tag, message: refused?.message, before, after, state, later }))
      `,
    ) as {
      refusedAs?: string
      message?: string
      before: number
      after: number
      state: { appliedSeq: number; kept: unknown; big?: unknown }
      later: { appliedSeq: number; bigBytes: number }
    }
    assert.strictEqual(result.refusedAs, "DiskFullError", JSON.stringify(result))
    assert.include(result.message, "No space left on device")
    assert.strictEqual(result.after, result.before, "LMDB wrote nothing")
    assert.deepStrictEqual(result.state, { appliedSeq: 1, kept: { n: 1 } })
    assert.deepStrictEqual(result.later, { appliedSeq: 2, bigBytes: 2 * 1024 * 1024 })
  })

  it("is let through when the file system has room for the bound and the reserve", () => {
    const dir = tempDir("mnemos-lmdb-room-free-")
    assert.isDefined(freeBytes(dir))
    assert.isUndefined(noRoomFor(dir, 0))
    assert.include(noRoomFor(dir, Number.MAX_SAFE_INTEGER) ?? "", "No space left on device")
  })
})

describe("the search index's writes on a disk without room for them", () => {
  it("are not started, the documents stay readable, no sequence is recorded after, and the next turn with room writes", () => {
    const dir = tempDir("mnemos-lmdb-room-search-")
    const result = onSmallDisk(
      dir,
      28,
      `
      const { openLmdbPersistence } = await import(${moduleUrl("search", "persistence", "SearchPersistence.ts")})
      const { statSync, writeFileSync, rmSync } = await import("node:fs")
      const { setImmediate: turn } = await import("node:timers/promises")
      const dir = ${JSON.stringify(dir)}
      const document = (id) => ({ id, store: "s", project: "p", kind: "note", title: id, text: id.repeat(100), at: 1, fields: {} })
      const persistence = openLmdbPersistence(dir + "/search")
      persistence.putDocument("g", document("before"))
      await persistence.committed()
      const size = () => statSync(dir + "/search/data.mdb").size
      // 10 MiB of ballast: 18 MiB left, less than the turn's 16 MiB and the 4 MiB reserve.
      writeFileSync(dir + "/ballast", Buffer.alloc(10 * 1024 * 1024))
      await turn()
      const before = size()
      persistence.putDocument("g", document("while-full"))
      persistence.putVector("while-full", "h".repeat(14), new Float32Array(100))
      await persistence.committed()
      const whileFull = { grew: size() - before, readable: persistence.document("s", "g", "while-full")?.id, vector: persistence.vector("while-full") === undefined }
      rmSync(dir + "/ballast")
      await turn()
      persistence.putDocument("g", document("after"))
      await persistence.committed()
      persistence.setSeq("s", 9)
      await persistence.committed()
      await turn()
      await persistence.committed()
      const after = { grew: size() > before, readable: persistence.document("s", "g", "after")?.id, seq: persistence.seq("s") ?? null }
      await persistence.close()
      console.log(JSON.stringify({ whileFull, after }))
      `,
    )
    assert.deepStrictEqual(result, {
      whileFull: { grew: 0, readable: "while-full", vector: true },
      after: { grew: true, readable: "after", seq: null },
    })
  })

  it("leave an older file's vectors where they are until there is room to move them under their documents' keys", () => {
    const dir = tempDir("mnemos-lmdb-room-vectors-")
    const result = onSmallDisk(
      dir,
      28,
      `
      const { openLmdbPersistence, documentKey } = await import(${moduleUrl("search", "persistence", "SearchPersistence.ts")})
      const { encodeKey } = await import(${moduleUrl("stores", "checkpoint", "KeyCodec.ts")})
      const { open } = await import("lmdb")
      const { writeFileSync, rmSync } = await import("node:fs")
      const dir = ${JSON.stringify(dir)}
      const path = dir + "/search"
      // An older file: one document, its vector under its id.
      const env = open({ path, maxDbs: 5, compression: false })
      const documents = env.openDB({ name: "documents", encoding: "json", keyEncoding: "binary" })
      const byId = env.openDB({ name: "vectors", encoding: "binary", keyEncoding: "binary" })
      const key = documentKey("s", "g", "a")
      await documents.put(encodeKey(key), { id: "a", store: "s", project: "p", kind: "note", title: "a", text: "a", at: 1, fields: {} })
      await byId.put(encodeKey("a"), Buffer.concat([Buffer.from("hash-a00000000", "latin1"), Buffer.from(Float32Array.of(1, 2).buffer)]))
      await env.close()
      // 12 MiB of ballast: 16 MiB left, less than a turn's 16 MiB and the 4 MiB reserve.
      writeFileSync(dir + "/ballast", Buffer.alloc(12 * 1024 * 1024))
      const full = openLmdbPersistence(path)
      const whileFull = full.vector(key) === undefined
      await full.close()
      rmSync(dir + "/ballast")
      const roomy = openLmdbPersistence(path)
      const after = roomy.vector(key) ?? null
      await roomy.close()
      console.log(JSON.stringify({ whileFull, after: after && { hash: after.hash, vector: [...after.vector] } }))
      `,
    )
    assert.deepStrictEqual(result, { whileFull: true, after: { hash: "hash-a00000000", vector: [1, 2] } })
  })
})
