/**
 * The clipboard tools under a real X server (Xvfb, started here) with xclip: text and HTML round
 * trips, and a clipboard that holds the other format; and the clear errors, naming the tool to
 * install, when there is no clipboard tool or no graphical session.
 */
import type { ChildProcess } from "node:child_process"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { ClipboardHost, type ClipboardHostInfo } from "../../src/editor/Clipboard.ts"
import { ClipboardWatch, makeClipboardWatcher } from "../../src/editor/ClipboardWatch.ts"
import { callTool, lacks, removeTempDirs, startXvfb, tempDir, toolFailure } from "./harness.ts"

let xvfb: ChildProcess | undefined
let display = ""

const onX11 = <A, E>(effect: Effect.Effect<A, E>) =>
  effect.pipe(
    Effect.provideService(ClipboardHost, { env: { PATH: process.env.PATH, DISPLAY: display }, platform: "linux" }),
  )
const on =
  (host: ClipboardHostInfo) =>
  <A, E>(effect: Effect.Effect<A, E>) =>
    effect.pipe(Effect.provideService(ClipboardHost, host))

describe.skipIf(lacks("Xvfb") || lacks("xclip"))("clipboard under Xvfb with xclip", () => {
  beforeAll(async () => {
    const started = await startXvfb()
    xvfb = started.process
    display = started.display
  })
  afterAll(async () => {
    if (xvfb !== undefined && xvfb.exitCode === null) {
      const gone = new Promise((resolve) => xvfb?.once("exit", resolve))
      xvfb.kill("SIGTERM")
      await gone
    }
  })

  it.live("writes text and reads it back", () =>
    onX11(
      Effect.gen(function* () {
        const text = "héllo ✓ clipboard\nsecond line"
        const written = yield* callTool("clipboard_write", { content: text })
        assert.deepStrictEqual(written.structured, { format: "text", bytes: Buffer.byteLength(text), tool: "xclip" })
        const read = yield* callTool("clipboard_read", {})
        assert.deepStrictEqual(read.structured, {
          format: "text",
          content: text,
          bytes: Buffer.byteLength(text),
          tool: "xclip",
        })
        assert.strictEqual(read.text, text)
      }),
    ),
  )

  it.live("writes HTML and reads it back; the clipboard then holds no plain text, and vice versa", () =>
    onX11(
      Effect.gen(function* () {
        const html = "<p>a <b>bold</b> claim</p>"
        yield* callTool("clipboard_write", { content: html, format: "html" })
        const read = yield* callTool("clipboard_read", { format: "html" })
        assert.strictEqual(read.structured.content, html)
        const noText = yield* toolFailure(callTool("clipboard_read", { format: "text" }))
        assert.strictEqual(noText.code, "NOT_FOUND")
        assert.include(noText.message, "holds no text")
        assert.include(noText.message, "text/html")

        yield* callTool("clipboard_write", { content: "plain" })
        const noHtml = yield* toolFailure(callTool("clipboard_read", { format: "html" }))
        assert.strictEqual(noHtml.code, "NOT_FOUND")
        assert.include(noHtml.message, "holds no HTML")
      }),
    ),
  )

  it.live("writes a file list (text/uri-list) and reads the paths back; a relative path is refused", () =>
    onX11(
      Effect.gen(function* () {
        const files = ["/tmp/report final.pdf", "/home/me/ünïcode.txt"]
        const written = yield* callTool("clipboard_write", { files, format: "files" })
        assert.strictEqual(written.structured.files, 2)
        const read = yield* callTool("clipboard_read", { format: "files" })
        assert.deepStrictEqual(read.structured.files, files)
        const noText = yield* toolFailure(callTool("clipboard_read", {}))
        assert.include(noText.message, "text/uri-list")
        const relative = yield* toolFailure(callTool("clipboard_write", { files: ["notes.txt"], format: "files" }))
        assert.strictEqual(relative.code, "VALIDATION_ERROR")
        const mixed = yield* toolFailure(callTool("clipboard_write", { content: "x", format: "files" }))
        assert.strictEqual(mixed.code, "VALIDATION_ERROR")
      }),
    ),
  )

  it.live("watch mode keeps each new copy while on (secrets redacted), reads nothing while off", () =>
    onX11(
      Effect.gen(function* () {
        const watcher = makeClipboardWatcher(50)
        const watched = <A, E>(effect: Effect.Effect<A, E>) =>
          effect.pipe(Effect.provideService(ClipboardWatch, watcher))
        const copiesOf = (state: { copies: ReadonlyArray<{ content: string }> }) =>
          state.copies.map((copy) => copy.content)
        const waitFor = (content: string) =>
          Effect.gen(function* () {
            for (let attempt = 0; attempt < 100; attempt++) {
              if (copiesOf(watcher.state()).includes(content)) return
              yield* Effect.sleep("50 millis")
            }
            return yield* Effect.die(new Error(`${content} was not seen: ${JSON.stringify(watcher.state())}`))
          })
        yield* callTool("clipboard_write", { content: "before watching" })
        const on = yield* watched(callTool("toggle_clipboard_watch_mode", {}))
        assert.isTrue(on.structured.watching)
        yield* waitFor("before watching")
        yield* callTool("clipboard_write", { content: "first copy" })
        yield* waitFor("first copy")
        yield* callTool("clipboard_write", { content: "token ghp_abcdefghijklmnopqrstuvwxyz0123456789" })
        yield* Effect.sleep("300 millis")
        const secret = copiesOf(watcher.state()).at(-1)!
        assert.notInclude(secret, "ghp_abcdefghijklmnopqrstuvwxyz0123456789")
        assert.include(secret, "[REDACTED")
        const off = yield* watched(callTool("toggle_clipboard_watch_mode", { enabled: false }))
        assert.isFalse(off.structured.watching)
        yield* callTool("clipboard_write", { content: "after watching" })
        yield* Effect.sleep("300 millis")
        assert.notInclude(copiesOf(watcher.state()), "after watching")
        assert.deepStrictEqual(copiesOf(watcher.state()).slice(0, 2), ["before watching", "first copy"])
      }),
    ),
  )
})

describe("clipboard without a clipboard tool", () => {
  afterAll(removeTempDirs)
  const emptyPath = () => tempDir("mnemos-no-tools-")

  it.live("an X11 session without xclip names xclip", () =>
    on({ env: { PATH: emptyPath(), DISPLAY: ":42" }, platform: "linux" })(
      Effect.gen(function* () {
        const read = yield* toolFailure(callTool("clipboard_read", {}))
        assert.strictEqual(read.code, "NOT_FOUND")
        assert.strictEqual(read.message, "this is an X11 session (DISPLAY=:42) but xclip is not installed")
        const write = yield* toolFailure(callTool("clipboard_write", { content: "x", format: "html" }))
        assert.strictEqual(write.message, read.message)
      }),
    ),
  )

  it.live("a Wayland session without wl-clipboard names wl-copy/wl-paste", () =>
    on({ env: { PATH: emptyPath(), WAYLAND_DISPLAY: "wayland-0" }, platform: "linux" })(
      Effect.gen(function* () {
        const read = yield* toolFailure(callTool("clipboard_read", {}))
        assert.strictEqual(read.code, "NOT_FOUND")
        assert.include(read.message, "wl-copy/wl-paste are not installed (package wl-clipboard)")
      }),
    ),
  )

  it.live("no graphical session names every tool; macOS without pbcopy names it", () =>
    Effect.gen(function* () {
      const none = yield* toolFailure(callTool("clipboard_read", {})).pipe(
        on({ env: { PATH: process.env.PATH }, platform: "linux" }),
      )
      assert.include(none.message, "neither WAYLAND_DISPLAY nor DISPLAY is set")
      assert.include(none.message, "xclip")
      const mac = yield* toolFailure(callTool("clipboard_write", { content: "x" })).pipe(
        on({ env: { PATH: emptyPath() }, platform: "darwin" }),
      )
      assert.include(mac.message, "pbcopy and pbpaste")
    }),
  )
})
