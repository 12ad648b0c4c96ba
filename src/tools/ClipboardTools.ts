/**
 * The clipboard tools of the editor toolset: reading and writing text, HTML, file lists and images
 * (src/editor/Clipboard.ts runs the platform's tools, ClipboardImage.ts does the pixels), and the
 * watch mode (ClipboardWatch.ts).
 *
 * Images come back as MCP image content: JPEG by default (as seed 002 rasterizes clipboard bitmaps),
 * PNG when asked, fitted within the caller's maximum size and byte budget. Images are written as
 * PNG, from PNG or JPEG bytes or from raw RGBA pixels (seed 002's `RgbaImage`).
 */
import { isAbsolute } from "node:path"
import { Effect, Schema } from "effect"
import {
  type ClipboardError,
  clipboardBytesMax,
  clipboardImageBytesMax,
  pathsOfUriList,
  readClipboard,
  readClipboardImage,
  uriListOf,
  writeClipboard,
  writeClipboardImage,
} from "../editor/Clipboard.ts"
import {
  decodeImage,
  encodeForCaller,
  encodePng,
  type ImageProblem,
  imagePixelsMax,
  type RgbaImage,
} from "../editor/ClipboardImage.ts"
import { ClipboardWatch, clipboardWatchEntriesMax, clipboardWatchIntervalMs } from "../editor/ClipboardWatch.ts"
import { isMaxUtf8Bytes } from "../graph/Model.ts"
import { editorTool } from "./EditorToolSupport.ts"
import { ToolError, type ToolOutput } from "./Tool.ts"

/** Most files one clipboard_write puts on the clipboard. */
export const clipboardFilesMax = 1_000
/** Longest side a caller may ask an image to fit within. */
export const imageSideMax = 8192
/** The defaults of an image read: a size and a byte budget every MCP client takes. */
export const imageReadDefaults = { encoding: "jpeg", quality: 85, maxWidth: 1920, maxHeight: 1920, maxBytes: 1 << 20 }
/** Smallest byte budget a caller may ask for. */
const imageBytesMin = 1024

const clipboardToolError = (error: ClipboardError): ToolError =>
  new ToolError({
    code:
      error.reason === "Empty" || error.reason === "NoTool"
        ? "NOT_FOUND"
        : error.reason === "Timeout"
          ? "BUSY"
          : error.reason === "TooLarge" || error.reason === "BadImage"
            ? "VALIDATION_ERROR"
            : "IO_ERROR",
    message: error.message,
  })

const imageError = (problem: ImageProblem, whose: string) =>
  new ToolError({ code: "VALIDATION_ERROR", message: `${whose}: ${problem.message}` })

const formatArg = Schema.optionalKey(
  Schema.Literals(["text", "html", "files", "image"]).annotate({
    description:
      "text (default), html (the text/html format), files (a file list, text/uri-list, as a file manager copies files; Linux), or image (PNG or JPEG; Linux)",
  }),
)

const imageSide = (description: string) =>
  Schema.optionalKey(
    Schema.Int.annotate({ description }).check(Schema.isBetween({ minimum: 16, maximum: imageSideMax })),
  )

const ReadArgs = Schema.Struct({
  format: formatArg,
  encoding: Schema.optionalKey(
    Schema.Literals(["jpeg", "png"]).annotate({
      description:
        "format image: how the image comes back, jpeg (default) or png (a PNG on the clipboard is kept byte for byte when it fits)",
    }),
  ),
  quality: Schema.optionalKey(
    Schema.Int.annotate({
      description: `format image, encoding jpeg: the JPEG quality, 1-100 (default ${imageReadDefaults.quality})`,
    }).check(Schema.isBetween({ minimum: 1, maximum: 100 })),
  ),
  maxWidth: imageSide(
    `format image: a wider image is scaled down, keeping its aspect ratio (pixels, default ${imageReadDefaults.maxWidth}, at most ${imageSideMax})`,
  ),
  maxHeight: imageSide(
    `format image: a taller image is scaled down, keeping its aspect ratio (pixels, default ${imageReadDefaults.maxHeight}, at most ${imageSideMax})`,
  ),
  maxBytes: Schema.optionalKey(
    Schema.Int.annotate({
      description: `format image: the encoded image is scaled down further until it is at most this many bytes (default ${imageReadDefaults.maxBytes}, ${imageBytesMin} to ${clipboardImageBytesMax})`,
    }).check(Schema.isBetween({ minimum: imageBytesMin, maximum: clipboardImageBytesMax })),
  ),
})
type ReadArgs = typeof ReadArgs.Type

const readImage = (args: ReadArgs) =>
  Effect.gen(function* () {
    const { bytes, mimeType, tool } = yield* readClipboardImage().pipe(Effect.mapError(clipboardToolError))
    const encoded = encodeForCaller(bytes, {
      encoding: args.encoding ?? "jpeg",
      quality: args.quality ?? imageReadDefaults.quality,
      maxWidth: args.maxWidth ?? imageReadDefaults.maxWidth,
      maxHeight: args.maxHeight ?? imageReadDefaults.maxHeight,
      maxBytes: args.maxBytes ?? imageReadDefaults.maxBytes,
    })
    if ("reason" in encoded) return yield* imageError(encoded, `the clipboard's ${mimeType}`)
    const { image, source } = encoded
    return {
      structured: {
        format: "image",
        mimeType: image.mimeType,
        width: image.width,
        height: image.height,
        bytes: image.bytes.length,
        source: { ...source, bytes: bytes.length },
        tool,
      },
      text: `${image.mimeType} ${image.width}×${image.height}, ${image.bytes.length} bytes (the clipboard held ${source.mimeType} ${source.width}×${source.height})`,
      images: [{ data: image.bytes.toString("base64"), mimeType: image.mimeType }],
    } satisfies ToolOutput
  })

const imageOptions = ["encoding", "quality", "maxWidth", "maxHeight", "maxBytes"] as const

const clipboardReadTool = editorTool(
  {
    name: "clipboard_read",
    title: "Read Clipboard",
    description:
      "What the system clipboard holds, as plain text, HTML, a list of copied files, or an image (returned as image content, JPEG by default, scaled down to fit maxWidth, maxHeight and maxBytes). Linux with wl-clipboard or xclip; macOS for text and HTML. Fails with NOT_FOUND naming the missing tool when there is none, or when the clipboard holds nothing in that format.",
    readOnly: true,
  },
  ReadArgs,
  (args) =>
    Effect.gen(function* () {
      const format = args.format ?? "text"
      if (format === "image") return yield* readImage(args)
      const stray = imageOptions.find((option) => args[option] !== undefined)
      if (stray !== undefined)
        return yield* new ToolError({ code: "VALIDATION_ERROR", message: `${stray} applies to format image only` })
      const { content, tool } = yield* readClipboard(format).pipe(Effect.mapError(clipboardToolError))
      if (format !== "files")
        return { structured: { format, content, bytes: Buffer.byteLength(content), tool }, text: content }
      const files = pathsOfUriList(content)
      return { structured: { format, files, tool }, text: files.join("\n") } satisfies ToolOutput
    }),
)

/** Characters of base64 that encode `bytes` bytes. */
const base64Length = (bytes: number) => Math.ceil(bytes / 3) * 4

const base64Arg = (description: string) =>
  Schema.optionalKey(
    Schema.String.annotate({ description }).check(
      Schema.isMinLength(4),
      Schema.isMaxLength(base64Length(clipboardImageBytesMax)),
      Schema.isPattern(/^[A-Za-z0-9+/]*={0,2}$/, { message: "not base64 (A-Z, a-z, 0-9, +, / and = padding)" }),
    ),
  )

const imageSideArg = (description: string) =>
  Schema.optionalKey(
    Schema.Int.annotate({ description }).check(Schema.isBetween({ minimum: 1, maximum: imagePixelsMax })),
  )

const WriteArgs = Schema.Struct({
  content: Schema.optionalKey(
    Schema.String.annotate({
      description: `The text or HTML (formats text and html), at most ${clipboardBytesMax} UTF-8 bytes`,
    }).check(isMaxUtf8Bytes(clipboardBytesMax)),
  ),
  files: Schema.optionalKey(
    Schema.Array(Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(4096)))
      .check(Schema.isMinLength(1), Schema.isMaxLength(clipboardFilesMax))
      .annotate({ description: `Absolute paths of the files (format files), at most ${clipboardFilesMax}` }),
  ),
  image: base64Arg(`Format image: a PNG or JPEG file, base64, at most ${clipboardImageBytesMax} bytes decoded`),
  rgba: base64Arg(
    `Format image, instead of image: raw pixels, 4 bytes (red, green, blue, alpha) each, row after row, base64, with width and height; at most ${clipboardImageBytesMax} bytes decoded`,
  ),
  width: imageSideArg("Format image with rgba: the width in pixels"),
  height: imageSideArg("Format image with rgba: the height in pixels"),
  format: formatArg,
})
type WriteArgs = typeof WriteArgs.Type

/** The pixels of a write's `rgba`, `width` and `height`. */
const rgbaOf = (rgba: string, width: number, height: number): RgbaImage | ToolError => {
  const data = Buffer.from(rgba, "base64")
  if (width * height > imagePixelsMax)
    return new ToolError({
      code: "VALIDATION_ERROR",
      message: `${width}×${height} is more than the ${imagePixelsMax} pixels mnemos encodes`,
    })
  if (data.length !== width * height * 4)
    return new ToolError({
      code: "VALIDATION_ERROR",
      message: `rgba holds ${data.length} bytes; ${width}×${height} RGBA pixels are ${width * height * 4}`,
    })
  return { width, height, data }
}

/** The PNG bytes a write puts on the clipboard: a PNG as given, anything else encoded as PNG. */
const pngOfWrite = (args: WriteArgs) =>
  Effect.gen(function* () {
    if (args.image !== undefined && args.rgba === undefined && args.width === undefined && args.height === undefined) {
      const bytes = Buffer.from(args.image, "base64")
      const decoded = decodeImage(bytes)
      if ("reason" in decoded) return yield* imageError(decoded, "image")
      const { image, mimeType } = decoded
      return { bytes: mimeType === "image/png" ? bytes : encodePng(image), width: image.width, height: image.height }
    }
    if (args.rgba !== undefined && args.image === undefined && args.width !== undefined && args.height !== undefined) {
      const image = rgbaOf(args.rgba, args.width, args.height)
      if (image instanceof ToolError) return yield* image
      return { bytes: encodePng(image), width: image.width, height: image.height }
    }
    return yield* new ToolError({
      code: "VALIDATION_ERROR",
      message: "format image takes image (base64 PNG or JPEG), or rgba with width and height",
    })
  })

const clipboardWriteTool = editorTool(
  {
    name: "clipboard_write",
    title: "Write Clipboard",
    description:
      "Put text, HTML, a list of files (absolute paths, format files: pasted as files in a file manager; Linux) or an image (format image: base64 PNG or JPEG, or raw RGBA pixels with width and height; put on the clipboard as PNG; Linux) on the system clipboard for the person to paste (Linux with wl-clipboard or xclip, macOS for text and HTML). Replaces what it held.",
    readOnly: false,
  },
  WriteArgs,
  (args) =>
    Effect.gen(function* () {
      const format = args.format ?? "text"
      const imageArgs = args.image !== undefined || args.rgba !== undefined
      if (format === "image") {
        if (args.content !== undefined || args.files !== undefined)
          return yield* new ToolError({ code: "VALIDATION_ERROR", message: "format image takes image or rgba" })
        const png = yield* pngOfWrite(args)
        const written = yield* writeClipboardImage(png.bytes, "image/png").pipe(Effect.mapError(clipboardToolError))
        return {
          structured: { format, mimeType: "image/png", width: png.width, height: png.height, ...written },
        } satisfies ToolOutput
      }
      if (imageArgs || args.width !== undefined || args.height !== undefined)
        return yield* new ToolError({
          code: "VALIDATION_ERROR",
          message: "image, rgba, width and height go with format image",
        })
      if (format === "files") {
        if (args.files === undefined || args.content !== undefined)
          return yield* new ToolError({ code: "VALIDATION_ERROR", message: "format files takes files, not content" })
        const relative = args.files.find((file) => !isAbsolute(file))
        if (relative !== undefined)
          return yield* new ToolError({ code: "VALIDATION_ERROR", message: `"${relative}" is not an absolute path` })
        const { bytes, tool } = yield* writeClipboard("files", uriListOf(args.files)).pipe(
          Effect.mapError(clipboardToolError),
        )
        return { structured: { format, files: args.files.length, bytes, tool } }
      }
      if (args.content === undefined || args.files !== undefined)
        return yield* new ToolError({ code: "VALIDATION_ERROR", message: `format ${format} takes content, not files` })
      const { bytes, tool } = yield* writeClipboard(format, args.content).pipe(Effect.mapError(clipboardToolError))
      return { structured: { format, bytes, tool } }
    }),
)

const clipboardWatchTool = editorTool(
  {
    name: "toggle_clipboard_watch_mode",
    title: "Toggle Clipboard Watch Mode",
    description: `Turn clipboard watching on or off (enabled; without it, the other way round). While on, the daemon reads the clipboard's text every ${clipboardWatchIntervalMs / 1000} s and keeps the last ${clipboardWatchEntriesMax} different copies (secrets redacted by the privacy filter), so you can see what the person copied; nothing is read while it is off. Answers the state and the copies seen.`,
    readOnly: false,
  },
  Schema.Struct({
    enabled: Schema.optionalKey(
      Schema.Boolean.annotate({ description: "true: watch; false: stop; omitted: switch to the other state" }),
    ),
  }),
  (args) =>
    Effect.gen(function* () {
      const watcher = yield* ClipboardWatch
      const state = yield* watcher.toggle(args.enabled)
      return {
        structured: { ...state },
        text: [
          state.watching ? `watching the clipboard since ${state.since}` : "not watching the clipboard",
          ...(state.lastError !== undefined ? [`last read failed: ${state.lastError}`] : []),
          ...state.copies.map((copy) => `${copy.at}: ${copy.content.replace(/\s+/g, " ").slice(0, 200)}`),
        ].join("\n"),
      }
    }),
)

/** The clipboard tools, in `tools/list` order. */
export const clipboardTools = [clipboardReadTool, clipboardWriteTool, clipboardWatchTool] as const
