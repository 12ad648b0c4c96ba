/**
 * Retrieval quality: Recall@5 and MRR of lexical, semantic and hybrid search on a labelled
 * engineering-memory set (bench/retrieval-set/): 100 records — decisions, bug fixes, tasks,
 * conversation messages, notes, snippets — and 178 queries, one "exact" (the record's own
 * distinctive words) and one "paraphrase" (other words for the same thing) per target record.
 *
 * Queries run through the real index (SearchIndex: FlexSearch + BM25F, vectors from the default
 * ONNX model, fusion) exactly as mem-search runs them. Paraphrase queries are also split by
 * whether they share any full-text term with their target: "no shared term" is the strict
 * subset, where full text cannot find the target by construction.
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { resolveDefaultModel } from "../src/search/Embedder.ts"
import type { SearchMode } from "../src/search/Ranking.ts"
import { embeddingText, type SearchDocument } from "../src/search/SearchDocument.ts"
import { SearchIndex } from "../src/search/SearchIndex.ts"
import { loadStaticModel } from "../src/search/StaticModel.ts"
import { fullTextTerms } from "../src/search/Tokenizer.ts"
import type { BenchSuite } from "./Table.ts"
import { round } from "./Table.ts"

const setDir = join(import.meta.dirname, "retrieval-set")
const recallAt = 5
const mrrDepth = 10

/** Reads a TSV with a header row. */
const readTsv = (file: string): Array<Record<string, string>> => {
  const [header, ...rows] = readFileSync(join(setDir, file), "utf8").trimEnd().split("\n")
  const columns = header!.split("\t")
  return rows.map((row) => Object.fromEntries(row.split("\t").map((cell, i) => [columns[i]!, cell])))
}

/** The labelled set as search documents and queries. */
export const loadRetrievalSet = (now: number) => {
  const documents = readTsv("corpus.tsv").map(
    (row): SearchDocument => ({
      id: row.id!,
      store: row.kind === "message" ? "conversations" : row.kind === "task" ? "tasks" : "engineering",
      project: "ledgerly",
      kind: row.kind!,
      // A message has no title: its role is metadata, not words to search.
      title: row.kind === "message" ? "" : row.title!,
      text: row.text!,
      session: row.session === "" ? undefined : row.session,
      at: now - 24 * 60 * 60 * 1000,
      ...(row.kind === "message" ? { fields: { role: row.title! } } : {}),
    }),
  )
  const queries = readTsv("queries.tsv").map((row) => ({
    type: row.type as "exact" | "paraphrase",
    target: row.target!,
    query: row.query!,
  }))
  return { documents, queries }
}

interface Score {
  hits: number
  reciprocal: number
  count: number
}

export const suite: BenchSuite = {
  title: "retrieval quality (Recall@5, MRR@10) on the labelled engineering-memory set",
  run: async () => {
    const now = Date.now()
    const { documents, queries } = loadRetrievalSet(now)
    const encoder = await loadStaticModel(resolveDefaultModel(undefined))
    const index = new SearchIndex()
    for (const document of documents) {
      for (const pending of index.replaceGroup(document.store, document.id, [document])) {
        const [vector] = await encoder.encode([pending.text])
        if (vector !== undefined) index.setVector(pending.id, pending.hash, vector)
      }
    }
    const byId = new Map(documents.map((document) => [document.id, document]))
    const sharesTerm = (query: string, target: string) => {
      const targetTerms = new Set(fullTextTerms(embeddingText(byId.get(target)!)))
      return fullTextTerms(query).some((term) => targetTerms.has(term))
    }
    const groups = {
      exact: (q: (typeof queries)[number]) => q.type === "exact",
      paraphrase: (q: (typeof queries)[number]) => q.type === "paraphrase",
      "paraphrase, no shared term": (q: (typeof queries)[number]) =>
        q.type === "paraphrase" && !sharesTerm(q.query, q.target),
      all: () => true,
    }
    const modes: ReadonlyArray<SearchMode> = ["lexical", "semantic", "hybrid"]
    const scores = new Map<string, Score>()
    const misses: Array<string> = []
    for (const query of queries) {
      const [vector] = await encoder.encode([query.query])
      for (const mode of modes) {
        const hits = index.search({
          text: query.query,
          mode,
          filter: { projects: ["ledgerly"] },
          limit: mrrDepth,
          vector,
          now,
        })
        const rank = hits.findIndex((hit) => hit.document.id === query.target) + 1
        if (mode === "hybrid" && (rank === 0 || rank > recallAt))
          misses.push(
            `${query.type} ${query.target} "${query.query}" → ${hits
              .slice(0, 3)
              .map((hit) => hit.document.id)
              .join(",")}`,
          )
        for (const [name, member] of Object.entries(groups)) {
          if (!member(query)) continue
          const key = `${name}|${mode}`
          const score = scores.get(key) ?? { hits: 0, reciprocal: 0, count: 0 }
          score.count++
          if (rank > 0 && rank <= recallAt) score.hits++
          if (rank > 0) score.reciprocal += 1 / rank
          scores.set(key, score)
        }
      }
    }
    await encoder.close()
    const cell = (name: string, mode: SearchMode) =>
      scores.get(`${name}|${mode}`) ?? { hits: 0, reciprocal: 0, count: 0 }
    const recall = (name: string, mode: SearchMode) => {
      const score = cell(name, mode)
      return score.count === 0 ? 0 : (100 * score.hits) / score.count
    }
    const mrr = (name: string, mode: SearchMode) => {
      const score = cell(name, mode)
      return score.count === 0 ? 0 : score.reciprocal / score.count
    }
    const rows = Object.keys(groups).map((name) => [
      name,
      cell(name, "hybrid").count,
      ...modes.map((mode) => round(recall(name, mode), 1)),
      ...modes.map((mode) => round(mrr(name, mode), 3)),
    ])
    const paraphraseGain = recall("paraphrase", "hybrid") - recall("paraphrase", "lexical")
    const strictGain = recall("paraphrase, no shared term", "hybrid") - recall("paraphrase, no shared term", "lexical")
    const exactLoss = recall("exact", "lexical") - recall("exact", "hybrid")
    return {
      tables: [
        {
          title: `Recall@${recallAt} (%) and MRR@${mrrDepth}, ${documents.length} records`,
          header: [
            "queries",
            "n",
            "R@5 lexical",
            "R@5 semantic",
            "R@5 hybrid",
            "MRR lexical",
            "MRR semantic",
            "MRR hybrid",
          ],
          rows,
        },
      ],
      notes: [
        `target: hybrid beats lexical by >= 10 Recall@5 points on paraphrases: +${round(paraphraseGain, 1)} (no-shared-term subset: +${round(strictGain, 1)}) ${paraphraseGain >= 10 ? "PASS" : "FAIL"}`,
        `target: hybrid loses nothing on exact-term queries: ${round(-exactLoss, 1)} points ${exactLoss <= 0 ? "PASS" : "FAIL"}`,
        `hybrid misses (target not in top ${recallAt}): ${misses.length}`,
        ...misses.slice(0, 60).map((line) => `  ${line}`),
      ],
      json: {
        documents: documents.length,
        queries: queries.length,
        recallAt,
        mrrDepth,
        results: Object.fromEntries(
          Object.keys(groups).map((name) => [
            name,
            Object.fromEntries(
              modes.map((mode) => [
                mode,
                { recall: round(recall(name, mode), 2), mrr: round(mrr(name, mode), 4), n: cell(name, mode).count },
              ]),
            ),
          ]),
        ),
        paraphraseGainPoints: round(paraphraseGain, 2),
        strictParaphraseGainPoints: round(strictGain, 2),
        exactLossPoints: round(exactLoss, 2),
      },
    }
  },
}
