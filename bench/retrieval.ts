/**
 * Retrieval quality: hits@1, hits@5 and MRR@10 of lexical, semantic and hybrid search on the
 * labelled engineering-memory sets (retrievalSet.ts): exact-word queries, paraphrases, and
 * near-miss queries whose target sits next to same-topic records that share more words with the
 * query. All 276 records are indexed together, so every query competes with every record.
 *
 * Queries run through the real index (SearchIndex: FlexSearch + BM25F, vectors from the ONNX
 * model, fusion, re-ranking by term alignment) exactly as mem-search runs them. Results are
 * printed per split: "tune" is what constants may be chosen on, "heldout" is the report. While
 * tuning, set MNEMOS_RETRIEVAL_SPLIT=tune so the held-out numbers are not even computed.
 *
 * Beside the default, the same run measures each idea on its own (hybrid mode): fusion without
 * alignment, and (not with --quick: each needs a model build of ≈ 20 s) the model before this
 * work (raw GloVe vectors), raw vectors with alignment, and vectors retrofitted to WordNet. Every
 * model pulled into the data directory's models folder (`mnemos model pull`; the data directory
 * `serve` would use) is measured beside them, so a user sees what a sentence model gains here.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { resolveDefaultModel } from "../src/search/embedding/Embedder.ts"
import { pulledModelDirs } from "../src/search/embedding/ModelFolder.ts"
import { defaultRetrofitOptions } from "../src/search/embedding/Retrofit.ts"
import { loadStaticModel, readStaticModelFiles } from "../src/search/embedding/StaticModel.ts"
import { buildStaticModel, type StaticModelBuildOptions } from "../src/search/embedding/StaticModelBuild.ts"
import { loadTransformerModel } from "../src/search/embedding/TransformerModel.ts"
import { SearchIndex } from "../src/search/index/SearchIndex.ts"
import type { SearchMode } from "../src/search/ranking/Ranking.ts"
import { loadTermAligner } from "../src/search/ranking/TermAlignment.ts"
import { resolveDataDir } from "../src/stores/datadir/DataDir.ts"
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

/** Per (group, split, mode): how many queries, how many ranked their target first / in the top 5, Σ 1/rank. */
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

/** One way of searching: a model (the default, or one built with `build`) and whether to align. */
interface Variant {
  readonly name: string
  readonly build?: Omit<StaticModelBuildOptions, "outDir">
  /** A transformer model's directory (a pulled model) instead of a static model. */
  readonly transformerDir?: string
  readonly align: boolean
}

const defaultVariant: Variant = { name: "default (all-but-the-top vectors, alignment)", align: true }
const variants: ReadonlyArray<Variant & { readonly full?: true }> = [
  defaultVariant,
  { name: "fusion only, no alignment", align: false },
  { name: "before: raw GloVe vectors, fusion only", build: { allButTheTop: false }, align: false, full: true },
  { name: "raw GloVe vectors, alignment", build: { allButTheTop: false }, align: true, full: true },
  {
    name: "retrofitted to WordNet, all-but-the-top, alignment",
    build: { retrofit: defaultRetrofitOptions },
    align: true,
    full: true,
  },
]

/** The encoder of `variant` (building its static model into `built` first), and its term aligner. */
const encoderOf = async (variant: Variant, built: string | undefined) => {
  // A transformer has no term aligner (as in serve: alignment needs the static model's vocabulary).
  if (variant.transformerDir !== undefined)
    return { encoder: await loadTransformerModel(variant.transformerDir), aligner: undefined }
  const dir = built ?? resolveDefaultModel(undefined)
  if (built !== undefined) buildStaticModel({ ...variant.build, outDir: built })
  const files = readStaticModelFiles(dir)
  const encoder = await loadStaticModel(dir, files)
  return { encoder, aligner: variant.align ? loadTermAligner(dir, files.vocabulary, files.vectors) : undefined }
}

/** The models pulled into the models folder of the data directory serve would use. */
const pulledVariants = (): ReadonlyArray<Variant> =>
  pulledModelDirs(resolveDataDir(undefined).path).map(({ name, dir }) => ({
    name: `pulled model ${name}, fusion only`,
    transformerDir: dir,
    align: false,
  }))

type Metrics = { n: number; hits1: number; hits5: number; mrr: number }

/** Runs every query of `queries` in every mode of `runModes` against `variant`. */
const measure = async (
  variant: Variant,
  set: ReturnType<typeof loadRetrievalSet>,
  queries: ReadonlyArray<LabelledQuery>,
  runModes: ReadonlyArray<SearchMode>,
  misses?: Array<string>,
) => {
  const now = Date.now()
  const built = variant.build === undefined ? undefined : mkdtempSync(join(tmpdir(), "mnemos-retrieval-"))
  try {
    const { encoder, aligner } = await encoderOf(variant, built)
    const index = new SearchIndex()
    for (const document of set.documents)
      for (const pending of index.replaceGroup(document.store, document.id, [document])) {
        const [vector] = await encoder.encode([pending.text])
        if (vector !== undefined) index.setVector(pending.id, pending.hash, vector)
      }
    const byId = new Map(set.documents.map((document) => [document.id, document]))
    const scores = new Map<string, Score>()
    for (const query of queries) {
      const [vector] = await encoder.encode([query.query])
      const shared = sharedTerms(query.query, byId.get(query.target)!)
      for (const mode of runModes) {
        const hits = index.search({
          text: query.query,
          mode,
          filter: { projects: ["ledgerly"] },
          limit: mrrDepth,
          vector,
          now,
          aligner,
        })
        const rank = hits.findIndex((hit) => hit.document.id === query.target) + 1
        if (mode === "hybrid" && rank !== 1 && query.split === "tune")
          misses?.push(
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
    return (name: string, split: Split, mode: SearchMode): Metrics => {
      const score = scores.get(`${name}|${split}|${mode}`) ?? { count: 0, top1: 0, top5: 0, reciprocal: 0 }
      const of = (value: number) => (score.count === 0 ? 0 : value / score.count)
      return { n: score.count, hits1: of(score.top1), hits5: of(score.top5), mrr: of(score.reciprocal) }
    }
  } finally {
    if (built !== undefined) rmSync(built, { recursive: true, force: true })
  }
}

const pass = (ok: boolean) => (ok ? "PASS" : "FAIL")

export const suite: BenchSuite = {
  title: "retrieval quality (hits@1, hits@5, MRR@10) on the labelled engineering-memory sets",
  run: async ({ quick }) => {
    const set = loadRetrievalSet(Date.now())
    const violations = nearMissViolations(set)
    if (violations.length > 0) throw new Error(`near-miss set: not near misses:\n${violations.join("\n")}`)
    const only = process.env.MNEMOS_RETRIEVAL_SPLIT as Split | undefined
    const reported = only === undefined ? splits : splits.filter((split) => split === only)
    const queries = set.queries.filter((query) => reported.includes(query.split))
    const misses: Array<string> = []
    const metrics = await measure(defaultVariant, set, queries, modes, misses)
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
    const compared: Array<{ name: string; metrics: typeof metrics }> = []
    const pulled = pulledVariants()
    for (const variant of [...variants, ...pulled] as ReadonlyArray<Variant & { readonly full?: true }>) {
      if (variant === defaultVariant) compared.push({ name: variant.name, metrics })
      else if (!quick || variant.full !== true)
        compared.push({ name: variant.name, metrics: await measure(variant, set, queries, ["hybrid"]) })
    }
    const variantRows = compared.flatMap(({ name, metrics: of }) =>
      reported.map((split) => [
        name,
        split,
        round(of("near-miss", split, "hybrid").hits1, 3),
        round(of("near-miss", split, "hybrid").mrr, 3),
        round(of("exact", split, "hybrid").hits1, 3),
        round(of("paraphrase", split, "hybrid").hits5, 3),
        round(of("paraphrase", split, "hybrid").mrr, 3),
      ]),
    )
    const targets = (split: Split) => {
      const nearMiss = metrics("near-miss", split, "hybrid")
      const paraphrase = metrics("paraphrase", split, "hybrid")
      const exact = metrics("exact", split, "hybrid")
      return `targets (${split}, hybrid): near-miss hits@1 ${round(nearMiss.hits1, 3)} (>= 0.80 ${pass(nearMiss.hits1 >= 0.8)}), MRR ${round(nearMiss.mrr, 3)} (>= 0.85 ${pass(nearMiss.mrr >= 0.85)}); paraphrase hits@5 ${round(paraphrase.hits5, 3)} (>= 0.95 ${pass(paraphrase.hits5 >= 0.95)}); exact hits@1 ${round(exact.hits1, 3)}`
    }
    const json = (of: typeof metrics, runModes: ReadonlyArray<SearchMode>) =>
      Object.fromEntries(
        reported.map((split) => [
          split,
          Object.fromEntries(
            groups.map(([name]) => [
              name,
              Object.fromEntries(
                runModes.map((mode) => {
                  const m = of(name, split, mode)
                  return [mode, { n: m.n, hits1: round(m.hits1, 4), hits5: round(m.hits5, 4), mrr: round(m.mrr, 4) }]
                }),
              ),
            ]),
          ),
        ]),
      )
    return {
      tables: [
        {
          title: `default ranking: hits@1, hits@5 and MRR@${mrrDepth} by mode (lex, sem, hyb), ${set.documents.length} records`,
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
        {
          title: "each idea on its own (hybrid)",
          header: [
            "variant",
            "split",
            "near-miss h@1",
            "near-miss MRR",
            "exact h@1",
            "paraphrase h@5",
            "paraphrase MRR",
          ],
          rows: variantRows,
        },
      ],
      notes: [
        ...reported.map(targets),
        pulled.length > 0
          ? `pulled models measured: ${pulled.map((variant) => variant.transformerDir).join(", ")}`
          : `no pulled model in ${resolveDataDir(undefined).path}/models (\`mnemos model pull\` adds one to this comparison)`,
        `hybrid misses on the tune split (target not first): ${misses.length}`,
        ...misses.map((line) => `  ${line}`),
      ],
      json: {
        documents: set.documents.length,
        queries: queries.length,
        mrrDepth,
        results: json(metrics, modes),
        variants: Object.fromEntries(compared.map(({ name, metrics: of }) => [name, json(of, ["hybrid"])])),
      },
    }
  },
}
