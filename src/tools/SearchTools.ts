/**
 * The search tools: seed 000's progressive disclosure — `mem-search` (a compact index),
 * `mem-timeline` (what came before and after), `mem-details` (full records), `mem-stats` — plus
 * `omni_search` (every store, with score breakdowns) and `search_graph` (entities ranked by
 * meaning and words; `search_nodes` keeps its official substring meaning).
 *
 * Text content is seed 000's compact markdown with `[mem:<id>]` ids; `structuredContent` has the
 * same data as JSON. Everything acts in the caller's project unless `project` names another.
 */
import { Effect, Schema } from "effect"
import { Router } from "../actors/Router.ts"
import { conversationStore } from "../conversations/ConversationStore.ts"
import { currentGen } from "../conversations/Generations.ts"
import { readStored } from "../conversations/MessageState.ts"
import { projectNameBytesMax } from "../graph/Model.ts"
import type { Reembedding } from "../search/embedding/ModelSwitch.ts"
import { type SearchHealth, SearchIndexer, type SearchRequest } from "../search/Indexer.ts"
import type { SearchDocument } from "../search/index/SearchDocument.ts"
import type { Timeline } from "../search/index/SearchIndex.ts"
import {
  isSeedEventType,
  type SearchHit,
  type SearchMode,
  searchModes,
  shownTypeOf,
} from "../search/ranking/Ranking.ts"
import { describedDefinition, makeTool, type Tool, type ToolCaller, ToolError, type ToolOutput } from "./Tool.ts"

/** Max UTF-8 bytes of a search query. */
export const searchQueryBytesMax = 4 * 1024
/** mem-search: default and max results (seed 000). */
export const memSearchTopKDefault = 5
export const memSearchTopKMax = 20
/** omni_search / search_graph: default and max results. */
export const omniLimitDefault = 10
export const omniLimitMax = 50
/** Ids per mem-timeline / mem-details call. */
export const idsPerCallMax = 20
/** mem-timeline: default and max neighbours each side. */
export const timelineWindowDefault = 3
export const timelineWindowMax = 10
/** Characters of the one-line summary in an index line. */
export const summaryCharsMax = 120
/** Characters of content per record in mem-details (longer records are cut, and say so). */
export const detailsContentCharsMax = 16 * 1024

// Descriptions go on before checks: a custom filter added after an annotation drops it from the
// generated JSON Schema.
const utf8BytesAtMost = (bytes: number) =>
  Schema.makeFilter<string>((text) =>
    Buffer.byteLength(text) <= bytes ? undefined : `expected at most ${bytes} UTF-8 bytes`,
  )
const Query = Schema.String.annotate({ description: "What to look for, in natural language or exact words" }).check(
  Schema.isMinLength(1),
  utf8BytesAtMost(searchQueryBytesMax),
)
const instant = (description: string) =>
  Schema.String.annotate({ description }).check(
    Schema.makeFilter<string>((text) =>
      Number.isFinite(Date.parse(text)) ? undefined : "expected an ISO 8601 date or date-time",
    ),
  )
const Mode = Schema.Literals(searchModes).annotate({
  description: "hybrid (default): words and meaning fused; lexical: words only; semantic: meaning only",
})
const Ids = Schema.Array(Schema.String.check(Schema.isMaxLength(256)))
  .check(Schema.isMinLength(1), Schema.isMaxLength(idsPerCallMax))
  .annotate({ description: `Memory ids from mem-search (at most ${idsPerCallMax})` })
const NameList = (description: string) =>
  Schema.Array(Schema.String.check(Schema.isMaxLength(64)))
    .check(Schema.isMaxLength(32))
    .annotate({ description })

const projectArg = Schema.optionalKey(
  Schema.String.annotate({ description: "Project to search; defaults to the connection's project" }).check(
    Schema.isMinLength(1),
    utf8BytesAtMost(projectNameBytesMax),
  ),
)
const timeArgs = {
  since: Schema.optionalKey(instant("Only records at or after this time (ISO 8601)")),
  until: Schema.optionalKey(instant("Only records at or before this time (ISO 8601)")),
}

const MemSearchArgs = Schema.Struct({
  query: Query,
  topK: Schema.optionalKey(
    Schema.Finite.annotate({
      description: `Maximum number of results (default: ${memSearchTopKDefault}, max: ${memSearchTopKMax}; more is read as ${memSearchTopKMax})`,
    }),
  ),
  sessionId: Schema.optionalKey(
    Schema.String.check(Schema.isMaxLength(256)).annotate({ description: "Only this session's records" }),
  ),
  eventType: Schema.optionalKey(
    Schema.String.check(Schema.isMaxLength(64)).annotate({
      description:
        "Only records of this type, as results show it: seed 000's prompt (a user's turn), response or assistant_response (an assistant's), system (a system turn), tool (a tool call or result in a conversation), insight (what was learned: semantic, procedure, preference and summary messages, ADRs, error fixes, session summaries); or a record type (message, observation, entity, task, adr, error_fix, ...)",
    }),
  ),
  store: Schema.optionalKey(
    Schema.String.check(Schema.isMaxLength(64)).annotate({
      description: "Only records of this store (e.g. graph, conversations, tasks)",
    }),
  ),
  project: projectArg,
  ...timeArgs,
  mode: Schema.optionalKey(Mode),
})

const OmniArgs = Schema.Struct({
  query: Query,
  stores: Schema.optionalKey(NameList("Only these stores (default: every store)")),
  kinds: Schema.optionalKey(NameList("Only these record types (a result's kind: message, entity, task, ...)")),
  project: projectArg,
  ...timeArgs,
  limit: Schema.optionalKey(
    Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: omniLimitMax })).annotate({
      description: `Maximum results (default ${omniLimitDefault}, at most ${omniLimitMax})`,
    }),
  ),
  mode: Schema.optionalKey(Mode),
})

const SearchGraphArgs = Schema.Struct({
  query: Query,
  project: projectArg,
  limit: Schema.optionalKey(
    Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: omniLimitMax })).annotate({
      description: `Maximum entities (default ${omniLimitDefault}, at most ${omniLimitMax})`,
    }),
  ),
  mode: Schema.optionalKey(Mode),
})

const TimelineArgs = Schema.Struct({
  ids: Ids,
  windowSize: Schema.optionalKey(
    Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: timelineWindowMax })).annotate({
      description: `Number of items before/after each id (default: ${timelineWindowDefault}, max ${timelineWindowMax})`,
    }),
  ),
})

const DetailsArgs = Schema.Struct({ ids: Ids })

// ---------------------------------------------------------------------------------------------
// Formatting
// ---------------------------------------------------------------------------------------------

const isoDate = (at: number) => new Date(at).toISOString().slice(0, 10)
const isoMinute = (at: number) => new Date(at).toISOString().slice(0, 16).replace("T", " ")
const oneLine = (text: string, max = summaryCharsMax) => {
  const flat = text.replace(/\s+/g, " ").trim()
  return flat.length <= max ? flat : `${flat.slice(0, max - 1)}…`
}
const round = (value: number) => Number(value.toFixed(4))

/** The one-line summary of a record: its title and the start of its text. */
export const summaryOf = (document: SearchDocument): string =>
  oneLine(
    document.text === ""
      ? document.title
      : // A title cut from the text's first line (a message's) is not said twice.
        document.text.startsWith(document.title)
        ? document.text
        : `${document.title}: ${document.text}`,
  )

/**
 * A hit's score parts (they sum to its score). `alignment` is the re-ranking by soft term
 * alignment; when the hit was aligned, `aligned` says why: how much of the query the record
 * covers, how much of the record the query asks about, and the mismatches that were penalised.
 */
const breakdownOf = (hit: SearchHit) => ({
  fulltext: round(hit.score_breakdown.fulltext),
  semantic: round(hit.score_breakdown.semantic),
  recency: round(hit.score_breakdown.recency),
  importance: round(hit.score_breakdown.importance),
  alignment: round(hit.score_breakdown.alignment),
  ...(hit.alignment === undefined
    ? {}
    : {
        aligned: {
          coverage: round(hit.alignment.coverage),
          precision: round(hit.alignment.precision),
          negation_mismatch: hit.alignment.negationMismatch,
          number_mismatch: hit.alignment.numberMismatch,
        },
      }),
})

const indexEntry = (hit: SearchHit) => ({
  id: hit.document.id,
  score: round(hit.score),
  store: hit.document.store,
  type: shownTypeOf(hit.document),
  kind: hit.document.kind,
  session: hit.document.session ?? null,
  date: isoDate(hit.document.at),
  summary: summaryOf(hit.document),
  score_breakdown: breakdownOf(hit),
})

const notices = (response: { warm: boolean; semantic: boolean }, mode: SearchMode) => [
  ...(response.warm ? [] : ["_Index warming after a restart: results may be incomplete._"]),
  ...(mode !== "lexical" && !response.semantic ? ["_No embedding for this query: matched by words only._"] : []),
]

/** seed 000 §6.1, with the store and type of each record. */
export const formatSearchIndex = (query: string, hits: ReadonlyArray<SearchHit>, extra: ReadonlyArray<string>) =>
  [
    "## Memory Search Results",
    "",
    hits.length === 0
      ? `No memories found for "${oneLine(query, 80)}".`
      : `Found ${hits.length} relevant memories for "${oneLine(query, 80)}":`,
    ...extra.map((line) => `\n${line}`),
    "",
    ...hits.flatMap((hit, index) => [
      `### ${index + 1}. [mem:${hit.document.id}] (${hit.score.toFixed(2)})`,
      [
        `**Store**: ${hit.document.store}/${shownTypeOf(hit.document)}`,
        ...(hit.document.session !== undefined ? [`**Session**: ${hit.document.session}`] : []),
        `**Date**: ${isoDate(hit.document.at)}`,
      ].join(" | "),
      `> ${summaryOf(hit.document)}`,
      "",
    ]),
    "---",
    "Use `mem-details` with IDs for full content.",
    "Use `mem-timeline` for context around these memories.",
  ].join("\n")

const timelineRow = (document: SearchDocument, anchor: boolean) => {
  const preview = oneLine(summaryOf(document), 80).replace(/\|/g, "\\|")
  return anchor
    ? `| **${isoMinute(document.at)}** | **${shownTypeOf(document)}** | **[mem:${document.id}] ${preview}** |`
    : `| ${isoMinute(document.at)} | ${shownTypeOf(document)} | [mem:${document.id}] ${preview} |`
}

/** seed 000 §6.2. */
export const formatTimeline = (ids: ReadonlyArray<string>, timelines: ReadonlyArray<Timeline | undefined>) =>
  [
    "## Timeline Context",
    ...timelines.flatMap((timeline, index) =>
      timeline === undefined
        ? ["", `### Around [mem:${ids[index]}]`, "", "_Not found._"]
        : [
            "",
            `### Around [mem:${timeline.anchor.id}]`,
            "",
            "| Time | Type | Preview |",
            "|------|------|---------|",
            ...timeline.before.map((document) => timelineRow(document, false)),
            timelineRow(timeline.anchor, true),
            ...timeline.after.map((document) => timelineRow(document, false)),
          ],
    ),
  ].join("\n")

const cutContent = (text: string) =>
  text.length <= detailsContentCharsMax
    ? text
    : `${text.slice(0, detailsContentCharsMax)}\n… (${text.length - detailsContentCharsMax} more characters)`

/** seed 000 §6.3. */
/**
 * One memory as mem-details shows it: the search document, and for a conversation message what
 * the store holds — its content verbatim, with its summary and tags as fields of their own (the
 * document's text joins them for the index).
 */
export interface MemoryDetail {
  readonly document: SearchDocument
  readonly content: string
  readonly summary?: string
  readonly tags?: ReadonlyArray<string>
}

export const formatDetails = (ids: ReadonlyArray<string>, details: ReadonlyArray<MemoryDetail | undefined>) =>
  [
    "## Memory Details",
    ...details.flatMap((detail, index) => {
      if (detail === undefined) return ["", `### [mem:${ids[index]}]`, "", "_Not found._"]
      const { document } = detail
      return [
        "",
        `### [mem:${document.id}]`,
        "",
        `**Store**: ${document.store} | **Type**: ${shownTypeOf(document, "details")} | **Project**: ${document.project}`,
        ...(document.session !== undefined ? [`**Session**: ${document.session}`] : []),
        `**Date**: ${isoMinute(document.at)}`,
        `**Title**: ${oneLine(document.title, 400)}`,
        ...(detail.summary !== undefined ? [`**Summary**: ${oneLine(detail.summary, 4096)}`] : []),
        ...(detail.tags !== undefined && detail.tags.length > 0 ? [`**Tags**: ${detail.tags.join(", ")}`] : []),
        ...(document.fields !== undefined && Object.keys(document.fields).length > 0
          ? [
              `**Fields**: ${Object.entries(document.fields)
                .map(([key, value]) => `${key}=${value}`)
                .join(", ")}`,
            ]
          : []),
        "",
        "**Content**:",
        "```",
        cutContent(detail.content).replace(/```/g, "ˋˋˋ"),
        "```",
      ]
    }),
  ].join("\n")

/** The details of `document`: a conversation message's own words from its store, else the document's. */
const detailOf = (document: SearchDocument): Effect.Effect<MemoryDetail, never, Router> =>
  Effect.gen(function* () {
    if (document.store !== conversationStore.name) return { document, content: document.text } satisfies MemoryDetail
    const stored = yield* (yield* Router)
      .store(conversationStore)
      .read((view) => readStored(view, currentGen(view), document.project, document.id))
      .pipe(Effect.orElseSucceed(() => undefined))
    if (stored === undefined || stored.deleted_at !== undefined)
      return { document, content: document.text } satisfies MemoryDetail
    const { content, metadata } = stored.message
    return {
      document,
      content,
      ...(metadata.summary !== undefined ? { summary: metadata.summary } : {}),
      tags: metadata.tags,
    } satisfies MemoryDetail
  })

/** seed 000's statistics, plus index health. */
/** What answers searches by meaning while a re-embed runs. */
const reembeddingMeanwhile = (reembedding: Reembedding) =>
  reembedding.finished
    ? ""
    : reembedding.previousModel === "unavailable"
      ? "; the previous model could not be loaded: search by meaning covers the re-embedded documents only until done"
      : "; searches by meaning use the previous model and its vectors until done"

export const formatStats = (health: SearchHealth) =>
  [
    "## Memory Statistics",
    "",
    `- **Total Events**: ${health.index.documents}`,
    `- **Total Vectors**: ${health.index.vectors}`,
    `- **Sessions**: ${health.index.sessions}`,
    `- **Storage Size**: ${(health.storageBytes / 1024 / 1024).toFixed(2)} MB`,
    `- **Index**: ${health.state}, ${health.lagEvents} events behind, ${health.pendingEmbeddings} embeddings pending`,
    `- **Model**: ${health.embedder.state === "ready" ? `${health.embedder.modelId} (${health.embedder.dimensions}-d)` : health.embedder.state}`,
    ...(health.memory !== undefined
      ? [
          `- **Search Memory**: ${(health.memory.heapUsedBytes / 1024 / 1024).toFixed(1)} MiB heap, ${(health.memory.arrayBuffersBytes / 1024 / 1024).toFixed(1)} MiB array buffers (${health.thread === "worker" ? "the search thread's own" : "shared with the daemon"})`,
        ]
      : []),
    ...(health.reembedding !== undefined
      ? [
          `- **Re-embedding**: ${health.reembedding.finished ? "done" : "in progress"}, ${health.reembedding.done} of ${health.reembedding.total} documents (${health.reembedding.from} → ${health.reembedding.to})${reembeddingMeanwhile(health.reembedding)}`,
        ]
      : []),
    `- **By store**: ${
      Object.entries(health.index.byStore)
        .map(([store, count]) => `${store} ${count}`)
        .join(", ") || "-"
    }`,
    `- **By type**: ${
      Object.entries(health.index.byKind)
        .map(([kind, count]) => `${kind} ${count}`)
        .join(", ") || "-"
    }`,
    "",
  ].join("\n")

// ---------------------------------------------------------------------------------------------
// Tools
// ---------------------------------------------------------------------------------------------

const parseTime = (text: string | undefined) => (text === undefined ? undefined : Date.parse(text))

const searchOf = (request: SearchRequest) =>
  Effect.gen(function* () {
    const indexer = yield* SearchIndexer
    return yield* indexer.search(request)
  })

const tool = <Args>(
  definition: { name: string; title: string; description: string },
  args: Schema.Codec<Args, unknown> & Schema.Top,
  run: (args: Args, caller: ToolCaller) => Effect.Effect<ToolOutput, ToolError, SearchIndexer | Router>,
): Tool<Args, SearchIndexer | Router> =>
  makeTool({
    definition: describedDefinition({ ...definition, readOnly: true }, args),
    toolset: "search",
    errorFormat: "envelope",
    args,
    run,
  })

/** mem-search's `topK` as seed 000 reads it: missing or below 1 is the default, above the max the max. */
export const memSearchLimit = (topK: number | undefined): number =>
  topK === undefined || topK < 1 ? memSearchTopKDefault : Math.min(Math.floor(topK), memSearchTopKMax)

const memSearch = tool(
  {
    name: "mem-search",
    title: "Memory Search",
    description:
      "Search memory (every store: graph, conversations, tasks, decisions, notes, ...) by meaning and by words. Returns a compact index of results - use mem-details to get full content, mem-timeline for what happened around them.",
  },
  MemSearchArgs,
  (args, caller) =>
    Effect.gen(function* () {
      const mode = args.mode ?? "hybrid"
      const response = yield* searchOf({
        query: args.query,
        mode,
        limit: memSearchLimit(args.topK),
        filter: {
          projects: [args.project ?? caller.project],
          stores: args.store === undefined ? undefined : [args.store],
          // Any other `eventType` names a record type (`kind`) as it is.
          kinds: args.eventType === undefined || isSeedEventType(args.eventType) ? undefined : [args.eventType],
          eventType: args.eventType !== undefined && isSeedEventType(args.eventType) ? args.eventType : undefined,
          session: args.sessionId,
          since: parseTime(args.since),
          until: parseTime(args.until),
        },
      })
      return {
        structured: {
          query: args.query,
          mode,
          warm: response.warm,
          semantic: response.semantic,
          results: response.hits.map(indexEntry),
        },
        text: formatSearchIndex(args.query, response.hits, notices(response, mode)),
      }
    }),
)

const memTimeline = tool(
  {
    name: "mem-timeline",
    title: "Memory Timeline",
    description:
      "Get chronological context around specific memories: the records just before and after each id, in the same project (and session, when it has one).",
  },
  TimelineArgs,
  (args) =>
    Effect.gen(function* () {
      const indexer = yield* SearchIndexer
      const window = args.windowSize ?? timelineWindowDefault
      const timelines = yield* indexer.timeline(args.ids, window)
      const entry = (document: SearchDocument) => ({
        id: document.id,
        date: new Date(document.at).toISOString(),
        store: document.store,
        type: shownTypeOf(document),
        summary: summaryOf(document),
      })
      return {
        structured: {
          timelines: timelines.map((timeline, index) =>
            timeline === undefined
              ? { id: args.ids[index]!, found: false }
              : {
                  id: timeline.anchor.id,
                  found: true,
                  before: timeline.before.map(entry),
                  anchor: entry(timeline.anchor),
                  after: timeline.after.map(entry),
                },
          ),
        },
        text: formatTimeline(args.ids, timelines),
      }
    }),
)

const memDetails = tool(
  {
    name: "mem-details",
    title: "Memory Details",
    description: "Get full content of specific memories. Use after mem-search to get complete information.",
  },
  DetailsArgs,
  (args) =>
    Effect.gen(function* () {
      const indexer = yield* SearchIndexer
      const documents = yield* indexer.documents(args.ids)
      const details = yield* Effect.forEach(documents, (document) =>
        document === undefined ? Effect.succeed(undefined) : detailOf(document),
      )
      return {
        structured: {
          memories: details.flatMap((detail) =>
            detail === undefined
              ? []
              : [
                  {
                    id: detail.document.id,
                    store: detail.document.store,
                    type: shownTypeOf(detail.document, "details"),
                    project: detail.document.project,
                    session: detail.document.session ?? null,
                    date: new Date(detail.document.at).toISOString(),
                    title: detail.document.title,
                    content: cutContent(detail.content),
                    ...(detail.summary !== undefined ? { summary: detail.summary } : {}),
                    ...(detail.tags !== undefined ? { tags: detail.tags } : {}),
                    fields: detail.document.fields ?? {},
                  },
                ],
          ),
          notFound: args.ids.filter((_, index) => documents[index] === undefined),
        },
        text: formatDetails(args.ids, details),
      }
    }),
)

const memStats = tool(
  {
    name: "mem-stats",
    title: "Memory Statistics",
    description: "Get statistics about the memory: records and vectors indexed, sessions, storage size, index health.",
  },
  Schema.Struct({}),
  () =>
    Effect.gen(function* () {
      const health = yield* (yield* SearchIndexer).health
      return { structured: { ...health }, text: formatStats(health) }
    }),
)

const omniSearch = tool(
  {
    name: "omni_search",
    title: "Search Everything",
    description:
      "Ranked search across every store (graph entities and observations, messages, tasks, ADRs, notes, snippets, error fixes, ...) with store, type, project and time filters. Each result carries score_breakdown {fulltext, semantic, recency, importance, alignment} (alignment: the re-ranking by how well the record's words match the query's, with the coverage and precision behind it).",
  },
  OmniArgs,
  (args, caller) =>
    Effect.gen(function* () {
      const mode = args.mode ?? "hybrid"
      const response = yield* searchOf({
        query: args.query,
        mode,
        limit: args.limit ?? omniLimitDefault,
        filter: {
          projects: [args.project ?? caller.project],
          stores: args.stores,
          kinds: args.kinds,
          since: parseTime(args.since),
          until: parseTime(args.until),
        },
      })
      const results = response.hits.map((hit) => ({ ...indexEntry(hit), title: hit.document.title }))
      return {
        structured: { query: args.query, mode, warm: response.warm, semantic: response.semantic, results },
        text: [
          `## Search: "${oneLine(args.query, 80)}" (${mode}, ${results.length} results)`,
          ...notices(response, mode),
          "",
          ...response.hits.map((hit, index) => {
            const b = hit.score_breakdown
            return `${index + 1}. [mem:${hit.document.id}] ${hit.score.toFixed(3)} ${hit.document.store}/${shownTypeOf(hit.document)} ${isoDate(hit.document.at)} — ${summaryOf(hit.document)}\n   fulltext ${b.fulltext.toFixed(3)} · semantic ${b.semantic.toFixed(3)} · recency ${b.recency.toFixed(3)} · importance ${b.importance.toFixed(3)} · alignment ${b.alignment.toFixed(3)}`
          }),
        ].join("\n"),
      }
    }),
)

const searchGraph = tool(
  {
    name: "search_graph",
    title: "Search Graph (ranked)",
    description:
      "Ranked knowledge-graph search by meaning and words: entities best first, each with its score, score_breakdown and the observations that matched. (search_nodes keeps the official substring semantics.)",
  },
  SearchGraphArgs,
  (args, caller) =>
    Effect.gen(function* () {
      const mode = args.mode ?? "hybrid"
      const limit = args.limit ?? omniLimitDefault
      const response = yield* searchOf({
        query: args.query,
        mode,
        limit: omniLimitMax * 4,
        filter: { projects: [args.project ?? caller.project], stores: ["graph"] },
      })
      const entities = new Map<
        string,
        {
          name: string
          entityType: string
          score: number
          score_breakdown: ReturnType<typeof breakdownOf>
          matchedObservations: Array<string>
        }
      >()
      for (const hit of response.hits) {
        const name = String(hit.document.fields?.entity ?? hit.document.title)
        let entity = entities.get(name)
        if (entity === undefined) {
          entity = {
            name,
            entityType: String(hit.document.fields?.entityType ?? ""),
            score: round(hit.score),
            score_breakdown: breakdownOf(hit),
            matchedObservations: [],
          }
          entities.set(name, entity)
        }
        if (hit.document.kind === "observation") entity.matchedObservations.push(hit.document.text)
      }
      const ranked = [...entities.values()].slice(0, limit)
      return {
        structured: { query: args.query, mode, warm: response.warm, entities: ranked },
        text: [
          `## Graph search: "${oneLine(args.query, 80)}" (${mode}, ${ranked.length} entities)`,
          ...notices(response, mode),
          "",
          ...ranked.flatMap((entity, index) => [
            `${index + 1}. **${entity.name}** (${entity.entityType}) ${entity.score.toFixed(3)}`,
            ...entity.matchedObservations.slice(0, 3).map((text) => `   - ${oneLine(text)}`),
          ]),
        ].join("\n"),
      }
    }),
)

/** Every search tool, seed 000's four first. */
export const searchTools: ReadonlyArray<Tool<never, SearchIndexer>> = [
  memSearch,
  memTimeline,
  memDetails,
  memStats,
  omniSearch,
  searchGraph,
] as never

/** A validation failure as a tool error (for callers outside MCP, e.g. REST). */
export const invalidSearch = (message: string) => new ToolError({ code: "VALIDATION_ERROR", message })
