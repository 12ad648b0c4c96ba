/**
 * The table of MCP sessions (transports/SessionTable.ts) on a clock the test drives: an idle
 * Streamable HTTP session expires after the idle time and a busy one never does; at the cap the
 * least recently active idle session makes room, in order of activity, whatever its transport;
 * an SSE or WebSocket connection with no request in flight is idle like any other session, and
 * one that has not initialised within its time is closed; when every session is busy there is no
 * room, until one ends.
 */
import { describe, expect, it } from "vitest"
import { makeSessionTable, type SessionKind } from "../../src/transports/SessionTable.ts"

const setup = (sessionsMax = 3, idleMs = 1_000, initializeMs = 100_000) => {
  let time = 0
  const closed: Array<string> = []
  const table = makeSessionTable({ sessionsMax, idleMs, initializeMs, now: () => time })
  const add = (name: string, kind: SessionKind = "streamable-http", initialized = true) => {
    const handle = table.add(kind, async () => void closed.push(name))
    if (handle === undefined) throw new Error(`no room for ${name}`)
    if (initialized) handle.initialized()
    return handle
  }
  const advance = (ms: number) => {
    time += ms
  }
  return { table, add, closed, advance }
}

describe("the session table", () => {
  it("an idle Streamable HTTP session expires after the idle time; one with an open exchange does not", () => {
    const { table, add, closed, advance } = setup(10)
    add("idle")
    const busy = add("busy")
    const end = busy.begin()
    advance(999)
    expect(table.sweep()).toBe(0)
    advance(1)
    expect(table.sweep()).toBe(1)
    expect(closed).toEqual(["idle"])
    advance(5_000)
    expect(table.sweep()).toBe(0)
    end()
    advance(999)
    expect(table.sweep()).toBe(0) // idle since its exchange ended, not since it began
    advance(1)
    expect(table.sweep()).toBe(1)
    expect(closed).toEqual(["idle", "busy"])
    expect(table.size()).toBe(0)
  })

  it("at the cap, the least recently active idle session makes room; activity reorders them", () => {
    const { table, add, closed, advance } = setup(3)
    const a = add("a")
    add("b")
    add("c")
    advance(10)
    a.begin()() // a request of a's, answered: a is now the most recent
    expect(table.makeRoom()).toBe(true)
    expect(closed).toEqual(["b"])
    add("d")
    expect(table.makeRoom()).toBe(true)
    expect(closed).toEqual(["b", "c"])
    expect(table.size()).toBe(2)
  })

  it("SSE and WebSocket sessions are idle without a request in flight: they expire and make room like any other", () => {
    const { table, add, closed, advance } = setup(3)
    const ws = add("ws", "ws")
    const sse = add("sse", "sse")
    add("streamable")
    const answering = ws.begin() // a request of the WebSocket client's, not answered yet
    advance(10)
    sse.begin()() // the SSE client's request, answered: the SSE session is now the most recent
    // At the cap: the least recently active idle session goes, of whatever transport.
    expect(table.makeRoom()).toBe(true)
    expect(closed).toEqual(["streamable"])
    advance(1_000)
    expect(table.sweep()).toBe(1) // the SSE session, idle past the idle time; the busy WebSocket stays
    expect(closed).toEqual(["streamable", "sse"])
    answering()
    advance(1_000)
    expect(table.sweep()).toBe(1)
    expect(closed).toEqual(["streamable", "sse", "ws"])
  })

  it("a session that has not initialised within its time is closed; one initialised in time is not", () => {
    const { table, add, closed, advance } = setup(10, 60_000, 30_000)
    add("silent", "ws", false)
    const slow = add("slow to answer", "ws", false)
    const initializing = slow.begin() // its initialize is being answered: busy, not closed
    const polite = add("polite", "ws", false)
    advance(29_999)
    polite.initialized()
    expect(table.sweep()).toBe(0)
    advance(1)
    expect(table.sweep()).toBe(1)
    expect(closed).toEqual(["silent"])
    initializing()
    expect(table.sweep()).toBe(1) // answered, still not initialised (its initialize failed)
    expect(closed).toEqual(["silent", "slow to answer"])
    expect(table.size()).toBe(1)
  })

  it("with every session busy there is no room until one ends", () => {
    const { table, add, closed, advance } = setup(3)
    const ws = add("ws", "ws")
    ws.begin()
    add("sse", "sse").begin()
    const streamable = add("streamable")
    const end = streamable.begin() // a GET stream, open
    advance(60_000)
    expect(table.sweep()).toBe(0)
    expect(table.makeRoom()).toBe(false)
    expect(table.add("ws", async () => undefined)).toBeUndefined()
    end()
    expect(table.makeRoom()).toBe(true)
    expect(closed).toEqual(["streamable"])
    // A session that ends on its own leaves room, and a second removal is a no-op.
    expect(ws.remove()).toBe(true)
    expect(ws.remove()).toBe(false)
    expect(table.size()).toBe(1)
  })

  it("an exchange that ends after its session was closed changes nothing", () => {
    const { table, add, advance } = setup(1)
    const only = add("only")
    const end = only.begin()
    end()
    advance(1_000)
    table.sweep()
    end() // a second end of the same exchange is ignored
    only.begin()() // the closed session's late activity does not bring it back
    expect(table.size()).toBe(0)
  })
})
