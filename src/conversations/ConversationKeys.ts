/**
 * The conversations store's key layout in LMDB, and the records kept under it.
 *
 * All message data lives in a *generation*: every key starts with `g<gen>` + separator. Reads and
 * writes use the current generation (`cur`). An import builds the next generation beside the
 * current one and switches `cur` in one small event, so readers see the whole import or none of it
 * (see Generations.ts).
 *
 * Components are joined with U+0005 (written `\5` below); a range `[P + \5, P + \6)` holds every
 * key under the prefix P. Projects and session ids are escaped so that no component contains a
 * character at or below U+0006 or a lone surrogate. Why not U+0000 like the graph store: LMDB's key
 * encoding (ordered-binary) escapes characters U+0000..U+0004 in keys shorter than 64 characters
 * but writes longer keys raw, so keys with those characters sort and decode inconsistently.
 *
 *   G m  \5 project \5 id                           → StoredMessage (live, or a tombstone)
 *   G h  \5 project \5 session \5 id                → 1            (history: live messages by id)
 *   G ln \5 project \5 id                           → Link         (previous/next live message of its session)
 *   G s  \5 project \5 session                      → SessionRecord (sessions with live messages)
 *   G so \5 project \5 started_at \5 session        → 1            (sessions in (time, id) order)
 *   G ri \5 project \5 target \5 source \5 type     → 1            (incoming relations of live messages)
 *   G d  \5 project \5 id                           → 1            (tombstones awaiting rebuild_index)
 *   G cl \5 n                                       → ChangeRecord (the last changes, for the search index)
 *   G st                                            → Stats
 *   cur, gnext, imp, lastid, switches               → current generation, next one, import state,
 *                                                     last id issued, imports committed
 *
 * Message ids are ULIDs issued in strictly increasing order, so `h` iterates a session in creation
 * order; `ln` links each live message to its neighbours in that order, so reading backwards (the
 * messages before one, the newest of a session) never needs a reverse range. Numbers in keys are
 * zero-padded base 36 so that string order is numeric order.
 */
import type { KeyRange } from "../stores/checkpoint/Checkpoint.ts"
import { type MemoryKind, type Message, memoryKinds } from "./Model.ts"

const sep = "\u0005"
const end = "\u0006"
const escapeMark = "\u0007"

const isHighSurrogate = (code: number) => code >= 0xd800 && code <= 0xdbff
const isLowSurrogate = (code: number) => code >= 0xdc00 && code <= 0xdfff

/** A project or session id as a key component: no character at or below U+0007, no lone surrogate. */
const component = (text: string): string => {
  let out = ""
  for (let index = 0; index < text.length; index++) {
    const code = text.charCodeAt(index)
    const paired = isHighSurrogate(code)
      ? isLowSurrogate(text.charCodeAt(index + 1))
      : isLowSurrogate(code) && isHighSurrogate(text.charCodeAt(index - 1))
    const escaped = code <= 7 || ((isHighSurrogate(code) || isLowSurrogate(code)) && !paired)
    out += escaped ? `${escapeMark}${code.toString(16).padStart(4, "0")}` : text[index]
  }
  return out
}
/** The text a key component stands for. */
const uncomponent = (text: string): string => {
  const [head, ...escapes] = text.split(escapeMark)
  return (
    head + escapes.map((part) => String.fromCharCode(Number.parseInt(part.slice(0, 4), 16)) + part.slice(4)).join("")
  )
}

/** The width of an encoded number in a key (36^11 > 2^53). */
const numberWidth = 11
const encodeNumber = (value: number): string => value.toString(36).padStart(numberWidth, "0")

/** The last `changelogEntriesMax` changes are kept for the in-memory search index to catch up. */
export const changelogEntriesMax = 10_000

/** Top-level keys (outside every generation). */
export const currentGenKey = "cur"
export const nextGenKey = "gnext"
export const importStateKey = "imp"
export const lastIdKey = "lastid"
/** How many imports have switched the current generation. */
export const switchesKey = "switches"
/** The generation of a store that never imported. */
export const firstGen = 1

/** A message as stored: the seed's object plus who wrote it, where, and whether it is deleted. */
export interface StoredMessage {
  readonly project: string
  readonly created_by: string
  /** Set when the message was logically deleted (it stays until rebuild_index). */
  readonly deleted_at?: number
  /** A tombstone's: the bytes of content and metadata the message held (the tombstone keeps none). */
  readonly dead_bytes?: number
  readonly message: Message
}

/** A session with at least one live message. */
export interface SessionRecord {
  readonly session_id: string
  readonly message_count: number
  readonly kind_counts: Readonly<Record<MemoryKind, number>>
  readonly first_id: string
  readonly started_at: number
  readonly last_id: string
  readonly last_message_at: number
}

/** A live message's neighbours in its session (history order). */
export interface Link {
  readonly prev?: string
  readonly next?: string
}

/** Counters of one generation, for health and the search index. */
export interface Stats {
  readonly active: number
  readonly deleted: number
  readonly writes: number
  readonly updates: number
  /** Changes recorded in the changelog so far (the number of the last one). */
  readonly changes: number
  readonly content_bytes: number
  readonly metadata_bytes: number
  /** Bytes of content and metadata held by tombstones. */
  readonly dead_bytes: number
  readonly relations: number
  /** Bumped by rebuild_index: in-memory indexes of an older epoch rebuild. */
  readonly epoch: number
}

export const emptyStats: Stats = {
  active: 0,
  deleted: 0,
  writes: 0,
  updates: 0,
  changes: 0,
  content_bytes: 0,
  metadata_bytes: 0,
  dead_bytes: 0,
  relations: 0,
  epoch: 0,
}

/** One changelog entry: a message that changed. */
export interface ChangeRecord {
  readonly project: string
  readonly message_id: string
}

/** Zero counts of every kind. */
export const zeroKindCounts = (): Record<MemoryKind, number> =>
  Object.fromEntries(memoryKinds.map((kind) => [kind, 0])) as Record<MemoryKind, number>

/** A range covering every key that starts with `prefix` (which must end in the separator). */
const under = (prefix: string): KeyRange => ({ start: prefix, end: `${prefix.slice(0, -1)}${end}` })

/** The prefix of every key of generation `gen`. */
export const genPrefix = (gen: number): string => `g${gen.toString(36)}${sep}`
/** Every key of generation `gen`. */
export const wholeGen = (gen: number): KeyRange => under(genPrefix(gen))

/** A stored message's key within its generation (what follows `genPrefix`). */
export const messageKeyInGen = (project: string, id: string): string => `m${sep}${component(project)}${sep}${id}`
export const messageKey = (gen: number, project: string, id: string): string =>
  `${genPrefix(gen)}${messageKeyInGen(project, id)}`
/** Whether `key` is a stored message's key (of any generation). */
export const isMessageKey = (key: string): boolean => {
  const parts = key.split(sep)
  return parts.length === 4 && parts[0]!.startsWith("g") && parts[1] === "m"
}
export const historyKey = (gen: number, project: string, session: string, id: string): string =>
  `${historyPrefix(gen, project, session)}${id}`
export const sessionKey = (gen: number, project: string, session: string): string =>
  `${genPrefix(gen)}s${sep}${component(project)}${sep}${component(session)}`
export const sessionOrderKey = (gen: number, project: string, startedAt: number, session: string): string =>
  `${sessionOrderPrefix(gen, project)}${encodeNumber(startedAt)}${sep}${component(session)}`
export const incomingKey = (gen: number, project: string, target: string, source: string, type: string): string =>
  `${incomingPrefix(gen, project, target)}${source}${sep}${type}`
export const linkKey = (gen: number, project: string, id: string): string =>
  `${genPrefix(gen)}ln${sep}${component(project)}${sep}${id}`
export const tombstoneKey = (gen: number, project: string, id: string): string =>
  `${genPrefix(gen)}d${sep}${component(project)}${sep}${id}`
export const statsKey = (gen: number): string => `${genPrefix(gen)}st`
export const changeKey = (gen: number, change: number): string => `${genPrefix(gen)}cl${sep}${encodeNumber(change)}`

const historyPrefix = (gen: number, project: string, session: string) =>
  `${genPrefix(gen)}h${sep}${component(project)}${sep}${component(session)}${sep}`
const sessionOrderPrefix = (gen: number, project: string) => `${genPrefix(gen)}so${sep}${component(project)}${sep}`
const incomingPrefix = (gen: number, project: string, target: string) =>
  `${genPrefix(gen)}ri${sep}${component(project)}${sep}${target}${sep}`

/** A session's live messages, in creation order. */
export const historyOf = (gen: number, project: string, session: string): KeyRange =>
  under(historyPrefix(gen, project, session))
/** A session's live messages after `id` (exclusive). */
export const historyAfter = (gen: number, project: string, session: string, id: string): KeyRange => ({
  start: `${historyPrefix(gen, project, session)}${id}${sep}`,
  end: historyOf(gen, project, session).end,
})
/** The message id of a history key. */
export const idOfHistoryKey = (key: string): string => key.slice(key.lastIndexOf(sep) + 1)

/** A project's sessions in (started_at, session_id) order. */
export const sessionsInOrder = (gen: number, project: string): KeyRange => under(sessionOrderPrefix(gen, project))
/** The part of a session-order key after the project, which a sessions cursor carries. */
export const sessionOrderSuffix = (gen: number, project: string, key: string): string =>
  key.slice(sessionOrderPrefix(gen, project).length)
/** The key a sessions cursor's suffix names. */
export const sessionOrderKeyOfSuffix = (gen: number, project: string, suffix: string): string =>
  `${sessionOrderPrefix(gen, project)}${suffix}`
/** The session a session-order key names. */
export const sessionOfOrderKey = (key: string): string => uncomponent(key.slice(key.lastIndexOf(sep) + 1))

/** Every session record of a generation (all projects). */
export const allSessions = (gen: number): KeyRange => under(`${genPrefix(gen)}s${sep}`)
/** The project and session of a session key. */
export const parseSessionKey = (gen: number, key: string): { project: string; session: string } => {
  const [project, session] = key.slice(genPrefix(gen).length + 2).split(sep)
  return { project: uncomponent(project!), session: uncomponent(session!) }
}
/** Every stored message of a generation, optionally of one project, by id. */
export const allMessages = (gen: number, project?: string): KeyRange =>
  under(project === undefined ? `${genPrefix(gen)}m${sep}` : `${genPrefix(gen)}m${sep}${component(project)}${sep}`)
/** Every history key of a generation: the live messages of every project and session. */
export const allHistory = (gen: number): KeyRange => under(`${genPrefix(gen)}h${sep}`)
/** The project and id of a history key. */
export const parseHistoryKey = (gen: number, key: string): { project: string; session: string; id: string } => {
  const [project, session, id] = key.slice(genPrefix(gen).length + 2).split(sep)
  return { project: uncomponent(project!), session: uncomponent(session!), id: id! }
}
/** Live messages relating to `target`: keys end in `source \0 type`. */
export const incomingOf = (gen: number, project: string, target: string): KeyRange =>
  under(incomingPrefix(gen, project, target))
/** The (source, type) of an incoming-relation key. */
export const parseIncomingKey = (key: string): { source: string; type: string } => {
  const parts = key.split(sep)
  return { source: parts[parts.length - 2]!, type: parts[parts.length - 1]! }
}
/** Every tombstone of a generation. */
export const allTombstones = (gen: number): KeyRange => under(`${genPrefix(gen)}d${sep}`)
/** The project and id of a tombstone key. */
export const parseTombstoneKey = (gen: number, key: string): { project: string; id: string } => {
  const [project, id] = key.slice(genPrefix(gen).length + 2).split(sep)
  return { project: uncomponent(project!), id: id! }
}
/** Changelog entries after change number `after`. */
export const changesAfter = (gen: number, after: number): KeyRange => ({
  start: changeKey(gen, after + 1),
  end: `${genPrefix(gen)}cl${end}`,
})
