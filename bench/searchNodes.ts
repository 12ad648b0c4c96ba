/**
 * search_nodes benchmark: builds a large synthetic graph in a `SubstringIndex` and times queries.
 *
 * The corpus is deterministic (seeded PRNG): entity names like "tenrasi_1234", a dozen entity
 * types, and observations of 5–14 words drawn by Zipf's law (s = 1) from a 20k-word
 * random-letter vocabulary that includes accented, Greek, Cyrillic, CJK and emoji words; the most
 * common words appear in most entities, like "the" would. Queries mix topical and common words,
 * names, name fragments, phrases, entity types, misses, and 1–2 character queries. Only
 * `index.search` is timed; a sample of queries is also answered by a linear scan, both to check
 * the index and to time the official approach side by side.
 */
import { performance } from "node:perf_hooks"
import { SubstringIndex, type SubstringIndexStats, textsMatchQuery } from "../src/graph/SubstringIndex.ts"
import { seededRandom, zipfSampler } from "./Random.ts"

/** Knobs for `benchmarkSearchNodes`; defaults are the 100k-entity / 300k-observation target. */
export interface SearchNodesBenchOptions {
  readonly entities?: number
  readonly observationsPerEntity?: number
  readonly queries?: number
  /** Queries also answered by a linear scan and compared; a mismatch throws. */
  readonly verifiedQueries?: number
  readonly seed?: number
}

/** Timings in milliseconds, plus the index's size. */
export interface SearchNodesBenchResult {
  readonly entities: number
  readonly observations: number
  readonly queries: number
  readonly buildMs: number
  readonly p50Ms: number
  readonly p99Ms: number
  readonly maxMs: number
  readonly meanMatches: number
  /** Mean time of the official linear scan over the verified queries, for comparison. */
  readonly linearScanMeanMs: number
  readonly heapUsedBytes: number
  readonly index: SubstringIndexStats
}

const entityTypes = [
  "person",
  "project",
  "organization",
  "tool",
  "concept",
  "file",
  "service",
  "library",
  "bug",
  "decision",
  "meeting",
  "Ort",
]
/** Distinct random words in the corpus vocabulary. */
const vocabularyWords = 20_000
/** Letters weighted roughly by English frequency. */
const letters =
  "eeeeeeeeeeeetttttttttaaaaaaaaooooooooiiiiiiinnnnnnnsssssshhhhhhrrrrrrddddllllcccuuummmwwffggyyppbbvkjxqz"
const exoticWords = [
  "café",
  "Straße",
  "naïve",
  "ΣΟΦΙΑ",
  "Москва",
  "İstanbul",
  "東京",
  "데이터",
  "🚀launch",
  "e\u0301clair",
]

const percentile = (sorted: ReadonlyArray<number>, fraction: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))]!

/** Builds the graph into an index and times `queries` search_nodes lookups. */
export const benchmarkSearchNodes = (options: SearchNodesBenchOptions = {}): SearchNodesBenchResult => {
  const entityCount = options.entities ?? 100_000
  const observationsPerEntity = options.observationsPerEntity ?? 3
  const queryCount = options.queries ?? 1000
  const verifiedQueries = options.verifiedQueries ?? 20
  const random = seededRandom(options.seed ?? 42)
  const pick = <A>(items: ArrayLike<A>): A => items[Math.floor(random() * items.length)]!

  const vocabulary: Array<string> = []
  for (let i = 0; i < vocabularyWords; i++) {
    const length = 3 + Math.floor(random() * 8)
    let word = ""
    for (let l = 0; l < length; l++) word += pick(letters)
    vocabulary.push(i % 997 === 500 ? pick(exoticWords) : word)
  }
  vocabulary.push(...exoticWords)
  const zipfWord = zipfSampler(vocabulary, random)
  const sentence = () => {
    const words = 5 + Math.floor(random() * 10)
    const parts: Array<string> = []
    for (let w = 0; w < words; w++) parts.push(zipfWord())
    return parts.join(" ")
  }

  const documents: Array<ReadonlyArray<string>> = []
  const names: Array<string> = []
  for (let i = 0; i < entityCount; i++) {
    const name = `${pick(vocabulary)}_${i}`
    const texts = [name, pick(entityTypes)]
    for (let o = 0; o < observationsPerEntity; o++) texts.push(sentence())
    names.push(name)
    documents.push(texts)
  }

  const index = new SubstringIndex<number>()
  const buildStart = performance.now()
  for (const [id, texts] of documents.entries()) index.upsert(id, texts)
  // As the daemon builds a project's model from its store (GraphReadModel.ts).
  index.compact()
  const buildMs = performance.now() - buildStart

  // The mix an agent plausibly sends: mostly names and topical words, a few phrases, misses,
  // very common words and one- or two-character queries.
  const query = (): string => {
    const kind = random()
    if (kind < 0.35) return pick(vocabulary)
    if (kind < 0.45) return zipfWord()
    if (kind < 0.65) return pick(names)
    if (kind < 0.75) {
      const name = pick(names)
      const start = Math.floor(random() * (name.length - 3))
      return name.slice(start, start + 3 + Math.floor(random() * 4)).toUpperCase()
    }
    if (kind < 0.85) {
      const text = pick(pick(documents))
      const start = Math.floor(random() * text.length)
      return text.slice(start, start + 4 + Math.floor(random() * 12))
    }
    if (kind < 0.9) return pick(entityTypes)
    if (kind < 0.98) return `zq${Math.floor(random() * 1e6)}x`
    return pick(letters) + (random() < 0.5 ? pick(letters) : "")
  }
  const queries = Array.from({ length: queryCount }, query)

  for (const text of queries.slice(0, 50)) index.search(text) // warm up the JIT
  const durations: Array<number> = []
  let totalMatches = 0
  for (const text of queries) {
    const start = performance.now()
    const keys = index.search(text)
    durations.push(performance.now() - start)
    totalMatches += keys.length
  }

  let linearScanMs = 0
  for (const text of queries.slice(0, verifiedQueries)) {
    const scanStart = performance.now()
    const expected = documents.flatMap((texts, id) => (textsMatchQuery(texts, text) ? [id] : []))
    linearScanMs += performance.now() - scanStart
    const actual = index.search(text)
    if (expected.length !== actual.length || expected.some((id, i) => actual[i] !== id)) {
      throw new Error(`index and linear scan disagree on query ${JSON.stringify(text)}`)
    }
  }

  durations.sort((a, b) => a - b)
  return {
    entities: entityCount,
    observations: entityCount * observationsPerEntity,
    queries: queryCount,
    buildMs,
    p50Ms: percentile(durations, 0.5),
    p99Ms: percentile(durations, 0.99),
    maxMs: durations[durations.length - 1]!,
    meanMatches: totalMatches / queryCount,
    linearScanMeanMs: verifiedQueries > 0 ? linearScanMs / Math.min(verifiedQueries, queryCount) : Number.NaN,
    heapUsedBytes: process.memoryUsage().heapUsed,
    index: index.stats(),
  }
}
