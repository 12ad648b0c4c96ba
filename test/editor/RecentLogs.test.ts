/**
 * The daemon's log ring and `get_recent_logs`: every Effect log line reaches the ring beside
 * the other loggers, the ring keeps only the last lines, readers filter by level, and the tool
 * answers the daemon's lines with the terminal's recent commands.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Logger } from "effect"
import {
  annotationCharsMax,
  DaemonLog,
  daemonLogLineCharsMax,
  layerRing,
  makeLogRing,
} from "../../src/editor/DaemonLog.ts"
import { makeMemoryTerminalLog, TerminalLog } from "../../src/editor/TerminalLog.ts"
import { callTool } from "./harness.ts"

describe("daemon log ring", () => {
  it.effect("keeps the last lines in order, with level, annotations and causes", () =>
    Effect.gen(function* () {
      const { service, logger } = makeLogRing(3)
      yield* Effect.gen(function* () {
        yield* Effect.logInfo("one")
        yield* Effect.logWarning("two", { detail: 2 })
        yield* Effect.logError("three").pipe(Effect.annotateLogs({ store: "graph" }))
        yield* Effect.logDebug("below the minimum level: not logged")
        yield* Effect.logInfo("four")
      }).pipe(Effect.provide(Logger.layer([logger])))
      const lines = yield* service.recent({ limit: 10 })
      assert.deepStrictEqual(
        lines.map((line) => [line.seq, line.level, line.message, line.annotations]),
        [
          [2, "warning", 'two {"detail":2}', undefined],
          [3, "error", "three", { store: "graph" }],
          [4, "info", "four", undefined],
        ],
      )
      assert.strictEqual(yield* service.total, 4)
      const errors = yield* service.recent({ limit: 10, minimumLevel: "warning" })
      assert.deepStrictEqual(
        errors.map((line) => line.message),
        ['two {"detail":2}', "three"],
      )
      assert.deepStrictEqual(
        (yield* service.recent({ limit: 1 })).map((line) => line.message),
        ["four"],
      )
    }),
  )

  it.effect("cuts long lines and records failures' causes", () =>
    Effect.gen(function* () {
      const { service, logger } = makeLogRing(10)
      yield* Effect.logError("failed", "x".repeat(daemonLogLineCharsMax * 2)).pipe(
        Effect.provide(Logger.layer([logger])),
      )
      yield* Effect.fail(new Error("disk on fire")).pipe(
        Effect.tapCause((cause) => Effect.logError("store stopped", cause)),
        Effect.ignore,
        Effect.provide(Logger.layer([logger])),
      )
      yield* Effect.logWarning("annotated").pipe(
        Effect.annotateLogs({
          code: "y".repeat(annotationCharsMax * 3),
          nested: { list: "z".repeat(annotationCharsMax * 3) },
        }),
        Effect.provide(Logger.layer([logger])),
      )
      const [long, withCause, annotated] = yield* service.recent({ limit: 10 })
      assert.strictEqual(annotated?.annotations?.code, `${"y".repeat(annotationCharsMax)}… (cut)`)
      assert.isTrue(String(annotated?.annotations?.nested).endsWith("… (cut)"))
      assert.isTrue((long?.message.length ?? 0) < daemonLogLineCharsMax + 20)
      assert.isTrue(long?.message.endsWith("… (cut)"))
      assert.include(withCause?.message ?? "", "store stopped")
      assert.include(withCause?.cause ?? "", "disk on fire")
    }),
  )

  it.effect("layerRing adds the ring to the installed loggers and provides it as DaemonLog", () =>
    Effect.gen(function* () {
      const seen: Array<unknown> = []
      const existing = Logger.layer([Logger.make(({ message }) => seen.push(message))])
      const log = yield* Effect.gen(function* () {
        yield* Effect.logWarning("both loggers see this")
        return yield* DaemonLog
      }).pipe(Effect.provide(layerRing(10).pipe(Layer.provideMerge(existing))))
      assert.deepStrictEqual(seen, [["both loggers see this"]])
      assert.deepStrictEqual(
        (yield* log.recent({ limit: 5 })).map((line) => line.message),
        ["both loggers see this"],
      )
    }),
  )
})

describe("get_recent_logs", () => {
  it.effect("answers the daemon's recent lines and the terminal's recent commands", () => {
    const { service, logger } = makeLogRing(100)
    const terminal = makeMemoryTerminalLog(10)
    terminal.report({
      command: "npm test",
      exitCode: 1,
      cwd: "/repo",
      outputTail: "1 failed",
      at: "2026-01-01T00:00:00.000Z",
    })
    terminal.report({ command: "git status", exitCode: 0, cwd: "/repo", at: "2026-01-01T00:00:01.000Z" })
    return Effect.gen(function* () {
      yield* Effect.logInfo("routine")
      yield* Effect.logError("store graph restarted")
      const result = yield* callTool("get_recent_logs", { level: "warning", terminalLimit: 1 })
      const daemon = result.structured.daemon as {
        total: number
        lines: ReadonlyArray<{ message: string; level: string }>
      }
      assert.strictEqual(daemon.total, 2)
      assert.deepStrictEqual(
        daemon.lines.map((line) => [line.level, line.message]),
        [["error", "store graph restarted"]],
      )
      assert.deepStrictEqual(result.structured.terminal, {
        commands: [{ command: "git status", exitCode: 0, cwd: "/repo", at: "2026-01-01T00:00:01.000Z" }],
      })
      assert.include(result.text ?? "", "ERROR store graph restarted")
      assert.include(result.text ?? "", "[exit 0] /repo$ git status")
    }).pipe(
      Effect.provide(Logger.layer([logger])),
      Effect.provideService(DaemonLog, service),
      Effect.provideService(TerminalLog, terminal),
    )
  })

  it.effect("without a ring or terminal feed it answers empty lists", () =>
    Effect.gen(function* () {
      const result = yield* callTool("get_recent_logs", {})
      assert.deepStrictEqual(result.structured, {
        daemon: { capacity: 0, total: 0, lines: [] },
        terminal: { commands: [] },
      })
    }),
  )
})
