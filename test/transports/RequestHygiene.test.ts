/**
 * Every malformed message gets an answer, and none ends the server or holds it: over stdio
 * (`serve --stdio` and the `mnemos mcp` shim) and WebSocket, a message that is not JSON is answered
 * -32700 (id null), one that is not JSON-RPC -32600 (with its id when it has one), a line longer
 * than the limit -32600 with its id — and the process keeps serving; a request whose params do not
 * fit its method is -32602 with a readable message, not -32603 with the validator's dump; an HTTP
 * request whose headers or body trickle in is cut off instead of holding its socket.
 */
import { connect, type Socket } from "node:net"
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"
import { describe, expect, it } from "vitest"
import { stdioLineBytesMax } from "../../src/transports/StdioLines.ts"
import {
  authHeaders,
  openRawWs,
  type RawShim,
  sharedDaemon,
  startRawEmbedded,
  startRawShim,
  tempDir,
  waitFor,
} from "./harness.ts"

const daemon = sharedDaemon()

type Answer = JSONRPCMessage & { error?: { code: number; message: string } }
const answerTo = (lines: RawShim, id: string | number | null, count = 1) =>
  waitFor(`answer ${count} to ${JSON.stringify(id)}`, () => {
    const list = lines.answers.get(id as string) as Array<Answer> | undefined
    return list !== undefined && list.length >= count ? list[count - 1]! : undefined
  })

/** A tools/call line of `bytes` bytes, its id last (as the SDK writes its requests). */
const oversizeLine = (id: string, bytes: number) => {
  const head = '{"method":"tools/call","params":{"name":"search_nodes","arguments":{"query":"'
  const tail = `"}},"jsonrpc":"2.0","id":${JSON.stringify(id)}}`
  return `${head}${"q".repeat(bytes - head.length - tail.length)}${tail}\n`
}

/** The same checks for any raw line transport (embedded mode, the shim). */
const checkLines = async (lines: RawShim) => {
  lines.writeRaw("{ this is not json\n")
  const parse = await answerTo(lines, null)
  expect(parse.error?.code).toBe(-32700)

  lines.writeRaw(`${JSON.stringify({ jsonrpc: "1.0", id: "old", method: "tools/list" })}\n`)
  expect((await answerTo(lines, "old")).error?.code).toBe(-32600)

  lines.writeRaw(oversizeLine("big", stdioLineBytesMax + 1024 * 1024))
  const big = await answerTo(lines, "big")
  expect(big.error?.code).toBe(-32600)
  expect(big.error?.message).toContain(`limit of ${stdioLineBytesMax} bytes`)

  const badParams = await lines.request("tools/call", { name: 5 }, "bad-params")
  expect((badParams as Answer).error?.code).toBe(-32602)
  expect((badParams as Answer).error?.message).toMatch(/params\.name/)
  expect((badParams as Answer).error?.message).not.toContain("[\n")

  // Still serving.
  const listed = await lines.request("tools/list", {}, "after")
  expect("result" in listed, JSON.stringify(listed)).toBe(true)
  expect(lines.running()).toBe(true)
}

describe("stdio", () => {
  it("serve --stdio answers bad lines, an oversize line and bad params, and keeps serving", async () => {
    const embedded = await startRawEmbedded(tempDir())
    await checkLines(embedded)
    await embedded.close()
  })

  it("the mnemos mcp shim does the same", async () => {
    const shim = await startRawShim(daemon().dataDir, daemon().port)
    await checkLines(shim)
    await shim.close()
  })
})

describe("WebSocket", () => {
  it("a frame that is not JSON is answered -32700; bad params -32602; the connection stays usable", async () => {
    const ws = await openRawWs(daemon().url, { dataDir: daemon().dataDir })
    ws.sendText("{ this is not json")
    const parse = await waitFor("the parse error", () => ws.answers.find((answer) => answer.id === null))
    expect(parse.error?.code).toBe(-32700)
    const bad = await ws.request("bad", "tools/call", { name: "search_nodes", arguments: "not an object" })
    expect(bad.error?.code).toBe(-32602)
    expect(bad.error?.message).toMatch(/params\.arguments/)
    expect((await ws.request("after", "tools/list")).result).toBeDefined()
    await ws.close()
  })
})

describe("HTTP requests that trickle in", () => {
  /** Opens a raw connection to the daemon and writes `text`; resolves with what came back once it closes. */
  const trickle = (text: string): { socket: Socket; closed: Promise<string> } => {
    const socket = connect(daemon().port, "127.0.0.1")
    socket.write(text)
    let received = ""
    socket.on("data", (chunk) => {
      received += chunk.toString()
    })
    const closed = new Promise<string>((resolve) => socket.once("close", () => resolve(received)))
    socket.on("error", () => undefined)
    return { socket, closed }
  }

  it("a body that stops (or trickles) is answered 408 and its connection closed; headers that never end are cut too", async () => {
    const token = authHeaders(daemon().dataDir).authorization!
    const head = `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${daemon().port}\r\nAuthorization: ${token}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n`
    const stopped = trickle(`${head}Content-Length: 100000\r\n\r\n{"jsonrpc":"2.0",`)
    const dripping = trickle(`${head}Content-Length: 100000\r\n\r\n`)
    const drip = setInterval(() => dripping.socket.write(" "), 1_000)
    const headers = trickle(`POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${daemon().port}\r\n`)
    try {
      expect(await stopped.closed).toMatch(/^HTTP\/1\.1 408/)
      expect(await dripping.closed).toMatch(/^HTTP\/1\.1 408/)
      await headers.closed // node answers 408 itself, or just closes
    } finally {
      clearInterval(drip)
    }
    expect((await fetch(`${daemon().url}/ping`)).status).toBe(200)
  })
})
