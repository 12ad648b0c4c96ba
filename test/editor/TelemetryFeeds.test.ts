/**
 * The daemon's telemetry feeding the editor tools: focus datagrams become `EditorFocus` reports
 * (with the Neovim address they carry), posted shell commands become `TerminalLog` entries.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { EditorFocus, lastNeovimFocus } from "../../src/editor/EditorFocus.ts"
import { editorFocusFromTelemetry, terminalLogFromTelemetry } from "../../src/editor/TelemetryFeeds.ts"
import { makeTelemetry, type Telemetry } from "../../src/transports/Telemetry.ts"

describe("telemetry feeds", () => {
  it.effect("a focus datagram's Neovim address (server) reaches EditorFocus", () =>
    Effect.gen(function* () {
      const telemetry = yield* makeTelemetry
      yield* telemetry.recordFocus(
        JSON.stringify({ file: "/repo/a.ts", line: 3, col: 7, session: "nvim-1", server: "/run/nvim.1.0" }),
      )
      const focus = editorFocusFromTelemetry(telemetry)
      const [report] = yield* focus.recent
      assert.deepStrictEqual(
        { ...report, at: undefined },
        { file: "/repo/a.ts", line: 3, col: 7, session: "nvim-1", server: "/run/nvim.1.0", at: undefined },
      )
    }),
  )

  it.effect("the most recent focus that names a server wins; focus without one is skipped", () => {
    const entry = (session: string, server?: string) => ({
      file: `/repo/${session}.ts`,
      line: 1,
      col: 1,
      session,
      at: "2026-01-01T00:00:00.000Z",
      ...(server !== undefined ? { server } : {}),
    })
    const telemetry = {
      editorActive: Effect.succeed({
        active: entry("vscode"),
        sessions: [entry("vscode"), entry("nvim-new", "/run/new.sock"), entry("nvim-old", "/run/old.sock")],
      }),
    } as unknown as Telemetry["Service"]
    return Effect.gen(function* () {
      const focus = yield* lastNeovimFocus
      assert.strictEqual(focus?.server, "/run/new.sock")
      assert.strictEqual(focus?.session, "nvim-new")
    }).pipe(Effect.provideService(EditorFocus, editorFocusFromTelemetry(telemetry)))
  })

  it.effect("posted shell commands become the terminal log, newest last, limited", () =>
    Effect.gen(function* () {
      const telemetry = yield* makeTelemetry
      yield* telemetry.recordCommand({ command: "ls", exit_code: 0, cwd: "/a" })
      yield* telemetry.recordCommand({ command: "make", exit_code: 2, cwd: "/b", output_tail: "oops", session: "tty1" })
      const log = terminalLogFromTelemetry(telemetry)
      const [last] = yield* log.recent(1)
      assert.deepStrictEqual(
        { ...last, at: undefined },
        { command: "make", exitCode: 2, cwd: "/b", outputTail: "oops", session: "tty1", at: undefined },
      )
      assert.strictEqual((yield* log.recent(10)).length, 2)
    }),
  )
})
