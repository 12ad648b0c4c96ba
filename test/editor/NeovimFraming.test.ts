/**
 * The gate between a Neovim socket and the `neovim` client: whole, well-formed answers to the
 * client's own requests pass (however the bytes are chunked), Neovim's requests and
 * notifications are dropped, and a peer that is not Neovim is refused — through the tools too,
 * where it must be a clear error and never an unhandled rejection that would end the daemon.
 */
import { createServer, type Server, type Socket } from "node:net"
import { join } from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { encode } from "@msgpack/msgpack"
import { Effect } from "effect"
import { NeovimConfig } from "../../src/editor/Neovim.ts"
import { makeRpcFramer, rpcDepthMax, scanValue } from "../../src/editor/NeovimFraming.ts"
import { callTool, removeTempDirs, tempDir, toolFailure } from "./harness.ts"

const bytes = (value: unknown) => encode(value)
const concat = (...parts: Array<Uint8Array>) => Uint8Array.from(parts.flatMap((part) => [...part]))
const awaitedIds = (...ids: Array<number>) => {
  const waiting = new Set(ids)
  return (id: number) => waiting.delete(id)
}

afterAll(removeTempDirs)

describe("msgpack-RPC framing", () => {
  it("passes whole responses, however the bytes are split, and drops requests and notifications", () => {
    const response = bytes([1, 2, null, { name: "x", list: [1, "two", 3.5, true, null] }])
    const notification = bytes([2, "nvim_buf_lines_event", [1, 2]])
    const request = bytes([0, 7, "provider_call", []])
    const stream = concat(notification, response, request, bytes([1, 3, [0, "E5108: boom"], null]))
    for (const size of [1, 3, 7, stream.length]) {
      const frame = makeRpcFramer(awaitedIds(2, 3))
      const out: Array<Uint8Array> = []
      for (let offset = 0; offset < stream.length; offset += size) {
        const framed = frame(stream.subarray(offset, offset + size))
        assert.isTrue("messages" in framed)
        if ("messages" in framed) out.push(...framed.messages)
      }
      assert.deepStrictEqual(
        out.map((message) => [...message]),
        [[...response], [...bytes([1, 3, [0, "E5108: boom"], null])]],
      )
    }
  })

  it("accepts Neovim's handles (extension types 0-2 holding an integer)", () => {
    const buffer = Uint8Array.of(0xd4, 0x00, 0x05) // Buffer 5 as fixext1
    const message = concat(Uint8Array.of(0x94, 0x01, 0x02, 0xc0), buffer)
    const framed = makeRpcFramer(awaitedIds(2))(message)
    assert.deepStrictEqual("messages" in framed ? framed.messages.length : framed.refused, 1)
  })

  it("refuses what no Neovim sends", () => {
    const refusal = (chunk: Uint8Array, ...ids: Array<number>) => {
      const framed = makeRpcFramer(awaitedIds(...ids))(chunk)
      return "refused" in framed ? framed.refused : "accepted"
    }
    assert.include(refusal(new TextEncoder().encode("HTTP/1.1 400 Bad Request\r\n\r\n")), "not a msgpack-RPC")
    assert.include(refusal(bytes(42)), "not a msgpack-RPC")
    assert.include(refusal(bytes([1, 9, null, 1]), 2), "request 9, which was not asked")
    assert.include(refusal(concat(bytes([1, 2, null, 1]), bytes([1, 2, null, 1])), 2), "request 2, which was not asked")
    assert.include(refusal(Uint8Array.of(0x94, 0x01, 0x02, 0xc0, 0xc1), 2), "0xc1")
    assert.include(refusal(Uint8Array.of(0x94, 0x01, 0x02, 0xc0, 0xd4, 0x07, 0x00), 2), "extension type 7")
    assert.include(refusal(Uint8Array.of(0x94, 0x01, 0x02, 0xc0, 0xd4, 0xff, 0x00), 2), "extension type -1")
    assert.include(refusal(Uint8Array.of(0x94, 0x01, 0x02, 0xc0, 0xd5, 0x00, 0xa1, 0x61), 2), "not one integer")
    assert.include(refusal(Uint8Array.of(0x94, 0x01, 0x02, 0xc0, 0x81, 0x90, 0x01), 2), "map key")
    const deep = concat(
      Uint8Array.of(0x94, 0x01, 0x02, 0xc0),
      new Uint8Array(rpcDepthMax + 2).fill(0x91),
      Uint8Array.of(0x00),
    )
    assert.include(refusal(deep, 2), "nesting deeper")
  })

  it("scans every msgpack type the encoder writes", () => {
    const value = [
      0,
      -1,
      127,
      255,
      65_535,
      2 ** 32 + 1,
      -(2 ** 40),
      1.5,
      "é".repeat(40),
      "x".repeat(70_000),
      new Uint8Array(300),
      Array.from({ length: 20 }, (_, index) => index),
      Object.fromEntries(Array.from({ length: 20 }, (_, index) => [`k${index}`, index])),
      null,
      false,
    ]
    const encoded = bytes(value)
    assert.deepStrictEqual(scanValue(encoded, 0), { end: encoded.length })
    assert.strictEqual(scanValue(encoded.subarray(0, encoded.length - 1), 0), "incomplete")
  })
})

describe("a peer that is not Neovim", () => {
  const servers: Array<Server> = []
  const sockets: Array<Socket> = []
  afterAll(async () => {
    for (const socket of sockets) socket.destroy()
    await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))))
  })
  const fakePeer = async (onConnection: (socket: Socket) => void) => {
    const address = join(tempDir("mnemos-fake-nvim-"), "peer.sock")
    const server = createServer((socket) => {
      sockets.push(socket)
      socket.on("error", () => undefined)
      onConnection(socket)
    })
    servers.push(server)
    await new Promise<void>((resolve) => server.listen(address, resolve))
    return address
  }
  const callAt = (address: string) =>
    toolFailure(callTool("nvim_get_cursor", {})).pipe(
      Effect.provideService(NeovimConfig, { address, executeLuaEnabled: false }),
    )

  it.live("an HTTP server at the address: NOT_FOUND saying it does not speak Neovim's RPC", () =>
    Effect.gen(function* () {
      const address = yield* Effect.promise(() =>
        fakePeer((socket) => socket.once("data", () => socket.write("HTTP/1.1 400 Bad Request\r\n\r\n"))),
      )
      const failure = yield* callAt(address)
      assert.strictEqual(failure.code, "NOT_FOUND")
      assert.include(failure.message, "does not speak Neovim's RPC")
    }),
  )

  it.live("a peer answering a request nobody sent is refused", () =>
    Effect.gen(function* () {
      const address = yield* Effect.promise(() =>
        fakePeer((socket) => socket.once("data", () => socket.write(bytes([1, 99, null, 1])))),
      )
      const failure = yield* callAt(address)
      assert.include(failure.message, "request 99, which was not asked")
    }),
  )

  it.live("a peer that never answers: BUSY after the request time limit, not a hang", () =>
    Effect.gen(function* () {
      const address = yield* Effect.promise(() => fakePeer(() => undefined))
      const failure = yield* callAt(address)
      assert.strictEqual(failure.code, "BUSY")
      assert.include(failure.message, "did not answer")
    }),
  )
})
