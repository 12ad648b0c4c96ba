/**
 * The labelled retrieval sets of bench/retrieval-set/, as search documents and queries.
 *
 * - `corpus.tsv` + `queries.tsv`: 100 engineering records with one "exact" query (the record's own
 *   distinctive words) and one "paraphrase" query (other words for the same thing) per target.
 * - `near-miss-corpus.tsv` + `near-miss-queries.tsv`: 44 topics of 4 records each (a bug, a
 *   decision, a convention, a task, ... about one subject, each stating a different fact) and 3
 *   "near-miss" queries per topic. Each query paraphrases its target's fact, and at least two other
 *   records of its topic share *more* full-text terms with the query than the target does: the
 *   query names the subject in their words, not the target's. `nearMissViolations` checks this.
 *
 * Every query belongs to a split: "tune" (constants may be chosen on it) or "heldout" (reported,
 * never tuned on). Near-miss topics alternate between the splits in file order; the older queries
 * split by their target's number (odd: tune, even: held out).
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { embeddingText, type SearchDocument } from "../src/search/index/SearchDocument.ts"
import { fullTextTerms } from "../src/search/index/Tokenizer.ts"

const setDir = join(import.meta.dirname, "retrieval-set")

/** What a query tests. */
export type QueryType = "exact" | "paraphrase" | "near-miss"
export type Split = "tune" | "heldout"
export const splits: ReadonlyArray<Split> = ["tune", "heldout"]

/** One labelled query. */
export interface LabelledQuery {
  readonly type: QueryType
  readonly split: Split
  readonly target: string
  readonly query: string
}

/** Reads a TSV with a header row. */
const readTsv = (file: string): Array<Record<string, string>> => {
  const [header, ...rows] = readFileSync(join(setDir, file), "utf8").trimEnd().split("\n")
  const columns = header!.split("\t")
  return rows.map((row) => Object.fromEntries(row.split("\t").map((cell, i) => [columns[i]!, cell])))
}

const storeOf = (kind: string) => (kind === "message" ? "conversations" : kind === "task" ? "tasks" : "engineering")

/** The records of both sets, the topic of each near-miss record, and every query. */
export const loadRetrievalSet = (now: number) => {
  const day = 24 * 60 * 60 * 1000
  const documents = readTsv("corpus.tsv").map(
    (row): SearchDocument => ({
      id: row.id!,
      store: storeOf(row.kind!),
      project: "ledgerly",
      kind: row.kind!,
      // A message has no title: its role is metadata, not words to search.
      title: row.kind === "message" ? "" : row.title!,
      text: row.text!,
      session: row.session === "" ? undefined : row.session,
      at: now - day,
      ...(row.kind === "message" ? { fields: { role: row.title! } } : {}),
    }),
  )
  const topicOf = new Map<string, string>()
  for (const row of readTsv("near-miss-corpus.tsv")) {
    topicOf.set(row.id!, row.topic!)
    documents.push({
      id: row.id!,
      store: storeOf(row.kind!),
      project: "ledgerly",
      kind: row.kind!,
      title: row.title!,
      text: row.text!,
      at: now - day,
    })
  }
  const queries: Array<LabelledQuery> = readTsv("queries.tsv").map((row) => ({
    type: row.type as "exact" | "paraphrase",
    split: Number(row.target!.slice(1)) % 2 === 1 ? "tune" : "heldout",
    target: row.target!,
    query: row.query!,
  }))
  for (const row of readTsv("near-miss-queries.tsv"))
    queries.push({ type: "near-miss", split: row.split as Split, target: row.target!, query: row.query! })
  return { documents, queries, topicOf }
}

/** The distinct full-text terms `query` shares with `document`. */
export const sharedTerms = (query: string, document: SearchDocument): number => {
  const terms = new Set(fullTextTerms(embeddingText(document)))
  return new Set(fullTextTerms(query).filter((term) => terms.has(term))).size
}

/** Near-miss queries with fewer than two topic neighbours sharing more terms than the target. */
export const nearMissViolations = (set: ReturnType<typeof loadRetrievalSet>): Array<string> => {
  const byId = new Map(set.documents.map((document) => [document.id, document]))
  const violations: Array<string> = []
  for (const query of set.queries) {
    if (query.type !== "near-miss") continue
    const topic = set.topicOf.get(query.target)
    const target = sharedTerms(query.query, byId.get(query.target)!)
    const closer = [...set.topicOf]
      .filter(([id, other]) => other === topic && id !== query.target)
      .filter(([id]) => sharedTerms(query.query, byId.get(id)!) > target)
    if (closer.length < 2) violations.push(`${query.target} "${query.query}"`)
  }
  return violations
}
