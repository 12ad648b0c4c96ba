/**
 * The three views of read_messages — history, context, sessions — as pure functions of a store
 * view (an LMDB read transaction plus acknowledged changes not yet in LMDB).
 *
 * Every view answers within `responseBytesMax` of JSON: history and sessions stop early and hand
 * out a cursor to the rest; context stops early and says `truncated`. At least one item is always
 * returned, so paging always makes progress (one message is at most ~7 MiB of JSON, the worst
 * escaping of 1 MiB of content).
 */
import type { StoreView } from "../stores/checkpoint/Checkpoint.ts"
import {
  historyAfter,
  historyOf,
  idOfHistoryKey,
  incomingOf,
  parseIncomingKey,
  type SessionRecord,
  sessionOfOrderKey,
  sessionOrderKeyOfSuffix,
  sessionOrderSuffix,
  sessionsInOrder,
} from "./ConversationKeys.ts"
import { type Cursor, encodeCursor } from "./Cursor.ts"
import { currentGen } from "./Generations.ts"
import { readLink, readSession, readStored } from "./MessageState.ts"
import { type Message, memoryKinds, messageJson, type RelationType, summaryBytesMax, utf8Bytes } from "./Model.ts"

/** The response budget: about 8 MiB of JSON per answer. */
export const responseBytesMax = 8 * 1024 * 1024
/** Messages per history/sessions page: at most 1000, 100 by default. */
export const pageLimitMax = 1000
export const pageLimitDefault = 100
/** Messages before/after the target in the context view: at most 10, 1 by default. */
export const neighborsMax = 10
export const neighborsDefault = 1
/** Relation hops in the context view: at most 2, 1 by default. */
export const relationDepthMax = 2
export const relationDepthDefault = 1
/** Messages in one context answer, the target included: 50. */
export const contextMessagesMax = 50
/** Messages looked at, newest first, for a session's representative summary: 20. */
export const representativeScanMessagesMax = 20

/** Counts the JSON bytes of an answer as it is built. */
export class ResponseBudget {
  private used: number
  constructor(
    private readonly bytesMax: number = responseBytesMax,
    reserved = 1024,
  ) {
    this.used = reserved
  }
  /** Takes room for `value` if it fits (or if `force`); false when it does not. */
  take(value: unknown, force = false): boolean {
    const bytes = utf8Bytes(JSON.stringify(value)) + 1
    if (!force && this.used + bytes > this.bytesMax) return false
    this.used += bytes
    return true
  }
}

/** A live message of the current generation, in the seed's shape. */
export const liveMessage = (view: StoreView, project: string, id: string): Message | undefined => {
  const stored = readStored(view, currentGen(view), project, id)
  return stored === undefined || stored.deleted_at !== undefined ? undefined : messageJson(stored.message)
}

/** Up to `count` live messages of the session just before / after `message`, oldest first. */
export const neighbours = (
  view: StoreView,
  project: string,
  message: Message,
  count: number,
): { before: Array<Message>; after: Array<Message> } => {
  const gen = currentGen(view)
  const walk = (side: "prev" | "next") => {
    const found: Array<Message> = []
    for (let id = readLink(view, gen, project, message.message_id)[side]; id !== undefined && found.length < count; ) {
      const next = liveMessage(view, project, id)
      if (next === undefined) break
      found.push(next)
      id = readLink(view, gen, project, id)[side]
    }
    return found
  }
  return { before: walk("prev").reverse(), after: walk("next") }
}

/** The history view: a session's live messages in creation order, one page. */
export const readHistory = (
  view: StoreView,
  project: string,
  session: string,
  limit: number,
  after: string | undefined,
  budget = new ResponseBudget(),
): { history: Array<Message>; nextCursor?: string } => {
  const gen = currentGen(view)
  const range = after === undefined ? historyOf(gen, project, session) : historyAfter(gen, project, session, after)
  const history: Array<Message> = []
  let more = false
  for (const { key } of view.getRange({ ...range, limit: limit + 1 })) {
    const message = history.length < limit ? liveMessage(view, project, idOfHistoryKey(key)) : undefined
    if (message === undefined || !budget.take(message, history.length === 0)) {
      more = true
      break
    }
    history.push(message)
  }
  const last = history[history.length - 1]
  const cursor: Cursor | undefined =
    more && last !== undefined ? { v: 1, view: "history", session_id: session, after: last.message_id } : undefined
  return { history, ...(cursor !== undefined ? { nextCursor: encodeCursor(cursor) } : {}) }
}

/** The first `bytesMax` UTF-8 bytes of `text`, never splitting a character. */
export const truncateUtf8 = (text: string, bytesMax: number): string => {
  if (utf8Bytes(text) <= bytesMax) return text
  let cut = Buffer.from(text, "utf8").subarray(0, bytesMax).toString("utf8")
  if (cut.endsWith("\uFFFD")) cut = cut.slice(0, -1)
  return cut
}

/** The newest summary among the session's last messages, else the newest content (cut to 4096 bytes). */
const representativeSummary = (view: StoreView, project: string, session: SessionRecord): string => {
  const gen = currentGen(view)
  let newest: Message | undefined
  let id: string | undefined = session.last_id
  for (let looked = 0; id !== undefined && looked < representativeScanMessagesMax; looked++) {
    const message = liveMessage(view, project, id)
    if (message === undefined) break
    newest ??= message
    if (message.metadata.summary !== undefined) return message.metadata.summary
    id = readLink(view, gen, project, id).prev
  }
  return newest === undefined ? "" : truncateUtf8(newest.content, summaryBytesMax)
}

/** One entry of the sessions view. */
export interface SessionSummary {
  readonly session_id: string
  readonly message_count: number
  readonly kind_counts: Record<string, number>
  readonly representative_summary: string
  readonly started_at: number
  readonly last_message_at: number
}

/** The sessions view: sessions with live messages in (started_at, session_id) order, one page. */
export const readSessions = (
  view: StoreView,
  project: string,
  limit: number,
  after: string | undefined,
  budget = new ResponseBudget(),
): { sessions: Array<SessionSummary>; nextCursor?: string } => {
  const gen = currentGen(view)
  const range = sessionsInOrder(gen, project)
  const start = after === undefined ? range.start : `${sessionOrderKeyOfSuffix(gen, project, after)}\u0000`
  const sessions: Array<SessionSummary> = []
  let lastKey: string | undefined
  let more = false
  for (const { key } of view.getRange({ start, end: range.end, limit: limit + 1 })) {
    const record = sessions.length < limit ? readSession(view, gen, project, sessionOfOrderKey(key)) : undefined
    const summary: SessionSummary | undefined = record && {
      session_id: record.session_id,
      message_count: record.message_count,
      kind_counts: Object.fromEntries(memoryKinds.map((kind) => [kind, record.kind_counts[kind] ?? 0])),
      representative_summary: representativeSummary(view, project, record),
      started_at: record.started_at,
      last_message_at: record.last_message_at,
    }
    if (summary === undefined || !budget.take(summary, sessions.length === 0)) {
      more = true
      break
    }
    sessions.push(summary)
    lastKey = key
  }
  const cursor: Cursor | undefined =
    more && lastKey !== undefined
      ? { v: 1, view: "sessions", after: sessionOrderSuffix(gen, project, lastKey) }
      : undefined
  return { sessions, ...(cursor !== undefined ? { nextCursor: encodeCursor(cursor) } : {}) }
}

/** One relation in the context view. */
export type ContextRelation =
  | { type: RelationType; direction: "outgoing" | "incoming"; depth: number; message: Message }
  | { type: RelationType; direction: "outgoing" | "incoming"; depth: number; message_id: string; status: "deleted" }

/** What the context view asks for. */
export interface ContextRequest {
  readonly before: number
  readonly after: number
  readonly relationDepth: number
  readonly relationTypes?: ReadonlyArray<RelationType>
}

/** The context view's answer, or undefined when the message is not a live message. */
export const readContext = (view: StoreView, project: string, id: string, request: ContextRequest) => {
  const gen = currentGen(view)
  const message = liveMessage(view, project, id)
  if (message === undefined) return undefined
  const budget = new ResponseBudget()
  budget.take(message, true)
  let messages = 1
  let truncated = false
  const admit = (candidate: Message): boolean => {
    if (truncated || messages >= contextMessagesMax || !budget.take(candidate)) {
      truncated = true
      return false
    }
    messages++
    return true
  }
  const near = neighbours(view, project, message, Math.max(request.before, request.after))
  // Nearest first, so a cut keeps the messages closest to the target.
  const before = (request.before === 0 ? [] : near.before.slice(-request.before)).reverse().filter(admit).reverse()
  const after = near.after.slice(0, request.after).filter(admit)

  const wanted = request.relationTypes === undefined ? undefined : new Set<string>(request.relationTypes)
  const relations: Array<ContextRelation> = []
  const listed = new Set<string>()
  const expanded = new Set<string>([message.message_id])
  let frontier: Array<Message> = [message]
  for (let depth = 1; depth <= request.relationDepth && !truncated; depth++) {
    const next: Array<Message> = []
    const visit = (
      type: RelationType,
      direction: "outgoing" | "incoming",
      source: string,
      target: string,
      far: string,
    ) => {
      const edge = `${source}\u0000${target}\u0000${type}`
      if (truncated || listed.has(edge) || (wanted !== undefined && !wanted.has(type))) return
      const other = liveMessage(view, project, far)
      if (other === undefined) {
        listed.add(edge)
        relations.push({ type, direction, depth, message_id: far, status: "deleted" })
        return
      }
      if (!admit(other)) return
      listed.add(edge)
      relations.push({ type, direction, depth, message: other })
      if (!expanded.has(far)) {
        expanded.add(far)
        next.push(other)
      }
    }
    for (const node of frontier) {
      for (const relation of node.metadata.relations)
        visit(relation.type, "outgoing", node.message_id, relation.message_id, relation.message_id)
      for (const { key } of view.getRange(incomingOf(gen, project, node.message_id))) {
        const { source, type } = parseIncomingKey(key)
        visit(type as RelationType, "incoming", source, node.message_id, source)
      }
    }
    frontier = next
  }
  const session = readSession(view, gen, project, message.session_id)
  return {
    message,
    chronological_context: { before, after },
    relations,
    session: { session_id: message.session_id, message_count: session?.message_count ?? 0 },
    truncated,
  }
}

/** Relations touching a live message: its own plus live messages relating to it. */
export const relationCount = (view: StoreView, project: string, message: Message): number =>
  message.metadata.relations.length + view.count(incomingOf(currentGen(view), project, message.message_id))
