/**
 * The clipboard tools under a real X server (Xvfb, started here) with xclip: text and HTML round
 * trips, and a clipboard that holds the other format; and the clear errors, naming the tool to
 * install, when there is no clipboard tool or no graphical session.
 */
import type { ChildProcess } from "node:child_process"
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import jpeg from "jpeg-js"
import { PNG } from "pngjs"
import { ClipboardHost, type ClipboardHostInfo, clipboardImageBytesMax } from "../../src/editor/Clipboard.ts"
import { ClipboardWatch, makeClipboardWatcher } from "../../src/editor/ClipboardWatch.ts"
import { callTool, lacks, removeTempDirs, startXvfb, tempDir, toolFailure } from "./harness.ts"

let xvfb: ChildProcess | undefined
let display = ""

const onX11 = <A, E>(effect: Effect.Effect<A, E>) =>
  effect.pipe(
    Effect.provideService(ClipboardHost, { env: { PATH: process.env.PATH, DISPLAY: display }, platform: "linux" }),
  )
/** Runs an X server for the tests of the enclosing block. */
const useXvfb = () => {
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
}
const on =
  (host: ClipboardHostInfo) =>
  <A, E>(effect: Effect.Effect<A, E>) =>
    effect.pipe(Effect.provideService(ClipboardHost, host))

describe.skipIf(lacks("Xvfb") || lacks("xclip"))("clipboard under Xvfb with xclip", () => {
  useXvfb()

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

/** A test picture: smooth gradients with a few hard edges, opaque (JPEG drops alpha). */
const picture = (width: number, height: number) => {
  const data = Buffer.alloc(width * height * 4)
  for (let y = 0; y < height; y++)
    for (let x = 0; x < width; x++) {
      const at = (y * width + x) * 4
      data[at] = Math.round((255 * x) / (width - 1))
      data[at + 1] = Math.round((255 * y) / (height - 1))
      data[at + 2] = x < width / 2 === y < height / 2 ? 200 : 40
      data[at + 3] = 255
    }
  return { width, height, data }
}
const pngBase64 = (image: { width: number; height: number; data: Buffer }) => {
  const png = new PNG({ width: image.width, height: image.height })
  png.data = image.data
  return PNG.sync.write(png).toString("base64")
}
const imageContent = (output: { images?: ReadonlyArray<{ data: string; mimeType: string }> }) => {
  assert.strictEqual(output.images?.length, 1)
  return { bytes: Buffer.from(output.images![0]!.data, "base64"), mimeType: output.images![0]!.mimeType }
}
const decodePng = (bytes: Buffer) => {
  const png = PNG.sync.read(bytes)
  return { width: png.width, height: png.height, data: png.data }
}
/** The mean absolute difference of the colour channels, 0-255. */
const meanDifference = (a: Uint8Array, b: Uint8Array) => {
  let sum = 0
  let count = 0
  for (let at = 0; at < a.length; at += 4)
    for (let channel = 0; channel < 3; channel++) {
      sum += Math.abs(a[at + channel]! - b[at + channel]!)
      count++
    }
  return sum / count
}

describe.skipIf(lacks("Xvfb") || lacks("xclip"))("clipboard images under Xvfb with xclip", () => {
  useXvfb()

  it.live("raw RGBA written, read back as PNG pixel for pixel and as JPEG (the default) within a tolerance", () =>
    onX11(
      Effect.gen(function* () {
        const image = picture(64, 48)
        const written = yield* callTool("clipboard_write", {
          format: "image",
          rgba: image.data.toString("base64"),
          width: 64,
          height: 48,
        })
        assert.deepInclude(written.structured, { format: "image", mimeType: "image/png", width: 64, height: 48 })
        const png = yield* callTool("clipboard_read", { format: "image", encoding: "png" })
        const pngContent = imageContent(png)
        assert.strictEqual(pngContent.mimeType, "image/png")
        assert.deepStrictEqual(decodePng(pngContent.bytes), image)
        assert.deepInclude(png.structured, { format: "image", mimeType: "image/png", width: 64, height: 48 })

        const jpg = yield* callTool("clipboard_read", { format: "image" })
        const jpgContent = imageContent(jpg)
        assert.strictEqual(jpgContent.mimeType, "image/jpeg")
        const decoded = jpeg.decode(jpgContent.bytes, { useTArray: true, formatAsRGBA: true })
        assert.strictEqual(decoded.width, 64)
        assert.strictEqual(decoded.height, 48)
        assert.isBelow(meanDifference(decoded.data, image.data), 4)
        assert.deepInclude(jpg.structured.source as object, { mimeType: "image/png", width: 64, height: 48 })

        const text = yield* toolFailure(callTool("clipboard_read", {}))
        assert.strictEqual(text.code, "NOT_FOUND")
        assert.include(text.message, "image/png")
      }),
    ),
  )

  it.live("a PNG is put on the clipboard and read back byte for byte; a JPEG is put there as PNG", () =>
    onX11(
      Effect.gen(function* () {
        const image = picture(40, 30)
        const png = pngBase64(image)
        yield* callTool("clipboard_write", { format: "image", image: png })
        const read = yield* callTool("clipboard_read", { format: "image", encoding: "png" })
        assert.strictEqual(imageContent(read).bytes.toString("base64"), png)

        const jpegBytes = jpeg.encode(image, 90).data
        const written = yield* callTool("clipboard_write", { format: "image", image: jpegBytes.toString("base64") })
        assert.strictEqual(written.structured.mimeType, "image/png")
        const again = yield* callTool("clipboard_read", { format: "image", encoding: "png" })
        const expected = jpeg.decode(jpegBytes, { useTArray: true, formatAsRGBA: true })
        const pixels = decodePng(imageContent(again).bytes)
        assert.deepStrictEqual(new Uint8Array(pixels.data), expected.data)
      }),
    ),
  )

  it.live("a large image is scaled down keeping its aspect ratio, to maxWidth/maxHeight and to maxBytes", () =>
    onX11(
      Effect.gen(function* () {
        const image = picture(400, 200)
        yield* callTool("clipboard_write", { format: "image", image: pngBase64(image) })
        const small = yield* callTool("clipboard_read", { format: "image", encoding: "png", maxWidth: 100 })
        assert.deepInclude(small.structured, { width: 100, height: 50 })
        const pixels = decodePng(imageContent(small).bytes)
        assert.strictEqual(pixels.width, 100)
        // Each pixel is the average of the 4×4 block it stands for: the red ramp is kept.
        assert.closeTo(pixels.data[(10 * 100 + 50) * 4]!, (255 * (50 * 4 + 1.5)) / 399, 1)
        const tall = yield* callTool("clipboard_read", { format: "image", maxHeight: 20 })
        assert.deepInclude(tall.structured, { width: 40, height: 20 })

        const budget = 2048
        const fitted = yield* callTool("clipboard_read", { format: "image", maxBytes: budget, quality: 95 })
        assert.isAtMost(imageContent(fitted).bytes.length, budget)
        assert.isBelow(fitted.structured.width as number, 400)
        const ratio = (fitted.structured.width as number) / (fitted.structured.height as number)
        assert.closeTo(ratio, 2, 0.1)
      }),
    ),
  )

  it.live("sizes and shapes are checked with clear errors", () =>
    onX11(
      Effect.gen(function* () {
        const noise = Buffer.alloc(400 * 400 * 4)
        let state = 0x9e3779b9
        for (let at = 0; at < noise.length; at++) {
          state ^= state << 13
          state ^= state >>> 17
          state ^= state << 5
          noise[at] = state & 0xff
        }
        yield* callTool("clipboard_write", { format: "image", rgba: noise.toString("base64"), width: 400, height: 400 })
        const tooSmall = yield* toolFailure(
          callTool("clipboard_read", { format: "image", encoding: "png", maxBytes: 1024 }),
        )
        assert.strictEqual(tooSmall.code, "VALIDATION_ERROR")
        assert.include(tooSmall.message, "does not fit in 1024 bytes as PNG")

        const wrongLength = yield* toolFailure(
          callTool("clipboard_write", {
            format: "image",
            rgba: Buffer.alloc(12).toString("base64"),
            width: 2,
            height: 2,
          }),
        )
        assert.strictEqual(wrongLength.code, "VALIDATION_ERROR")
        assert.include(wrongLength.message, "rgba holds 12 bytes; 2×2 RGBA pixels are 16")
        const notImage = yield* toolFailure(
          callTool("clipboard_write", { format: "image", image: Buffer.from("GIF89a....").toString("base64") }),
        )
        assert.include(notImage.message, "neither a PNG nor a JPEG")
        const damaged = pngBase64(picture(8, 8)).slice(0, 80)
        const broken = yield* toolFailure(callTool("clipboard_write", { format: "image", image: damaged }))
        assert.strictEqual(broken.code, "VALIDATION_ERROR")
        assert.include(broken.message, "damaged")
        const huge = yield* toolFailure(
          callTool("clipboard_write", {
            format: "image",
            image: "A".repeat(Math.ceil(clipboardImageBytesMax / 3) * 4 + 4),
          }),
        )
        assert.strictEqual(huge.code, "SCHEMA")
        const tooManyPixels = yield* toolFailure(
          callTool("clipboard_write", { format: "image", rgba: "AAAA", width: 5000, height: 5000 }),
        )
        assert.include(tooManyPixels.message, "more than the 16777216 pixels")
        const stray = yield* toolFailure(callTool("clipboard_read", { quality: 50 }))
        assert.strictEqual(stray.message, "quality applies to format image only")
        const mixed = yield* toolFailure(callTool("clipboard_write", { content: "x", rgba: "AAAA" }))
        assert.strictEqual(mixed.code, "VALIDATION_ERROR")

        yield* callTool("clipboard_write", { content: "just text" })
        const noImage = yield* toolFailure(callTool("clipboard_read", { format: "image" }))
        assert.strictEqual(noImage.code, "NOT_FOUND")
        assert.include(noImage.message, "holds no image")
      }),
    ),
  )
})

/**
 * An `xclip` that behaves as the real one does at its worst: it exits once it has read what to
 * write, and what it wrote is served only 300 ms later (xclip's forked child takes the selection
 * when it first flushes its requests to the X server, which a loaded machine can delay).
 */
const lateXclip = `#!/bin/sh
mode=o; type=UTF8_STRING
while [ $# -gt 0 ]; do case "$1" in -i) mode=i ;; -o) mode=o ;; -t) shift; type="$1" ;; esac; shift; done
if [ "$mode" = i ]; then
  cat > "$CLIP_DIR/incoming"
  ( sleep 0.3; echo "$type" > "$CLIP_DIR/type"; mv "$CLIP_DIR/incoming" "$CLIP_DIR/content" ) > /dev/null 2>&1 &
  exit 0
fi
if [ "$type" = TARGETS ]; then echo TARGETS; cat "$CLIP_DIR/type"; exit 0; fi
cat "$CLIP_DIR/content"
`

describe("clipboard through a tool that exits before what it wrote is served", () => {
  it.live("a write is done once what it wrote is served: a read right after gets it, not the content before", () => {
    const dir = tempDir("mnemos-late-xclip-")
    writeFileSync(join(dir, "xclip"), lateXclip, { mode: 0o755 })
    writeFileSync(join(dir, "content"), "before")
    writeFileSync(join(dir, "type"), "UTF8_STRING\n")
    const host = {
      env: { PATH: `${dir}:${process.env.PATH}`, DISPLAY: ":late", CLIP_DIR: dir },
      platform: "linux" as const,
    }
    return on(host)(
      Effect.gen(function* () {
        yield* callTool("clipboard_write", { content: "<p>after</p>", format: "html" })
        const read = yield* callTool("clipboard_read", { format: "html" })
        assert.strictEqual(read.structured.content, "<p>after</p>")
        yield* callTool("clipboard_write", { content: "plain after" })
        assert.strictEqual((yield* callTool("clipboard_read", {})).structured.content, "plain after")
      }),
    )
  })
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
