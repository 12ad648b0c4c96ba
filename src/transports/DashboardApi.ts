/**
 * The REST reads (and the one write) the dashboard's views need beyond `RestApi.ts`, each served
 * by running one MCP tool of the catalogue with the dashboard as caller: the same Schema checks
 * the arguments, the same code reads the stores, the same answer comes back. A view whose tool is
 * not in the catalogue (its store is not built yet) gets 501 and shows "not available yet".
 *
 *   GET   /api/tasks?project=P                        list_tasks
 *   PATCH /api/tasks/{id}   {status, expected_revision?}   update_task (drag and drop)
 *   POST  /api/tasks/{id}/complete   {note?}          complete_task
 *   GET   /api/sticky?project=P                       list_sticky_notes
 *   GET   /api/notes?project=P                        sticky notes, handoffs and session summaries
 *   GET   /api/audit?project=P|*&store=S&cursor=C     query_audit
 *   GET   /api/gates?project=P                        gate_list
 *   GET   /api/conversations/sessions?project=P&cursor=C         read_messages view sessions
 *   GET   /api/conversations/{session}/messages?project=P&cursor=C   read_messages view history
 *   GET   /api/entity?project=P&name=N                get_entity_details
 *   GET   /api/omni?project=P&q=Q                     omni search with score breakdowns (else search_nodes)
 *   GET   /api/search/health                          mem-stats (index size, lag, embeddings)
 *
 * Failures keep the tool's code: VALIDATION_ERROR is 400, NOT_FOUND 404, CONFLICT 409, BUSY 503.
 */
import type { IncomingMessage, ServerResponse } from "node:http"
import { Cause, type Context, Effect, Exit, Option, Schema } from "effect"
import { defaultProjectName, ProjectName, SearchQuery } from "../graph/Model.ts"
import type { SessionServices } from "../tools/Tool.ts"
import { type Tool, type ToolCaller, ToolError } from "../tools/Tool.ts"

/** The identity the dashboard's writes are recorded under. */
export const dashboardClient = "mnemos-dashboard"
/** Largest request body of a dashboard write. */
export const dashboardBodyBytesMax = 64 * 1024
/** Records one list asks for. */
const listLimit = 500
/** Hits one search asks for. */
const searchLimit = 50

/** The omni-search tools, best first; `search_nodes` is the fallback without score breakdowns. */
const omniSearchTools = ["omni_search", "search"]

/** What the dashboard API needs from the server. */
export interface DashboardApiContext {
  readonly context: Context.Context<SessionServices>
  readonly tools: ReadonlyArray<Tool<never, SessionServices>>
  readonly readJsonBody: (
    req: IncomingMessage,
    res: ServerResponse,
    bytesMax?: number,
  ) => Promise<{ value: unknown } | undefined>
  readonly sendJson: (res: ServerResponse, status: number, body: unknown) => void
  /** Called with the duration of every search the dashboard runs. */
  readonly searched: (millis: number) => void
}

/** A tool's outcome as HTTP. */
interface Answer {
  readonly status: number
  readonly body: unknown
}

const statusOfCode: Record<ToolError["code"], number> = {
  VALIDATION_ERROR: 400,
  NOT_FOUND: 404,
  CONFLICT: 409,
  BUSY: 503,
  IO_ERROR: 500,
  CORRUPT_STORE: 500,
  INTERNAL_ERROR: 500,
}

const TaskMove = Schema.Struct({
  status: Schema.String.check(Schema.isMaxLength(32)),
  expected_revision: Schema.optionalKey(Schema.Int),
})
const TaskCompletion = Schema.UndefinedOr(Schema.Struct({ note: Schema.optionalKey(Schema.String) }))
const decodeProject = Schema.decodeUnknownExit(ProjectName)
const decodeQuery = Schema.decodeUnknownExit(SearchQuery)

/** Runs the tool `name` with `args` as the dashboard in `project`. */
const runTool = async (
  api: DashboardApiContext,
  name: string,
  args: Record<string, unknown>,
  project: string,
): Promise<Answer> => {
  const tool = api.tools.find((candidate) => candidate.definition.name === name)
  if (tool === undefined) return { status: 501, body: { error: `not available yet (no ${name} tool)`, missing: name } }
  const caller: ToolCaller = { project, client: dashboardClient }
  const effect = Schema.decodeUnknownEffect(tool.args)(args).pipe(
    Effect.mapError((issue) => new ToolError({ code: "VALIDATION_ERROR", message: String(issue) })),
    Effect.flatMap((decoded) => tool.run(decoded, caller)),
  )
  const exit = await Effect.runPromiseExitWith(api.context)(effect)
  if (Exit.isSuccess(exit)) return { status: 200, body: exit.value.structured }
  const error = Cause.findErrorOption(exit.cause)
  if (Option.isSome(error) && error.value instanceof ToolError)
    return { status: statusOfCode[error.value.code], body: { error: error.value.message, code: error.value.code } }
  return { status: 500, body: { error: String(exit.cause) } }
}

const hasTool = (api: DashboardApiContext, name: string) => api.tools.some((tool) => tool.definition.name === name)

/** Sticky notes, handoffs and session summaries in one answer; a missing part is null. */
const notesOf = async (api: DashboardApiContext, project: string): Promise<Answer> => {
  const part = async (tool: string, key: string) => {
    const answer = await runTool(api, tool, { project, limit: listLimit }, project)
    return answer.status === 200 ? ((answer.body as Record<string, unknown>)[key] ?? []) : null
  }
  const [notes, handoffs, summaries] = await Promise.all([
    part("list_sticky_notes", "notes"),
    part("list_handoffs", "handoffs"),
    part("list_session_summaries", "summaries"),
  ])
  if (notes === null && handoffs === null && summaries === null)
    return { status: 501, body: { error: "not available yet (no note tools)" } }
  return { status: 200, body: { notes, handoffs, summaries } }
}

/** Omni search with score breakdowns when a tool offers it, else search_nodes (no breakdowns). */
const searchOf = async (api: DashboardApiContext, project: string, query: string): Promise<Answer> => {
  const started = performance.now()
  const omni = omniSearchTools.find((name) => hasTool(api, name))
  const answer =
    omni !== undefined
      ? await runTool(api, omni, { query, project, limit: searchLimit }, project)
      : await runTool(api, "search_nodes", { query }, project)
  const tookMs = performance.now() - started
  api.searched(tookMs)
  if (answer.status !== 200) return answer
  return { status: 200, body: { tool: omni ?? "search_nodes", tookMs, result: answer.body } }
}

const cursorArgs = (url: URL) => {
  const cursor = url.searchParams.get("cursor")
  return cursor === null || cursor === "" ? {} : { cursor }
}

/** Serves one dashboard API request; false when the route is not one of these. */
export const handleDashboardApi = async (
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  api: DashboardApiContext,
): Promise<boolean> => {
  const path = url.pathname
  const reply = (answer: Answer) => {
    api.sendJson(res, answer.status, answer.body)
    return true
  }
  const refuse = (status: number, error: string) => reply({ status, body: { error } })
  const projectParam = url.searchParams.get("project") || defaultProjectName
  const projectExit = decodeProject(projectParam)
  if (!path.startsWith("/api/")) return false
  const project = Exit.isSuccess(projectExit) ? projectExit.value : undefined
  const get = req.method === "GET" || req.method === "HEAD"

  const taskRoute = /^\/api\/tasks\/([^/]+)(\/complete)?$/.exec(path)
  const messagesRoute = /^\/api\/conversations\/([^/]+)\/messages$/.exec(path)
  const known =
    taskRoute !== null ||
    messagesRoute !== null ||
    [
      "/api/tasks",
      "/api/sticky",
      "/api/notes",
      "/api/audit",
      "/api/gates",
      "/api/entity",
      "/api/omni",
      "/api/search/health",
    ].includes(path) ||
    path === "/api/conversations/sessions"
  if (!known) return false
  if (project === undefined) return refuse(400, "project must be 1 to 256 bytes")

  if (taskRoute !== null) {
    const id = decodeURIComponent(taskRoute[1]!)
    const complete = taskRoute[2] !== undefined
    if (complete ? req.method !== "POST" : req.method !== "PATCH")
      return refuse(405, `${req.method} is not allowed on ${path}; ${complete ? "POST" : "PATCH {status}"}`)
    const body = await api.readJsonBody(req, res, dashboardBodyBytesMax)
    if (body === undefined) return true
    if (complete) {
      const decoded = Schema.decodeUnknownExit(TaskCompletion)(body.value)
      if (Exit.isFailure(decoded)) return refuse(400, "body must be {note?: string}")
      const note = decoded.value?.note
      return reply(await runTool(api, "complete_task", { id, project, ...(note ? { note } : {}) }, project))
    }
    const decoded = Schema.decodeUnknownExit(TaskMove)(body.value)
    if (Exit.isFailure(decoded)) return refuse(400, "body must be {status, expected_revision?}")
    return reply(await runTool(api, "update_task", { id, project, ...decoded.value }, project))
  }
  if (!get) return refuse(405, `${req.method} is not allowed on ${path}`)
  if (messagesRoute !== null) {
    const session = decodeURIComponent(messagesRoute[1]!)
    const args = { view: "history", session_id: session, limit: listLimit, ...cursorArgs(url) }
    return reply(await runTool(api, "read_messages", args, project))
  }
  switch (path) {
    case "/api/tasks":
      return reply(await runTool(api, "list_tasks", { project, limit: listLimit }, project))
    case "/api/sticky":
      return reply(await runTool(api, "list_sticky_notes", { project, limit: listLimit }, project))
    case "/api/notes":
      return reply(await notesOf(api, project))
    case "/api/gates":
      return reply(await runTool(api, "gate_list", { namespace: project }, project))
    case "/api/audit": {
      const scope = url.searchParams.get("project") || "*"
      const store = url.searchParams.get("store")
      const cursor = Number(url.searchParams.get("cursor"))
      const args = {
        project: scope,
        limit: 200,
        ...(store ? { store } : {}),
        ...(Number.isInteger(cursor) && cursor > 0 ? { cursor } : {}),
      }
      return reply(await runTool(api, "query_audit", args, project))
    }
    case "/api/conversations/sessions":
      return reply(
        await runTool(api, "read_messages", { view: "sessions", limit: listLimit, ...cursorArgs(url) }, project),
      )
    case "/api/entity":
      return reply(
        await runTool(api, "get_entity_details", { names: [url.searchParams.get("name") ?? ""], project }, project),
      )
    case "/api/search/health":
      return reply(await runTool(api, "mem-stats", {}, project))
    case "/api/omni": {
      const query = decodeQuery(url.searchParams.get("q") ?? "")
      if (Exit.isFailure(query)) return refuse(400, "q is too long")
      return reply(await searchOf(api, project, query.value))
    }
  }
  return false
}
