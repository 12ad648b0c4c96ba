/**
 * A warm start loads the persisted index in slices while the indexer already applies new events.
 * A record removed in that window must be gone from the persisted index too, not only from memory:
 * the load skips a group an event replaced first, so nothing else would ever remove it.
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import { afterAll, assert, describe, it } from "vitest"
import { layer as embedderLayer } from "../../src/search/embedding/Embedder.ts"
import { makeIndexCore } from "../../src/search/index/IndexCore.ts"
import { embeddingText, hashText, type SearchDocument } from "../../src/search/index/SearchDocument.ts"
import { documentKey, openLmdbPersistence } from "../../src/search/persistence/SearchPersistence.ts"
import { residentBytesOf } from "../support/Smaps.ts"
import { writeTinyBert } from "./tinyModels.ts"

const dirs: Array<string> = []
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

const note = (id: string, text: string): SearchDocument => ({
  id,
  store: "notes",
  project: "p",
  kind: "note",
  title: id,
  text,
  at: 1,
  fields: {},
})

type Core = Effect.Success<ReturnType<typeof makeIndexCore>>

/** Runs cores on one fresh data directory (with a tiny model), one after another, each in its own scope. */
const coreRunner = (prefix: string, config: Partial<Parameters<typeof makeIndexCore>[0]> = {}) => {
  const dataDir = mkdtempSync(join(tmpdir(), prefix))
  dirs.push(dataDir)
  const modelDir = join(dataDir, "model")
  mkdirSync(modelDir)
  writeTinyBert(modelDir)
  const run = <A>(use: (core: Core) => Effect.Effect<A>) =>
    Effect.runPromise(
      Effect.scoped(Effect.flatMap(makeIndexCore({ stores: ["notes"], dataDir, ...config }), use)).pipe(
        Effect.provide(embedderLayer({ model: { kind: "transformer", dir: modelDir }, worker: false })),
      ),
    )
  return { dataDir, run }
}

describe("the search index's warm start", () => {
  it.skipIf(process.platform !== "linux")(
    "lets go of the persisted file's pages it mapped once warm-up is over, and of those reads mapped once idle",
    async () => {
      const dataDir = mkdtempSync(join(tmpdir(), "mnemos-core-pages-"))
      dirs.push(dataDir)
      const modelDir = join(dataDir, "model")
      mkdirSync(modelDir)
      writeTinyBert(modelDir)
      const path = join(dataDir, "search", "lmdb")
      // 4,000 documents of about 1 KiB, with their vectors: nothing for warm-up to embed.
      const seeded = openLmdbPersistence(path)
      for (let i = 0; i < 4000; i++) {
        const document = note(`n${i}`, `note ${i} `.repeat(100))
        seeded.putDocument(`g${i}`, document)
        seeded.putVector(
          documentKey("notes", `g${i}`, document.id),
          hashText(embeddingText(document)),
          new Float32Array(16).fill(i / 4000),
        )
      }
      await seeded.close()
      const resident = await Effect.runPromise(
        Effect.scoped(
          Effect.gen(function* () {
            const core = yield* makeIndexCore({ stores: ["notes"], dataDir, releaseMappedPagesIdleMs: 0 })
            yield* core.load
            const loaded = residentBytesOf(join(path, "data.mdb"))
            yield* core.embedMissing
            const warm = residentBytesOf(join(path, "data.mdb"))
            // Documents are read from the file (the index holds their columns only).
            const all = yield* core.documents(Array.from({ length: 4000 }, (_, i) => `n${i}`))
            const read = residentBytesOf(join(path, "data.mdb"))
            yield* core.tick // idle for the 0 ms this core waits
            const idle = residentBytesOf(join(path, "data.mdb"))
            const found = (yield* core.documents(["n0", "n3999"])).map((document) => document?.text)
            return { loaded, warm, all, read, idle, found, stats: yield* core.stats }
          }),
        ).pipe(Effect.provide(embedderLayer({ model: { kind: "transformer", dir: modelDir }, worker: false }))),
      )
      assert.isAtLeast(resident.loaded, 2 * 1024 * 1024, "the load read the file through its map")
      assert.isAtMost(resident.warm, 256 * 1024, "warm, the daemon holds next to none of it")
      assert.deepStrictEqual(
        resident.all.map((document) => document?.text),
        Array.from({ length: 4000 }, (_, i) => `note ${i} `.repeat(100)),
      )
      assert.isAtLeast(resident.read, 2 * 1024 * 1024, "reading the documents mapped the file again")
      assert.isAtMost(resident.idle, 256 * 1024, "idle, the pages are let go")
      assert.deepStrictEqual(resident.found, ["note 0 ".repeat(100), "note 3999 ".repeat(100)])
      assert.strictEqual(resident.stats.index.vectors, 4000)
      assert.strictEqual(resident.stats.memory?.heapUsedBytes !== undefined, true, "stats report the thread's heap")
    },
  )

  it.skipIf(process.platform !== "linux")(
    "lets go of the pages a run of writes mapped once the writes pause, and of a few writes' only once idle",
    async () => {
      const pauseMs = 200
      const { dataDir, run } = coreRunner("mnemos-core-pause-", {
        releaseMappedPagesIdleMs: 3_600_000,
        releaseMappedPagesWritesMax: 64,
        // After the first release of the run below, none while writes go on.
        releaseMappedPagesWritesEveryMs: 3_600_000,
        releaseMappedPagesWritesPauseMs: pauseMs,
      })
      const file = join(dataDir, "search", "lmdb", "data.mdb")
      const groups = (from: number, count: number) =>
        Array.from({ length: count }, (_, i) => ({
          group: `g${from + i}`,
          documents: [note(`n${from + i}`, `note ${from + i} `.repeat(100))],
        }))
      const seen = await run((core) =>
        Effect.gen(function* () {
          yield* core.load
          yield* core.embedMissing
          // A few writes (a document and its vector): their pages wait for the idle hour.
          yield* core.apply("notes", groups(0, 1), 1, 1, 0)
          const afterFew = yield* core.tick
          // A run of writes: 800 documents of 1 KiB and their vectors, in applies of 100 (the first
          // one, past 64 writes, lets go of the pages once; the rest map them again).
          for (let batch = 0; batch < 8; batch++)
            yield* core.apply("notes", groups(1 + batch * 100, 100), 2 + batch, 100, 0)
          const afterRun = yield* core.tick
          const mapped = residentBytesOf(file)
          yield* Effect.sleep(`${pauseMs + 50} millis`)
          const paused = yield* core.tick
          const released = residentBytesOf(file)
          const found = (yield* core.documents(["n0", "n800"])).map((document) => document?.text)
          return { afterFew, afterRun, mapped, paused, released, found }
        }),
      )
      assert.isAbove(seen.afterFew as number, pauseMs, "a few writes: released when idle, not at a pause")
      assert.isAtMost(seen.afterRun as number, pauseMs, "a run of writes: released once they pause")
      assert.isAtLeast(seen.mapped, 512 * 1024, "the run's writes mapped the file's pages")
      assert.strictEqual(seen.paused, "idle", "released: nothing is left to let go")
      assert.isAtMost(seen.released, 256 * 1024, "the pause let go of them")
      assert.deepStrictEqual(seen.found, ["note 0 ".repeat(100), "note 800 ".repeat(100)])
    },
  )

  it("removes from disk what an event removed while the persisted index was loading", async () => {
    const { dataDir, run } = coreRunner("mnemos-core-load-")
    const group = "p\u0000notes"
    const kept = note("kept", "hello world")
    const removed = note("removed", "hello cafe")
    // Longer groups share the range prefix of `group`: they must be left alone.
    const neighbour = note("neighbour", "unaffable")

    await run((core) =>
      Effect.gen(function* () {
        yield* core.load
        yield* core.apply("notes", [{ group, documents: [kept, removed] }], 1, 1, 0)
        yield* core.apply("notes", [{ group: `${group}\u0000x`, documents: [neighbour] }], 2, 1, 0)
      }),
    )
    // Restarted: the removal is applied before the load has read the group.
    await run((core) =>
      Effect.gen(function* () {
        yield* core.apply("notes", [{ group, documents: [kept] }], 3, 1, 0)
        yield* core.load
      }),
    )

    const persistence = openLmdbPersistence(join(dataDir, "search", "lmdb"))
    try {
      const persisted = [...persistence.groups()].map((each) => [each.group, each.documents.map((d) => d.id)])
      assert.deepStrictEqual(persisted, [
        [group, ["kept"]],
        [`${group}\u0000x`, ["neighbour"]],
      ])
      assert.strictEqual(
        persistence.vector(documentKey("notes", group, "removed")),
        undefined,
        "its vector is gone too",
      )
      assert.deepStrictEqual(persistence.groupDocumentIds("notes", group), ["kept"])
    } finally {
      await persistence.close()
    }
    // And the next warm start finds only what is there.
    const found = await run((core) =>
      Effect.gen(function* () {
        yield* core.load
        return (yield* core.documents(["kept", "removed", "neighbour"])).map((document) => document?.id)
      }),
    )
    assert.deepStrictEqual(found, ["kept", undefined, "neighbour"])
  })

  it("answers and persists every document of a run of writes that let go of the file's pages between them", async () => {
    // Idle never comes (an hour): only the writes let go of the pages, every 64 of them.
    const { run } = coreRunner("mnemos-core-writes-", {
      releaseMappedPagesIdleMs: 3_600_000,
      releaseMappedPagesWritesMax: 64,
      releaseMappedPagesWritesEveryMs: 0,
    })
    const ids = Array.from({ length: 600 }, (_, i) => `n${i}`)
    const texts = ids.map((_, i) => `note ${i} about ${i % 2 === 0 ? "cafe" : "tea"}`)
    const written = await run((core) =>
      Effect.gen(function* () {
        yield* core.load
        yield* core.embedMissing // warm: from here on writes let go of the pages
        // 60 applies of 10 groups, each a document and its vector; the last group's replaced, then emptied.
        for (let batch = 0; batch < 60; batch++)
          yield* core.apply(
            "notes",
            Array.from({ length: 10 }, (_, i) => {
              const n = batch * 10 + i
              return { group: `g${n}`, documents: [note(ids[n]!, texts[n]!)] }
            }),
            batch + 1,
            10,
            0,
          )
        yield* core.apply("notes", [{ group: "g599", documents: [note("n599", "replaced")] }], 61, 1, 0)
        yield* core.apply("notes", [{ group: "g598", documents: [] }], 62, 1, 0)
        const documents = yield* core.documents(ids)
        const stats = yield* core.stats
        return { texts: documents.map((document) => document?.text), stats }
      }),
    )
    const expected = [...texts.slice(0, 598), undefined, "replaced"]
    assert.deepStrictEqual(written.texts, expected)
    assert.strictEqual(written.stats.index.documents, 599)
    assert.strictEqual(written.stats.index.vectors, 599)
    // Restarted: everything was persisted, the last sequence with it.
    const reloaded = await run((core) =>
      Effect.gen(function* () {
        const seqs = yield* core.load
        const documents = yield* core.documents(ids)
        return { seqs, texts: documents.map((document) => document?.text), stats: yield* core.stats }
      }),
    )
    assert.deepStrictEqual(reloaded.seqs, { notes: 62 })
    assert.deepStrictEqual(reloaded.texts, expected)
    assert.strictEqual(reloaded.stats.index.vectors, 599)
  })

  it("keeps a vector under its document's key: one moved to another group has it there, none where it was", async () => {
    const { dataDir, run } = coreRunner("mnemos-core-move-")
    // A message id met again in another project's group (a conversation's group is project\0id).
    const moving = note("m", "hello cafe")
    const stayed = note("s", "hello tea")
    await run((core) =>
      Effect.gen(function* () {
        yield* core.load
        yield* core.embedMissing
        yield* core.apply("notes", [{ group: "p\u0000a", documents: [moving, stayed] }], 1, 1, 0)
        yield* core.apply("notes", [{ group: "q\u0000b", documents: [moving] }], 2, 1, 0)
      }),
    )
    const persistence = openLmdbPersistence(join(dataDir, "search", "lmdb"))
    try {
      assert.deepStrictEqual(
        [...persistence.groups()].map((each) => [each.group, each.documents.map((d) => d.id)]),
        [
          ["p\u0000a", ["s"]],
          ["q\u0000b", ["m"]],
        ],
      )
      const hash = (document: SearchDocument) => hashText(embeddingText(document))
      assert.strictEqual(persistence.vector(documentKey("notes", "q\u0000b", "m"))?.hash, hash(moving))
      assert.strictEqual(persistence.vector(documentKey("notes", "p\u0000a", "s"))?.hash, hash(stayed))
      assert.isUndefined(persistence.vector(documentKey("notes", "p\u0000a", "m")), "nothing left where it was")
    } finally {
      await persistence.close()
    }
    // The next start finds the moved document's vector: nothing to embed again.
    const embedded = await run((core) =>
      Effect.gen(function* () {
        yield* core.load
        return (yield* core.stats).index.vectors
      }),
    )
    assert.strictEqual(embedded, 2)
  })
})
