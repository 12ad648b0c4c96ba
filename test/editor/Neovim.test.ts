/**
 * The Neovim tools against a real headless Neovim (`nvim --headless --listen`): open a file,
 * move the cursor, read it back, read the active buffer (unsaved edits included), list buffers,
 * read Visual selections of each kind, set and read diagnostics; and how the instance is found
 * (`--nvim`, `$NVIM`, the last focus datagram), what happens when none is, and the guarded,
 * audited `nvim_execute_lua`.
 */
import { readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { EditorFocus, makeMemoryEditorFocus } from "../../src/editor/EditorFocus.ts"
import { NeovimConfig, type NeovimSettings, resolveServer, settingsFromEnvironment } from "../../src/editor/Neovim.ts"
import {
  caller,
  callTool,
  type HeadlessNeovim,
  lacks,
  nvimRequests,
  removeTempDirs,
  startNeovim,
  tempDir,
  toolFailure,
} from "./harness.ts"

let nvim: HeadlessNeovim
let workDir: string
let sample: string
let other: string

const sampleLines = ["alpha beta", "gamma délta", "epsilon", "zeta eta theta", "iota"]

const settings = (overrides: Partial<NeovimSettings> = {}): NeovimSettings => ({
  address: nvim.address,
  executeLuaEnabled: false,
  ...overrides,
})
const withNvim = <A, E>(effect: Effect.Effect<A, E>, overrides: Partial<NeovimSettings> = {}) =>
  effect.pipe(Effect.provideService(NeovimConfig, settings(overrides)))

describe.skipIf(lacks("nvim"))("Neovim tools on a headless Neovim", () => {
  beforeAll(async () => {
    nvim = await startNeovim()
    workDir = tempDir("mnemos-nvim-work-")
    sample = join(workDir, "sample.txt")
    other = join(workDir, "other.txt")
    writeFileSync(sample, `${sampleLines.join("\n")}\n`)
    writeFileSync(other, "one\ntwo\n")
  })
  afterAll(async () => {
    await nvim?.stop()
    removeTempDirs()
  })

  it.live("opens a file at a line and column, and the cursor reads back there", () =>
    withNvim(
      Effect.gen(function* () {
        const moved = yield* callTool("nvim_goto_line", { file: sample, line: 2, col: 7 })
        assert.deepStrictEqual(
          { ...moved.structured, bufnr: undefined },
          {
            server: { address: nvim.address, source: "flag" },
            bufnr: undefined,
            name: sample,
            line: 2,
            col: 7,
            lineCount: 5,
            clamped: false,
          },
        )
        const cursor = yield* callTool("nvim_get_cursor", {})
        assert.strictEqual(cursor.structured.name, sample)
        assert.strictEqual(cursor.structured.line, 2)
        assert.strictEqual(cursor.structured.col, 7)
        assert.strictEqual(cursor.structured.mode, "n")
        assert.strictEqual(cursor.structured.lineText, "gamma délta")
      }),
    ),
  )

  it.live("moves within the buffer and clamps past its end; a relative file resolves against the root", () =>
    withNvim(
      Effect.gen(function* () {
        const clamped = yield* callTool("nvim_goto_line", { line: 99, col: 50 })
        assert.strictEqual(clamped.structured.line, 5)
        assert.strictEqual(clamped.structured.col, 4) // "iota": the last byte
        assert.strictEqual(clamped.structured.clamped, true)
        const relative = yield* callTool("nvim_goto_line", { file: "other.txt", line: 2 }, caller(workDir))
        assert.strictEqual(relative.structured.name, other)
        assert.strictEqual(relative.structured.line, 2)
        const missing = yield* toolFailure(callTool("nvim_goto_line", { file: join(workDir, "nope.txt"), line: 1 }))
        assert.strictEqual(missing.code, "NOT_FOUND")
        assert.include(missing.message, "nope.txt does not exist")
      }),
    ),
  )

  it.live("reads the active buffer, unsaved edits included, and a line range", () =>
    withNvim(
      Effect.gen(function* () {
        yield* callTool("nvim_goto_line", { file: sample, line: 3 })
        yield* nvimRequests(nvim.address, [["nvim_buf_set_lines", [0, 4, 5, false, ["iota (edited)"]]]])
        const whole = yield* callTool("nvim_get_active_buffer", {})
        assert.strictEqual(whole.structured.name, sample)
        assert.strictEqual(whole.structured.modified, true)
        assert.strictEqual(whole.structured.lineCount, 5)
        assert.deepStrictEqual(whole.structured.lines, [...sampleLines.slice(0, 4), "iota (edited)"])
        assert.deepStrictEqual(whole.structured.cursor, { line: 3, col: 1 })
        assert.include(whole.text ?? "", "3  epsilon")
        const range = yield* callTool("nvim_get_active_buffer", { startLine: 2, endLine: 3 })
        assert.deepStrictEqual(range.structured.lines, ["gamma délta", "epsilon"])
        assert.strictEqual(range.structured.firstLine, 2)
        assert.strictEqual(range.structured.lastLine, 3)
        assert.strictEqual(range.structured.truncated, false)
        const backwards = yield* toolFailure(callTool("nvim_get_active_buffer", { startLine: 3, endLine: 2 }))
        assert.strictEqual(backwards.code, "VALIDATION_ERROR")
      }),
    ),
  )

  it.live("lists the buffers: current, modified, loaded", () =>
    withNvim(
      Effect.gen(function* () {
        const listed = yield* callTool("nvim_list_buffers", {})
        const buffers = listed.structured.buffers as ReadonlyArray<Record<string, unknown>>
        const byName = new Map(buffers.map((buffer) => [buffer.name, buffer]))
        assert.strictEqual(byName.get(sample)?.current, true)
        assert.strictEqual(byName.get(sample)?.modified, true)
        assert.strictEqual(byName.get(sample)?.lineCount, 5)
        assert.strictEqual(byName.get(other)?.current, false)
        assert.strictEqual(byName.get(other)?.modified, false)
        assert.match(listed.text ?? "", /%\+ +\d+ {2}.*sample\.txt/)
      }),
    ),
  )

  it.live("sets diagnostics on a buffer and reads them back; an empty list clears them", () =>
    withNvim(
      Effect.gen(function* () {
        const set = yield* callTool("nvim_set_diagnostics", {
          file: sample,
          diagnostics: [
            { line: 2, col: 7, endCol: 13, severity: "error", message: "délta is misspelt", code: "E1" },
            { line: 4, severity: "hint", message: "consider a shorter line", source: "style" },
          ],
        })
        assert.strictEqual(set.structured.count, 2)
        assert.strictEqual(set.structured.namespace, "mnemos")
        const read = yield* callTool("nvim_get_diagnostics", { file: sample })
        assert.deepStrictEqual(read.structured.diagnostics, [
          {
            file: sample,
            bufnr: set.structured.bufnr,
            line: 2,
            col: 7,
            endLine: 2,
            endCol: 13,
            severity: "error",
            message: "délta is misspelt",
            source: "mnemos",
            code: "E1",
            namespace: "mnemos",
          },
          {
            file: sample,
            bufnr: set.structured.bufnr,
            line: 4,
            col: 1,
            endLine: 4,
            endCol: 1,
            severity: "hint",
            message: "consider a shorter line",
            source: "style",
            namespace: "mnemos",
          },
        ])
        assert.include(read.text ?? "", `${sample}:2:7: error: délta is misspelt [mnemos E1]`)
        // Diagnostics of another source (an LSP, say) stay when mnemos replaces its own.
        yield* nvimRequests(nvim.address, [
          [
            "nvim_exec_lua",
            [
              "local ns = vim.api.nvim_create_namespace('lsp-like'); vim.diagnostic.set(ns, vim.fn.bufnr(...), {{ lnum = 0, col = 0, message = 'from lsp', severity = 2 }})",
              [sample],
            ],
          ],
        ])
        yield* callTool("nvim_set_diagnostics", { file: sample, diagnostics: [] })
        const after = yield* callTool("nvim_get_diagnostics", { file: sample })
        assert.deepStrictEqual(
          (after.structured.diagnostics as ReadonlyArray<Record<string, unknown>>).map((d) => [
            d.message,
            d.severity,
            d.namespace,
          ]),
          [["from lsp", "warning", "lsp-like"]],
        )
        const all = yield* callTool("nvim_get_diagnostics", { allBuffers: true })
        assert.strictEqual(all.structured.total, 1)
      }),
    ),
  )

  it.live("sets diagnostics on a file that is not open (loading it) and refuses lines past its end", () =>
    withNvim(
      Effect.gen(function* () {
        const unopened = join(workDir, "unopened.txt")
        writeFileSync(unopened, "x\ny\n")
        const set = yield* callTool("nvim_set_diagnostics", {
          file: unopened,
          diagnostics: [{ line: 2, severity: "warning", message: "y?" }],
        })
        assert.strictEqual(set.structured.name, unopened)
        const read = yield* callTool("nvim_get_diagnostics", { file: unopened })
        assert.strictEqual(read.structured.total, 1)
        const outside = yield* toolFailure(
          callTool("nvim_set_diagnostics", {
            file: unopened,
            diagnostics: [{ line: 3, severity: "error", message: "no" }],
          }),
        )
        assert.strictEqual(outside.code, "VALIDATION_ERROR")
        assert.include(outside.message, "outside the buffer's 2 lines")
        const notOpen = yield* toolFailure(callTool("nvim_get_diagnostics", { file: join(workDir, "never.txt") }))
        assert.strictEqual(notOpen.code, "NOT_FOUND")
        const badSeverity = yield* toolFailure(
          callTool("nvim_set_diagnostics", { diagnostics: [{ line: 1, severity: "fatal", message: "x" }] }),
        )
        assert.strictEqual(badSeverity.code, "SCHEMA")
      }),
    ),
  )

  it.live("reads Visual selections: active charwise, then the last one, linewise and blockwise", () =>
    withNvim(
      Effect.gen(function* () {
        yield* callTool("nvim_goto_line", { file: other, line: 1 })
        yield* callTool("nvim_goto_line", { file: sample, line: 1, col: 7 })
        const none = yield* callTool("nvim_get_visual_selection", {})
        assert.strictEqual(none.structured.kind, "none")

        // Charwise from "beta" on line 1 to the multi-byte "é" on line 2, Visual mode still on.
        yield* nvimRequests(nvim.address, [["nvim_input", ["vjl"]]])
        yield* waitForMode("v")
        const active = yield* callTool("nvim_get_visual_selection", {})
        assert.strictEqual(active.structured.active, true)
        assert.strictEqual(active.structured.kind, "char")
        assert.deepStrictEqual(active.structured.start, { line: 1, col: 7 })
        assert.deepStrictEqual(active.structured.end, { line: 2, col: 8 })
        assert.deepStrictEqual(active.structured.lines, ["beta", "gamma dé"])
        assert.strictEqual(active.structured.text, "beta\ngamma dé")

        yield* nvimRequests(nvim.address, [["nvim_input", ["<Esc>"]]])
        yield* waitForMode("n")
        const last = yield* callTool("nvim_get_visual_selection", {})
        assert.strictEqual(last.structured.active, false)
        assert.deepStrictEqual(last.structured.lines, ["beta", "gamma dé"])

        yield* nvimRequests(nvim.address, [["nvim_input", ["3GVj<Esc>"]]])
        yield* waitForMode("n")
        const lines = yield* callTool("nvim_get_visual_selection", {})
        assert.strictEqual(lines.structured.kind, "line")
        assert.deepStrictEqual(lines.structured.lines, ["epsilon", "zeta eta theta"])
        assert.deepStrictEqual(lines.structured.start, { line: 3, col: 1 })
        assert.deepStrictEqual(lines.structured.end, { line: 4, col: 14 })

        yield* nvimRequests(nvim.address, [["nvim_input", ["1G0l<C-v>2jl"]]])
        yield* waitForMode("\u0016")
        const block = yield* callTool("nvim_get_visual_selection", {})
        assert.strictEqual(block.structured.kind, "block")
        assert.strictEqual(block.structured.active, true)
        assert.deepStrictEqual(block.structured.lines, ["lp", "am", "ps"])
        yield* nvimRequests(nvim.address, [["nvim_input", ["<Esc>"]]])
        yield* waitForMode("n")
      }),
    ),
  )

  it.live("finds the instance from $NVIM, then from the last focus datagram naming a server", () =>
    Effect.gen(function* () {
      const fromEnvironment = settingsFromEnvironment({ NVIM: nvim.address })
      const viaEnvironment = yield* callTool("nvim_get_cursor", {}).pipe(
        Effect.provideService(NeovimConfig, fromEnvironment),
      )
      assert.deepStrictEqual(viaEnvironment.structured.server, { address: nvim.address, source: "environment" })

      const focus = makeMemoryEditorFocus()
      focus.report({ file: sample, line: 1, col: 1, session: "old", server: "/nonexistent/older.sock" })
      focus.report({ file: sample, line: 1, col: 1, session: "nvim", server: nvim.address })
      focus.report({ file: "/tmp/x.ts", line: 1, col: 1, session: "vscode" }) // no server: not Neovim
      const viaFocus = yield* callTool("nvim_list_buffers", {}).pipe(
        Effect.provideService(NeovimConfig, settingsFromEnvironment({})),
        Effect.provideService(EditorFocus, focus),
      )
      assert.deepStrictEqual(viaFocus.structured.server, { address: nvim.address, source: "focus" })

      const flagWins = yield* resolveServer.pipe(
        Effect.provideService(NeovimConfig, {
          address: "/flag.sock",
          environmentAddress: "/env.sock",
          executeLuaEnabled: false,
        }),
        Effect.provideService(EditorFocus, focus),
      )
      assert.deepStrictEqual(flagWins, { address: "/flag.sock", source: "flag" })
    }),
  )

  it.live("no known instance, or one that has quit: a clear NOT_FOUND", () =>
    Effect.gen(function* () {
      const none = yield* toolFailure(callTool("nvim_get_cursor", {})).pipe(
        Effect.provideService(NeovimConfig, settingsFromEnvironment({})),
      )
      assert.strictEqual(none.code, "NOT_FOUND")
      assert.include(none.message, "no Neovim instance is known")
      assert.include(none.message, "--nvim")
      const gone = yield* toolFailure(callTool("nvim_get_cursor", {})).pipe(
        Effect.provideService(NeovimConfig, { address: join(workDir, "gone.sock"), executeLuaEnabled: false }),
      )
      assert.strictEqual(gone.code, "NOT_FOUND")
      assert.include(gone.message, "no Neovim listens at")
    }),
  )

  it.live("nvim_execute_lua is refused unless enabled", () =>
    withNvim(
      Effect.gen(function* () {
        const refused = yield* toolFailure(callTool("nvim_execute_lua", { code: "return 1" }))
        assert.strictEqual(refused.code, "VALIDATION_ERROR")
        assert.include(refused.message, "--nvim-allow-lua")
      }),
    ),
  )

  it.live("nvim_execute_lua, when enabled, runs the chunk with its args and audits it before it runs", () => {
    const auditFile = join(tempDir("mnemos-audit-"), "nvim-lua-audit.jsonl")
    return withNvim(
      Effect.gen(function* () {
        const ran = yield* callTool("nvim_execute_lua", {
          code: "local a, b = ...; return { sum = a + b, name = vim.api.nvim_buf_get_name(0), list = { 1, 2 } }",
          args: [2, 3],
        })
        assert.deepStrictEqual(ran.structured.result, { sum: 5, name: sample, list: [1, 2] })
        const failed = yield* toolFailure(callTool("nvim_execute_lua", { code: "error('boom')" }))
        assert.strictEqual(failed.code, "VALIDATION_ERROR")
        assert.include(failed.message, "boom")
        const entries = readFileSync(auditFile, "utf8")
          .trim()
          .split("\n")
          .map((line) => JSON.parse(line) as Record<string, unknown>)
        assert.deepStrictEqual(
          entries.map((entry) => entry.event),
          ["run", "done", "run", "failed"],
        )
        assert.strictEqual(
          entries[0]?.code,
          "local a, b = ...; return { sum = a + b, name = vim.api.nvim_buf_get_name(0), list = { 1, 2 } }",
        )
        assert.strictEqual(entries[0]?.argsJson, "[2,3]")
        assert.strictEqual(entries[0]?.client, "editor-test/0 via test")
        assert.strictEqual(entries[0]?.server, nvim.address)
        assert.strictEqual(entries[0]?.id, entries[1]?.id)
      }),
      { executeLuaEnabled: true, luaAuditFile: auditFile },
    )
  })

  it.live("nvim_execute_lua does not run when it cannot be audited", () =>
    withNvim(
      Effect.gen(function* () {
        const refused = yield* toolFailure(
          callTool("nvim_execute_lua", { code: "vim.g.mnemos_should_not_run = 1; return 1" }),
        )
        assert.strictEqual(refused.code, "IO_ERROR")
        assert.include(refused.message, "the code was not run")
        const flag = yield* nvimRequests(nvim.address, [
          ["nvim_exec_lua", ["return vim.g.mnemos_should_not_run == nil", []]],
        ])
        assert.strictEqual(flag, true)
      }),
      { executeLuaEnabled: true, luaAuditFile: join(workDir, "no-such-dir", "audit.jsonl") },
    ),
  )
})

/** Waits until Neovim reports `mode` (input is processed asynchronously). */
const waitForMode = (mode: string) =>
  Effect.gen(function* () {
    for (let attempt = 0; attempt < 200; attempt++) {
      const current = (yield* nvimRequests(nvim.address, [["nvim_get_mode", []]])) as {
        mode: string
        blocking: boolean
      }
      if (current.mode === mode && !current.blocking) return
      yield* Effect.sleep("10 millis")
    }
    return yield* Effect.die(new Error(`Neovim never reached mode ${JSON.stringify(mode)}`))
  })
