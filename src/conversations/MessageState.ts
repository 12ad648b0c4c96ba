/**
 * How one message's life changes the conversations store's keys: the only code that writes
 * message records and the indexes derived from them (history, sessions, incoming relations,
 * tombstones, counters, changelog). Used by `apply` only, so everything here is a deterministic
 * function of the event and the state.
 *
 * Invariants kept together:
 * - `h`, `ln`, `s`, `so` and `ri` describe exactly the live messages (tombstones are in none).
 * - The `ln` links of a session's live messages form one list in id (creation) order, from the
 *   session record's `first_id` to its `last_id`; `started_at`/`last_message_at` are their
 *   timestamps. A session record exists iff the session has a live message. Appending (every
 *   write) needs no range read; inserting (an import) reads one key after the new id.
 * - `Stats` counts live and deleted messages and their bytes; every change is numbered in the
 *   changelog, of which only the last `changelogEntriesMax` entries are kept.
 */
import type { StoreView, StoreWriter } from "../stores/checkpoint/Checkpoint.ts"
import {
  changeKey,
  changelogEntriesMax,
  emptyStats,
  historyAfter,
  historyKey,
  idOfHistoryKey,
  incomingKey,
  type Link,
  linkKey,
  messageKey,
  type SessionRecord,
  type Stats,
  type StoredMessage,
  sessionKey,
  sessionOrderKey,
  statsKey,
  tombstoneKey,
  zeroKindCounts,
} from "./ConversationKeys.ts"
import { defaultMetadata, type Message, utf8Bytes } from "./Model.ts"

/** The counters of generation `gen`. */
export const readStats = (state: StoreView, gen: number): Stats =>
  (state.get(statsKey(gen)) as Stats | undefined) ?? emptyStats

/** The stored message `id` of `project` (live or tombstone), if any. */
export const readStored = (state: StoreView, gen: number, project: string, id: string): StoredMessage | undefined =>
  state.get(messageKey(gen, project, id)) as StoredMessage | undefined

/** The session record, if the session has live messages. */
export const readSession = (
  state: StoreView,
  gen: number,
  project: string,
  session: string,
): SessionRecord | undefined => state.get(sessionKey(gen, project, session)) as SessionRecord | undefined

const bytesOf = (message: Message) => ({
  content: utf8Bytes(message.content),
  metadata: utf8Bytes(JSON.stringify(message.metadata)),
})

const updateStats = (state: StoreWriter, gen: number, change: (stats: Stats) => Stats) =>
  state.put(statsKey(gen), change(readStats(state, gen)))

/** Numbers a change of message `id` in the changelog and forgets the entry that falls out of it. */
export const recordChange = (state: StoreWriter, gen: number, project: string, id: string): void => {
  const change = readStats(state, gen).changes + 1
  updateStats(state, gen, (stats) => ({ ...stats, changes: change }))
  state.put(changeKey(gen, change), { project, message_id: id })
  if (change > changelogEntriesMax) state.remove(changeKey(gen, change - changelogEntriesMax))
}

const putSession = (
  state: StoreWriter,
  gen: number,
  project: string,
  next: SessionRecord,
  previous?: SessionRecord,
) => {
  if (previous !== undefined && previous.started_at !== next.started_at)
    state.remove(sessionOrderKey(gen, project, previous.started_at, previous.session_id))
  if (previous === undefined || previous.started_at !== next.started_at)
    state.put(sessionOrderKey(gen, project, next.started_at, next.session_id), 1)
  state.put(sessionKey(gen, project, next.session_id), next)
}

/** The neighbours of live message `id` in its session. */
export const readLink = (state: StoreView, gen: number, project: string, id: string): Link =>
  (state.get(linkKey(gen, project, id)) as Link | undefined) ?? {}

const linkOf = (prev: string | undefined, next: string | undefined): Link => ({
  ...(prev !== undefined ? { prev } : {}),
  ...(next !== undefined ? { next } : {}),
})

/** Points `id`'s previous or next neighbour elsewhere (undefined: it has none). */
const relink = (
  state: StoreWriter,
  gen: number,
  project: string,
  id: string,
  side: "prev" | "next",
  to: string | undefined,
) => {
  const link = readLink(state, gen, project, id)
  state.put(linkKey(gen, project, id), side === "prev" ? linkOf(to, link.next) : linkOf(link.prev, to))
}

/** The live message right after `id` in the session (the history key must not exist yet). */
const successorOf = (state: StoreView, gen: number, project: string, session: string, id: string) => {
  for (const { key } of state.getRange({ ...historyAfter(gen, project, session, id), limit: 1 }))
    return idOfHistoryKey(key)
  return undefined
}

/** Links a new live message into its session, in id order, and updates the session record. */
const addToSession = (state: StoreWriter, gen: number, project: string, message: Message) => {
  const id = message.message_id
  const previous = readSession(state, gen, project, message.session_id)
  // Writes always append (ids only grow); an import may insert anywhere.
  const next =
    previous === undefined || id > previous.last_id
      ? undefined
      : successorOf(state, gen, project, message.session_id, id)
  const prev =
    previous === undefined
      ? undefined
      : next === undefined
        ? previous.last_id
        : readLink(state, gen, project, next).prev
  state.put(linkKey(gen, project, id), linkOf(prev, next))
  if (prev !== undefined) relink(state, gen, project, prev, "next", id)
  if (next !== undefined) relink(state, gen, project, next, "prev", id)
  state.put(historyKey(gen, project, message.session_id, id), 1)
  const kinds = { ...(previous?.kind_counts ?? zeroKindCounts()) }
  kinds[message.metadata.memory_kind]++
  const first = prev === undefined
  const last = next === undefined
  putSession(
    state,
    gen,
    project,
    {
      session_id: message.session_id,
      message_count: (previous?.message_count ?? 0) + 1,
      kind_counts: kinds,
      first_id: first || previous === undefined ? id : previous.first_id,
      started_at: first || previous === undefined ? message.timestamp : previous.started_at,
      last_id: last || previous === undefined ? id : previous.last_id,
      last_message_at: last || previous === undefined ? message.timestamp : previous.last_message_at,
    },
    previous,
  )
}

/** Unlinks a live message from its session and updates (or removes) the session record. */
const removeFromSession = (state: StoreWriter, gen: number, project: string, message: Message) => {
  const id = message.message_id
  const { prev, next } = readLink(state, gen, project, id)
  if (prev !== undefined) relink(state, gen, project, prev, "next", next)
  if (next !== undefined) relink(state, gen, project, next, "prev", prev)
  state.remove(linkKey(gen, project, id))
  state.remove(historyKey(gen, project, message.session_id, id))
  const previous = readSession(state, gen, project, message.session_id)
  if (previous === undefined) return
  if (previous.message_count <= 1) {
    state.remove(sessionKey(gen, project, message.session_id))
    state.remove(sessionOrderKey(gen, project, previous.started_at, previous.session_id))
    return
  }
  const kinds = { ...previous.kind_counts }
  kinds[message.metadata.memory_kind] = Math.max(0, kinds[message.metadata.memory_kind] - 1)
  const first =
    id === previous.first_id && next !== undefined ? readStored(state, gen, project, next)?.message : undefined
  const last =
    id === previous.last_id && prev !== undefined ? readStored(state, gen, project, prev)?.message : undefined
  putSession(
    state,
    gen,
    project,
    {
      ...previous,
      message_count: previous.message_count - 1,
      kind_counts: kinds,
      first_id: first?.message_id ?? previous.first_id,
      started_at: first?.timestamp ?? previous.started_at,
      last_id: last?.message_id ?? previous.last_id,
      last_message_at: last?.timestamp ?? previous.last_message_at,
    },
    previous,
  )
}

const indexRelations = (state: StoreWriter, gen: number, project: string, message: Message, add: boolean) => {
  for (const relation of message.metadata.relations) {
    const key = incomingKey(gen, project, relation.message_id, message.message_id, relation.type)
    if (add) state.put(key, 1)
    else state.remove(key)
  }
}

/** Stores a new live message (its id must not be stored yet). */
export const insertLive = (state: StoreWriter, gen: number, stored: StoredMessage): void => {
  const { project, message } = stored
  state.put(messageKey(gen, project, message.message_id), stored)
  addToSession(state, gen, project, message)
  indexRelations(state, gen, project, message, true)
  const bytes = bytesOf(message)
  updateStats(state, gen, (stats) => ({
    ...stats,
    active: stats.active + 1,
    writes: stats.writes + 1,
    content_bytes: stats.content_bytes + bytes.content,
    metadata_bytes: stats.metadata_bytes + bytes.metadata,
    relations: stats.relations + message.metadata.relations.length,
  }))
  recordChange(state, gen, project, message.message_id)
}

/** Stores a message as it is stored elsewhere, live or tombstone (its id must not be stored yet). */
export const insertStored = (state: StoreWriter, gen: number, stored: StoredMessage): void => {
  if (stored.deleted_at === undefined) {
    insertLive(state, gen, stored)
    return
  }
  const { project, message } = stored
  state.put(messageKey(gen, project, message.message_id), stored)
  state.put(tombstoneKey(gen, project, message.message_id), 1)
  updateStats(state, gen, (stats) => ({
    ...stats,
    deleted: stats.deleted + 1,
    dead_bytes: stats.dead_bytes + (stored.dead_bytes ?? 0),
  }))
  recordChange(state, gen, project, message.message_id)
}

/** Replaces a live message by its new revision (same id, session and role). */
export const replaceLive = (state: StoreWriter, gen: number, previous: StoredMessage, message: Message): void => {
  const { project } = previous
  const old = previous.message
  state.put(messageKey(gen, project, message.message_id), { ...previous, message })
  if (old.metadata.memory_kind !== message.metadata.memory_kind) {
    const session = readSession(state, gen, project, message.session_id)
    if (session !== undefined) {
      const kinds = { ...session.kind_counts }
      kinds[old.metadata.memory_kind] = Math.max(0, kinds[old.metadata.memory_kind] - 1)
      kinds[message.metadata.memory_kind]++
      state.put(sessionKey(gen, project, message.session_id), { ...session, kind_counts: kinds })
    }
  }
  indexRelations(state, gen, project, old, false)
  indexRelations(state, gen, project, message, true)
  const before = bytesOf(old)
  const after = bytesOf(message)
  updateStats(state, gen, (stats) => ({
    ...stats,
    updates: stats.updates + 1,
    content_bytes: stats.content_bytes - before.content + after.content,
    metadata_bytes: stats.metadata_bytes - before.metadata + after.metadata,
    relations: stats.relations - old.metadata.relations.length + message.metadata.relations.length,
  }))
  recordChange(state, gen, project, message.message_id)
}

const unlinkLive = (state: StoreWriter, gen: number, stored: StoredMessage) => {
  const { project, message } = stored
  removeFromSession(state, gen, project, message)
  indexRelations(state, gen, project, message, false)
}

/**
 * A message's tombstone: its id, session, role and times, with no content and default metadata
 * (what was deleted is in no key of the state, so a compaction leaves it in no file), and how
 * many bytes it held, for the counters.
 */
export const tombstoneOf = (stored: StoredMessage, at: number): StoredMessage => {
  const { message } = stored
  const bytes = bytesOf(message)
  return {
    project: stored.project,
    created_by: stored.created_by,
    deleted_at: stored.deleted_at ?? at,
    dead_bytes: stored.dead_bytes ?? bytes.content + bytes.metadata,
    message: { ...message, content: "", metadata: defaultMetadata },
  }
}

/** Logically deletes a live message: it leaves every index and stays as a tombstone without content. */
export const markDeleted = (state: StoreWriter, gen: number, stored: StoredMessage, at: number): void => {
  const { project, message } = stored
  unlinkLive(state, gen, stored)
  state.put(messageKey(gen, project, message.message_id), tombstoneOf(stored, at))
  state.put(tombstoneKey(gen, project, message.message_id), 1)
  const bytes = bytesOf(message)
  updateStats(state, gen, (stats) => ({
    ...stats,
    active: stats.active - 1,
    deleted: stats.deleted + 1,
    content_bytes: stats.content_bytes - bytes.content,
    metadata_bytes: stats.metadata_bytes - bytes.metadata,
    dead_bytes: stats.dead_bytes + bytes.content + bytes.metadata,
    relations: stats.relations - message.metadata.relations.length,
  }))
  recordChange(state, gen, project, message.message_id)
}

/** Physically removes a stored message, live or tombstone. */
export const erase = (state: StoreWriter, gen: number, stored: StoredMessage): void => {
  const { project, message } = stored
  const bytes = bytesOf(message)
  state.remove(messageKey(gen, project, message.message_id))
  if (stored.deleted_at !== undefined) {
    state.remove(tombstoneKey(gen, project, message.message_id))
    updateStats(state, gen, (stats) => ({
      ...stats,
      deleted: stats.deleted - 1,
      dead_bytes: stats.dead_bytes - (stored.dead_bytes ?? bytes.content + bytes.metadata),
    }))
    return
  }
  unlinkLive(state, gen, stored)
  updateStats(state, gen, (stats) => ({
    ...stats,
    active: stats.active - 1,
    content_bytes: stats.content_bytes - bytes.content,
    metadata_bytes: stats.metadata_bytes - bytes.metadata,
    relations: stats.relations - message.metadata.relations.length,
  }))
  recordChange(state, gen, project, message.message_id)
}
