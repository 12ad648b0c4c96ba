/**
 * Search: one box over every store (omni search), hits ranked, each with its score and the
 * breakdown behind it (full text, meaning, recency, importance). When the daemon has no omni
 * search, the graph's substring search answers instead, without scores.
 */
import { useEffect, useRef, useState } from "preact/hooks"
import { api, withProject } from "../api.ts"
import { Badge, Empty, Failure, Loading, Meter, ViewHeader } from "../components.tsx"
import { colorOf, formatMs } from "../format.ts"
import { useDebounced, useResource } from "../hooks.ts"
import { Icon } from "../icons.tsx"

/** Stores whose writes can change the hits (the open search re-runs when they change). */
const searchedStores = ["graph", "conversations", "tasks", "notes", "adrs", "engineering"]
/** How long typing must pause before a search runs. */
const typingPauseMs = 200

interface Breakdown {
  readonly fulltext: number
  readonly semantic: number
  readonly recency: number
  readonly importance: number
}
interface Hit {
  readonly id: string
  readonly title: string
  readonly summary: string
  readonly store: string
  readonly type: string
  readonly date?: string
  readonly score?: number
  readonly breakdown?: Breakdown
}
interface SearchAnswer {
  readonly tool: string
  readonly tookMs: number
  readonly result: Record<string, unknown>
}

const asRecord = (value: unknown): Record<string, unknown> =>
  typeof value === "object" && value !== null ? (value as Record<string, unknown>) : {}
const asString = (value: unknown, fallback = ""): string =>
  typeof value === "string" ? value : typeof value === "number" ? String(value) : fallback

/** The hits of an omni search or a search_nodes answer. */
const hitsOf = (answer: SearchAnswer): ReadonlyArray<Hit> => {
  const results = answer.result.results ?? answer.result.hits
  if (Array.isArray(results))
    return results.map((raw) => {
      const hit = asRecord(raw)
      const document = asRecord(hit.document)
      const breakdown = asRecord(hit.score_breakdown)
      return {
        id: asString(hit.id ?? document.id),
        title: asString(hit.title ?? document.title, asString(hit.summary)),
        summary: asString(hit.summary ?? document.text),
        store: asString(hit.store ?? document.store, "?"),
        type: asString(hit.type ?? hit.kind ?? document.kind, "?"),
        date: asString(hit.date ?? document.at) || undefined,
        ...(typeof hit.score === "number" ? { score: hit.score } : {}),
        ...(typeof breakdown.fulltext === "number"
          ? {
              breakdown: {
                fulltext: Number(breakdown.fulltext),
                semantic: Number(breakdown.semantic ?? 0),
                recency: Number(breakdown.recency ?? 0),
                importance: Number(breakdown.importance ?? 0),
              },
            }
          : {}),
      }
    })
  const entities = answer.result.entities
  if (Array.isArray(entities))
    return entities.map((raw) => {
      const entity = asRecord(raw)
      const observations = Array.isArray(entity.observations) ? entity.observations.map((text) => asString(text)) : []
      return {
        id: asString(entity.name),
        title: asString(entity.name),
        summary: observations.join(" · "),
        store: "graph",
        type: asString(entity.entityType, "entity"),
      }
    })
  return []
}

const parts: ReadonlyArray<{ key: keyof Breakdown; label: string }> = [
  { key: "fulltext", label: "full text" },
  { key: "semantic", label: "meaning" },
  { key: "recency", label: "recency" },
  { key: "importance", label: "importance" },
]

export const SearchView = (props: { project: string; focusTick: number }) => {
  const { project } = props
  const [query, setQuery] = useState(new URLSearchParams(location.hash.split("?")[1] ?? "").get("q") ?? "")
  const settled = useDebounced(query.trim(), typingPauseMs)
  const input = useRef<HTMLInputElement>(null)
  useEffect(() => input.current?.focus(), [props.focusTick])
  useEffect(() => {
    history.replaceState(null, "", settled === "" ? "#/search" : `#/search?q=${encodeURIComponent(settled)}`)
  }, [settled])

  const search = useResource(
    () =>
      settled === ""
        ? Promise.resolve(undefined)
        : api<SearchAnswer>(withProject("/api/omni", project, { q: settled })),
    [project, settled],
    { stores: searchedStores, project },
  )
  const hits = search.data === undefined ? [] : hitsOf(search.data)
  const top = Math.max(1e-9, ...hits.map((hit) => hit.score ?? 0))
  return (
    <section class="view search-view" aria-labelledby="search-title">
      <ViewHeader
        title="Search"
        subtitle={`Everything agents stored in “${project}”: entities, observations, messages, tasks, notes, decisions.`}
      />
      <search class="search-form">
        <label for="omni-search" class="visually-hidden">
          Search memory
        </label>
        <span class="search-icon">
          <Icon name="search" />
        </span>
        <input
          id="omni-search"
          ref={input}
          type="search"
          placeholder="Search memory — words or meaning…"
          value={query}
          autocomplete="off"
          onInput={(event) => setQuery(event.currentTarget.value)}
          data-testid="omni-search"
        />
        {search.loading && settled !== "" && <span class="spinner" aria-hidden="true" />}
      </search>
      {settled === "" ? (
        <Empty title="Search everything your agents remember" icon="search">
          Type a few words. Hits are ranked by full-text match and meaning, then recency and importance — each shows
          why.
        </Empty>
      ) : search.error !== undefined && search.data === undefined ? (
        <Failure error={search.error} what="Search" onRetry={search.refresh} />
      ) : search.data === undefined ? (
        <Loading label="Searching…" />
      ) : (
        <>
          <p class="search-summary" role="status">
            {hits.length === 0 ? "No hits" : `${hits.length} hit${hits.length === 1 ? "" : "s"}`} for “{settled}” ·{" "}
            {formatMs(search.data.tookMs)}
            {search.data.tool !== "omni_search" && (
              <span class="muted">
                {" "}
                · substring search of the graph (no score breakdowns: omni search is not available)
              </span>
            )}
            {search.data.result.warm === false && <Badge tone="warn">index warming</Badge>}
          </p>
          {hits.length === 0 ? (
            <Empty title={`Nothing matches “${settled}”`} icon="search">
              Try other words, or fewer of them.
            </Empty>
          ) : (
            <ol class="hits" data-testid="hits">
              {hits.map((hit, index) => (
                <li key={`${hit.id}${index}`} class="hit" data-testid="hit">
                  <div class="hit-rank" aria-hidden="true">
                    {index + 1}
                  </div>
                  <div class="hit-body">
                    <p class="hit-head">
                      <Badge title="store / type">
                        <span class="dot" style={{ background: colorOf(hit.store) }} aria-hidden="true" /> {hit.store}/
                        {hit.type}
                      </Badge>
                      <strong class="hit-title">{hit.title}</strong>
                      {hit.date !== undefined && <span class="muted small">{hit.date.slice(0, 10)}</span>}
                    </p>
                    {hit.summary !== "" && hit.summary !== hit.title && <p class="hit-summary">{hit.summary}</p>}
                  </div>
                  {hit.score !== undefined && (
                    <div class="hit-score">
                      <p class="score-line">
                        <span class="score-value">{hit.score.toFixed(3)}</span>
                        <span class="muted small">score</span>
                      </p>
                      {hit.breakdown === undefined ? (
                        <Meter value={hit.score / top} />
                      ) : (
                        <>
                          <span class="stack" aria-hidden="true">
                            {parts.map((part) => (
                              <span
                                key={part.key}
                                class={`stack-${part.key}`}
                                style={{ width: `${(hit.breakdown![part.key] / top) * 100}%` }}
                              />
                            ))}
                          </span>
                          <dl class="breakdown" aria-label="score breakdown">
                            {parts.map((part) => (
                              <div key={part.key} class={`part part-${part.key}`}>
                                <dt>
                                  <span class={`dot stack-${part.key}`} aria-hidden="true" />
                                  {part.label}
                                </dt>
                                <dd>{hit.breakdown![part.key].toFixed(3)}</dd>
                              </div>
                            ))}
                          </dl>
                        </>
                      )}
                    </div>
                  )}
                </li>
              ))}
            </ol>
          )}
        </>
      )}
    </section>
  )
}
