/**
 * The REST API beside MCP, for scripts and the dashboard. Thin: each route decodes its query,
 * runs one engine read, and encodes JSON. Unknown routes are 404; wrong methods 405.
 *
 *   GET /api/version            build information
 *   GET /api/stats              counts per project and the health of every store
 *   GET /api/graph?project=P    the graph as nodes and edges (at most `graphNodesMax` nodes)
 *   GET /api/search?q=Q&project=P   search_nodes
 */
import type { IncomingMessage, ServerResponse } from "node:http"
import { type Context, Effect, Exit } from "effect"
import { Router } from "../actors/Router.ts"
import { buildInfo } from "../cli/BuildInfo.ts"
import { countersOf, entitiesOf, projectsOf, relationsOf } from "../graph/GraphQueries.ts"
import { GraphSearch } from "../graph/GraphSearch.ts"
import { graphStore } from "../graph/GraphStore.ts"
import { defaultProjectName, searchQueryBytesMax } from "../graph/Model.ts"
import type { SessionServices } from "../tools/McpSession.ts"

/** The most nodes `/api/graph` returns. */
export const graphNodesMax = 20_000

/** What a route needs from the server. */
export interface RestContext {
  readonly context: Context.Context<SessionServices>
  readonly readJsonBody: (req: IncomingMessage, res: ServerResponse) => Promise<{ value: unknown } | undefined>
  readonly sendJson: (res: ServerResponse, status: number, body: unknown) => void
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

const stats = Effect.gen(function* () {
  const router = yield* Router
  const search = yield* GraphSearch
  const projects = yield* router.store(graphStore).read((view) =>
    projectsOf(view).map((project) => {
      const counters = countersOf(view, project)
      return { project, entities: counters.entities, relations: counters.relations }
    }),
  )
  return { version: buildInfo(), projects, stores: router.health(), search: search.stats() }
})

const searchOf = (project: string, query: string) =>
  Effect.gen(function* () {
    const search = yield* GraphSearch
    return yield* search.searchNodes(project, query)
  })

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
      return void (onlyGet() && (await run(stats)))
    case "/api/graph":
      return void (onlyGet() && (await run(graphOf(project))))
    case "/api/search": {
      if (!onlyGet()) return
      const query = url.searchParams.get("q") ?? ""
      if (Buffer.byteLength(query) > searchQueryBytesMax)
        return rest.sendJson(res, 400, { error: `q exceeds ${searchQueryBytesMax} bytes` })
      return run(searchOf(project, query))
    }
    default:
      return rest.sendJson(res, 404, { error: `no route ${url.pathname}` })
  }
}
