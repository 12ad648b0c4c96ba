/**
 * The search index keeps its documents whole in search's LMDB only (DocumentStore.ts) and reads
 * them from there for the hits it returns, a timeline and re-embedding: each read is the document
 * as last replaced, before its write is committed and after, a removed one is never read (also
 * when it goes while a search embeds its query), and a fresh index loaded from the file answers as
 * the one that wrote it.
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import { afterAll, assert, describe, it } from "vitest"
import { layer as embedderLayer } from "../../src/search/embedding/Embedder.ts"
import { makeIndexCore } from "../../src/search/index/IndexCore.ts"
import type { SearchDocument } from "../../src/search/index/SearchDocument.ts"
import { SearchIndex } from "../../src/search/index/SearchIndex.ts"
import { openLmdbPersistence, type SearchPersistence } from "../../src/search/persistence/SearchPersistence.ts"
import { writeTinyBert } from "./tinyModels.ts"

const dirs: Array<string> = []
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

const now = 1_700_000_000_000
const openFile = () => {
  const dir = mkdtempSync(join(tmpdir(), "mnemos-index-documents-"))
  dirs.push(dir)
  const path = join(dir, "lmdb")
  return { path, persistence: openLmdbPersistence(path) }
}

const message = (id: string, text: string, at: number, fields: SearchDocument["fields"]): SearchDocument => ({
  id,
  store: "conversations",
  project: "p",
  kind: "message",
  title: `turn ${id}`,
  text,
  session: "s1",
  at,
  importance: 0.7,
  fields,
})

/** What a reader is shown: hits with their documents, and a timeline. */
const answers = (index: SearchIndex) => ({
  hits: index.search({ text: "deploy rollback", mode: "lexical", filter: { projects: ["p"] }, limit: 10, now }),
  prompts: index
    .search({ text: "deploy", mode: "lexical", filter: { eventType: "prompt", session: "s1" }, limit: 10, now })
    .map((hit) => hit.document.id),
  timeline: index.timeline("m2", 5),
})

const load = (persistence: SearchPersistence) => {
  const index = new SearchIndex(undefined, persistence)
  for (const group of persistence.groups()) index.loadGroup(group.store, group.group, group.documents)
  return index
}

describe("SearchIndex with its documents in search's LMDB", () => {
  it("reads each hit and timeline entry as last replaced, committed or not, and as loaded after a restart", async () => {
    const { path, persistence } = openFile()
    const index = new SearchIndex(undefined, persistence)
    index.replaceGroup("conversations", "p\u0000m1", [message("m1", "deploy failed", now - 3000, { role: "user" })])
    index.replaceGroup("conversations", "p\u0000m2", [
      message("m2", "rollback the deploy", now - 2000, { role: "user" }),
    ])
    index.replaceGroup("conversations", "p\u0000m3", [message("m3", "deploy done", now - 1000, { role: "assistant" })])
    await persistence.committed()
    // An update and a delete, not committed when the index reads.
    const m2 = message("m2", "rollback the deploy now, then deploy again", now - 2000, { role: "assistant", n: 2 })
    index.replaceGroup("conversations", "p\u0000m2", [m2])
    index.replaceGroup("conversations", "p\u0000m1", [])
    const uncommitted = answers(index)
    assert.deepStrictEqual(
      uncommitted.hits.map((hit) => hit.document),
      [m2, message("m3", "deploy done", now - 1000, { role: "assistant" })],
    )
    assert.deepStrictEqual(uncommitted.prompts, [], "m2 is no longer a prompt, m1 is gone")
    assert.deepStrictEqual(uncommitted.timeline?.anchor, m2)
    assert.deepStrictEqual(
      uncommitted.timeline?.after.map((document) => document.id),
      ["m3"],
    )
    assert.deepStrictEqual(uncommitted.timeline?.before, [])
    assert.strictEqual(index.get("m1"), undefined)
    assert.strictEqual(index.embeddingOf("m2")?.text, `turn m2\n${m2.text}`)
    await persistence.committed()
    assert.deepStrictEqual(answers(index), uncommitted)
    await persistence.close()
    const reopened = openLmdbPersistence(path)
    assert.deepStrictEqual(answers(load(reopened)), uncommitted)
    await reopened.close()
  })

  it("keeps one copy of a document that moved to another group, under its new group", async () => {
    const { persistence } = openFile()
    const index = new SearchIndex(undefined, persistence)
    const note = (text: string): SearchDocument => ({
      id: "n",
      store: "notes",
      project: "p",
      kind: "note",
      title: "",
      text,
      at: now,
    })
    index.replaceGroup("notes", "a", [note("first")])
    index.replaceGroup("notes", "b", [note("second")])
    assert.deepStrictEqual(index.groupIds("notes", "a"), [])
    await persistence.committed()
    assert.deepStrictEqual(
      [...persistence.groups()].map((group) => [group.group, group.documents]),
      [["b", [note("second")]]],
    )
    assert.deepStrictEqual(index.get("n"), note("second"))
    await persistence.close()
  })

  it("tells an unchanged document from a changed one by the file's copy, after a restart too", async () => {
    const { path, persistence } = openFile()
    const documents = [message("m1", "deploy", now, { role: "user" }), message("m2", "rollback", now, { role: "user" })]
    const pending = new SearchIndex(undefined, persistence).replaceGroup("conversations", "g", documents)
    assert.deepStrictEqual(
      pending.map((item) => item.id),
      ["m1", "m2"],
    )
    await persistence.close()
    const reopened = openLmdbPersistence(path)
    const index = load(reopened)
    for (const item of pending) assert.isTrue(index.setVector(item.id, item.hash, Float32Array.of(1, 0)))
    assert.deepStrictEqual(index.replaceGroup("conversations", "g", documents), [], "unchanged, embedded")
    // Other fields, same text: changed, its vector still current.
    const fields = message("m2", "rollback", now, { role: "assistant" })
    assert.deepStrictEqual(index.replaceGroup("conversations", "g", [documents[0]!, fields]), [])
    assert.deepStrictEqual(index.get("m2"), fields)
    const text = message("m2", "rollback twice", now, { role: "assistant" })
    assert.deepStrictEqual(
      index.replaceGroup("conversations", "g", [documents[0]!, text]).map((item) => item.id),
      ["m2"],
    )
    assert.deepStrictEqual(index.get("m2"), text)
    await reopened.close()
  })

  it("answers a search that a delete and an update overtake while its query is embedded from what is left", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "mnemos-index-documents-core-"))
    dirs.push(dataDir)
    const modelDir = join(dataDir, "model")
    mkdirSync(modelDir)
    writeTinyBert(modelDir)
    const doomed = message("m1", "deploy failed", now - 2000, { role: "user" })
    const updated = message("m2", "deploy rolled back, then again", now - 1000, { role: "user" })
    const result = await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const core = yield* makeIndexCore({ stores: ["conversations"], dataDir })
          yield* core.load
          yield* core.apply(
            "conversations",
            [
              { group: "p\u0000m1", documents: [doomed] },
              { group: "p\u0000m2", documents: [message("m2", "deploy done", now - 1000, { role: "user" })] },
            ],
            1,
            1,
            now,
          )
          // Both start at once: the search embeds its query first (onnxruntime answers later, on
          // its own thread), and only then takes the index's lock, which the changes take at once.
          const [searched] = yield* Effect.all(
            [
              core.search({ query: "deploy", mode: "hybrid", filter: {}, limit: 10 }, now),
              core.apply(
                "conversations",
                [
                  { group: "p\u0000m1", documents: [] },
                  { group: "p\u0000m2", documents: [updated] },
                ],
                2,
                1,
                now,
              ),
            ],
            { concurrency: "unbounded" },
          )
          const after = yield* core.search({ query: "deploy", mode: "hybrid", filter: {}, limit: 10 }, now)
          return { searched, after, details: yield* core.documents(["m1", "m2"]) }
        }),
      ).pipe(Effect.provide(embedderLayer({ model: { kind: "transformer", dir: modelDir }, worker: false }))),
    )
    assert.deepStrictEqual(
      result.searched.hits.map((hit) => hit.document),
      [updated],
      "overtaken: the deleted message is not found, the updated one is read as it is now",
    )
    assert.deepStrictEqual(
      result.after.hits.map((hit) => hit.document),
      [updated],
    )
    assert.deepStrictEqual(result.details, [undefined, updated])
  })
})
