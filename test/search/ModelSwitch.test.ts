/**
 * A model change without a gap in search by meaning (ModelSwitch.ts), on the index core with its
 * LMDB persistence and two real models (tiny BERTs of 8 and 6 dimensions):
 *
 * - records embedded with model A; the core restarted with model B: until B's re-embed is done,
 *   a semantic query is embedded with A and answered from A's vectors over every record, records
 *   written meanwhile included; once done, from B's, with the records written meanwhile too;
 * - a restart mid-way keeps A answering and resumes: what B embedded is not embedded again;
 * - A's folder gone: A's vectors are dropped (searching by words meanwhile, as health says), and
 *   the B vectors made before the restart are kept.
 *
 * The re-embed advances only when the test calls `tick` (two texts a step), so "mid-way" is a
 * state the test holds, not a moment it hopes to catch.
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import { afterAll, assert, beforeAll, describe, it } from "vitest"
import { layer as embedderLayer } from "../../src/search/embedding/Embedder.ts"
import { loadEncoder } from "../../src/search/embedding/EncoderLoader.ts"
import type { SentenceEncoder } from "../../src/search/embedding/SentenceEncoder.ts"
import { compactDot, compactVector } from "../../src/search/index/CompactVector.ts"
import { type IndexCore, makeIndexCore } from "../../src/search/index/IndexCore.ts"
import { embeddingText, type SearchDocument } from "../../src/search/index/SearchDocument.ts"
import { documentKey, openLmdbPersistence } from "../../src/search/persistence/SearchPersistence.ts"
import { writeTinyBert } from "./tinyModels.ts"

const dirs: Array<string> = []
const temp = () => {
  const dir = mkdtempSync(join(tmpdir(), "mnemos-model-switch-"))
  dirs.push(dir)
  return dir
}

const note = (id: string, text: string): SearchDocument => ({
  id,
  store: "notes",
  project: "p",
  kind: "note",
  title: "",
  text,
  at: 1,
  fields: {},
})
const group = "p\u0000notes"
/** Texts of distinct words of the tiny vocabulary: each is its own nearest record. */
const records = [
  note("n1", "hello"),
  note("n2", "world"),
  note("n3", "cafe"),
  note("n4", "hello world"),
  note("n5", "unaffable"),
  note("n6", "hello cafe"),
]

let modelA: string
let modelB: string
let encoderA: SentenceEncoder
let encoderB: SentenceEncoder
beforeAll(async () => {
  modelA = temp()
  writeTinyBert(modelA, { hidden: 8, seed: 11 })
  modelB = temp()
  writeTinyBert(modelB, { hidden: 6, seed: 29 })
  encoderA = await loadEncoder({ kind: "transformer", dir: modelA })
  encoderB = await loadEncoder({ kind: "transformer", dir: modelB })
})
afterAll(async () => {
  await encoderA?.close()
  await encoderB?.close()
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

/** Runs `use` on a core over `dataDir` embedding with the model in `modelDir`, then closes it (a restart). */
const withCore = <A>(dataDir: string, modelDir: string, use: (core: IndexCore) => Effect.Effect<A>) =>
  Effect.runPromise(
    Effect.scoped(
      Effect.flatMap(makeIndexCore({ stores: ["notes"], dataDir, reembedChunkTexts: 2 }), (core) =>
        Effect.andThen(core.load, use(core)),
      ),
    ).pipe(Effect.provide(embedderLayer({ model: { kind: "transformer", dir: modelDir }, worker: false }))),
  )

/** Similarity of query `a` to record `b` as the index scores it: the record's vector held compactly. */
const cosine = async (encoder: SentenceEncoder, a: string, b: string) => {
  const [x, y] = await encoder.encode([a, b])
  const { codes, peak } = compactVector(y!)
  return compactDot(codes, 0, peak, x!)
}

/**
 * Asserts that a semantic query with each record's text finds that record first, and that every
 * similarity is the one `encoder` gives (so the query and the vectors are both of its model).
 */
const assertAnsweredBy = (core: IndexCore, encoder: SentenceEncoder, expected: ReadonlyArray<SearchDocument>) =>
  Effect.gen(function* () {
    const byId = new Map(expected.map((document) => [document.id, document]))
    for (const record of expected) {
      const { hits, semantic } = yield* core.search({ query: record.text, mode: "semantic", filter: {}, limit: 10 }, 1)
      assert.isTrue(semantic, `query ${record.text} embedded`)
      assert.strictEqual(hits[0]?.document.id, record.id, `query "${record.text}" finds ${record.id} by meaning`)
      for (const hit of hits) {
        const document = byId.get(hit.document.id)
        assert.isDefined(document, `${hit.document.id} is a current record`)
        const similarity = yield* Effect.promise(() => cosine(encoder, record.text, embeddingText(document!)))
        assert.closeTo(hit.similarity!, similarity, 1e-4, `similarity of "${record.text}" to ${hit.document.id}`)
      }
    }
  })

const reembedding = (core: IndexCore) => Effect.map(core.stats, (stats) => stats.reembedding)

describe("a model change", () => {
  it("answers from the previous model's vectors over every record until the new ones are complete", async () => {
    const dataDir = temp()
    await withCore(dataDir, modelA, (core) =>
      Effect.gen(function* () {
        yield* core.apply("notes", [{ group, documents: records }], 1, 1, 0)
        yield* assertAnsweredBy(core, encoderA, records)
      }),
    )

    // Restarted with B: nothing re-embedded yet, A answers for all; one step later, still A.
    await withCore(dataDir, modelB, (core) =>
      Effect.gen(function* () {
        yield* assertAnsweredBy(core, encoderA, records)
        assert.deepStrictEqual(yield* reembedding(core), {
          from: `transformer:${modelA}`,
          to: `transformer:${modelB}`,
          done: 0,
          total: 0,
          finished: false,
          previousModel: "answering",
        })
        yield* core.tick
        const progress = yield* reembedding(core)
        assert.strictEqual(progress?.done, 2)
        assert.strictEqual(progress?.total, records.length)
        assert.isFalse(progress?.finished)
        yield* assertAnsweredBy(core, encoderA, records)
      }),
    )

    // Restarted mid-way: A still answers, and the two re-embedded before are not embedded again.
    const written = [note("n1", "hello , world"), ...records.slice(2), note("n7", "world cafe")]
    await withCore(dataDir, modelB, (core) =>
      Effect.gen(function* () {
        yield* assertAnsweredBy(core, encoderA, records)
        yield* core.tick
        assert.strictEqual((yield* reembedding(core))?.done, 4, "resumed: 2 kept, 2 more embedded")

        // Written mid-way: n1 changed, n2 removed, n7 added; A answers for them at once.
        yield* core.apply("notes", [{ group, documents: written }], 2, 1, 0)
        yield* assertAnsweredBy(core, encoderA, written)

        for (let step = 0; step < 10 && (yield* reembedding(core))?.finished !== true; step++) yield* core.tick
        const progress = yield* reembedding(core)
        assert.isTrue(progress?.finished)
        assert.strictEqual(progress?.done, progress?.total)
        assert.strictEqual(progress?.previousModel, "released")
        yield* assertAnsweredBy(core, encoderB, written)
        const stats = yield* core.stats
        assert.strictEqual(stats.index.vectors, written.length)
        assert.strictEqual(stats.embedder.state === "ready" && stats.embedder.dimensions, 6)
      }),
    )

    // The next start is plain B: nothing to re-embed, and only B's vectors are on disk.
    await withCore(dataDir, modelB, (core) =>
      Effect.gen(function* () {
        assert.isUndefined(yield* reembedding(core))
        yield* assertAnsweredBy(core, encoderB, written)
      }),
    )
    const persistence = openLmdbPersistence(join(dataDir, "search", "lmdb"))
    try {
      assert.strictEqual(persistence.model()?.id, `transformer:${modelB}`)
      assert.isUndefined(persistence.nextModel())
      for (const document of written) {
        const stored = persistence.vector(documentKey("notes", group, document.id))?.vector
        assert.strictEqual(stored instanceof Float32Array ? stored.length : stored?.codes.length, 6)
        assert.isUndefined(persistence.nextVector(documentKey("notes", group, document.id)))
      }
      assert.isUndefined(persistence.vector(documentKey("notes", group, "n2")))
    } finally {
      await persistence.close()
    }
  })

  it("drops the previous model's vectors when its folder is gone, keeping the new ones made so far", async () => {
    const dataDir = temp()
    const previousDir = join(temp(), "previous")
    mkdirSync(previousDir)
    writeTinyBert(previousDir, { hidden: 8, seed: 11 })
    await withCore(dataDir, previousDir, (core) => core.apply("notes", [{ group, documents: records }], 1, 1, 0))
    await withCore(dataDir, modelB, (core) => core.tick)
    rmSync(previousDir, { recursive: true })

    await withCore(dataDir, modelB, (core) =>
      Effect.gen(function* () {
        const progress = yield* reembedding(core)
        assert.strictEqual(progress?.previousModel, "unavailable")
        assert.isFalse(progress?.finished)
        assert.strictEqual((yield* core.stats).index.vectors, 2, "the two B vectors made before are kept")
        yield* core.embedMissing
        assert.isTrue((yield* reembedding(core))?.finished)
        assert.strictEqual((yield* reembedding(core))?.total, records.length - 2)
        yield* assertAnsweredBy(core, encoderB, records)
      }),
    )
  })
})
