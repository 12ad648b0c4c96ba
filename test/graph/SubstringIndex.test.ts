/**
 * SubstringIndex must answer exactly like the official linear scan
 * (`text.toLowerCase().includes(query.toLowerCase())` over each document's texts), in insertion
 * order, on tricky Unicode and after any sequence of upserts and removals, including ones that
 * make it rebuild itself.
 */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { benchmarkSearchNodes } from "../../bench/searchNodes.ts"
import {
  isWordSeparator,
  PostingPool,
  SubstringIndex,
  textsMatchQuery,
  WordLists,
} from "../../src/graph/SubstringIndex.ts"

/** Pieces that stress case folding and code-unit matching. */
const trickyPieces = [
  "a",
  "A",
  "b",
  "x",
  "k",
  "word",
  "WORD",
  "Word ",
  "alpha.",
  " ",
  "-",
  "_",
  "İ", // lower-cases to "i̇" (two units)
  "I",
  "i",
  "ı",
  "ß",
  "ẞ", // capital sharp s, lower-cases to "ß"
  "SS",
  "Σ", // lower-cases to σ or ς depending on context
  "σ",
  "ς",
  "😀",
  "\uD83D", // lone high surrogate
  "\uDE00", // lone low surrogate
  "e",
  "\u0301", // combining acute
  "é",
  "\u212A", // Kelvin sign, lower-cases to "k"
  "Ω",
  "ǅ",
  "\u0000", // the index's own text separator
  "東京",
]

const trickyText = fc.oneof(
  { weight: 4, arbitrary: fc.array(fc.constantFrom(...trickyPieces), { maxLength: 8 }).map((parts) => parts.join("")) },
  { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 8 }) },
  { weight: 1, arbitrary: fc.string({ unit: "grapheme", maxLength: 6 }) },
)

const documentTexts = fc.array(trickyText, { minLength: 1, maxLength: 4 })

const wordsOf = (text: string): Array<string> => text.split(/[\s!-/:-@[-`{-~]+/).filter((word) => word.length > 0)

/**
 * A query: random tricky text, a case-changed code-unit slice of a text (possibly splitting a
 * surrogate pair), a slice spanning two adjacent texts joined by "\u0000" (the index's own
 * separator), or a whole word of a text.
 */
const queryFor = (documents: ReadonlyArray<ReadonlyArray<string>>) => {
  const texts = documents.flat()
  const spans = documents.flatMap((document) => document.slice(1).map((text, i) => `${document[i]}\u0000${text}`))
  const sliceOf = (sources: ReadonlyArray<string>) =>
    sources.length === 0
      ? fc.constant("")
      : fc
          .tuple(fc.constantFrom(...sources), fc.nat(), fc.nat({ max: 8 }), fc.constantFrom("same", "upper", "lower"))
          .map(([text, start, length, casing]) => {
            const from = text.length === 0 ? 0 : start % text.length
            const slice = text.slice(from, from + length)
            return casing === "upper" ? slice.toUpperCase() : casing === "lower" ? slice.toLowerCase() : slice
          })
  const words = texts.flatMap(wordsOf)
  return fc.oneof(
    { weight: 3, arbitrary: sliceOf(texts) },
    { weight: 1, arbitrary: sliceOf(spans) },
    { weight: 1, arbitrary: words.length === 0 ? fc.constant("word") : fc.constantFrom(...words) },
    { weight: 2, arbitrary: trickyText },
  )
}

/** The linear scan over a model kept in insertion order (a Map keeps first-insertion order on set). */
const linearSearch = (model: ReadonlyMap<number, ReadonlyArray<string>>, query: string): Array<number> =>
  [...model].filter(([, texts]) => textsMatchQuery(texts, query)).map(([key]) => key)

type Operation =
  | { readonly kind: "upsert"; readonly key: number; readonly texts: ReadonlyArray<string> }
  | { readonly kind: "remove"; readonly key: number }
  | { readonly kind: "search"; readonly query: string }
  | { readonly kind: "compact" }

const operation: fc.Arbitrary<Operation> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({ kind: fc.constant("upsert" as const), key: fc.nat({ max: 12 }), texts: documentTexts }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("remove" as const), key: fc.nat({ max: 12 }) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("search" as const), query: trickyText }) },
  { weight: 1, arbitrary: fc.constant({ kind: "compact" as const }) },
)

describe("SubstringIndex", () => {
  it("returns exactly the linear scan's documents, in insertion order, on random graphs and queries", () => {
    fc.assert(
      fc.property(
        fc
          .array(documentTexts, { maxLength: 30 })
          .chain((documents) =>
            fc.tuple(fc.constant(documents), fc.array(queryFor(documents), { minLength: 1, maxLength: 15 })),
          ),
        ([documents, queries]) => {
          const index = new SubstringIndex<number>({
            candidatesWorthIntersecting: 0,
            verifyToMarkCostRatio: Number.POSITIVE_INFINITY,
          })
          const model = new Map<number, ReadonlyArray<string>>()
          documents.forEach((texts, key) => {
            index.upsert(key, texts)
            model.set(key, texts)
          })
          for (const query of queries) expect(index.search(query)).toEqual(linearSearch(model, query))
        },
      ),
      { numRuns: 1000 },
    )
  })

  it("stays equal to the linear scan through random upserts, removals, compactions, rebuilds and mark wraps", () => {
    fc.assert(
      fc.property(
        fc.array(operation, { maxLength: 60 }),
        fc.constantFrom(0, 3, 1 << 16),
        fc.array(fc.integer({ min: 0, max: 1000 }), { minLength: 1, maxLength: 5 }),
        fc.constantFrom(undefined, 1),
        fc.boolean(),
        (operations, rebuildMinimum, querySeeds, stampGenerationsMax, alwaysIntersect) => {
          const index = new SubstringIndex<number>({
            stalePostingsBeforeRebuildMin: rebuildMinimum,
            deadSlotsBeforeRebuildMin: rebuildMinimum,
            // 1 is raised to the smallest allowed value, so marks wrap every few operations.
            stampGenerationsMax,
            // Small graphs never reach the intersection thresholds unless told to.
            ...(alwaysIntersect
              ? { candidatesWorthIntersecting: 0, verifyToMarkCostRatio: Number.POSITIVE_INFINITY }
              : {}),
          })
          const model = new Map<number, ReadonlyArray<string>>()
          for (const step of operations) {
            if (step.kind === "upsert") {
              index.upsert(step.key, step.texts)
              model.set(step.key, step.texts)
            } else if (step.kind === "remove") {
              expect(index.remove(step.key)).toBe(model.delete(step.key))
            } else if (step.kind === "compact") {
              index.compact()
            } else {
              expect(index.search(step.query)).toEqual(linearSearch(model, step.query))
            }
            expect(index.size).toBe(model.size)
          }
          // Also query pieces of every text ever indexed, including texts since replaced or removed
          // (their stale postings must not leak into answers).
          const seen = operations.flatMap((step) => (step.kind === "upsert" ? step.texts : []))
          for (const seed of querySeeds) {
            const text = seen[seed % Math.max(1, seen.length)] ?? ""
            const words = wordsOf(text)
            const word = words[seed % Math.max(1, words.length)] ?? ""
            for (const query of [text, text.slice(1), text.slice(0, 3), text.slice(-2), text.toUpperCase(), word]) {
              expect(index.search(query)).toEqual(linearSearch(model, query))
            }
          }
          expect(index.keys()).toEqual([...model.keys()])
        },
      ),
      { numRuns: 1000 },
    )
  })

  it("follows toLowerCase and code-unit includes on the cases that trip up case folding", () => {
    const index = new SubstringIndex<string>()
    index.upsert("istanbul", ["İstanbul"])
    index.upsert("dotless", ["ılık"])
    index.upsert("strasse", ["Straße"])
    index.upsert("emoji", ["launch 😀 now"])
    index.upsert("sigma", ["ΟΔΟΣ"])
    index.upsert("kelvin", ["300 \u212A"])
    index.upsert("combining", ["cafe\u0301"])

    expect(index.search("i̇stanbul")).toEqual(["istanbul"])
    expect(index.search("istanbul")).toEqual([]) // "İ" lower-cases to "i" + U+0307
    expect(index.search("İ")).toEqual(["istanbul"])
    expect(index.search("I")).toEqual(["istanbul"]) // "i" is inside "i̇"
    expect(index.search("ı")).toEqual(["dotless"])
    expect(index.search("STRASSE")).toEqual([])
    expect(index.search("STRAẞE")).toEqual(["strasse"])
    expect(index.search("\uD83D")).toEqual(["emoji"]) // half a surrogate pair matches
    expect(index.search("😀")).toEqual(["emoji"])
    expect(index.search("ς")).toEqual(["sigma"]) // final sigma after lower-casing "ΟΔΟΣ"
    expect(index.search("Σ")).toEqual([]) // a lone "Σ" lower-cases to "σ"
    expect(index.search("300 k")).toEqual(["kelvin"])
    expect(index.search("\u0301")).toEqual(["combining"])
    expect(index.search("café")).toEqual([]) // precomposed é is not e + U+0301
    expect(index.search("CAFE")).toEqual(["combining"])
  })

  it("never matches across two texts of one document, even when the query contains the separator", () => {
    const index = new SubstringIndex<string>()
    index.upsert("split", ["ab", "cd"])
    index.upsert("inside", ["b\u0000c"])
    expect(index.search("b\u0000c")).toEqual(["inside"])
    expect(index.search("bc")).toEqual([])
    expect(index.search("abcd")).toEqual([])
    // Every trigram of "ab\u0000cd" occurs in some text, and the texts' joined form contains it,
    // yet no single text does.
    index.upsert("contrived", ["ab", "cd", "xab\u0000", "b\u0000c", "\u0000cdy"])
    expect(index.search("ab\u0000cd")).toEqual([])
  })

  it("matches everything on the empty query, and keeps a document's position when it is updated", () => {
    const index = new SubstringIndex<string>()
    index.upsert("first", ["apple"])
    index.upsert("second", ["banana"])
    index.upsert("third", ["apricot"])
    index.upsert("first", ["cherry", "apple pie"])
    expect(index.search("")).toEqual(["first", "second", "third"])
    expect(index.search("ap")).toEqual(["first", "third"])
    index.remove("first")
    index.upsert("first", ["apple"])
    expect(index.search("ap")).toEqual(["third", "first"])
  })

  it("does not trust a word posting after the word was removed from the document", () => {
    const index = new SubstringIndex<string>()
    index.upsert("doc", ["the keyword here"])
    expect(index.search("keyword")).toEqual(["doc"])
    index.upsert("doc", ["the keywor here"])
    expect(index.search("keyword")).toEqual([])
    expect(index.search("keywor")).toEqual(["doc"])
  })

  it("rebuilds itself once stale postings outnumber live ones, keeping answers and order", () => {
    const index = new SubstringIndex<number>({ stalePostingsBeforeRebuildMin: 10, deadSlotsBeforeRebuildMin: 2 })
    for (let key = 0; key < 20; key++) index.upsert(key, [`entity ${key}`, "shared observation"])
    for (let key = 0; key < 15; key++) index.remove(key)
    const stats = index.stats()
    expect(stats.rebuilds).toBeGreaterThan(0)
    expect(stats.slots).toBeLessThan(20)
    expect(index.search("shared")).toEqual([15, 16, 17, 18, 19])
    expect(index.search("entity 1")).toEqual([15, 16, 17, 18, 19])
  })

  it("compacted after a bulk build, answers the same from less memory, and keeps answering through later changes", () => {
    // 6,000 documents: lists longer than a block (every document has "e"), a pool of many pages.
    const texts = (key: number) => [`entity-${key}`, `observation ${key % 97} of the ${key % 13}th kind`]
    const index = new SubstringIndex<number>()
    const model = new Map<number, ReadonlyArray<string>>()
    for (let key = 0; key < 6000; key++) {
      index.upsert(key, texts(key))
      model.set(key, texts(key))
    }
    const queries = ["e", "ent", "entity-59", "of the 7th", "observation 96", "kind", "zz", "TY-1"]
    const before = queries.map((query) => index.search(query))
    const grown = index.stats().poolBytes
    index.compact()
    expect(index.stats().poolBytes).toBeLessThan(grown * 0.85)
    // A posting is a slot's distance from the one before, mostly one byte (four as a 32-bit slot).
    expect(index.stats().poolBytes / index.stats().postings).toBeLessThan(2)
    expect(queries.map((query) => index.search(query))).toEqual(before)
    for (let key = 0; key < 6000; key += 7) {
      if (key % 2 === 0) {
        index.remove(key)
        model.delete(key)
      } else {
        index.upsert(key, [`renamed ${key}`, "entity"])
        model.set(key, [`renamed ${key}`, "entity"])
      }
    }
    for (let key = 6000; key < 6500; key++) {
      index.upsert(key, texts(key))
      model.set(key, texts(key))
    }
    for (const query of [...queries, "renamed 1", "entity"])
      expect(index.search(query)).toEqual(linearSearch(model, query))
  })

  it("agrees with a linear scan on a benchmark-style corpus, where intersection and word proofs kick in", () => {
    // benchmarkSearchNodes throws when the index and the linear scan disagree on a verified query.
    const result = benchmarkSearchNodes({ entities: 3000, queries: 400, verifiedQueries: 400, seed: 7 })
    expect(result.index.documents).toBe(3000)
    expect(result.meanMatches).toBeGreaterThan(0)
  })
})

describe("the word scanner", () => {
  it("separates words where the regular expression it stands for does, on every UTF-16 code unit", () => {
    const separator = /[\s!-/:-@[-`{-~]/
    const disagreeing: Array<number> = []
    for (let unit = 0; unit <= 0xffff; unit++)
      if (isWordSeparator(unit) !== separator.test(String.fromCharCode(unit))) disagreeing.push(unit)
    expect(disagreeing).toEqual([])
  })
})

describe("the word lists", () => {
  it("tell apart words whose two hashes are the same", () => {
    // Real collisions of both 32-bit hashes are too rare to find: the hashes are given.
    const words = new WordLists()
    words.add("alpha", 7, 9, 1)
    words.add("omega", 7, 9, 2)
    words.add("delta", 7, 10, 3)
    const text = "an alpha and an omega, no gamma"
    expect(words.get(text, 3, 8, 7, 9)).toBe(1)
    expect(words.get(text, 16, 21, 7, 9)).toBe(2)
    expect(words.get(text, 26, 31, 7, 9)).toBe(-1)
    expect(words.get("delta", 0, 5, 7, 10)).toBe(3)
    expect(words.get("gamma", 0, 5, 7, 10)).toBe(-1)
  })
})

describe("PostingPool", () => {
  it("reads back every list as appended, through distances of every encoded length, descents and compactions", () => {
    // Slots near each varint boundary (1 to 5 bytes), and descents (written as escaped slots).
    const slot = fc.oneof(
      fc.nat({ max: 300 }),
      fc.constantFrom(0, 127, 128, 16_383, 16_384, 2_097_151, 2_097_152, 268_435_455, 268_435_456, 0xffff_ffff),
      fc.nat({ max: 0xffff_ffff }),
    )
    const step = fc.oneof(
      { weight: 20, arbitrary: fc.tuple(fc.nat({ max: 5 }), slot) },
      { weight: 1, arbitrary: fc.constant("compact" as const) },
    )
    fc.assert(
      fc.property(fc.array(step, { maxLength: 400 }), (steps) => {
        let pool = new PostingPool()
        const lists = Array.from({ length: 6 }, () => pool.newList())
        const model: Array<Array<number>> = lists.map(() => [])
        for (const s of steps) {
          if (s === "compact") pool = pool.compacted()
          else {
            pool.append(lists[s[0]]!, s[1])
            model[s[0]]!.push(s[1])
          }
        }
        for (const [at, list] of lists.entries()) {
          expect(pool.length(list)).toBe(model[at]!.length)
          expect(Array.from(pool.entriesOf(list))).toEqual(model[at])
        }
        expect(pool.entries).toBe(model.flat().length)
      }),
      { numRuns: 300 },
    )
  })

  it("keeps lists longer than its largest block whole through compactions, cut only between entries", () => {
    // Lists of 2 to 5 times the largest block's bytes, entries of 1 to 5 bytes mixed, compacted
    // between appends and again at the end: a block filled past its room, or an entry cut in two,
    // reads back wrong.
    const entry = fc.oneof(
      { weight: 8, arbitrary: fc.integer({ min: 1, max: 127 }) },
      { weight: 2, arbitrary: fc.integer({ min: 128, max: 2_097_151 }) },
      { weight: 1, arbitrary: fc.integer({ min: 2_097_152, max: 0x7fff_ffff }) },
    )
    fc.assert(
      fc.property(
        fc.array(entry, { minLength: 20_000, maxLength: 20_000 }),
        fc.array(fc.nat({ max: 19_999 }), { maxLength: 4 }),
        (distances, compactAt) => {
          let pool = new PostingPool()
          const lists = [pool.newList(), pool.newList()]
          const model: Array<Array<number>> = [[], []]
          const lasts = [-1, -1]
          for (const [at, distance] of distances.entries()) {
            const list = at % 2
            // Ascending slots (distances), with a descent now and then (an escaped slot).
            const slot = at % 997 === 0 ? distance % 1000 : (lasts[list]! + distance) % 0x1_0000_0000
            pool.append(lists[list]!, slot)
            model[list]!.push(slot)
            lasts[list] = slot
            if (compactAt.includes(at)) pool = pool.compacted()
          }
          pool = pool.compacted()
          for (const [at, list] of lists.entries()) expect(Array.from(pool.entriesOf(list))).toEqual(model[at])
          // Appends after the last compaction continue each list where it ended.
          pool.append(lists[0]!, 5)
          expect(Array.from(pool.entriesOf(lists[0]!)).slice(-2)).toEqual([model[0]!.at(-1), 5])
        },
      ),
      { numRuns: 20 },
    )
  })
})
