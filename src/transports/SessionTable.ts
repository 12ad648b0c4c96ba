/**
 * The daemon's live MCP sessions — Streamable HTTP, SSE and WebSocket together — and who makes
 * room for whom, so that no client, leaky or hostile, can lock the others out.
 *
 * Invariants:
 * - At most `sessionsMax` sessions are open at once.
 * - A session is busy while it has an open exchange with its client: a request being answered
 *   (SessionActivity.ts counts them on every transport), or a Streamable HTTP request or GET
 *   stream. A session with no open exchange is idle, whatever its transport: an SSE or WebSocket
 *   connection that sends nothing holds nothing of its client's waiting on it.
 * - A session that has not completed `initialize` within `sessionInitializeMs`, or has been idle
 *   `sessionIdleMs`, is closed (`sweep`). When the table is full, the least recently active idle
 *   session of any transport is closed at once to admit a new one (`makeRoom`). A Streamable HTTP
 *   client's next request then gets 404 and the MCP spec has it start a new session; an SSE or
 *   WebSocket client sees its connection close (a `mnemos mcp` shim reconnects by itself).
 * - Only when every session is busy is a new client refused (`makeRoom` is false).
 * Recency is the order of the map: an entry moves to the end whenever an exchange begins or ends.
 * Closing an entry removes it first (synchronously), so the room it frees is counted at once, and
 * a session closing on its own later finds itself already removed.
 */

/** Most MCP sessions open at once over HTTP, SSE and WebSocket together. */
export const sessionsMax = 1024
/** A session without a request or stream for this long is closed. */
export const sessionIdleMs = 30 * 60 * 1000
/** A session that has not completed `initialize` this long after it opened is closed. */
export const sessionInitializeMs = 30 * 1000
/** How often expired sessions are looked for. */
export const sessionSweepMs = 5 * 1000

/** How a session talks. */
export type SessionKind = "streamable-http" | "sse" | "ws"

/** One registered session, as its transport sees it. */
export interface SessionHandle {
  /** Marks an exchange open (a request, a stream); the returned function marks it done (once). */
  readonly begin: () => () => void
  /** Takes the session out of the table; false when it was out already (evicted, expired). */
  readonly remove: () => boolean
  /** The session completed `initialize`: from now on only idleness ends it. */
  readonly initialized: () => void
}

/** The table of sessions. */
export interface SessionTable {
  /** Makes room for one more session, closing the least recently active idle one when full; false when all are busy. */
  readonly makeRoom: () => boolean
  /** Registers a session (after `makeRoom`); `close` ends it. Undefined when the table is full. */
  readonly add: (kind: SessionKind, close: () => Promise<void>) => SessionHandle | undefined
  /** Closes every idle session not initialized within `sessionInitializeMs`, or idle for `sessionIdleMs`; how many it closed. */
  readonly sweep: () => number
  /** Closes every session. */
  readonly closeAll: () => Promise<void>
  readonly size: () => number
}

interface Entry {
  readonly kind: SessionKind
  readonly close: () => Promise<void>
  open: number
  lastActiveAt: number
  readonly openedAt: number
  initialized: boolean
}

/** How the table is set up (tests shrink the limits and drive the clock). */
export interface SessionTableOptions {
  readonly sessionsMax?: number
  readonly idleMs?: number
  readonly initializeMs?: number
  readonly now?: () => number
}

/** A table of sessions; nothing runs by itself (the server calls `sweep` every `sessionSweepMs`). */
export const makeSessionTable = (options: SessionTableOptions = {}): SessionTable => {
  const max = options.sessionsMax ?? sessionsMax
  const idleMs = options.idleMs ?? sessionIdleMs
  const initializeMs = options.initializeMs ?? sessionInitializeMs
  const now = options.now ?? Date.now
  const entries = new Map<object, Entry>()

  /** Marks activity: the entry moves to the end (most recent), unless it was closed meanwhile. */
  const touch = (key: object, entry: Entry) => {
    entry.lastActiveAt = now()
    if (!entries.delete(key)) return
    entries.set(key, entry)
  }
  const isIdle = (entry: Entry) => entry.open === 0
  const evict = (key: object, entry: Entry) => {
    entries.delete(key)
    void entry.close().catch(() => undefined)
  }

  return {
    makeRoom: () => {
      if (entries.size < max) return true
      for (const [key, entry] of entries) {
        if (!isIdle(entry)) continue
        evict(key, entry)
        return true
      }
      return false
    },
    add: (kind, close) => {
      if (entries.size >= max) return undefined
      const key = {}
      const openedAt = now()
      const entry: Entry = { kind, close, open: 0, lastActiveAt: openedAt, openedAt, initialized: false }
      entries.set(key, entry)
      return {
        begin: () => {
          entry.open++
          touch(key, entry)
          let done = false
          return () => {
            if (done) return
            done = true
            entry.open--
            touch(key, entry)
          }
        },
        remove: () => entries.delete(key),
        initialized: () => {
          entry.initialized = true
        },
      }
    },
    sweep: () => {
      const idleSince = now() - idleMs
      const openedBefore = now() - initializeMs
      let closed = 0
      for (const [key, entry] of [...entries]) {
        if (!isIdle(entry)) continue
        const expired = entry.lastActiveAt <= idleSince || (!entry.initialized && entry.openedAt <= openedBefore)
        if (!expired) continue
        evict(key, entry)
        closed++
      }
      return closed
    },
    closeAll: async () => {
      const all = [...entries.values()]
      entries.clear()
      await Promise.all(all.map((entry) => entry.close().catch(() => undefined)))
    },
    size: () => entries.size,
  }
}
