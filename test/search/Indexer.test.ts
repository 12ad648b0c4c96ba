/**
 * The indexer in a real engine: it follows every create, update and delete of the graph store
 * (a search right after an acknowledged write sees it), its index always equals a scan of the
 * store, and after a restart — with its derived data intact, deleted, or stale because the store
 * moved on without it — it answers exactly what it answered before.
 */
import { rmSync } from "node:fs"
import { join } from "node:path"
import { Effect, Layer } from "effect"
import fc from "fast-check"
import { afterAll, assert, describe, it } from "vitest"
import * as Router from "../../src/actors/Router.ts"
import { type GraphCommand, graphStore } from "../../src/graph/GraphStore.ts"
import { graphSearchSource } from "../../src/search/GraphDocuments.ts"
import type { SearchDocument } from "../../src/search/index/SearchDocument.ts"
import { openSearchThread, type SearchThread } from "../../src/search/thread/SearchThread.ts"
import * as EventBus from "../../src/stores/EventBus.ts"
import { layerNode } from "../../src/stores/wal/WalFs.ts"
import { openSearchEngine, removeTempDirs, type SearchEngine, tempDir } from "./harness.ts"

afterAll(removeTempDirs)

const sendAll = (engine: SearchEngine, commands: ReadonlyArray<GraphCommand>) =>
  engine.run(
    Effect.gen(function* () {
      const store = (yield* Router.Router).store(graphStore)
      for (const command of commands) yield* Effect.exit(store.send(command))
    }),
  )

/** Every document the graph store implies now, by scanning it. */
const scannedDocuments = (engine: SearchEngine) =>
  engine.run(
    Effect.gen(function* () {
      const store = (yield* Router.Router).store(graphStore)
      return yield* store.read((view) => [...graphSearchSource.scan(view)].flatMap((group) => group.documents))
    }),
  )

/** Asserts the index holds exactly the scanned documents, all embedded (`withoutVector` of them to no vector). */
const assertIndexEqualsStore = async (engine: SearchEngine, withoutVector = 0) => {
  const indexer = await engine.indexer()
  const expected = await scannedDocuments(engine)
  const indexed = await engine.run(indexer.documents(expected.map((document) => document.id)))
  assert.deepStrictEqual(indexed, expected)
  // Documents are found by words at once; their vectors follow the model's first load, which may
  // take longer than the 5 s indexing waits for it on a loaded machine (they wait in the thread).
  let health = await engine.run(indexer.health)
  for (let attempt = 0; health.pendingEmbeddings > 0 && attempt < 3_000; attempt++) {
    await new Promise((resolve) => setTimeout(resolve, 10))
    health = await engine.run(indexer.health)
  }
  assert.strictEqual(health.index.documents, expected.length)
  // Every word used here is in the model's vocabulary, so every document has a vector.
  assert.strictEqual(health.index.vectors, expected.length - withoutVector)
  assert.strictEqual(health.pendingEmbeddings, 0)
}

const names = ["Alice", "Bob", "Payments API", "Ledger", "Flaky test"]
const texts = [
  "prefers PostgreSQL for the ledger",
  "the login test fails intermittently on CI",
  "deploys happen every Tuesday",
  "memory leak in the websocket server",
  "rate limits are 100 requests per second",
]
const command: fc.Arbitrary<GraphCommand> = fc.oneof(
  fc.record({
    _tag: fc.constant("CreateEntities" as const),
    project: fc.constant("p"),
    entities: fc.array(
      fc.record({
        name: fc.constantFrom(...names),
        entityType: fc.constantFrom("person", "service", "bug"),
        observations: fc.array(fc.constantFrom(...texts), { maxLength: 2 }),
      }),
      { minLength: 1, maxLength: 2 },
    ),
  }),
  fc.record({
    _tag: fc.constant("AddObservations" as const),
    project: fc.constant("p"),
    observations: fc.array(
      fc.record({
        entityName: fc.constantFrom(...names),
        contents: fc.array(fc.constantFrom(...texts), { maxLength: 2 }),
      }),
      { minLength: 1, maxLength: 1 },
    ),
  }),
  fc.record({
    _tag: fc.constant("DeleteObservations" as const),
    project: fc.constant("p"),
    deletions: fc.array(
      fc.record({
        entityName: fc.constantFrom(...names),
        observations: fc.array(fc.constantFrom(...texts), { maxLength: 2 }),
      }),
      { minLength: 1, maxLength: 1 },
    ),
  }),
  fc.record({
    _tag: fc.constant("DeleteEntities" as const),
    project: fc.constant("p"),
    entityNames: fc.array(fc.constantFrom(...names), { minLength: 1, maxLength: 2 }),
  }),
  fc.record({
    _tag: fc.constant("MergeEntities" as const),
    project: fc.constant("p"),
    target: fc.constantFrom(...names),
    sources: fc.array(fc.constantFrom(...names), { maxLength: 2 }),
  }),
)

const searchAll = (engine: SearchEngine, query: string) =>
  engine.ok("omni_search", { query, project: "p", limit: 50 }).then((reply) =>
    (reply.structured.results as Array<{ id: string; score: number; score_breakdown: unknown }>).map((hit) => ({
      id: hit.id,
      fulltext: (hit.score_breakdown as { fulltext: number }).fulltext,
      semantic: (hit.score_breakdown as { semantic: number }).semantic,
    })),
  )

describe("search indexer", () => {
  it("follows every create, update and delete: the index equals a scan of the store", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(command, { minLength: 1, maxLength: 12 }), async (commands) => {
        const engine = await openSearchEngine()
        try {
          for (const step of commands) {
            await sendAll(engine, [step])
            await assertIndexEqualsStore(engine)
          }
        } finally {
          await engine.close()
        }
      }),
      { numRuns: 6 },
    )
  })

  it("a search right after an acknowledged write sees it; a delete hides it", async () => {
    const engine = await openSearchEngine()
    await engine.ok("create_entities", {
      entities: [{ name: "Ledger", entityType: "service", observations: ["uses PostgreSQL sixteen"] }],
    })
    const found = await engine.ok("mem-search", { query: "postgresql" })
    assert.strictEqual(found.structured.results[0].summary, "Ledger: uses PostgreSQL sixteen")
    await engine.ok("delete_observations", {
      deletions: [{ entityName: "Ledger", observations: ["uses PostgreSQL sixteen"] }],
    })
    const gone = await engine.ok("mem-search", { query: "postgresql", mode: "lexical" })
    assert.deepStrictEqual(gone.structured.results, [])
    const health = await engine.run((await engine.indexer()).health)
    assert.strictEqual(health.state, "warm")
    assert.strictEqual(health.lagEvents, 0)
    await engine.close()
  })

  it("restarts warm without loading the model; a search by meaning, or a write, loads it", async () => {
    const dir = tempDir()
    const first = await openSearchEngine(dir)
    const embedderState = async (engine: SearchEngine) =>
      (await engine.run((await engine.indexer()).health)).embedder.state
    assert.strictEqual(await embedderState(first), "unloaded", "an empty index needs no model")
    const threadOf = async (engine: SearchEngine) => (await engine.run((await engine.indexer()).health)).thread
    assert.strictEqual(await threadOf(first), "not started", "nothing to index or load: no search thread")
    await sendAll(first, [
      {
        _tag: "CreateEntities",
        project: "p",
        // Zzqx's two documents have no word the model knows: embedded as "no vector", not retried.
        entities: [
          { name: "Ledger", entityType: "service", observations: [texts[0]!] },
          { name: "Zzqx", entityType: "qqvk", observations: ["zzqx vvkq"] },
        ],
      },
    ])
    await assertIndexEqualsStore(first, 2)
    assert.strictEqual(await embedderState(first), "ready", "a write loads the model")
    assert.strictEqual(await threadOf(first), "worker", "the first document to index started the thread")
    await first.close()

    const restarted = await openSearchEngine(dir)
    assert.strictEqual(await embedderState(restarted), "unloaded", "every vector was persisted")
    const hybrid = await searchAll(restarted, "postgresql")
    assert.strictEqual(await embedderState(restarted), "ready", "a hybrid search loads the model")
    assert.isAbove(hybrid[0]!.fulltext, 0)
    assert.isAbove(hybrid[0]!.semantic, 0, "and is answered by meaning too")
    await assertIndexEqualsStore(restarted, 2)
    await restarted.close()

    const wordsOnly = await openSearchEngine(dir)
    await wordsOnly.ok("omni_search", { query: "postgresql", project: "p", mode: "lexical" })
    assert.strictEqual(await embedderState(wordsOnly), "unloaded", "a search by words needs no model")
    await wordsOnly.close()
  })

  it("answers identically after a restart, after losing its data, and after the store moved on without it", async () => {
    const dir = tempDir()
    const first = await openSearchEngine(dir)
    await sendAll(first, [
      {
        _tag: "CreateEntities",
        project: "p",
        entities: names.map((name, i) => ({
          name,
          entityType: "thing",
          observations: [texts[i]!, texts[(i + 1) % 5]!],
        })),
      },
    ])
    const queries = ["ledger database", "unreliable test", "weekly release", "heap growth in sockets", "throttling"]
    // Every document embedded first: on a loaded machine the model's first load can outlast the
    // 5 s a write's indexing waits for it, and hits by meaning would be missing from `before`.
    await assertIndexEqualsStore(first)
    const before = await Promise.all(queries.map((query) => searchAll(first, query)))
    await first.close()

    const restarted = await openSearchEngine(dir)
    assert.strictEqual(
      (await restarted.run((await restarted.indexer()).health)).reconciles,
      0,
      "persisted data was current",
    )
    assert.deepStrictEqual(await Promise.all(queries.map((query) => searchAll(restarted, query))), before)
    await restarted.close()

    rmSync(join(dir, "search"), { recursive: true, force: true })
    const rebuilt = await openSearchEngine(dir)
    await assertIndexEqualsStore(rebuilt)
    assert.deepStrictEqual(await Promise.all(queries.map((query) => searchAll(rebuilt, query))), before)
    await rebuilt.close()

    // Write with the stores alone (no indexer running), then start the whole engine again.
    const storesOnly = Router.layer({ dataDir: dir, stores: [graphStore] }).pipe(
      Layer.provideMerge(EventBus.layer),
      Layer.provide(layerNode),
    )
    await Effect.runPromise(
      Effect.gen(function* () {
        const store = (yield* Router.Router).store(graphStore)
        yield* store.send({ _tag: "DeleteEntities", project: "p", entityNames: ["Ledger"] })
        yield* store.send({
          _tag: "AddObservations",
          project: "p",
          observations: [{ entityName: "Alice", contents: ["likes tea"] }],
        })
      }).pipe(Effect.provide(Layer.fresh(storesOnly))),
    )
    const caughtUp = await openSearchEngine(dir)
    await assertIndexEqualsStore(caughtUp)
    const ids = (await searchAll(caughtUp, "ledger database")).map((hit) => hit.id)
    const documents: ReadonlyArray<SearchDocument | undefined> = await caughtUp.run(
      (await caughtUp.indexer()).documents(ids),
    )
    assert.isFalse(documents.some((document) => document?.title === "Ledger"))
    await caughtUp.close()
  })

  it("a search thread that stops unasked is replaced, and catches up with every change it lost", async () => {
    const threads: Array<SearchThread> = []
    const engine = await openSearchEngine(tempDir(), {
      openThread: (config, thread) => {
        const opened = openSearchThread(config, thread)
        threads.push(opened)
        return opened
      },
    })
    const health = () => engine.run(Effect.flatMap(Effect.promise(engine.indexer), (indexer) => indexer.health))
    const entity = (name: string, observation: string) => ({ name, entityType: "service", observations: [observation] })
    await sendAll(engine, [{ _tag: "CreateEntities", project: "p", entities: [entity("Ledger", texts[0]!)] }])
    await assertIndexEqualsStore(engine)
    // Changes it has indexed but perhaps not yet persisted, then it stops as a crash would.
    await sendAll(engine, [
      { _tag: "CreateEntities", project: "p", entities: [entity("Login", texts[1]!), entity("Deploys", texts[2]!)] },
      { _tag: "DeleteEntities", project: "p", entityNames: ["Ledger"] },
    ])
    await engine.run(Effect.flatMap(Effect.promise(engine.indexer), (indexer) => indexer.sync))
    await threads[0]!.terminate()
    for (let attempt = 0; (await health()).threadRestarts === 0; attempt++) {
      assert.isBelow(attempt, 500, "the indexer noticed the stopped thread")
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
    // Changes while it is down, then searches go to its successor, which loads and reconciles.
    await sendAll(engine, [
      { _tag: "CreateEntities", project: "p", entities: [entity("Sockets", texts[3]!)] },
      { _tag: "DeleteEntities", project: "p", entityNames: ["Deploys"] },
    ])
    for (let attempt = 0; ; attempt++) {
      const now = await health()
      if (now.state === "warm" && now.reconciles >= 2 && now.lagEvents === 0 && now.pendingEmbeddings === 0) break
      assert.isBelow(attempt, 3_000, "the new thread caught up")
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
    assert.strictEqual(threads.length, 2, "one new thread")
    // Health counts a reconcile as it begins, one a store: the scan that sends back what the stopped
    // thread had not persisted may still be under way. Caught up means equal to the store, in time.
    for (let attempt = 0; ; attempt++) {
      try {
        await assertIndexEqualsStore(engine)
        break
      } catch (notYet) {
        if (attempt >= 200) throw notYet
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
    }
    const found = await engine.ok("mem-search", { query: "websocket memory leak", project: "p", mode: "lexical" })
    assert.include(found.text, "Sockets")
    await engine.close()
  })
})
