/**
 * Search's persistence and its in-memory twin keep the same contract (one suite, both layers):
 * groups come back whole and in key order, vectors with their hash, sequences and model id; the next
 * model's vectors stay apart from the current ones until the switch, across reopening. As the
 * index's document store it reads back each document as last put or removed at once, before its
 * transaction commits, after it, across reopening and a compaction.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { open } from "lmdb"
import { afterAll, assert, describe, it } from "vitest"
import { type CompactVector, compactVector } from "../../src/search/index/CompactVector.ts"
import type { SearchDocument } from "../../src/search/index/SearchDocument.ts"
import { makeMemoryPersistence } from "../../src/search/persistence/MemoryPersistence.ts"
import {
  documentKey,
  openLmdbPersistence,
  type SearchPersistence,
} from "../../src/search/persistence/SearchPersistence.ts"
import { encodeKey } from "../../src/stores/checkpoint/KeyCodec.ts"

const dirs: Array<string> = []
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

const document = (id: string, store: string, text: string): SearchDocument => ({
  id,
  store,
  project: "p",
  kind: "note",
  title: `title ${id}`,
  text,
  at: 1,
  fields: { tag: "x" },
})

/**
 * A stored vector is the one put, in the compact form the index holds (CompactVector.ts): LMDB
 * stores that form, the in-memory twin the float32 it was given.
 */
const assertVector = (stored: Float32Array | CompactVector, expected: ReadonlyArray<number>, message?: string) => {
  const compact = (vector: Float32Array | CompactVector) => {
    const { codes, peak } = vector instanceof Float32Array ? compactVector(vector) : vector
    return { codes: [...codes], peak }
  }
  assert.deepStrictEqual(compact(stored), compact(Float32Array.from(expected)), message)
}

/** The key a document's vectors are kept under: its own (`SearchIndex.keyOf`). */
const key = (id: string, group = "g1", store = "s") => documentKey(store, group, id)

const layers: ReadonlyArray<readonly [string, () => { open: () => SearchPersistence }]> = [
  [
    "memory",
    () => {
      const shared = makeMemoryPersistence()
      return { open: () => shared }
    },
  ],
  [
    "lmdb",
    () => {
      const dir = mkdtempSync(join(tmpdir(), "mnemos-search-persist-"))
      dirs.push(dir)
      return { open: () => openLmdbPersistence(join(dir, "lmdb")) }
    },
  ],
]

describe.each(layers)("SearchPersistence (%s)", (_, make) => {
  it("keeps groups, vectors, sequences and the model id across reopening", async () => {
    const layer = make()
    const first = layer.open()
    first.putDocument("g1", document("a", "s", "one"))
    first.putDocument("g1", document("b", "s", "two"))
    first.putDocument("g2", document("c", "s", "three"))
    first.putDocument("g1", document("d", "t", "four"))
    first.putVector(key("a"), "hash-a", Float32Array.of(0.5, -0.25))
    first.putVector(key("b"), "hash-b", Float32Array.of(1, 0))
    first.removeDocument("s", "g1", "b") // and its vector
    first.setSeq("s", 42)
    first.setModel({ id: "model-1", config: { kind: "transformer", dir: "/m1" } })
    await first.close()
    const second = layer.open()
    assert.deepStrictEqual(
      [...second.groups()].map((group) => [group.store, group.group, group.documents.map((d) => d.id)]),
      [
        ["s", "g1", ["a"]],
        ["s", "g2", ["c"]],
        ["t", "g1", ["d"]],
      ],
    )
    assert.deepStrictEqual([...second.groups()][0]!.documents[0], document("a", "s", "one"))
    const vector = second.vector(key("a"))!
    assert.strictEqual(vector.hash, "hash-a")
    assertVector(vector.vector, [0.5, -0.25])
    assert.strictEqual(second.vector(key("b")), undefined)
    assert.strictEqual(second.vector(key("c", "g2")), undefined)
    assert.strictEqual(second.seq("s"), 42)
    assert.strictEqual(second.seq("t"), undefined)
    assert.deepStrictEqual(second.model(), { id: "model-1", config: { kind: "transformer", dir: "/m1" } })
    await second.clearVectors()
    assert.strictEqual(second.vector(key("a")), undefined)
    await second.close()
  })

  it("reads and writes as before once its mapped pages are let go, writes made just before included", async () => {
    const layer = make()
    const first = layer.open()
    first.putDocument("g1", document("a", "s", "one"))
    first.putVector(key("a"), "hash-a", Float32Array.of(0.5))
    first.setSeq("s", 7) // written once the writes before it are committed
    await first.releaseMappedPages()
    assert.deepStrictEqual(
      [...first.groups()].map((group) => group.documents.map((d) => d.id)),
      [["a"]],
    )
    assert.strictEqual(first.vector(key("a"))?.hash, "hash-a")
    first.putDocument("g2", document("b", "s", "two"))
    first.setSeq("s", 8)
    await first.committed()
    assert.deepStrictEqual(first.groupDocumentIds("s", "g2"), ["b"])
    await first.close()
    const second = layer.open()
    assert.deepStrictEqual(
      [...second.groups()].map((group) => group.group),
      ["g1", "g2"],
    )
    assert.strictEqual(second.seq("s"), 8)
    await second.close()
  })

  it("counts the writes since its mapped pages were let go, so a run of writes can let go of them too", async () => {
    const layer = make()
    const first = layer.open()
    assert.strictEqual(first.writesSinceMappedPagesReleased(), 0)
    first.putDocument("g1", document("a", "s", "one"))
    first.putDocument("g1", document("b", "s", "two"))
    first.putVector(key("a"), "hash-a", Float32Array.of(0.5))
    first.removeDocument("s", "g1", "b") // the document and its vector
    assert.strictEqual(first.writesSinceMappedPagesReleased(), 5)
    await first.releaseMappedPages()
    assert.strictEqual(first.writesSinceMappedPagesReleased(), 0)
    first.putVector(key("a"), "hash-a", Float32Array.of(0.25))
    assert.strictEqual(first.writesSinceMappedPagesReleased(), 1)
    assert.deepStrictEqual(first.groupDocumentIds("s", "g1"), ["a"])
    await first.close()
  })

  it("keeps the next model's vectors apart until the switch, which makes them current at once", async () => {
    const layer = make()
    const first = layer.open()
    first.setModel({ id: "old" })
    for (const id of ["a", "b", "c"]) first.putDocument("g1", document(id, "s", id))
    first.putVector(key("a"), "hash-a", Float32Array.of(1, 0))
    first.putVector(key("b"), "hash-b", Float32Array.of(0, 1))
    first.putVector(key("c"), "hash-c", Float32Array.of(1, 1))
    await first.beginNextModel({ id: "new", config: { kind: "transformer", dir: "/new" } })
    first.putNextVector(key("a"), "hash-a", Float32Array.of(0.5, 0.5, 0.5))
    first.putNextVector(key("b"), "hash-b", Float32Array.of(0.25, 0.25, 0.25))
    first.putNextVector(key("c"), "hash-c", Float32Array.of(0.75, 0.75, 0.75))
    first.removeDocument("s", "g1", "c") // its vectors in both slots with it
    assertVector(first.vector(key("a"))!.vector, [1, 0], "the current slot is untouched")
    await first.close()

    const second = layer.open()
    assert.deepStrictEqual(second.model(), { id: "old" })
    assert.deepStrictEqual(second.nextModel(), { id: "new", config: { kind: "transformer", dir: "/new" } })
    assertVector(second.nextVector(key("a"))!.vector, [0.5, 0.5, 0.5])
    assertVector(second.vector(key("b"))!.vector, [0, 1])
    assert.strictEqual(second.vector(key("c")), undefined)
    assert.strictEqual(second.nextVector(key("c")), undefined)
    await second.switchToNextModel()
    assert.deepStrictEqual(second.model(), { id: "new", config: { kind: "transformer", dir: "/new" } })
    assert.strictEqual(second.nextModel(), undefined)
    assertVector(second.vector(key("a"))!.vector, [0.5, 0.5, 0.5])
    assertVector(second.vector(key("b"))!.vector, [0.25, 0.25, 0.25])
    assert.strictEqual(second.nextVector(key("a")), undefined, "the former vectors are gone")
    second.putVector(key("d"), "hash-d", Float32Array.of(1, 1, 1))
    await second.close()

    const third = layer.open()
    assert.strictEqual(third.model()?.id, "new")
    assertVector(third.vector(key("d"))!.vector, [1, 1, 1])
    await third.beginNextModel({ id: "newer" })
    third.putNextVector(key("a"), "hash-a", Float32Array.of(1))
    await third.dropNextModel()
    assert.strictEqual(third.nextModel(), undefined)
    assert.strictEqual(third.nextVector(key("a")), undefined)
    await third.close()
    const fourth = layer.open()
    assert.strictEqual(fourth.nextModel(), undefined)
    assert.strictEqual(fourth.nextVector(key("a")), undefined)
    assertVector(fourth.vector(key("a"))!.vector, [0.5, 0.5, 0.5])
    await fourth.close()
  })

  it("reads each document as last written at once, committed or not, and after reopening and compacting", async () => {
    const layer = make()
    const first = layer.open()
    const a1 = document("a", "s", "first text")
    const a2 = { ...document("a", "s", "second text"), fields: { tag: "y" } }
    first.putDocument("g\u0000x", a1)
    first.putDocument("g\u0000x", document("b", "s", "bee"))
    // The same transaction: nothing committed yet.
    assert.deepStrictEqual(first.document("s", "g\u0000x", "a"), a1)
    assert.isTrue(first.holds("g\u0000x", a1))
    assert.isFalse(first.holds("g\u0000x", a2))
    assert.isFalse(first.holds("g", a1)) // another group's key
    first.putDocument("g\u0000x", a2)
    assert.deepStrictEqual(first.document("s", "g\u0000x", "a"), a2)
    await first.committed()
    assert.deepStrictEqual(first.document("s", "g\u0000x", "a"), a2)
    assert.isTrue(first.holds("g\u0000x", a2))
    assert.isFalse(first.holds("g\u0000x", a1))
    // Removed, then put again, then removed, each in a later transaction than the last.
    first.removeDocument("s", "g\u0000x", "b")
    assert.strictEqual(first.document("s", "g\u0000x", "b"), undefined)
    assert.isFalse(first.holds("g\u0000x", document("b", "s", "bee")))
    await sleep(0)
    first.putDocument("g\u0000x", document("b", "s", "bee again"))
    assert.deepStrictEqual(first.document("s", "g\u0000x", "b"), document("b", "s", "bee again"))
    await sleep(0)
    first.removeDocument("s", "g\u0000x", "b")
    assert.strictEqual(first.document("s", "g\u0000x", "b"), undefined)
    await first.committed()
    assert.strictEqual(first.document("s", "g\u0000x", "b"), undefined)
    await first.compact()
    assert.deepStrictEqual(first.document("s", "g\u0000x", "a"), a2)
    await first.close()
    const second = layer.open()
    assert.deepStrictEqual(second.document("s", "g\u0000x", "a"), a2)
    assert.strictEqual(second.document("s", "g\u0000x", "b"), undefined)
    assert.strictEqual(second.document("t", "g\u0000x", "a"), undefined)
    await second.close()
  })

  it("gives back a group whose key holds the separator whole (a conversation's is project\\0id)", async () => {
    const layer = make()
    const first = layer.open()
    first.putDocument("p\u0000m1", document("m1", "conversations", "one"))
    first.putDocument("p\u0000m2", document("m2", "conversations", "two"))
    first.putDocument("q\u0000m3", document("m3", "conversations", "three"))
    await first.close()
    const second = layer.open()
    const groups = [...second.groups()].map((group) => [group.group, group.documents.map((d) => d.id)])
    assert.deepStrictEqual(groups, [
      ["p\u0000m1", ["m1"]],
      ["p\u0000m2", ["m2"]],
      ["q\u0000m3", ["m3"]],
    ])
    // What a group's key says is what removes its documents.
    for (const [group, ids] of groups)
      second.removeDocument("conversations", group as string, (ids as Array<string>)[0]!)
    await second.close()
    const third = layer.open()
    assert.deepStrictEqual([...third.groups()], [])
    await third.close()
  })

  it("lists one group's document ids, not those of a longer group that begins with it", async () => {
    const layer = make()
    const first = layer.open()
    first.putDocument("p", document("a", "conversations", "one"))
    first.putDocument("p", document("b", "conversations", "two"))
    first.putDocument("p\u0000m", document("c", "conversations", "three"))
    first.putDocument("p", document("d", "graph", "four"))
    await first.close()
    const second = layer.open()
    assert.deepStrictEqual([...second.groupDocumentIds("conversations", "p")].sort(), ["a", "b"])
    assert.deepStrictEqual(second.groupDocumentIds("conversations", "p\u0000m"), ["c"])
    assert.deepStrictEqual(second.groupDocumentIds("conversations", "q"), [])
    await second.close()
  })

  it("gives back groups larger than a read batch, and groups on both sides of a batch's end, whole", async () => {
    const layer = make()
    const first = layer.open()
    const expected: Array<[string, Array<string>]> = []
    const pad = (n: number) => String(n).padStart(5, "0")
    for (let g = 0; g < 1500; g++) {
      // group g0700 holds 2,500 documents (more than two batches); the others one to three.
      const count = g === 700 ? 2500 : 1 + (g % 3)
      const ids = Array.from({ length: count }, (_, i) => `d${pad(g)}-${pad(i)}`)
      for (const id of ids) first.putDocument(`g${pad(g)}`, document(id, "s", id))
      expected.push([`g${pad(g)}`, ids])
    }
    await first.close()
    const second = layer.open()
    assert.deepStrictEqual(
      [...second.groups()].map((group) => [group.group, group.documents.map((d) => d.id)]),
      expected,
    )
    await second.close()
  })
})

describe("SearchPersistence (lmdb) while loading", () => {
  it("holds no snapshot between the groups it gives (other work commits meanwhile; LMDB could not reuse freed pages)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "mnemos-search-persist-"))
    dirs.push(dir)
    const path = join(dir, "lmdb")
    const first = openLmdbPersistence(path)
    for (let g = 0; g < 3000; g++) first.putDocument(`g${g}`, document(`d${g}`, "s", `text ${g}`))
    // What it reports as its size is the pages its documents use (3,000 of ~150 bytes each).
    await first.close()
    const second = openLmdbPersistence(path)
    assert.isAtLeast(second.sizeBytes(), 3000 * 150)
    const groups = second.groups()[Symbol.iterator]()
    assert.strictEqual(groups.next().done, false)
    await sleep(20) // a macrotask: lmdb-js lets go of its implicit read snapshot here
    const readers = open({ path, readOnly: true })
    try {
      // readerList: a header, then "pid thread txnid" per slot; "-" is a slot holding no snapshot.
      const held = readers
        .readerList()
        .split("\n")
        .slice(1)
        .map((line) => line.trim().split(/\s+/)[2])
        .filter((txn) => txn !== undefined && txn !== "-")
      assert.deepStrictEqual(held, [])
      let rest = 0
      for (let next = groups.next(); next.done !== true; next = groups.next()) rest++
      assert.strictEqual(rest, 2999)
    } finally {
      await readers.close()
      await second.close()
    }
  })
})

describe("SearchPersistence (lmdb) vectors on disk", () => {
  it("stores a vector in the index's compact form, and reads those written before as float32 (and 'no vector' both ways)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "mnemos-search-persist-"))
    dirs.push(dir)
    const path = join(dir, "lmdb")
    const vector = Float32Array.from({ length: 100 }, (_, i) => Math.sin(i + 1) / 3)
    const first = openLmdbPersistence(path)
    first.putVector("new", "hash-new0000ab", vector)
    first.putVector("none", "hash-none00000", new Float32Array(0))
    await first.close()
    // Two entries as the code before wrote them: the 14-byte hash, then float32 data.
    const env = open({ path, maxDbs: 5, compression: false })
    const raw = env.openDB<Uint8Array, Buffer>({ name: "document-vectors", encoding: "binary", keyEncoding: "binary" })
    const old = (hash: string, floats: Float32Array) =>
      Buffer.concat([Buffer.from(hash, "latin1"), Buffer.from(floats.buffer, floats.byteOffset, floats.byteLength)])
    await raw.put(encodeKey("old"), old("hash-old000000", vector))
    await raw.put(encodeKey("old-none"), old("hash-oldnone00", new Float32Array(0)))
    // 1 tag byte, the hash, the peak and a byte a dimension: 119 bytes, not 414.
    assert.strictEqual(raw.getBinary(encodeKey("new"))?.length, 1 + 14 + 4 + 100)
    assert.strictEqual(raw.getBinary(encodeKey("none"))?.length, 1 + 14)
    await env.close()

    const second = openLmdbPersistence(path)
    try {
      const stored = second.vector("new")!
      assert.strictEqual(stored.hash, "hash-new0000ab")
      assert.notInstanceOf(stored.vector, Float32Array)
      assert.deepStrictEqual(stored.vector, compactVector(vector), "exactly what the index holds")
      assert.deepStrictEqual(second.vector("none"), { hash: "hash-none00000", vector: new Float32Array(0) })
      assert.deepStrictEqual(second.vector("old"), { hash: "hash-old000000", vector })
      assert.deepStrictEqual(second.vector("old-none"), { hash: "hash-oldnone00", vector: new Float32Array(0) })
    } finally {
      await second.close()
    }
  })
})

describe("SearchPersistence (lmdb) vectors of a file that kept them by id", () => {
  it("moves each under its document's key in both slots at open, and drops those of no document", async () => {
    const dir = mkdtempSync(join(tmpdir(), "mnemos-search-persist-"))
    dirs.push(dir)
    const path = join(dir, "lmdb")
    const bytes = (hash: string, ...floats: Array<number>) => {
      const data = Float32Array.from(floats)
      return Buffer.concat([Buffer.from(hash, "latin1"), Buffer.from(data.buffer)])
    }
    // As the code before wrote a file: vectors under the document's id, in dbs of their own.
    const env = open({ path, maxDbs: 5, compression: false })
    const raw = (name: string) => env.openDB<Uint8Array, Buffer>({ name, encoding: "binary", keyEncoding: "binary" })
    const documents = env.openDB<SearchDocument, Buffer>({ name: "documents", encoding: "json", keyEncoding: "binary" })
    const [current, next] = [raw("vectors"), raw("vectors-1")]
    const meta = env.openDB<unknown, Buffer>({ name: "meta", encoding: "json", keyEncoding: "binary" })
    // 2,500 documents: more than one transaction of the move.
    const ids = Array.from({ length: 2500 }, (_, i) => `d${String(i).padStart(4, "0")}`)
    await env.transaction(() => {
      for (const [i, id] of ids.entries()) {
        const group = `p\u0000g${i % 700}`
        void documents.put(encodeKey(documentKey("s", group, id)), document(id, "s", id))
        void current.put(encodeKey(id), bytes(`hash-${id}-cur`.padEnd(14, "-"), i))
        if (i % 2 === 0) void next.put(encodeKey(id), bytes(`hash-${id}-nxt`.padEnd(14, "-"), -i))
      }
      void current.put(encodeKey("gone"), bytes("hash-gone00000", 1)) // of a document removed
      // Cut short before: d0001's vector was moved, and written again since under its key.
      void raw("document-vectors").put(encodeKey(documentKey("s", "p\u0000g1", "d0001")), bytes("hash-newer0000", 7))
      void meta.put(encodeKey("vectorsSlot"), 0)
      void meta.put(encodeKey("nextModel"), { id: "next" })
    })
    await env.close()

    const check = async () => {
      const persistence = openLmdbPersistence(path)
      try {
        for (const [i, id] of ids.entries()) {
          const key = documentKey("s", `p\u0000g${i % 700}`, id)
          const stored = persistence.vector(key)
          if (i === 1) assert.deepStrictEqual(stored, { hash: "hash-newer0000", vector: Float32Array.of(7) })
          else assert.deepStrictEqual(stored, { hash: `hash-${id}-cur`, vector: Float32Array.of(i) }, id)
          assert.deepStrictEqual(
            persistence.nextVector(key),
            i % 2 === 0 ? { hash: `hash-${id}-nxt`, vector: Float32Array.of(-i) } : undefined,
          )
        }
      } finally {
        await persistence.close()
      }
    }
    await check()
    const after = open({ path, maxDbs: 5, compression: false, readOnly: true })
    try {
      const keys = (name: string) => [...after.openDB({ name, keyEncoding: "binary" }).getKeys()]
      assert.strictEqual(keys("document-vectors").length, ids.length, "one a document")
      assert.strictEqual(keys("document-vectors-1").length, ids.length / 2)
      assert.deepStrictEqual([...keys("vectors"), ...keys("vectors-1")], [], "none by id, not even of no document")
    } finally {
      await after.close()
    }
    await check() // opened again: nothing left to move
  })
})

describe("SearchPersistence (lmdb) keys on disk", () => {
  it("keeps each key's KeyCodec bytes: documents and sequences written as bytes read back, and the other way round", async () => {
    const dir = mkdtempSync(join(tmpdir(), "mnemos-search-persist-"))
    dirs.push(dir)
    const path = join(dir, "lmdb")
    // A group with the separator, an astral character and a lone surrogate in it (KeyCodec's WTF-8).
    const group = "p\u0000caf\u00e9 \u{1f600} \ud800"
    const first = openLmdbPersistence(path)
    first.putDocument(group, document("new", "graph", "written by the persistence"))
    first.setSeq("graph", 7)
    await first.committed()
    await first.close()
    const env = open({ path, maxDbs: 5, compression: false })
    const documents = env.openDB<SearchDocument, Buffer>({ name: "documents", encoding: "json", keyEncoding: "binary" })
    const meta = env.openDB<number, Buffer>({ name: "meta", encoding: "json", keyEncoding: "binary" })
    assert.strictEqual(documents.get(encodeKey(`graph\u0000${group}\u0000new`))?.text, "written by the persistence")
    assert.strictEqual(meta.get(encodeKey("seq\u0000graph")), 7)
    // As the code before wrote them: keys as KeyCodec's bytes.
    await documents.put(encodeKey(`graph\u0000${group}\u0000old`), document("old", "graph", "written as bytes"))
    await meta.put(encodeKey("seq\u0000notes"), 3)
    await env.close()

    const second = openLmdbPersistence(path)
    try {
      assert.deepStrictEqual(
        [...second.groups()].map(({ store, group, documents }) => [store, group, documents.map(({ id }) => id)]),
        [["graph", group, ["new", "old"]]],
      )
      assert.strictEqual(second.document("graph", group, "old")?.text, "written as bytes")
      assert.deepStrictEqual(second.groupDocumentIds("graph", group), ["new", "old"])
      assert.strictEqual(second.seq("notes"), 3)
      assert.strictEqual(second.seq("graph"), 7)
    } finally {
      await second.close()
    }
  })
})
