/**
 * The REST API beside MCP, for scripts and the dashboard. Thin: each route decodes its query,
 * runs one engine read, and encodes JSON. Unknown routes are 404; wrong methods 405.
 *
 *   GET /api/version            build information
 *   GET /api/stats              counts per project (entities, relations, tasks, tech debt) and the
 *                               health of every store (the health even
 *                               when the graph store refuses: `projects` is then empty and
 *                               `projectsError` says why)
 *   GET /api/cluster            the shared memory: its daemons, which are live, how far each is
 *                               behind per store (`{shared: false}` for a local memory)
 *   GET /api/graph?project=P    the graph as nodes and edges (at most `graphNodesMax` nodes)
 *   GET /api/search?q=Q&project=P[&stores=a,b&kinds=k&mode=hybrid&limit=N&since=ISO&until=ISO]
 *                               omni search (every store, ranked, with score breakdowns)
 *   GET /api/conversations/export[?project=P&session=S]
 *                               the conversations backup (versioned JSONL, streamed; its
 *                               `content-length` and `x-mnemos-records` tell a whole file)
 *   POST /api/conversations/import?policy=reject|overwrite[&project=P]
 *                               a conversations backup as the raw body (up to 4 GiB of records,
 *                               not the 16 MiB JSON limit), all or nothing: {records, policy} or
 *                               {error, line?} (422 for a bad line); see ConversationTransferApi.ts
 *   POST /api/compact[?stores=a,b]  compacts the stores (all when none is named) and search's files:
 *                               afterwards nothing deleted is left in any file (`mnemos compact`)
 *   POST /terminal/telemetry    one finished shell command (see Telemetry.ts), answered 202
 *   GET|POST /gate/verify?action=A&namespace=N[&consume=1]   200 authorized, 403 blocked/pending/expired, 404 none
 *   POST /gate/set              {action, status, namespace?, reason?, expires_in_seconds?}
 *   GET /gate/list?namespace=N  every gate with its verdict
 */
import type { IncomingMessage, ServerResponse } from "node:http"
import { type Context, Effect, Exit, Result, Schema } from "effect"
import { Router } from "../actors/Router.ts"
import { buildInfo } from "../cli/BuildInfo.ts"
import { ClusterPresence } from "../cluster/ClusterPresence.ts"
import { compactAll } from "../Engine.ts"
import { engineeringStore, techDebtKind } from "../engineering/CodeHistory.ts"
import { GateSetBody, GateVerifyQuery, httpStatusOf, restClientLengthMax } from "../engineering/GateHttp.ts"
import { gateHttpStatus, listGates, setGate, verifyGate } from "../engineering/Gates.ts"
import { allRecords } from "../engineering/RecordKeys.ts"
import { presentRecord } from "../engineering/RecordQueries.ts"
import type { RecordRejected, StoredRecord } from "../engineering/RecordStore.ts"
import { taskKind, tasksStore } from "../engineering/Tasks.ts"
import { countersOf, entitiesOf, projectsOf, relationsOf } from "../graph/GraphQueries.ts"
import { GraphSearch } from "../graph/GraphSearch.ts"
import { graphStore } from "../graph/GraphStore.ts"
import { defaultProjectName, searchQueryBytesMax } from "../graph/Model.ts"
import { privacyStats } from "../privacy/PrivacyFilter.ts"
import { SearchIndexer } from "../search/Indexer.ts"
import { threadMemory } from "../search/index/IndexCore.ts"
import { type SearchMode, searchModes } from "../search/ranking/Ranking.ts"
import type { StoreView } from "../stores/checkpoint/Checkpoint.ts"
import type { StoreError } from "../stores/StoreError.ts"
import { omniLimitDefault, omniLimitMax } from "../tools/SearchTools.ts"
import type { SessionServices } from "../tools/Tool.ts"
import type { ConversationTransferApi } from "./ConversationTransferApi.ts"
import { type Telemetry, terminalBodyBytesMax } from "./Telemetry.ts"

/** The most nodes `/api/graph` returns. */
export const graphNodesMax = 20_000

/** What a route needs from the server. */
export interface RestContext {
  readonly context: Context.Context<SessionServices>
  readonly readJsonBody: (
    req: IncomingMessage,
    res: ServerResponse,
    bytesMax?: number,
  ) => Promise<{ value: unknown } | undefined>
  readonly sendJson: (res: ServerResponse, status: number, body: unknown) => void
  /** The conversations backup routes (export and import through the daemon). */
  readonly conversationTransfers?: ConversationTransferApi
  /** The daemon's telemetry, when it runs one. */
  readonly telemetry?: Telemetry["Service"]
}

const graphOf = (project: string) =>
  Effect.gen(function* () {
    const store = (yield* Router).store(graphStore)
    return yield* store.read((view) => {
      const entities = entitiesOf(view, project)
      const truncated = entities.length > graphNodesMax
      const nodes = entities.slice(0, graphNodesMax)
      const names = new Set(nodes.map((entity) => entity.name))
      return {
        project,
        truncated,
        nodes: nodes.map((entity) => ({
          id: entity.name,
          type: entity.entityType,
          observations: entity.observations.length,
          updatedAt: new Date(entity.updatedAt).toISOString(),
        })),
        edges: relationsOf(view, project)
          .filter((relation) => names.has(relation.from) && names.has(relation.to))
          .map((relation) => ({ from: relation.from, to: relation.to, type: relation.relationType })),
      }
    })
  })

/**
 * Live records of `kind` per project (a scan of the kind's records: stats are asked every few
 * seconds, and a project holds thousands of tasks, not millions). A store that refuses counts none.
 */
const countRecords = (
  store: { readonly read: <A>(query: (view: StoreView) => A) => Effect.Effect<A, StoreError> },
  kind: string,
) =>
  store
    .read((view) => {
      const counts = new Map<string, number>()
      for (const { value } of view.getRange(allRecords)) {
        const record = value as StoredRecord
        if (record.kind !== kind || record.deletedAt !== undefined) continue
        counts.set(record.project, (counts.get(record.project) ?? 0) + 1)
      }
      return counts
    })
    .pipe(Effect.catch(() => Effect.succeed(new Map<string, number>())))

const stats = (telemetry: Telemetry["Service"] | undefined) =>
  Effect.gen(function* () {
    const router = yield* Router
    const search = yield* GraphSearch
    // A graph store that refuses (corrupt, unavailable) must not hide the report that says so.
    const counted = yield* router
      .store(graphStore)
      .read((view) => ({
        projects: projectsOf(view).map((project) => {
          const counters = countersOf(view, project)
          return { project, entities: counters.entities, relations: counters.relations }
        }),
      }))
      .pipe(Effect.catch((error) => Effect.succeed({ projects: [], projectsError: error.message })))
    // Open tasks and tech debt per project (seed 002's stats), beside the graph's counts.
    const records = yield* Effect.all({
      tasks: countRecords(router.store(tasksStore), taskKind.name),
      techDebt: countRecords(router.store(engineeringStore), techDebtKind.name),
    })
    const projects = counted.projects.map((entry) => ({
      ...entry,
      tasks: records.tasks.get(entry.project) ?? 0,
      techDebt: records.techDebt.get(entry.project) ?? 0,
    }))
    for (const project of new Set([...records.tasks.keys(), ...records.techDebt.keys()]))
      if (!projects.some((entry) => entry.project === project))
        projects.push({
          project,
          entities: 0,
          relations: 0,
          tasks: records.tasks.get(project) ?? 0,
          techDebt: records.techDebt.get(project) ?? 0,
        })
    return {
      version: buildInfo(),
      ...counted,
      projects,
      stores: router.health(),
      search: search.stats(),
      omniSearch: yield* (yield* SearchIndexer).health,
      // The daemon's own thread (the search thread's is `omniSearch.memory`), for footprint work.
      mainThread: threadMemory(),
      privacy: privacyStats(),
      ...(telemetry !== undefined ? { telemetry: yield* telemetry.stats } : {}),
    }
  })

/** The shared memory's daemons (ClusterPresence), or that this daemon serves a local memory. */
const clusterView = Effect.gen(function* () {
  const view = yield* (yield* ClusterPresence).view
  return view === undefined ? { shared: false } : { shared: true, ...view }
})

/** Decodes `/api/search`'s query string into an omni search, or says what is wrong. */
const omniSearchOf = (project: string, params: URLSearchParams) => {
  const list = (name: string) =>
    params
      .get(name)
      ?.split(",")
      .filter((item) => item !== "") || undefined
  const time = (name: string) => {
    const text = params.get(name)
    return text === null ? undefined : Date.parse(text)
  }
  const mode = (params.get("mode") ?? "hybrid") as SearchMode
  const limit = Number(params.get("limit") ?? omniLimitDefault)
  const since = time("since")
  const until = time("until")
  if (!searchModes.includes(mode)) return { error: `mode must be one of ${searchModes.join(", ")}` }
  if (!Number.isInteger(limit) || limit < 1 || limit > omniLimitMax)
    return { error: `limit must be an integer from 1 to ${omniLimitMax}` }
  if (Number.isNaN(since) || Number.isNaN(until)) return { error: "since and until must be ISO 8601 times" }
  return {
    search: Effect.gen(function* () {
      const response = yield* (yield* SearchIndexer).search({
        query: params.get("q") ?? "",
        mode,
        limit,
        filter: { projects: [project], stores: list("stores"), kinds: list("kinds"), since, until },
      })
      return { ...response, hits: response.hits.map((hit) => ({ ...hit, ranks: undefined })) }
    }),
  }
}

/** Serves one REST request. */
export const handleRest = async (
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  rest: RestContext,
): Promise<void> => {
  const run = async (effect: Effect.Effect<unknown, unknown, SessionServices>) => {
    const exit = await Effect.runPromiseExitWith(rest.context)(effect)
    if (Exit.isSuccess(exit)) return rest.sendJson(res, 200, exit.value)
    return rest.sendJson(res, 503, { error: String(exit.cause) })
  }
  const project = url.searchParams.get("project") || defaultProjectName
  const onlyGet = () => {
    if (req.method === "GET") return true
    rest.sendJson(res, 405, { error: `${req.method} is not allowed on ${url.pathname}` })
    return false
  }
  switch (url.pathname) {
    case "/api/version":
      return void (onlyGet() && rest.sendJson(res, 200, buildInfo()))
    case "/api/stats":
      return void (onlyGet() && (await run(stats(rest.telemetry))))
    case "/api/cluster":
      return void (onlyGet() && (await run(clusterView)))
    case "/api/graph":
      return void (onlyGet() && (await run(graphOf(project))))
    case "/api/search": {
      if (!onlyGet()) return
      const query = url.searchParams.get("q") ?? ""
      if (Buffer.byteLength(query) > searchQueryBytesMax)
        return rest.sendJson(res, 400, { error: `q exceeds ${searchQueryBytesMax} bytes` })
      const omni = omniSearchOf(project, url.searchParams)
      if (omni.error !== undefined) return rest.sendJson(res, 400, { error: omni.error })
      return run(omni.search)
    }
    case "/api/compact": {
      if (req.method !== "POST") return rest.sendJson(res, 405, { error: `${req.method} is not allowed; POST` })
      const stores = url.searchParams
        .get("stores")
        ?.split(",")
        .filter((name) => name !== "")
      return run(compactAll(stores))
    }
    case "/api/conversations/export":
      if (rest.conversationTransfers === undefined) break
      return rest.conversationTransfers.exportRoute(req, res, url)
    case "/api/conversations/import":
      if (rest.conversationTransfers === undefined) break
      return rest.conversationTransfers.importRoute(req, res, url)
    case "/terminal/telemetry":
      if (rest.telemetry === undefined) break
      return recordCommand(req, res, rest, rest.telemetry)
  }
  if (await gateRoute(req, res, url, rest)) return
  return rest.sendJson(res, 404, { error: `no route ${url.pathname}` })
}

/** `POST /terminal/telemetry`: 202 with the kept entry's number, 400 when the body does not decode. */
const recordCommand = async (
  req: IncomingMessage,
  res: ServerResponse,
  rest: RestContext,
  telemetry: Telemetry["Service"],
): Promise<void> => {
  if (req.method !== "POST") return rest.sendJson(res, 405, { error: `${req.method} is not allowed; POST a command` })
  const body = await rest.readJsonBody(req, res, terminalBodyBytesMax)
  if (body === undefined) return
  const result = await Effect.runPromise(Effect.result(telemetry.recordCommand(body.value)))
  if (Result.isSuccess(result)) return rest.sendJson(res, 202, { accepted: true, seq: result.success.seq })
  return rest.sendJson(res, 400, { error: `invalid telemetry: ${result.failure.message}` })
}

/**
 * The gate routes, for git wrappers and CI; answers and returns true when the path is one of
 * them. The caller's identity for the audit ledger is `x-mnemos-client`, else "http". (The
 * dashboard's kanban and sticky-note routes run the MCP tools; see DashboardApi.ts.)
 */
const gateRoute = async (req: IncomingMessage, res: ServerResponse, url: URL, rest: RestContext): Promise<boolean> => {
  const path = url.pathname
  if (!["/gate/verify", "/gate/set", "/gate/list"].includes(path)) return false
  const header = req.headers["x-mnemos-client"]
  const by = typeof header === "string" && header !== "" ? header.slice(0, restClientLengthMax) : "http"
  const params = Object.fromEntries(url.searchParams)
  const method = (allowed: ReadonlyArray<string>) => {
    if (allowed.includes(req.method ?? "")) return true
    rest.sendJson(res, 405, { error: `${req.method} is not allowed on ${path}` })
    return false
  }
  const answer = async <A>(
    effect: Effect.Effect<A, RecordRejected | StoreError, SessionServices>,
    status: (value: A) => number = () => 200,
    body: (value: A) => unknown = (value) => value,
  ) => {
    const exit = await Effect.runPromiseExitWith(rest.context)(effect)
    if (Exit.isSuccess(exit)) return rest.sendJson(res, status(exit.value), body(exit.value))
    const failure = exit.cause.reasons.find((reason) => reason._tag === "Fail")
    if (failure?._tag === "Fail")
      return rest.sendJson(res, httpStatusOf(failure.error), { error: failure.error.message })
    return rest.sendJson(res, 500, { error: "internal error" })
  }
  const decode = <A>(schema: Schema.Codec<A, unknown>, input: unknown): A | undefined => {
    const decoded = Schema.decodeUnknownResult(schema)(input)
    if (Result.isSuccess(decoded)) return decoded.success
    rest.sendJson(res, 400, { error: decoded.failure.message })
    return undefined
  }
  switch (path) {
    case "/gate/verify": {
      const query = method(["GET", "POST"]) ? decode(GateVerifyQuery, params) : undefined
      if (query === undefined) return true
      const consume = query.consume === "1" || query.consume === "true"
      await answer(
        verifyGate(
          query.namespace ?? defaultProjectName,
          { action: query.action, consume },
          { by, tool: "/gate/verify" },
        ),
        (verdict) => gateHttpStatus(verdict.status),
        ({ gate, ...verdict }) => ({ ...verdict, gate: gate === undefined ? null : presentRecord(gate) }),
      )
      return true
    }
    case "/gate/set": {
      if (!method(["POST"])) return true
      const raw = await rest.readJsonBody(req, res)
      const body = raw === undefined ? undefined : decode(GateSetBody, raw.value)
      if (body !== undefined)
        await answer(
          setGate(body.namespace ?? defaultProjectName, body, { by, tool: "/gate/set" }),
          undefined,
          (gate) => ({ gate: presentRecord(gate) }),
        )
      return true
    }
    case "/gate/list": {
      const namespace = params.namespace || defaultProjectName
      if (method(["GET"]))
        await answer(listGates(namespace), undefined, (gates) => ({
          namespace,
          gates: gates.map(({ gate, verdict }) => ({ ...presentRecord(gate), verdict })),
        }))
      return true
    }
  }
  return false
}
