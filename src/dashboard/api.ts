/**
 * The daemon's HTTP API as the page uses it: JSON over same-origin fetch with the session cookie.
 * A 401 means the login is gone (the app shows how to log in again); a 501 means the daemon has
 * no such view yet (the view says "not available yet"); a failed fetch means the daemon is away.
 */

/** An API call that did not succeed. */
export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly code?: string,
  ) {
    super(message)
  }
  /** The daemon does not offer this yet. */
  get notAvailable(): boolean {
    return this.status === 501
  }
  /** No answer at all: the daemon is unreachable. */
  get offline(): boolean {
    return this.status === 0
  }
}

type UnauthorizedListener = () => void
const unauthorizedListeners = new Set<UnauthorizedListener>()

/** Calls `listener` whenever the API answers 401. */
export const onUnauthorized = (listener: UnauthorizedListener): (() => void) => {
  unauthorizedListeners.add(listener)
  return () => unauthorizedListeners.delete(listener)
}

/** Fetches `path` and parses the JSON answer; throws `ApiFailure` unless it is 2xx. */
export const api = async <T>(path: string, init: RequestInit = {}): Promise<T> => {
  let response: Response
  try {
    response = await fetch(path, {
      ...init,
      credentials: "same-origin",
      headers: { accept: "application/json", ...(init.body ? { "content-type": "application/json" } : {}) },
    })
  } catch {
    throw new ApiFailure(0, "the daemon is unreachable")
  }
  const text = await response.text()
  let body: unknown
  try {
    body = text === "" ? undefined : JSON.parse(text)
  } catch {
    body = text
  }
  if (response.ok) return body as T
  if (response.status === 401) for (const listener of unauthorizedListeners) listener()
  const record = (typeof body === "object" && body !== null ? body : {}) as { error?: unknown; code?: unknown }
  const message = typeof record.error === "string" ? record.error : `HTTP ${response.status}`
  throw new ApiFailure(response.status, message, typeof record.code === "string" ? record.code : undefined)
}

/** `?project=` for a path. */
export const withProject = (path: string, project: string, extra: Record<string, string> = {}): string => {
  const params = new URLSearchParams({ project, ...extra })
  return `${path}?${params.toString()}`
}

// ---- shapes the views read -------------------------------------------------------------------

export interface GraphNode {
  readonly id: string
  readonly type: string
  readonly observations: number
  readonly updatedAt: string
}
export interface GraphEdge {
  readonly from: string
  readonly to: string
  readonly type: string
}
export interface GraphData {
  readonly project: string
  readonly truncated: boolean
  readonly nodes: ReadonlyArray<GraphNode>
  readonly edges: ReadonlyArray<GraphEdge>
}

export interface EntityDetails {
  readonly entities: ReadonlyArray<{
    readonly name: string
    readonly entityType: string
    readonly createdAt: string
    readonly updatedAt: string
    readonly observations: ReadonlyArray<{ readonly text: string; readonly createdAt: string }>
  }>
  readonly relations: ReadonlyArray<{
    readonly from: string
    readonly to: string
    readonly relationType: string
    readonly createdAt: string
  }>
}

/** The bookkeeping every engineering record carries. */
export interface RecordBase {
  readonly id: string
  readonly project: string
  readonly revision: number
  readonly createdAt: string
  readonly updatedAt: string
  readonly createdBy: string
  readonly updatedBy: string
}

export const taskStatuses = ["todo", "doing", "blocked", "done"] as const
export type TaskStatus = (typeof taskStatuses)[number]

export interface Task extends RecordBase {
  readonly title: string
  readonly description?: string
  readonly status: TaskStatus
  readonly priority: "low" | "medium" | "high" | "urgent"
  readonly assignee?: string
  readonly due?: string
  readonly links?: ReadonlyArray<string>
  readonly tags?: ReadonlyArray<string>
  readonly completedAt?: string
  readonly completionNote?: string
}

export interface StickyNote extends RecordBase {
  readonly text: string
  readonly tags?: ReadonlyArray<string>
  readonly color?: string
  readonly expiresAt?: string
}
export interface Handoff extends RecordBase {
  readonly fromAgent: string
  readonly toAgent: string
  readonly summary: string
  readonly context?: string
  readonly openTasks?: ReadonlyArray<string>
  readonly files?: ReadonlyArray<string>
  readonly status: "open" | "acknowledged"
  readonly acknowledgedBy?: string
  readonly acknowledgedAt?: string
}
export interface SessionSummaryNote extends RecordBase {
  readonly summary: string
  readonly sessionId?: string
  readonly agent?: string
  readonly highlights?: ReadonlyArray<string>
  readonly nextSteps?: ReadonlyArray<string>
  readonly files?: ReadonlyArray<string>
}
export interface NotesData {
  readonly notes: ReadonlyArray<StickyNote> | null
  readonly handoffs: ReadonlyArray<Handoff> | null
  readonly summaries: ReadonlyArray<SessionSummaryNote> | null
}

export interface AuditEntry {
  readonly seq: number
  readonly store: string
  readonly sourceSeq: number
  readonly at: string
  readonly project: string
  readonly who: string
  readonly tool: string
  readonly action: string
  readonly kind?: string
  readonly recordId?: string
  readonly summary: string
}

export interface ConversationSession {
  readonly session_id: string
  readonly message_count: number
  readonly kind_counts: Readonly<Record<string, number>>
  readonly representative_summary: string
  readonly started_at: number
  readonly last_message_at: number
}
export interface ConversationMessage {
  readonly message_id: string
  readonly session_id: string
  readonly timestamp: number
  readonly role: string
  readonly content: string
  readonly metadata: {
    readonly tags: ReadonlyArray<string>
    readonly memory_kind: string
    readonly memory_tier: string
    readonly importance: number
    readonly summary?: string
  }
}

export interface Gate extends RecordBase {
  readonly action: string
  readonly status: "authorized" | "blocked" | "pending"
  readonly reason?: string
  readonly expiresAt?: string
  readonly verdict?: unknown
}

export interface StoreHealth {
  readonly name: string
  readonly state: string
  readonly restarts: number
  readonly lastError?: string
  readonly appliedSeq: number
  readonly mailboxDepth: number
  readonly wal?: {
    readonly segments: number
    readonly bytes: number
    readonly appends: number
    readonly fsyncs: number
  }
  readonly lmdbBytes?: number
}
export interface StatsData {
  readonly version: { readonly version: string; readonly gitCommit?: string; readonly builtAt?: string }
  readonly projects: ReadonlyArray<{
    readonly project: string
    readonly entities: number
    readonly relations: number
    readonly tasks?: number
    readonly techDebt?: number
  }>
  readonly stores: ReadonlyArray<StoreHealth>
  readonly search: Readonly<Record<string, unknown>>
  readonly [key: string]: unknown
}
export interface MetricsData {
  readonly at: number
  readonly writes: {
    readonly windowSeconds: number
    readonly until: number
    readonly perSecond: ReadonlyArray<number>
    readonly totalByStore: Readonly<Record<string, number>>
    readonly lastSeqByStore: Readonly<Record<string, number>>
  }
  readonly search: {
    readonly count: number
    readonly p50Ms: number | null
    readonly p95Ms: number | null
    readonly recentMs: ReadonlyArray<number>
  }
  readonly pagesOpen: number
  readonly process: { readonly uptimeSeconds: number; readonly rssBytes: number }
}
