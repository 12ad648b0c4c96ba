/**
 * Where the search index runs (Indexer.ts): a small memory's on the daemon's main thread, with no
 * second JavaScript runtime; once it holds more than `mainThreadDocumentsMax` documents it moves to
 * a worker thread of its own, losing no document; a restart places a persisted index by its size.
 * The limit is lowered here to a few documents.
 */
import { Effect } from "effect"
import { afterAll, assert, describe, it } from "vitest"
import * as Router from "../../src/actors/Router.ts"
import type * as Engine from "../../src/Engine.ts"
import { type GraphCommand, graphStore } from "../../src/graph/GraphStore.ts"
import { graphSearchSource } from "../../src/search/GraphDocuments.ts"
import { openSearchThread } from "../../src/search/thread/SearchThread.ts"
import { openEngineClient } from "../support/engineClient.ts"
import { openSearchEngine, removeTempDirs, type SearchEngine, tempDir } from "./harness.ts"

afterAll(removeTempDirs)

const documentsMax = 4

/** An engine whose index is placed by size, recording each thread it starts (true: a worker). */
const openPlaced = async (
  dir: string,
  max = documentsMax,
  burst: { readonly documents: number; readonly ms: number } = { documents: 1_000_000, ms: 1 },
) => {
  const started: Array<boolean> = []
  const search: Engine.EngineConfig["search"] = {
    thread: undefined,
    mainThreadDocumentsMax: max,
    mainThreadBurstDocuments: burst.documents,
    mainThreadBurstMs: burst.ms,
    openThread: (config, thread) => {
      started.push(thread ?? true)
      return openSearchThread(config, thread)
    },
  }
  const engine = await openSearchEngine(dir, search)
  return { engine, started }
}

const create = (engine: SearchEngine, names: ReadonlyArray<string>) =>
  engine.run(
    Effect.gen(function* () {
      const store = (yield* Router.Router).store(graphStore)
      const command: GraphCommand = {
        _tag: "CreateEntities",
        project: "p",
        entities: names.map((name) => ({ name, entityType: "service", observations: [`${name} writes the ledger`] })),
      }
      yield* store.send(command)
    }),
  )

const health = async (engine: SearchEngine) => engine.run((await engine.indexer()).health)

/** Asserts the index holds exactly the documents a scan of the store implies, and finds each entity by name. */
const assertEveryDocument = async (engine: SearchEngine, names: ReadonlyArray<string>) => {
  const indexer = await engine.indexer()
  const expected = await engine.run(
    Effect.gen(function* () {
      const store = (yield* Router.Router).store(graphStore)
      return yield* store.read((view) => [...graphSearchSource.scan(view)].flatMap((group) => group.documents))
    }),
  )
  assert.deepStrictEqual(await engine.run(indexer.documents(expected.map((document) => document.id))), expected)
  assert.strictEqual((await health(engine)).index.documents, expected.length)
  for (const name of names) {
    const reply = await engine.ok("omni_search", { query: name, project: "p", mode: "lexical", limit: 50 })
    const titles = (reply.structured.results as Array<{ title: string }>).map((hit) => hit.title)
    assert.include(titles, name, `${name} is found`)
  }
}

describe("where the search index runs", () => {
  it("runs a small memory's index on the main thread, and moves it to a worker with every document once it outgrows it", async () => {
    const dir = tempDir()
    const { engine, started } = await openPlaced(dir)
    await create(engine, ["Alpha"]) // 2 documents: the entity and its observation
    await assertEveryDocument(engine, ["Alpha"])
    assert.strictEqual((await health(engine)).thread, "main")
    assert.deepStrictEqual(started, [false], "no worker thread under the limit")

    await create(engine, ["Bravo", "Charlie"]) // 6 documents
    for (let attempt = 0; (await health(engine)).thread !== "worker"; attempt++) {
      assert.isBelow(attempt, 3_000, "the index moved to a worker thread")
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
    assert.deepStrictEqual(started, [false, true], "one worker, started once")
    assert.strictEqual((await health(engine)).threadRestarts, 0, "a move is no restart")
    await assertEveryDocument(engine, ["Alpha", "Bravo", "Charlie"])
    // Writes after the move reach the worker's index.
    await create(engine, ["Delta"])
    await assertEveryDocument(engine, ["Alpha", "Bravo", "Charlie", "Delta"])
    await engine.close()
  })

  it("moves a small index to a worker with every document when events bring it a burst of documents, not when they come apart", async () => {
    const waitForWorker = async (engine: SearchEngine) => {
      for (let attempt = 0; (await health(engine)).thread !== "worker"; attempt++) {
        assert.isBelow(attempt, 3_000, "the index moved to a worker thread")
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
    }
    // Far below the size limit (100), more than 4 documents within the hour: a burst.
    const bursting = await openPlaced(tempDir(), 100, { documents: 4, ms: 3_600_000 })
    await create(bursting.engine, ["Alpha"]) // 2 documents
    await assertEveryDocument(bursting.engine, ["Alpha"])
    assert.strictEqual((await health(bursting.engine)).thread, "main", "2 documents are no burst")
    await create(bursting.engine, ["Bravo", "Charlie"]) // 6 within the window
    await waitForWorker(bursting.engine)
    assert.deepStrictEqual(bursting.started, [false, true], "one worker, started once")
    await assertEveryDocument(bursting.engine, ["Alpha", "Bravo", "Charlie"])
    await bursting.engine.close()

    // The same 6 documents, 2 at a time, 400 ms apart with a window of 50 ms: no burst, and within the size limit.
    const apart = await openPlaced(tempDir(), 100, { documents: 4, ms: 50 })
    for (const name of ["Alpha", "Bravo", "Charlie"]) {
      await create(apart.engine, [name])
      await assertEveryDocument(apart.engine, [name])
      await new Promise((resolve) => setTimeout(resolve, 400))
    }
    assert.strictEqual((await health(apart.engine)).thread, "main")
    assert.deepStrictEqual(apart.started, [false], "no worker thread")
    await assertEveryDocument(apart.engine, ["Alpha", "Bravo", "Charlie"])
    await apart.engine.close()
  })

  it("places a persisted index by its size when it starts", async () => {
    const dir = tempDir()
    const first = await openPlaced(dir, 100)
    await create(first.engine, ["Alpha", "Bravo", "Charlie"])
    await assertEveryDocument(first.engine, ["Alpha", "Bravo", "Charlie"])
    assert.strictEqual((await health(first.engine)).thread, "main")
    await first.engine.close()

    const large = await openPlaced(dir)
    assert.deepStrictEqual(large.started, [true], "6 persisted documents, past the limit of 4: a worker from the start")
    await assertEveryDocument(large.engine, ["Alpha", "Bravo", "Charlie"])
    await large.engine.close()

    const small = await openPlaced(dir, 6)
    assert.deepStrictEqual(small.started, [false], "6 persisted documents, within a limit of 6: the main thread")
    await assertEveryDocument(small.engine, ["Alpha", "Bravo", "Charlie"])
    await small.engine.close()
  })

  it("a search before a small index's warm-up (as `serve` delays it) finds what was persisted", async () => {
    const dir = tempDir()
    const first = await openPlaced(dir, 100)
    await create(first.engine, ["Alpha", "Bravo"])
    await assertEveryDocument(first.engine, ["Alpha", "Bravo"])
    await first.engine.close()

    const engine = await openEngineClient(dir, {
      clientName: "search-test",
      clientVersion: "0",
      stores: [graphStore],
      search: { mainThreadDocumentsMax: 100, mainThreadWarmUpAfterMs: 60_000 },
    })
    try {
      const reply = await engine.ok("omni_search", { query: "Alpha", project: "p", mode: "lexical", limit: 50 })
      const titles = (reply.structured.results as Array<{ title: string }>).map((hit) => hit.title)
      assert.include(titles, "Alpha")
    } finally {
      await engine.close()
    }
  })
})
