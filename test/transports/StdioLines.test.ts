/**
 * The stdio line transport (transports/StdioLines.ts) in process: whatever the chunking of the
 * input, every line is delivered or answered exactly as a reference says — blank lines ignored,
 * a line over the limit answered -32600 with the id found at either end, not JSON -32700 with id
 * null, not JSON-RPC -32600 with its id — and nothing is ever held beyond the limit. Property
 * tests print their fast-check seed (rerun with FC_SEED=<seed>).
 */
import { PassThrough, Writable } from "node:stream"
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"
import fc from "fast-check"
import { beforeAll, describe, expect, it } from "vitest"
import { decodeJsonRpcText, idOfCutMessage, tooLong } from "../../src/transports/JsonRpcText.ts"
import { heldBytesMax, requestsInFlightMax } from "../../src/transports/RequestGate.ts"
import { StdioLineTransport } from "../../src/transports/StdioLines.ts"

const seed = Number(process.env.FC_SEED ?? Date.now() % 2 ** 31)
beforeAll(() => console.log(`StdioLines: fast-check seed ${seed} (rerun with FC_SEED=${seed})`))

const lineBytesMax = 200

/** Feeds `chunks` to a transport; what it delivered and what it answered, in order. */
const run = async (chunks: ReadonlyArray<Buffer>) => {
  const input = new PassThrough()
  const output = new PassThrough()
  const transport = new StdioLineTransport(input, output, lineBytesMax)
  const seen: Array<unknown> = []
  transport.onmessage = (message) => seen.push({ delivered: message })
  output.on("data", (chunk: Buffer) => {
    for (const line of chunk
      .toString("utf8")
      .split("\n")
      .filter((text) => text !== ""))
      seen.push({ answered: JSON.parse(line) })
  })
  await transport.start()
  for (const chunk of chunks) input.write(chunk)
  await new Promise((resolve) => setImmediate(resolve))
  await transport.close()
  return seen
}

/** What the transport must do with each line. */
const reference = (lines: ReadonlyArray<string>) =>
  lines.flatMap((line): Array<unknown> => {
    const bytes = Buffer.byteLength(line)
    const text = line.replace(/\r$/, "")
    if (bytes > lineBytesMax) {
      const refused = tooLong(idOfCutMessage(line.slice(0, 1024), text.slice(-1024)), bytes, lineBytesMax)
      return [{ answered: { jsonrpc: "2.0", id: refused.id, error: { code: refused.code, message: refused.error } } }]
    }
    if (text.trim() === "") return []
    const decoded = decodeJsonRpcText(text)
    if ("message" in decoded) return [{ delivered: decoded.message }]
    return [{ answered: { jsonrpc: "2.0", id: decoded.id, error: { code: decoded.code, message: decoded.error } } }]
  })

const message = fc.record({
  jsonrpc: fc.constant("2.0"),
  id: fc.oneof(fc.integer(), fc.string({ maxLength: 8 })),
  method: fc.constantFrom("tools/list", "ping"),
  params: fc.record({ text: fc.string({ maxLength: 300 }) }),
})
const line = fc.oneof(
  message.map((value) => JSON.stringify(value)),
  // The SDK's order: the id last (found in the tail of an oversize line).
  message.map(({ id, ...rest }) => JSON.stringify({ ...rest, id })),
  fc.string({ maxLength: 300 }),
  fc.constantFrom("", " ", "{", '{"jsonrpc":"1.0","id":3}', "[]", "null", "\r"),
)

describe("StdioLineTransport", () => {
  it("delivers or answers every line as the reference says, however the input is chunked", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(line, { maxLength: 20 }),
        fc.array(fc.integer({ min: 1, max: 64 })),
        async (lines, cuts) => {
          lines = lines.filter((text) => !text.includes("\n"))
          const stream = Buffer.from(lines.map((text) => `${text}\n`).join(""), "utf8")
          const chunks: Array<Buffer> = []
          let from = 0
          for (const size of cuts) {
            if (from >= stream.length) break
            chunks.push(stream.subarray(from, from + size))
            from += size
          }
          if (from < stream.length) chunks.push(stream.subarray(from))
          expect(await run(chunks)).toEqual(reference(lines))
        },
      ),
      { seed, numRuns: 200 },
    )
  })

  it("a line over the limit is answered with its id, found at its start or its end", async () => {
    const long = "x".repeat(lineBytesMax)
    const seen = await run([
      Buffer.from(`{"jsonrpc":"2.0","id":"first","method":"ping","params":{"t":"${long}"}}\n`),
      Buffer.from(`{"method":"ping","params":{"t":"${long}"},"jsonrpc":"2.0","id":42}\n`),
      Buffer.from(`{"method":"ping","params":{"id":7,"t":"${long}"}}\n`),
    ])
    expect(seen.map((item) => (item as { answered: JSONRPCMessage & { id: unknown } }).answered.id)).toEqual([
      "first",
      42,
      null, // a nested "id" is no request id
    ])
  })
})

describe("the end of the input", () => {
  const request = (id: number) =>
    ({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "read_graph" } }) as const

  it("takes a last line without its newline, then says the input ended; waits for every answer", async () => {
    const input = new PassThrough()
    const output = new PassThrough()
    const transport = new StdioLineTransport(input, output, lineBytesMax)
    const order: Array<string> = []
    transport.onmessage = (message) => order.push(`took ${(message as { id: number }).id}`)
    transport.onend = () => order.push("ended")
    await transport.start()
    input.end(`${JSON.stringify(request(1))}\n${JSON.stringify(request(2))}`)
    await new Promise((resolve) => setImmediate(resolve))
    expect(order).toEqual(["took 1", "took 2", "ended"])
    const answered = transport.whenAnswered(60_000)
    await transport.send({ jsonrpc: "2.0", id: 2, result: {} })
    expect(transport.unansweredCount()).toBe(1)
    await transport.send({ jsonrpc: "2.0", id: 1, result: {} })
    expect(await answered).toBe(true)
  })

  it("gives up waiting for an answer after the grace it is given, and counts a cancelled request as answered", async () => {
    const input = new PassThrough()
    const transport = new StdioLineTransport(input, new PassThrough(), lineBytesMax)
    transport.onmessage = () => undefined
    await transport.start()
    input.end(
      `${JSON.stringify(request(1))}\n${JSON.stringify(request(2))}\n${JSON.stringify({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 2 } })}\n`,
    )
    await new Promise((resolve) => setImmediate(resolve))
    expect(transport.unansweredCount()).toBe(1)
    expect(await transport.whenAnswered(10)).toBe(false)
  })
})

describe("a client that writes faster than it reads", () => {
  const request = (id: number) =>
    ({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "read_graph" } }) as const
  const lines = (messages: ReadonlyArray<unknown>) => messages.map((message) => `${JSON.stringify(message)}\n`).join("")
  const turn = () => new Promise((resolve) => setImmediate(resolve))
  const idsOf = (taken: ReadonlyArray<JSONRPCMessage>) =>
    taken.filter((message) => "method" in message && "id" in message).map((message) => (message as { id: number }).id)

  it("starts at most so many requests at once, the rest in order as answers go out; passes the rest at once", async () => {
    const input = new PassThrough()
    const transport = new StdioLineTransport(input, new PassThrough(), 1 << 20)
    const taken: Array<JSONRPCMessage> = []
    transport.onmessage = (message) => taken.push(message)
    const ended: Array<number> = []
    transport.onend = () => ended.push(idsOf(taken).length)
    await transport.start()
    const count = requestsInFlightMax + 20
    input.write(lines(Array.from({ length: count }, (_, i) => request(i + 1))))
    // Past the limit: the client's answer to a server request, a notification and a cancellation
    // of a held request pass; the cancelled request is never started.
    input.write(
      lines([
        { jsonrpc: "2.0", id: "roots-1", result: { roots: [] } },
        { jsonrpc: "2.0", method: "notifications/roots/list_changed" },
        { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: count } },
      ]),
    )
    input.end()
    await turn()
    const limit = requestsInFlightMax
    expect(idsOf(taken)).toEqual(Array.from({ length: limit }, (_, i) => i + 1))
    expect(taken.some((message) => "result" in message)).toBe(true)
    expect(taken.some((message) => "method" in message && message.method === "notifications/roots/list_changed")).toBe(
      true,
    )
    expect(transport.heldCount()).toBe(count - limit - 1)
    expect(ended).toEqual([]) // not before the held requests are started
    for (let id = 1; id < count; id++) {
      await transport.send({ jsonrpc: "2.0", id, result: {} })
      expect(transport.unansweredCount()).toBeLessThanOrEqual(limit)
    }
    expect(idsOf(taken)).toEqual(Array.from({ length: count - 1 }, (_, i) => i + 1))
    expect(ended).toEqual([count - 1])
    expect(await transport.whenAnswered(1_000)).toBe(true)
  })

  it("starts no request while the output is full, and reads no more input past the bytes it holds", async () => {
    const input = new PassThrough()
    // A reader that has stopped reading: the output's buffer fills and stays full until it reads.
    const output = new PassThrough({ highWaterMark: 64 })
    const transport = new StdioLineTransport(input, output, 1 << 20)
    const taken: Array<JSONRPCMessage> = []
    transport.onmessage = (message) => taken.push(message)
    await transport.start()
    input.write(lines([request(1), request(2)]))
    await turn()
    const answered = transport.send({ jsonrpc: "2.0", id: 1, result: { text: "x".repeat(4_096) } })
    // The answer waits in the output; request 3 is read and held.
    input.write(lines([request(3)]))
    await turn()
    expect(idsOf(taken)).toEqual([1, 2])
    expect(transport.heldCount()).toBe(1)
    // A flood of requests: held until the limit of bytes, then the input is no longer read.
    const padded = (id: number) => ({ ...request(id), params: { pad: "p".repeat(64 * 1024) } })
    const flood = Array.from({ length: Math.ceil(heldBytesMax / (64 * 1024)) + 8 }, (_, i) => padded(100 + i))
    for (const message of flood) input.write(lines([message]))
    await turn()
    expect(input.isPaused()).toBe(true)
    expect(idsOf(taken)).toEqual([1, 2])
    // The client reads: the answer goes out, and the held requests start, in order.
    output.resume()
    await answered
    await turn()
    expect(idsOf(taken).slice(0, 4)).toEqual([1, 2, 3, 100])
  })
})

describe("answers written in pieces", () => {
  it("drops the answers once the output fails (its reader is gone), so waiting for them ends with the requests", async () => {
    const input = new PassThrough()
    // A client killed with requests in flight: each write fails as a pipe's does, at once.
    const output = new Writable({
      write: (_chunk, _encoding, callback) => callback(Object.assign(new Error("write EPIPE"), { code: "EPIPE" })),
    })
    output.on("error", () => undefined) // as the CLI does for stdout (cli/Main.ts)
    const transport = new StdioLineTransport(input, output, lineBytesMax)
    transport.onmessage = () => undefined
    await transport.start()
    for (const id of [1, 2, 3]) input.write(`${JSON.stringify({ jsonrpc: "2.0", id, method: "ping" })}\n`)
    await new Promise((resolve) => setImmediate(resolve))
    expect(transport.unansweredCount()).toBe(3)
    const sent = [1, 2, 3].map((id) => transport.send({ jsonrpc: "2.0", id, result: {} }))
    expect(await transport.whenAnswered(2_000)).toBe(true)
    await Promise.all(sent)
    await transport.close()
  })

  it("writes a large answer as one line, whole, before the answer sent after it, through a slow reader", async () => {
    const input = new PassThrough()
    // A small buffer: the large answer fills it many times over while the reader lags.
    const output = new PassThrough({ highWaterMark: 1024 })
    const transport = new StdioLineTransport(input, output, lineBytesMax)
    await transport.start()
    const text = `${'😀 "a" \\ '.repeat(30_000)}end`
    const large = {
      jsonrpc: "2.0",
      id: 1,
      result: { content: [{ type: "text", text }], structuredContent: { entities: [{ name: "x" }] } },
    } as JSONRPCMessage
    const small = { jsonrpc: "2.0", id: 2, result: { content: [{ type: "text", text: "small" }] } } as JSONRPCMessage
    const sent = Promise.all([transport.send(large), transport.send(small)])
    const chunks: Array<Buffer> = []
    let writes = 0
    output.on("data", (chunk: Buffer) => {
      chunks.push(chunk)
      writes++
    })
    await sent
    await new Promise((resolve) => setImmediate(resolve))
    const lines = Buffer.concat(chunks).toString("utf8").split("\n")
    expect(lines).toEqual([JSON.stringify(large), JSON.stringify(small), ""])
    expect(writes).toBeGreaterThan(4) // in pieces, not one write of the whole line
    await transport.close()
  })

  it("ends the line of an answer that fails half-written, so the next answer is read whole", async () => {
    const input = new PassThrough()
    const output = new PassThrough()
    const transport = new StdioLineTransport(input, output, lineBytesMax)
    await transport.start()
    const chunks: Array<Buffer> = []
    output.on("data", (chunk: Buffer) => chunks.push(chunk))
    const entities = Array.from({ length: 3_000 }, (_, i) => ({ name: `entity-${i}` }))
    // A value JSON cannot hold, late in the answer: its first pieces are written before it is met.
    const broken = {
      jsonrpc: "2.0",
      id: 1,
      result: { content: [{ type: "text", text: "x".repeat(100_000) }], structuredContent: { entities, late: [10n] } },
    } as unknown as JSONRPCMessage
    const next = { jsonrpc: "2.0", id: 2, result: { content: [{ type: "text", text: "next" }] } } as JSONRPCMessage
    await expect(transport.send(broken)).rejects.toThrow(/BigInt/)
    await transport.send(next)
    await new Promise((resolve) => setImmediate(resolve))
    const lines = Buffer.concat(chunks).toString("utf8").split("\n")
    expect(lines).toHaveLength(3)
    expect(lines[0]!.length).toBeGreaterThan(100_000) // the broken answer's pieces, cut short
    expect(JSON.parse(lines[1]!)).toEqual(next)
    await transport.close()
  })
})
