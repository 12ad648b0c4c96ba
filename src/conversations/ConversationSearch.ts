/**
 * search_messages as a pure function of a store view: catch the store handle's index up (in the
 * same read transaction, so a search sees every acknowledged write), rank, and shape each hit as
 * the seed's result — the message, its score parts, its relation count and, if asked, its
 * neighbours — within the response budget (later results are left out, the first never is).
 */
import type { StoreView } from "../stores/checkpoint/Checkpoint.ts"
import { type IndexQuery, indexOf } from "./ConversationIndex.ts"
import { liveMessage, neighbours, ResponseBudget, relationCount } from "./ConversationReads.ts"

/** Max results of search_messages: 100, 20 by default. */
export const searchLimitMax = 100
export const searchLimitDefault = 20
/** Max messages before/after each search result: 3. */
export const searchContextSizeMax = 3

/** The results of `query` in `view`, for the store handle `store` (whose index is used). */
export const searchMessages = (
  view: StoreView,
  store: object,
  query: IndexQuery,
  contextSize: number,
): Array<Record<string, unknown>> => {
  const index = indexOf(store)
  index.sync(view)
  const budget = new ResponseBudget()
  const results: Array<Record<string, unknown>> = []
  for (const hit of index.search(query)) {
    const message = liveMessage(view, query.project, hit.id)
    if (message === undefined) continue
    const result = {
      ...message,
      score: hit.score,
      score_breakdown: hit.breakdown,
      matched_fields: hit.matchedFields,
      relation_count: relationCount(view, query.project, message),
      ...(contextSize > 0 ? { context_preview: neighbours(view, query.project, message, contextSize) } : {}),
    }
    if (!budget.take(result, results.length === 0)) break
    results.push(result)
  }
  return results
}
