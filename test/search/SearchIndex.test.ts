/**
 * The search index answers exactly what a brute-force scan answers, after any sequence of
 * creates, updates and deletes (property test on random corpora; the full-text postings compacted
 * at once or never), and its timeline equals a sort. A next model's vector set, filled beside the
 * live one, follows the documents replaced and removed meanwhile, and replaces it whole.
 */
import fc from "fast-check"
import { assert, describe, it } from "vitest"
import { embeddingText, type SearchDocument } from "../../src/search/index/SearchDocument.ts"
import { SearchIndex } from "../../src/search/index/SearchIndex.ts"
import {
  type SearchFilter,
  type SearchMode,
  type SeedEventType,
  seedEventTypes,
} from "../../src/search/ranking/Ranking.ts"
import { bruteForceSearch, bruteForceTimeline } from "./reference.ts"

const words = [
  "cache",
  "caches",
  "deploy",
  "rollback",
  "postgres",
  "migration",
  "migrations",
  "flaky",
  "test",
  "login",
  "token",
  "the",
  "a",
  "of",
  "createEntities",
  "search_nodes",
  "latency",
  "queries",
  "query",
  "café",
  "日本",
  "timeout",
  "timeouts",
  "retry",
]
const dimensions = 6
const now = 1_700_000_000_000

const text = fc.array(fc.constantFrom(...words), { maxLength: 8 }).map((parts) => parts.join(" "))
// Integer components: fast-check's doubles lean to tiny magnitudes, which left nearly every vector
// one-hot or too short to keep, and semantic hits all but absent from the runs.
const unitVector = fc
  .array(fc.integer({ min: -100, max: 100 }), { minLength: dimensions, maxLength: dimensions })
  .map((values) => {
    const norm = Math.hypot(...values)
    return norm < 1e-3 ? undefined : Float32Array.from(values, (value) => value / norm)
  })

const documentDraft = fc.record({
  title: text,
  text,
  project: fc.constantFrom("p1", "p2"),
  kind: fc.constantFrom("note", "task", "message", "adr"),
  session: fc.option(fc.constantFrom("s1", "s2"), { nil: undefined }),
  at: fc.integer({ min: now - 1e9, max: now }),
  importance: fc.option(fc.double({ min: 0, max: 1, noNaN: true }), { nil: undefined }),
  // What seed 000's event types read (the index keeps them as bits, not the fields).
  fields: fc.option(
    fc.record(
      {
        role: fc.constantFrom("user", "assistant", "system", "tool"),
        tool_call_id: fc.constantFrom("call-1", 7),
        memory_kind: fc.constantFrom("semantic", "episodic", "summary"),
      },
      { requiredKeys: [] },
    ),
    { nil: undefined },
  ),
})

/** Replace group `group` of `store` with up to three documents; each new embedding may be computed or not. */
const operation = fc.record({
  store: fc.constantFrom("alpha", "beta"),
  group: fc.integer({ min: 0, max: 6 }),
  /** Indexes into the run's pool of drafts, so the same document is written again often. */
  drafts: fc.array(fc.nat(4), { maxLength: 3 }),
  vectors: fc.array(fc.option(unitVector, { nil: undefined, freq: 4 }), { minLength: 3, maxLength: 3 }),
})

const filterArbitrary: fc.Arbitrary<SearchFilter> = fc.record(
  {
    projects: fc.constantFrom(["p1"], ["p2"], ["p1", "p2"], ["p3"]),
    stores: fc.constantFrom(["alpha"], ["beta"], ["alpha", "gamma"]),
    kinds: fc.constantFrom(["note"], ["task"], ["message", "adr"], ["unheard-of"]),
    session: fc.constantFrom("s1", "s2", "s3"),
    eventType: fc.constantFrom(...(Object.keys(seedEventTypes) as Array<SeedEventType>)),
    since: fc.integer({ min: now - 1e9, max: now }),
    until: fc.integer({ min: now - 1e9, max: now }),
  },
  { requiredKeys: [] },
)

const queryArbitrary = fc.record({
  text,
  mode: fc.constantFrom<SearchMode>("lexical", "semantic", "hybrid"),
  filter: filterArbitrary,
  limit: fc.integer({ min: 1, max: 12 }),
  vector: fc.option(unitVector, { nil: undefined }),
})

describe("SearchIndex", () => {
  it("holds the full text in memory in proportion to the documents' terms, and its stats say how much", () => {
    const index = new SearchIndex()
    const bytesOf = (documents: number) => {
      const batch = Array.from({ length: documents }, (_, n) => ({
        id: `d${n}`,
        store: "s",
        project: "p",
        kind: "note",
        title: `title ${n % 97}`,
        // About ten terms, one repeated (stemming joins a few).
        text: Array.from({ length: 10 }, (_, i) => words[(n * 7 + i * 3) % words.length]).join(" ") + " again again",
        at: now + n,
      }))
      index.replaceGroup("s", "g", batch)
      return index.stats().termBytes
    }
    const empty = index.stats().termBytes
    assert.isAbove(empty, 0)
    const documents = 20_000
    const held = bytesOf(documents) - empty
    // 195 bytes a document when written (each one's frequencies and postings, four bytes a number,
    // and its start, in arrays grown by half or doubled): up to three times that is capacity.
    assert.isAbove(held, documents * 100)
    assert.isBelow(held, documents * 600, `${(held / documents).toFixed(0)} bytes a document`)
  })

  it("search equals a brute-force scan after random creates, updates and deletes", () => {
    fc.assert(
      fc.property(
        fc.array(documentDraft, { minLength: 5, maxLength: 5 }),
        fc.array(operation, { maxLength: 25 }),
        fc.array(queryArbitrary, { minLength: 1, maxLength: 8 }),
        // Compacting the postings at every removal, or (as in production) never at this size.
        fc.boolean(),
        (pool, operations, queries, compactAlways) => {
          const index = new SearchIndex(compactAlways ? (stale) => stale > 0 : undefined)
          const groups = new Map<string, Array<SearchDocument>>()
          const vectors = new Map<string, { text: string; vector: Float32Array }>()
          for (const op of operations) {
            const key = `${op.store}/${op.group}`
            const documents = op.drafts.map(
              (draft, i): SearchDocument => ({ ...pool[draft]!, id: `${key}#${i}`, store: op.store }),
            )
            for (const old of groups.get(key) ?? [])
              if (!documents.some((document) => document.id === old.id)) vectors.delete(old.id)
            for (const document of documents) {
              const kept = vectors.get(document.id)
              if (kept !== undefined && kept.text !== embeddingText(document)) vectors.delete(document.id)
            }
            if (documents.length > 0) groups.set(key, documents)
            else groups.delete(key)
            const pending = index.replaceGroup(op.store, String(op.group), documents)
            // What still needs a vector is exactly what the model has no vector for.
            assert.deepStrictEqual(
              pending.map((item) => item.id).sort(),
              documents
                .filter((document) => !vectors.has(document.id))
                .map((document) => document.id)
                .sort(),
            )
            pending.forEach((item, i) => {
              const vector = op.vectors[Number(item.id.split("#")[1]) ?? i]
              if (vector === undefined) return
              assert.isTrue(index.setVector(item.id, item.hash, vector))
              vectors.set(item.id, { text: item.text, vector })
            })
          }
          const documents = [...groups.values()].flat()
          assert.strictEqual(index.size, documents.length)
          const countBy = (key: (document: SearchDocument) => string | undefined) => {
            const counts: Record<string, number> = {}
            for (const document of documents) {
              const value = key(document)
              if (value !== undefined) counts[value] = (counts[value] ?? 0) + 1
            }
            return counts
          }
          const stats = index.stats()
          assert.deepStrictEqual(
            stats.byStore,
            countBy((document) => document.store),
          )
          assert.deepStrictEqual(
            stats.byKind,
            countBy((document) => document.kind),
          )
          assert.strictEqual(stats.sessions, Object.keys(countBy((document) => document.session)).length)
          assert.strictEqual(stats.vectors, vectors.size)
          const plainVectors = new Map([...vectors].map(([id, entry]) => [id, entry.vector]))
          for (const query of queries) {
            const request = { ...query, now }
            const expected = bruteForceSearch(documents, plainVectors, request)
            const actual = index.search(request)
            const view = (hit: (typeof actual)[number]) => [hit.document.id, hit.score, hit.bm25, hit.similarity]
            assert.deepStrictEqual(
              actual.map(view),
              expected.map(view),
              `query ${JSON.stringify(query.text)} ${query.mode}`,
            )
            for (const hit of actual) {
              const parts = hit.score_breakdown
              assert.closeTo(parts.fulltext + parts.semantic + parts.recency + parts.importance, hit.score, 1e-12)
            }
          }
          for (const document of documents.slice(0, 3)) {
            const timeline = index.timeline(document.id, 2)!
            assert.deepStrictEqual(
              { before: timeline.before.map((d) => d.id), after: timeline.after.map((d) => d.id) },
              bruteForceTimeline(documents, document.id, 2),
            )
          }
        },
      ),
      { numRuns: 150 },
    )
  })

  it("common terms only score documents a rarer term found, unless the query has nothing rarer", () => {
    const index = new SearchIndex()
    const documents: Array<SearchDocument> = Array.from({ length: 1200 }, (_, i) => ({
      id: `d${String(i).padStart(4, "0")}`,
      store: i % 2 === 0 ? "alpha" : "beta",
      project: "p",
      kind: "note",
      title: i % 7 === 0 ? "deploy rollback" : "notes",
      text: [i % 10 !== 0 ? "error" : "", i % 97 === 0 ? "segfault" : "", i % 3 === 0 ? "error error" : ""].join(" "),
      at: now - i,
    }))
    for (const document of documents) index.replaceGroup(document.store, document.id, [document])
    for (const text of ["error segfault", "error", "error deploy", "segfault rollback error"]) {
      const query = { text, mode: "lexical" as const, filter: {}, limit: 50, now }
      const view = (hit: { document: SearchDocument; score: number; bm25?: number }) => [
        hit.document.id,
        hit.score,
        hit.bm25,
      ]
      assert.deepStrictEqual(
        index.search(query).map(view),
        bruteForceSearch(documents, new Map(), query).map(view),
        text,
      )
    }
    // "error" is common: with "segfault" in the query only segfault documents are candidates.
    const hits = index.search({ text: "error segfault", mode: "lexical", filter: {}, limit: 50, now })
    assert.isTrue(hits.length > 0 && hits.every((hit) => hit.document.text.includes("segfault")))
  })

  it("answers as a brute-force scan while its term pool grows, and after the pool is rewritten without removed documents", () => {
    // Documents with no terms leave no stale postings: their ranges alone make the pool rewrite.
    const compactWhen = (stale: number, live: number) => stale > Math.max(64, live)
    const index = new SearchIndex(compactWhen)
    const random = fc.sample(fc.array(fc.constantFrom(...words), { minLength: 0, maxLength: 12 }), {
      numRuns: 6000,
      seed: 28,
    })
    const make = (i: number, round: number): SearchDocument => ({
      id: `d${i}`,
      store: i % 2 === 0 ? "alpha" : "beta",
      project: "p",
      kind: "note",
      title: i % 5 === 0 ? "" : random[(i + round * 7) % random.length]!.slice(0, 3).join(" "),
      text: i % 5 === 0 ? "" : random[(i * 3 + round) % random.length]!.join(" "),
      at: now - i,
    })
    const live = new Map<string, SearchDocument>()
    const check = (label: string) => {
      for (const text of ["cache deploy", "the query timeout", "日本 café", "flaky test retry", "a"]) {
        const query = { text, mode: "lexical" as const, filter: {}, limit: 30, now }
        const view = (hit: { document: SearchDocument; score: number }) => [hit.document.id, hit.score]
        assert.deepStrictEqual(
          index.search(query).map(view),
          bruteForceSearch([...live.values()], new Map(), query).map(view),
          `${label}: ${text}`,
        )
      }
    }
    // 2,000 documents (far past the pool's first 4,096 numbers), then three rounds of updating
    // and deleting most of them: stale ranges outnumber live ones, the pool is rewritten.
    for (let i = 0; i < 2000; i++) {
      const document = make(i, 0)
      index.replaceGroup(document.store, document.id, [document])
      live.set(document.id, document)
    }
    check("grown")
    for (let round = 1; round <= 3; round++) {
      for (let i = 0; i < 2000; i++) {
        const document = make(i, round)
        if ((i + round) % 3 === 0) {
          index.replaceGroup(document.store, document.id, [])
          live.delete(document.id)
        } else {
          index.replaceGroup(document.store, document.id, [document])
          live.set(document.id, document)
        }
      }
      check(`round ${round}`)
    }
  })

  it("ranks words in the title above the same words in the text, and folds plurals", () => {
    const index = new SearchIndex()
    const base = { store: "s", project: "p", kind: "note", at: now }
    index.replaceGroup("s", "1", [{ ...base, id: "a", title: "unrelated", text: "database migration went fine" }])
    index.replaceGroup("s", "2", [{ ...base, id: "b", title: "Database migrations", text: "notes" }])
    const hits = index.search({ text: "database migration", mode: "lexical", filter: {}, limit: 5, now })
    assert.deepStrictEqual(
      hits.map((hit) => hit.document.id),
      ["b", "a"],
    )
    assert.isAbove(hits[0]!.score_breakdown.fulltext, hits[1]!.score_breakdown.fulltext)
  })

  it("keeps a next model's vectors current through replaces and removals, then swaps them in", () => {
    const index = new SearchIndex()
    const base = { store: "s", project: "p", kind: "note", at: now, title: "" }
    const unit = (...values: Array<number>) => Float32Array.from(values)
    const group = (texts: Record<string, string>) =>
      index.replaceGroup(
        "s",
        "g",
        Object.entries(texts).map(([id, text]) => ({ ...base, id, text, fields: { revision: text.length } })),
      )
    for (const pending of group({ a: "alpha", b: "beta", c: "gamma" }))
      index.setVector(pending.id, pending.hash, unit(1, 0))
    index.beginNextVectors()
    for (const id of ["a", "b", "c"]) {
      const { hash } = index.embeddingOf(id)!
      assert.isTrue(index.setNextVector(id, hash, unit(0, 0, 1)))
    }
    // a: same text, other fields (its next vector comes along); b: new text; c: removed.
    index.replaceGroup("s", "g", [
      { ...base, id: "a", text: "alpha", fields: { revision: 99 } },
      { ...base, id: "b", text: "beta changed" },
    ])
    assert.deepStrictEqual(
      index.missingNextVectors().map((pending) => pending.id),
      ["b"],
    )
    const b = index.embeddingOf("b")!
    assert.isFalse(index.setNextVector("b", "stale hash", unit(0, 1, 0)), "a stale vector is refused")
    assert.isTrue(index.setNextVector("b", b.hash, unit(0, 1, 0)))
    assert.deepStrictEqual(index.missingNextVectors(), [])
    const semantic = (vector: Float32Array) =>
      index
        .search({ text: "", mode: "semantic", filter: {}, limit: 5, now, vector })
        .map((hit) => [hit.document.id, hit.similarity])
    assert.deepStrictEqual(semantic(unit(1, 0)), [["a", 1]], "the live set answers until the swap")
    index.switchToNextVectors()
    assert.deepStrictEqual(semantic(unit(0, 0, 1)), [["a", 1]])
    assert.deepStrictEqual(semantic(unit(0, 1, 0)), [["b", 1]])
    assert.strictEqual(index.stats().vectors, 2)
  })
})
