/**
 * Telemetry in process: the terminal ring and the editor focus state decode every input with
 * Schema and stay bounded; the UDP listener accepts loopback datagrams only, drops oversized and
 * invalid ones, and counts every outcome; accepted inputs signal their resource's URI.
 */
import { createSocket, type Socket } from "node:dgram"
import { networkInterfaces } from "node:os"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, PubSub } from "effect"
import {
  commandBytesMax,
  editorActiveUri,
  editorSessionsMax,
  makeTelemetry,
  Telemetry,
  terminalEntriesMax,
  terminalRecentUri,
} from "../../src/transports/Telemetry.ts"
import { datagramBytesMax, isLoopbackSender, receiveDatagram, startUdpListener } from "../../src/transports/Udp.ts"

const command = (index: number) => ({
  command: `make test-${index}`,
  exit_code: index % 3,
  cwd: "/work",
  output_tail: `ok ${index}`,
})
const focus = (session: string, line = 1) => JSON.stringify({ file: "/work/src/a.ts", line, col: 4, session })

/** An IPv4 address of this machine that is not loopback, if it has one. */
const externalIpv4 = Object.values(networkInterfaces())
  .flat()
  .find((address) => address !== undefined && address.family === "IPv4" && !address.internal)?.address

const sendFrom = (fromHost: string, toPort: number, payload: string | Buffer) =>
  Effect.callback<void>((resume) => {
    const socket: Socket = createSocket("udp4")
    socket.bind(0, fromHost, () =>
      socket.send(payload, toPort, fromHost === "127.0.0.1" ? "127.0.0.1" : fromHost, () => {
        socket.close()
        resume(Effect.void)
      }),
    )
  })

/** Waits (real time: UDP is real I/O) until the counters satisfy `done`. */
const untilStats = (
  telemetry: Telemetry["Service"],
  done: (stats: Telemetry["Service"] extends { stats: Effect.Effect<infer S> } ? S : never) => boolean,
) =>
  Effect.gen(function* () {
    for (let attempt = 0; attempt < 200; attempt++) {
      const stats = yield* telemetry.stats
      if (done(stats)) return stats
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 10)))
    }
    return yield* Effect.die(new Error(`counters never matched: ${JSON.stringify(yield* telemetry.stats)}`))
  })

describe("terminal telemetry", () => {
  it.effect("keeps the last 200 commands, oldest first, numbered on arrival", () =>
    Effect.gen(function* () {
      const telemetry = yield* makeTelemetry
      for (let index = 0; index < terminalEntriesMax + 50; index++) yield* telemetry.recordCommand(command(index))
      const recent = yield* telemetry.terminalRecent
      assert.strictEqual(recent.capacity, terminalEntriesMax)
      assert.strictEqual(recent.total, terminalEntriesMax + 50)
      assert.strictEqual(recent.entries.length, terminalEntriesMax)
      assert.deepStrictEqual(
        recent.entries.map((entry) => entry.command),
        Array.from({ length: terminalEntriesMax }, (_, index) => `make test-${index + 50}`),
      )
      assert.strictEqual(recent.entries[0]!.seq, 51)
      const stats = yield* telemetry.stats
      assert.deepStrictEqual(stats.terminal, {
        accepted: terminalEntriesMax + 50,
        invalid: 0,
        kept: terminalEntriesMax,
      })
    }),
  )

  it.effect("refuses what does not decode, with a message naming the field, and counts it", () =>
    Effect.gen(function* () {
      const telemetry = yield* makeTelemetry
      const invalid: Array<unknown> = [
        undefined,
        "ls",
        { command: "ls", cwd: "/" },
        { command: "", exit_code: 0, cwd: "/" },
        { command: "ls", exit_code: 1.5, cwd: "/" },
        { command: "x".repeat(commandBytesMax + 1), exit_code: 0, cwd: "/" },
        { command: "ls", exit_code: 0, cwd: "/", output_tail: "y".repeat(16 * 1024 + 1) },
      ]
      for (const input of invalid) {
        const exit = yield* Effect.exit(telemetry.recordCommand(input))
        assert.isTrue(Exit.isFailure(exit), `accepted ${JSON.stringify(input)?.slice(0, 80)}`)
      }
      const missing = yield* Effect.flip(telemetry.recordCommand({ command: "ls", cwd: "/" }))
      assert.include(missing.message, "exit_code")
      // Optional fields may be left out; unknown fields are ignored.
      const kept = yield* telemetry.recordCommand({ command: "ls", exit_code: 0, cwd: "/", extra: true })
      assert.strictEqual(kept.command, "ls")
      assert.deepStrictEqual((yield* telemetry.stats).terminal, { accepted: 1, invalid: invalid.length + 1, kept: 1 })
    }),
  )
})

describe("editor focus", () => {
  it.effect("the latest focus is active; each session keeps its latest, at most 32 sessions", () =>
    Effect.gen(function* () {
      const telemetry = yield* makeTelemetry
      yield* telemetry.recordFocus(focus("nvim-a", 1))
      yield* telemetry.recordFocus(focus("nvim-b", 2))
      yield* telemetry.recordFocus(focus("nvim-a", 3))
      const active = yield* telemetry.editorActive
      assert.deepStrictEqual(
        { session: active.active?.session, line: active.active?.line },
        { session: "nvim-a", line: 3 },
      )
      assert.deepStrictEqual(
        active.sessions.map((entry) => [entry.session, entry.line]),
        [
          ["nvim-a", 3],
          ["nvim-b", 2],
        ],
      )
      for (let index = 0; index < editorSessionsMax + 10; index++) yield* telemetry.recordFocus(focus(`s${index}`))
      const many = yield* telemetry.editorActive
      assert.strictEqual(many.sessions.length, editorSessionsMax)
      assert.strictEqual(many.sessions[0]!.session, `s${editorSessionsMax + 9}`)
      assert.isFalse(many.sessions.some((entry) => entry.session === "nvim-a"))
    }),
  )

  it.effect("keeps the editor's RPC address when the datagram names one; ignores unknown fields", () =>
    Effect.gen(function* () {
      const telemetry = yield* makeTelemetry
      const entry = yield* telemetry.recordFocus(
        JSON.stringify({ file: "/a.ts", line: 1, col: 2, session: "nvim-9", server: "/run/nvim.9.0", extra: 1 }),
      )
      assert.strictEqual(entry.server, "/run/nvim.9.0")
      assert.isFalse("extra" in entry)
      const exit = yield* Effect.exit(
        telemetry.recordFocus(
          JSON.stringify({ file: "/a.ts", line: 1, col: 2, session: "s", server: "x".repeat(1025) }),
        ),
      )
      assert.isTrue(Exit.isFailure(exit))
    }),
  )

  it.effect("reads seed 002's session_id as the session; session wins when both are there", () =>
    Effect.gen(function* () {
      const telemetry = yield* makeTelemetry
      const seeded = yield* telemetry.recordFocus(
        JSON.stringify({ file: "/a.ts", line: 4, col: 2, session_id: "gemini-1" }),
      )
      assert.strictEqual(seeded.session, "gemini-1")
      assert.strictEqual((yield* telemetry.editorActive).active?.session, "gemini-1")
      const both = yield* telemetry.recordFocus(
        JSON.stringify({ file: "/a.ts", line: 5, col: 2, session: "nvim-1", session_id: "other" }),
      )
      assert.strictEqual(both.session, "nvim-1")
      const neither = yield* Effect.exit(telemetry.recordFocus(JSON.stringify({ file: "/a.ts", line: 1, col: 1 })))
      assert.isTrue(Exit.isFailure(neither))
    }),
  )

  it.effect("refuses datagrams that are not a focus object", () =>
    Effect.gen(function* () {
      const telemetry = yield* makeTelemetry
      for (const text of [
        "",
        "not json",
        "[]",
        JSON.stringify({ file: "", line: 1, col: 1, session: "s" }),
        JSON.stringify({ file: "/a", line: -1, col: 1, session: "s" }),
        JSON.stringify({ file: "/a", line: 1, col: "4", session: "s" }),
        JSON.stringify({ file: "/a", line: 1, col: 1 }),
      ]) {
        const exit = yield* Effect.exit(telemetry.recordFocus(text))
        assert.isTrue(Exit.isFailure(exit), `accepted ${text}`)
      }
      assert.strictEqual((yield* telemetry.stats).udp.invalid, 7)
      assert.isNull((yield* telemetry.editorActive).active)
    }),
  )

  it.effect("every accepted input signals its resource's URI to subscribers", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const telemetry = yield* makeTelemetry
        const changes = yield* telemetry.changes
        yield* telemetry.recordCommand(command(1))
        yield* telemetry.recordFocus(focus("nvim"))
        yield* Effect.ignore(telemetry.recordFocus("invalid"))
        assert.deepStrictEqual(yield* PubSub.takeAll(changes), [terminalRecentUri, editorActiveUri])
      }),
    ),
  )
})

describe("the UDP listener", () => {
  it("knows loopback senders, IPv4-mapped ones included", () => {
    for (const address of ["127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.1"])
      assert.isTrue(isLoopbackSender(address))
    for (const address of ["10.0.0.5", "192.0.2.2", "::ffff:10.0.0.5", "fd00::2", "0.0.0.0"])
      assert.isFalse(isLoopbackSender(address))
  })

  it.effect("drops a datagram from a non-loopback sender, and one above 8 KiB, counting each", () =>
    Effect.gen(function* () {
      const telemetry = yield* makeTelemetry
      const receive = (payload: string, address: string) =>
        receiveDatagram(Buffer.from(payload), { address }).pipe(Effect.provideService(Telemetry, telemetry))
      yield* receive(focus("remote"), "10.0.0.5")
      yield* receive(focus("x".repeat(datagramBytesMax)), "127.0.0.1")
      yield* receive("{}", "127.0.0.1")
      yield* receive(focus("local"), "::ffff:127.0.0.1")
      const stats = yield* telemetry.stats
      assert.deepStrictEqual(
        { ...stats.udp, port: null },
        { port: null, received: 4, accepted: 1, droppedNonLoopback: 1, droppedOversized: 1, invalid: 1 },
      )
      assert.strictEqual((yield* telemetry.editorActive).active?.session, "local")
    }),
  )

  it.effect("over real sockets: loopback accepted; a non-loopback sender dropped and counted", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const telemetry = yield* makeTelemetry
        // Bound to every interface only so that a non-loopback sender can reach it at all.
        const listener = yield* startUdpListener({
          host: externalIpv4 === undefined ? "127.0.0.1" : "0.0.0.0",
          port: 0,
        }).pipe(Effect.provideService(Telemetry, telemetry))
        assert.strictEqual((yield* telemetry.stats).udp.port, listener.port)
        yield* sendFrom("127.0.0.1", listener.port, focus("loopback-editor", 7))
        yield* sendFrom("127.0.0.1", listener.port, Buffer.alloc(datagramBytesMax + 1, 0x20))
        if (externalIpv4 !== undefined) yield* sendFrom(externalIpv4, listener.port, focus("remote-editor", 9))
        const stats = yield* untilStats(
          telemetry,
          (stats) => stats.udp.received === (externalIpv4 === undefined ? 2 : 3),
        )
        assert.strictEqual(stats.udp.accepted, 1)
        assert.strictEqual(stats.udp.droppedOversized, 1)
        assert.strictEqual(stats.udp.droppedNonLoopback, externalIpv4 === undefined ? 0 : 1)
        const active = yield* telemetry.editorActive
        assert.deepStrictEqual(
          active.sessions.map((entry) => entry.session),
          ["loopback-editor"],
        )
      }),
    ),
  )

  it.effect("closes its socket with its scope (the port is free again) and reports it is not listening", () =>
    Effect.gen(function* () {
      const telemetry = yield* makeTelemetry
      const port = yield* Effect.scoped(
        startUdpListener({ host: "127.0.0.1", port: 0 }).pipe(
          Effect.provideService(Telemetry, telemetry),
          Effect.map((listener) => listener.port),
        ),
      )
      assert.isNull((yield* telemetry.stats).udp.port)
      // Binding the same port again succeeds only if it was released.
      const again = yield* Effect.scoped(
        startUdpListener({ host: "127.0.0.1", port }).pipe(
          Effect.provideService(Telemetry, telemetry),
          Effect.map((listener) => listener.port),
        ),
      )
      assert.strictEqual(again, port)
    }),
  )

  it.effect("fails to start, with the socket's error, when the port is taken", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const telemetry = yield* makeTelemetry
        const first = yield* startUdpListener({ host: "127.0.0.1", port: 0 }).pipe(
          Effect.provideService(Telemetry, telemetry),
        )
        const error = yield* Effect.flip(
          startUdpListener({ host: "127.0.0.1", port: first.port }).pipe(Effect.provideService(Telemetry, telemetry)),
        )
        assert.include(error.message, "EADDRINUSE")
      }),
    ),
  )
})
