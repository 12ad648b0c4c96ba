/**
 * The system clipboard, text, HTML, file lists and images (Linux), through the platform's clipboard tools: `wl-copy` and
 * `wl-paste` on Wayland, `xclip` on X11, `pbcopy`/`pbpaste` (and `osascript` for HTML) on macOS.
 * Without one, a clear error names the tool to install.
 *
 * The tool is chosen per call from the environment the daemon runs in (`ClipboardHost`, by
 * default this process's): `WAYLAND_DISPLAY` with wl-clipboard, else `DISPLAY` with xclip. X11
 * and Wayland clipboards are owned by a process: `xclip -i` and `wl-copy` fork a child that
 * serves the new content until something else takes the clipboard, and that child keeps our
 * pipes open, so a write is done when the tool itself exits, not when its pipes close. Each
 * command has a timeout; reads and writes are bounded by `clipboardBytesMax` (text) and
 * `clipboardImageBytesMax` (encoded images; pixels are ClipboardImage.ts's business).
 */
import { execFile, spawn } from "node:child_process"
import { accessSync, constants } from "node:fs"
import { delimiter, join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { Context, Effect, Option, Schema } from "effect"

/** Largest clipboard content read or written. */
export const clipboardBytesMax = 1024 * 1024
/** Largest encoded image (PNG or JPEG) read from or written to the clipboard. */
export const clipboardImageBytesMax = 8 * 1024 * 1024
/** How long one clipboard command may run. */
export const clipboardTimeoutMs = 5_000

/**
 * What is read or written: plain text, HTML (`text/html`), or a list of files (`text/uri-list`, as
 * a file manager copies them; Linux only: macOS's clipboard tools offer no file lists).
 */
export type ClipboardFormat = "text" | "html" | "files"

/** The MIME type of each format on Linux clipboards. */
const mimeOf = (format: ClipboardFormat) =>
  format === "html" ? "text/html" : format === "files" ? "text/uri-list" : "text/plain"

/** The absolute paths of a `text/uri-list` (comments and non-`file:` URIs left out). */
export const pathsOfUriList = (list: string): Array<string> =>
  list
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== "" && !line.startsWith("#") && line.startsWith("file://"))
    .flatMap((line) => {
      try {
        return [fileURLToPath(line)]
      } catch {
        return []
      }
    })

/** A `text/uri-list` of absolute paths. */
export const uriListOf = (paths: ReadonlyArray<string>): string =>
  paths.map((path) => pathToFileURL(path).href).join("\r\n")

/** Where clipboard tools are looked for and run. */
export interface ClipboardHostInfo {
  readonly env: NodeJS.ProcessEnv
  readonly platform: NodeJS.Platform
}

/** The environment the clipboard tools run in; by default this process's. */
export const ClipboardHost = Context.Reference<ClipboardHostInfo>("mnemos/editor/ClipboardHost", {
  defaultValue: () => ({ env: process.env, platform: process.platform }),
})

/** Why the clipboard could not be read or written. */
export class ClipboardError extends Schema.TaggedError<ClipboardError>()("ClipboardError", {
  reason: Schema.Literals(["NoTool", "Empty", "TooLarge", "Timeout", "Failed", "BadImage"]),
  message: Schema.String,
}) {}

interface Command {
  readonly command: string
  readonly args: ReadonlyArray<string>
}

/** A clipboard tool set and how it reads and writes each format. */
export interface ClipboardBackend {
  readonly name: "wl-clipboard" | "xclip" | "pbcopy"
  readonly read: (format: ClipboardFormat) => Command
  readonly write: (format: ClipboardFormat, content: string) => Command & { readonly input: string }
  /** Turns what `read` printed into the content (macOS HTML arrives hex-encoded). */
  readonly decode?: (format: ClipboardFormat, output: string) => string
  /**
   * Lists the formats on offer, one per line, when the tool answers any request regardless of
   * format (xclip serves its content under every target it is asked for).
   */
  readonly targets?: Command
  /** Lists the types on offer, one per line (Linux); images are read in the first type it offers. */
  readonly types?: Command
  /** Reads and writes content of a MIME type as bytes (Linux). */
  readonly readType?: (mimeType: string) => Command
  readonly writeType?: (mimeType: string) => Command
  /**
   * The tool exits before the content it wrote is served (`untilServed`): xclip's parent exits once
   * it has forked the child that serves it, and the child takes the selection only when it first
   * sends its buffered requests to the X server.
   */
  readonly servesAfterExit?: true
}

/** X11 targets that carry plain text. */
const textTargets = new Set(["UTF8_STRING", "STRING", "TEXT", "text/plain", "text/plain;charset=utf-8"])
const offers = (format: ClipboardFormat, targets: ReadonlyArray<string>) =>
  targets.some((target) => (format === "text" ? textTargets.has(target) : target === mimeOf(format)))

const wayland: ClipboardBackend = {
  name: "wl-clipboard",
  read: (format) => ({
    command: "wl-paste",
    args: ["--no-newline", "--type", mimeOf(format)],
  }),
  write: (format, content) => ({
    command: "wl-copy",
    args: ["--type", mimeOf(format)],
    input: content,
  }),
  types: { command: "wl-paste", args: ["--list-types"] },
  readType: (mimeType) => ({ command: "wl-paste", args: ["--no-newline", "--type", mimeType] }),
  writeType: (mimeType) => ({ command: "wl-copy", args: ["--type", mimeType] }),
}

const xclipTargets: Command = { command: "xclip", args: ["-selection", "clipboard", "-o", "-t", "TARGETS"] }

const xclip: ClipboardBackend = {
  name: "xclip",
  read: (format) => ({
    command: "xclip",
    args: ["-selection", "clipboard", "-o", ...(format === "text" ? [] : ["-t", mimeOf(format)])],
  }),
  write: (format, content) => ({
    command: "xclip",
    args: ["-selection", "clipboard", "-i", ...(format === "text" ? [] : ["-t", mimeOf(format)])],
    input: content,
  }),
  targets: xclipTargets,
  types: xclipTargets,
  readType: (mimeType) => ({ command: "xclip", args: ["-selection", "clipboard", "-o", "-t", mimeType] }),
  writeType: (mimeType) => ({ command: "xclip", args: ["-selection", "clipboard", "-i", "-t", mimeType] }),
  servesAfterExit: true,
}

const macos: ClipboardBackend = {
  name: "pbcopy",
  read: (format) =>
    format === "html"
      ? { command: "osascript", args: ["-e", "the clipboard as «class HTML»"] }
      : { command: "pbpaste", args: ["-Prefer", "txt"] },
  write: (format, content) =>
    format === "html"
      ? {
          command: "osascript",
          args: ["-"],
          input: `set the clipboard to «data HTML${Buffer.from(content, "utf8").toString("hex").toUpperCase()}»`,
        }
      : { command: "pbcopy", args: [], input: content },
  decode: (format, output) => {
    if (format !== "html") return output
    const hex = /«data HTML([0-9A-Fa-f]*)»/.exec(output)?.[1]
    return hex === undefined ? output : Buffer.from(hex, "hex").toString("utf8")
  },
}

/** Whether `name` is an executable on `PATH`. */
const onPath = (name: string, env: NodeJS.ProcessEnv): boolean =>
  (env.PATH ?? "").split(delimiter).some((directory) => {
    if (directory === "") return false
    try {
      accessSync(join(directory, name), constants.X_OK)
      return true
    } catch {
      return false
    }
  })

/** The clipboard tools this host has, or an error naming the one to install. */
export const chooseBackend = (host: ClipboardHostInfo): ClipboardBackend | ClipboardError => {
  const { env, platform } = host
  const noTool = (message: string) => new ClipboardError({ reason: "NoTool", message })
  if (platform === "darwin")
    return onPath("pbcopy", env) && onPath("pbpaste", env)
      ? macos
      : noTool("the clipboard needs pbcopy and pbpaste, which are not on PATH")
  if (platform === "win32") return noTool("the clipboard tools support Linux (wl-clipboard, xclip) and macOS only")
  const waylandDisplay = env.WAYLAND_DISPLAY ?? ""
  const x11Display = env.DISPLAY ?? ""
  const hasWayland = waylandDisplay !== "" && onPath("wl-copy", env) && onPath("wl-paste", env)
  if (hasWayland) return wayland
  const hasXclip = x11Display !== "" && onPath("xclip", env)
  if (hasXclip) return xclip
  if (waylandDisplay !== "")
    return noTool(
      `this is a Wayland session (WAYLAND_DISPLAY=${waylandDisplay}) but wl-copy/wl-paste are not installed (package wl-clipboard)${x11Display !== "" ? ", nor is xclip for its X11 display" : ""}`,
    )
  if (x11Display !== "") return noTool(`this is an X11 session (DISPLAY=${x11Display}) but xclip is not installed`)
  return noTool(
    "no graphical session: neither WAYLAND_DISPLAY nor DISPLAY is set; the clipboard needs wl-copy/wl-paste (Wayland), xclip (X11) or pbcopy/pbpaste (macOS)",
  )
}

const noFileLists = new ClipboardError({
  reason: "NoTool",
  message: "macOS's clipboard tools (pbcopy, pbpaste) offer no file lists; files need wl-clipboard or xclip on Linux",
})

const backendFor = Effect.gen(function* () {
  const host = yield* ClipboardHost
  const chosen = chooseBackend(host)
  if (chosen instanceof ClipboardError) return yield* chosen
  return { backend: chosen, host }
})

const emptyMessages = /not available|no selection|nothing is copied|no suitable type|does not contain|can't convert/i

/** What a format is called in messages. */
const nameOf = (format: ClipboardFormat | "image") =>
  format === "html" ? "HTML" : format === "files" ? "file list" : format === "image" ? "image" : "text"

const noContent = (format: ClipboardFormat | "image", detail: string) =>
  new ClipboardError({ reason: "Empty", message: `the clipboard holds no ${nameOf(format)} (${detail})` })

/** Runs a reading command; its output (text, or bytes with `encoding: "buffer"`), or why there is none. */
const runRead = <Encoding extends "utf8" | "buffer" = "utf8">(
  host: ClipboardHostInfo,
  { command, args }: Command,
  format: ClipboardFormat | "image",
  options: { readonly encoding?: Encoding; readonly bytesMax?: number } = {},
) =>
  Effect.callback<Encoding extends "buffer" ? Buffer : string, ClipboardError>((resume) => {
    const bytesMax = options.bytesMax ?? clipboardBytesMax
    const child = execFile(
      command,
      [...args],
      { env: host.env, timeout: clipboardTimeoutMs, maxBuffer: bytesMax, encoding: options.encoding ?? "utf8" },
      (error, stdout, stderr) => {
        if (error === null) return resume(Effect.succeed(stdout as Encoding extends "buffer" ? Buffer : string))
        const detail = stderr.toString().trim() || error.message
        if ((error as { code?: unknown }).code === "ERR_CHILD_PROCESS_STDIO_MAXBUFFER")
          return resume(
            Effect.fail(
              new ClipboardError({
                reason: "TooLarge",
                message: `the clipboard holds more than ${bytesMax} bytes`,
              }),
            ),
          )
        if (error.killed)
          return resume(
            Effect.fail(
              new ClipboardError({
                reason: "Timeout",
                message: `${command} did not answer within ${clipboardTimeoutMs} ms`,
              }),
            ),
          )
        if (emptyMessages.test(detail)) return resume(Effect.fail(noContent(format, detail)))
        resume(Effect.fail(new ClipboardError({ reason: "Failed", message: `${command} failed: ${detail}` })))
      },
    )
    return Effect.sync(() => void child.kill())
  })

/** The types the clipboard offers, as `types` lists them. */
const offeredTypes = (host: ClipboardHostInfo, command: Command, format: ClipboardFormat | "image") =>
  runRead(host, command, format).pipe(
    Effect.map((listed) =>
      listed
        .split("\n")
        .map((target) => target.trim())
        .filter((target) => target !== ""),
    ),
  )

/** What the clipboard holds, as `format`. */
export const readClipboard = (
  format: ClipboardFormat,
): Effect.Effect<{ readonly content: string; readonly tool: string }, ClipboardError> =>
  Effect.gen(function* () {
    const { backend, host } = yield* backendFor
    if (format === "files" && backend.name === "pbcopy") return yield* noFileLists
    if (backend.targets !== undefined) {
      const targets = yield* offeredTypes(host, backend.targets, format)
      if (!offers(format, targets)) return yield* noContent(format, `it offers ${targets.join(", ") || "nothing"}`)
    }
    const read = backend.read(format)
    const output = yield* runRead(host, read, format)
    return { content: backend.decode?.(format, output) ?? output, tool: read.command }
  })

/** Runs a writing command with `input` on its standard input; done when the tool exits. */
const runWrite = (host: ClipboardHostInfo, { command, args }: Command, input: string | Buffer) =>
  Effect.callback<void, ClipboardError>((resume) => {
    const child = spawn(command, [...args], { env: host.env, stdio: ["pipe", "ignore", "pipe"] })
    let stderr = ""
    child.stderr.setEncoding("utf8")
    child.stderr.on("data", (chunk: string) => {
      if (stderr.length < 4096) stderr += chunk
    })
    const timer = setTimeout(() => {
      child.kill()
      resume(
        Effect.fail(
          new ClipboardError({
            reason: "Timeout",
            message: `${command} did not finish within ${clipboardTimeoutMs} ms`,
          }),
        ),
      )
    }, clipboardTimeoutMs)
    child.once("error", (error) => {
      clearTimeout(timer)
      resume(Effect.fail(new ClipboardError({ reason: "Failed", message: `cannot run ${command}: ${error.message}` })))
    })
    // "exit", not "close": the forked owner of the selection keeps our stderr pipe open.
    child.once("exit", (code, signal) => {
      clearTimeout(timer)
      child.stderr.destroy()
      if (code === 0) return resume(Effect.void)
      resume(
        Effect.fail(
          new ClipboardError({
            reason: "Failed",
            message: `${command} failed (${signal ?? `exit ${code}`}): ${stderr.trim() || "no message"}`,
          }),
        ),
      )
    })
    child.stdin.on("error", () => undefined) // a tool that exits early; its exit code says why
    child.stdin.end(input)
    return Effect.sync(() => {
      clearTimeout(timer)
      child.kill()
    })
  })

/** How long a write waits for what it wrote to be served (`ClipboardBackend.servesAfterExit`). */
const servedWithinMs = 1_000

/**
 * Waits until `read` gives back `written`, at most `servedWithinMs`: a read right after a write
 * could otherwise still reach the previous owner of the clipboard (the clipboard test, under a
 * loaded machine, read the previous text's targets after writing HTML). Past the bound the write
 * stands: another program (a clipboard manager) may have taken the clipboard since.
 */
const untilServed = (host: ClipboardHostInfo, read: Command, written: string | Buffer) =>
  Effect.gen(function* () {
    const deadline = Date.now() + servedWithinMs
    while (Date.now() < deadline) {
      const served =
        typeof written === "string"
          ? (yield* Effect.option(runRead(host, read, "text"))).pipe(Option.exists((got) => got === written))
          : (yield* Effect.option(
              runRead(host, read, "image", { encoding: "buffer", bytesMax: written.length + 1 }),
            )).pipe(Option.exists((got) => got.equals(written)))
      if (served) return
      yield* Effect.sleep("10 millis")
    }
  })

/** Puts `content` on the clipboard as `format`. */
export const writeClipboard = (
  format: ClipboardFormat,
  content: string,
): Effect.Effect<{ readonly bytes: number; readonly tool: string }, ClipboardError> =>
  Effect.gen(function* () {
    const bytes = Buffer.byteLength(content, "utf8")
    if (bytes > clipboardBytesMax)
      return yield* new ClipboardError({
        reason: "TooLarge",
        message: `${bytes} bytes is more than the ${clipboardBytesMax} the clipboard tools accept`,
      })
    const { backend, host } = yield* backendFor
    if (format === "files" && backend.name === "pbcopy") return yield* noFileLists
    const { command, args, input } = backend.write(format, content)
    yield* runWrite(host, { command, args }, input)
    if (backend.servesAfterExit) yield* untilServed(host, backend.read(format), input)
    return { bytes, tool: command }
  })

const noImages = new ClipboardError({
  reason: "NoTool",
  message:
    "clipboard images need wl-clipboard or xclip on Linux; macOS's clipboard tools (pbcopy, pbpaste) carry text only",
})

/** The image types read from the clipboard, the first offered first. */
export const clipboardImageTypes = ["image/png", "image/jpeg"] as const

/** The image the clipboard holds, as the PNG or JPEG bytes it offers (PNG preferred). */
export const readClipboardImage = (): Effect.Effect<
  { readonly bytes: Buffer; readonly mimeType: (typeof clipboardImageTypes)[number]; readonly tool: string },
  ClipboardError
> =>
  Effect.gen(function* () {
    const { backend, host } = yield* backendFor
    if (backend.types === undefined || backend.readType === undefined) return yield* noImages
    const offered = yield* offeredTypes(host, backend.types, "image")
    const mimeType = clipboardImageTypes.find((type) => offered.includes(type))
    if (mimeType === undefined)
      return yield* noContent("image", `it offers ${offered.join(", ") || "nothing"}; images are read as PNG or JPEG`)
    const read = backend.readType(mimeType)
    const bytes = yield* runRead(host, read, "image", { encoding: "buffer", bytesMax: clipboardImageBytesMax })
    return { bytes, mimeType, tool: read.command }
  })

/** Puts encoded image `bytes` on the clipboard as `mimeType`. */
export const writeClipboardImage = (
  bytes: Buffer,
  mimeType: string,
): Effect.Effect<{ readonly bytes: number; readonly tool: string }, ClipboardError> =>
  Effect.gen(function* () {
    if (bytes.length > clipboardImageBytesMax)
      return yield* new ClipboardError({
        reason: "TooLarge",
        message: `a ${bytes.length}-byte image is more than the ${clipboardImageBytesMax} bytes the clipboard tools accept`,
      })
    const { backend, host } = yield* backendFor
    if (backend.writeType === undefined) return yield* noImages
    const write = backend.writeType(mimeType)
    yield* runWrite(host, write, bytes)
    if (backend.servesAfterExit && backend.readType !== undefined)
      yield* untilServed(host, backend.readType(mimeType), bytes)
    return { bytes: bytes.length, tool: write.command }
  })
