/**
 * Retrieval quality: hits@1, hits@5 and MRR@10 of lexical, semantic and hybrid search on the
 * labelled engineering-memory sets (retrievalSet.ts): exact-word queries, paraphrases, and
 * near-miss queries whose target sits next to same-topic records that share more words with the
 * query. All 276 records are indexed together, so every query competes with every record.
 *
 * Queries run through the real index (SearchIndex: FlexSearch + BM25F, vectors from the default
 * ONNX model, fusion) exactly as mem-search runs them. Results are printed per split: "tune" is
 * what constants may be chosen on, "heldout" is the report. While tuning, set
 * MNEMOS_RETRIEVAL_SPLIT=tune so the held-out numbers are not even computed.
 */
import { resolveDefaultModel } from "../src/search/Embedder.ts"
import type { SearchMode } from "../src/search/Ranking.ts"
import { SearchIndex } from "../src/search/SearchIndex.ts"
import { loadStaticModel } from "../src/search/StaticModel.ts"
import {
  type LabelledQuery,
  loadRetrievalSet,
  nearMissViolations,
  type Split,
  sharedTerms,
  splits,
} from "./retrievalSet.ts"
import type { BenchSuite } from "./Table.ts"
import { round } from "./Table.ts"

const mrrDepth = 10
const modes: ReadonlyArray<SearchMode> = ["lexical", "semantic", "hybrid"]

/** Per (group, mode): how many queries, how many ranked their target first / in the top 5, Σ 1/rank. */
interface Score {
  count: number
  top1: number
  top5: number
  reciprocal: number
}

/** The query groups reported, each a predicate over labelled queries (with its shared-term count). */
const groups: ReadonlyArray<readonly [string, (query: LabelledQuery, shared: number) => boolean]> = [
  ["near-miss", (query) => query.type === "near-miss"],
  ["exact", (query) => query.type === "exact"],
  ["paraphrase", (query) => query.type === "paraphrase"],
  ["paraphrase, no shared term", (query, shared) => query.type === "paraphrase" && shared === 0],
]

export const suite: BenchSuite = {
  title: "retrieval quality (hits@1, hits@5, MRR@10) on the labelled engineering-memory sets",
  run: async () => {
    const now = Date.now()
    const set = loadRetrievalSet(now)
    const violations = nearMissViolations(set)
    if (violations.length > 0) throw new Error(`near-miss set: not near misses:\n${violations.join("\n")}`)
    const only = process.env.MNEMOS_RETRIEVAL_SPLIT as Split | undefined
    const reported = only === undefined ? splits : splits.filter((split) => split === only)
    const queries = set.queries.filter((query) => reported.includes(query.split))
    const encoder = await loadStaticModel(resolveDefaultModel(undefined))
    const index = new SearchIndex()
    for (const document of set.documents)
      for (const pending of index.replaceGroup(document.store, document.id, [document])) {
        const [vector] = await encoder.encode([pending.text])
        if (vector !== undefined) index.setVector(pending.id, pending.hash, vector)
      }
    const byId = new Map(set.documents.map((document) => [document.id, document]))
    const scores = new Map<string, Score>()
    const misses: Array<string> = []
    for (const query of queries) {
      const [vector] = await encoder.encode([query.query])
      const shared = sharedTerms(query.query, byId.get(query.target)!)
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
        if (mode === "hybrid" && rank !== 1 && query.split === "tune")
          misses.push(
            `${query.type} ${query.target} @${rank || "-"} "${query.query}" → ${hits
              .slice(0, 3)
              .map((hit) => hit.document.id)
              .join(", ")}`,
          )
        for (const [name, member] of groups) {
          if (!member(query, shared)) continue
          const key = `${name}|${query.split}|${mode}`
          const score = scores.get(key) ?? { count: 0, top1: 0, top5: 0, reciprocal: 0 }
          score.count++
          if (rank === 1) score.top1++
          if (rank > 0 && rank <= 5) score.top5++
          if (rank > 0) score.reciprocal += 1 / rank
          scores.set(key, score)
        }
      }
    }
    await encoder.close()
    const cell = (name: string, split: Split, mode: SearchMode) =>
      scores.get(`${name}|${split}|${mode}`) ?? { count: 0, top1: 0, top5: 0, reciprocal: 0 }
    const metrics = (name: string, split: Split, mode: SearchMode) => {
      const score = cell(name, split, mode)
      const of = (value: number) => (score.count === 0 ? 0 : value / score.count)
      return { n: score.count, hits1: of(score.top1), hits5: of(score.top5), mrr: of(score.reciprocal) }
    }
    const rows = reported.flatMap((split) =>
      groups.map(([name]) => {
        const byMode = modes.map((mode) => metrics(name, split, mode))
        return [
          `${name} (${split})`,
          byMode[0]!.n,
          ...byMode.map((m) => round(m.hits1, 3)),
          ...byMode.map((m) => round(m.hits5, 3)),
          ...byMode.map((m) => round(m.mrr, 3)),
        ]
      }),
    )
    const target = (split: Split) => {
      const nearMiss = metrics("near-miss", split, "hybrid")
      const paraphrase = metrics("paraphrase", split, "hybrid")
      return [
        `targets (${split}, hybrid): near-miss hits@1 ${round(nearMiss.hits1, 3)} (>= 0.80 ${nearMiss.hits1 >= 0.8 ? "PASS" : "FAIL"}), MRR ${round(nearMiss.mrr, 3)} (>= 0.85 ${nearMiss.mrr >= 0.85 ? "PASS" : "FAIL"}); paraphrase hits@5 ${round(paraphrase.hits5, 3)} (>= 0.95 ${paraphrase.hits5 >= 0.95 ? "PASS" : "FAIL"}); exact hits@1 ${round(metrics("exact", split, "hybrid").hits1, 3)}`,
      ]
    }
    return {
      tables: [
        {
          title: `hits@1, hits@5 and MRR@${mrrDepth} by mode (lex, sem, hyb), ${set.documents.length} records`,
          header: [
            "queries",
            "n",
            "h@1 lex",
            "h@1 sem",
            "h@1 hyb",
            "h@5 lex",
            "h@5 sem",
            "h@5 hyb",
            "MRR lex",
            "MRR sem",
            "MRR hyb",
          ],
          rows,
        },
      ],
      notes: [
        ...reported.flatMap(target),
        `hybrid misses on the tune split (target not first): ${misses.length}`,
        ...misses.map((line) => `  ${line}`),
      ],
      json: {
        documents: set.documents.length,
        queries: queries.length,
        mrrDepth,
        results: Object.fromEntries(
          reported.map((split) => [
            split,
            Object.fromEntries(
              groups.map(([name]) => [
                name,
                Object.fromEntries(
                  modes.map((mode) => {
                    const m = metrics(name, split, mode)
                    return [mode, { n: m.n, hits1: round(m.hits1, 4), hits5: round(m.hits5, 4), mrr: round(m.mrr, 4) }]
                  }),
                ),
              ]),
            ),
          ]),
        ),
      },
    }
  },
}
