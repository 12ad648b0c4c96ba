/**
 * The editor toolset: what the person sees in the editor, and acting on it. The Neovim tools
 * (`NeovimTools.ts`), file skeletons, the active Git worktree, the daemon's and the terminal's
 * recent logs, and the clipboard.
 *
 * Handlers read their services as `Context.Reference`s with working defaults (Neovim from
 * `$NVIM`, no focus, no terminal, an empty log, this process's clipboard environment), so the
 * tools need nothing beyond `SessionServices`; `mnemos serve` provides the real ones
 * (`src/editor/EditorServices.ts`, and in the daemon its telemetry through `TelemetryFeeds.ts`).
 */
import { isAbsolute } from "node:path"
import { Effect, Schema } from "effect"
import {
  type ClipboardError,
  clipboardBytesMax,
  pathsOfUriList,
  readClipboard,
  uriListOf,
  writeClipboard,
} from "../editor/Clipboard.ts"
import { ClipboardWatch, clipboardWatchEntriesMax, clipboardWatchIntervalMs } from "../editor/ClipboardWatch.ts"
import { DaemonLog, daemonLogLevels, daemonLogLinesMax } from "../editor/DaemonLog.ts"
import { EditorFocus } from "../editor/EditorFocus.ts"
import { formatSkeleton, readFileSkeleton, type SkeletonError } from "../editor/FileSkeleton.ts"
import { skeletonLanguages } from "../editor/SkeletonLanguages.ts"
import { TerminalLog } from "../editor/TerminalLog.ts"
import { readWorktreeContext, recentCommitsMax, type WorktreeError } from "../editor/WorktreeContext.ts"
import { isMaxUtf8Bytes } from "../graph/Model.ts"
import { editorTool, pathArg, resolvePath } from "./EditorToolSupport.ts"
import { neovimTools } from "./NeovimTools.ts"
import { type Tool, type ToolCaller, ToolError, type ToolOutput } from "./Tool.ts"

/** Most terminal commands `get_recent_logs` returns. */
export const terminalCommandsMax = 200

const skeletonToolError = (error: SkeletonError): ToolError =>
  new ToolError({
    code:
      error.reason === "NotFound"
        ? "NOT_FOUND"
        : error.reason === "ReadFailed"
          ? "IO_ERROR"
          : error.reason === "GrammarFailed"
            ? "INTERNAL_ERROR"
            : "VALIDATION_ERROR",
    message: error.message,
  })

const worktreeToolError = (error: WorktreeError): ToolError =>
  new ToolError({
    code: error.reason === "GitFailed" ? "IO_ERROR" : error.reason === "NoDirectory" ? "NOT_FOUND" : "VALIDATION_ERROR",
    message: error.message,
  })

const clipboardToolError = (error: ClipboardError): ToolError =>
  new ToolError({
    code:
      error.reason === "Empty"
        ? "NOT_FOUND"
        : error.reason === "Timeout"
          ? "BUSY"
          : error.reason === "TooLarge"
            ? "VALIDATION_ERROR"
            : error.reason === "NoTool"
              ? "NOT_FOUND"
              : "IO_ERROR",
    message: error.message,
  })

// ---------------------------------------------------------------------------------------------
// Developer tools

const SkeletonArgs = Schema.Struct({
  path: pathArg("The source file (absolute, or relative to your workspace root)"),
  language: Schema.optionalKey(
    Schema.Literals(skeletonLanguages).annotate({ description: "The language, when the extension does not tell" }),
  ),
})

const skeletonTool = editorTool(
  {
    name: "read_file_skeleton",
    title: "Read File Skeleton",
    description:
      "The outline of a source file without its bodies: functions, classes and their methods, interfaces, types, enums, top-level constants, with 1-based line ranges, signatures and which are exported. TypeScript, TSX, JavaScript, Python, Rust and Go. Read this before reading a big file whole.",
    readOnly: true,
  },
  SkeletonArgs,
  (args, caller) =>
    Effect.gen(function* () {
      const path = resolvePath(args.path, caller)
      if (path === undefined)
        return yield* new ToolError({
          code: "VALIDATION_ERROR",
          message: `${args.path} is relative and this connection has no file: workspace root; pass an absolute path`,
        })
      const skeleton = yield* readFileSkeleton(path, args.language).pipe(Effect.mapError(skeletonToolError))
      return { structured: { ...skeleton }, text: formatSkeleton(skeleton) } satisfies ToolOutput
    }),
)

const WorktreeArgs = Schema.Struct({
  path: Schema.optionalKey(
    pathArg(
      "A file or directory in the worktree (absolute, or relative to your workspace root). Default: the file focused in the editor, else your workspace root",
    ),
  ),
  commitsLimit: Schema.optionalKey(
    Schema.Int.annotate({ description: `Recent commits to list (default 10, at most ${recentCommitsMax})` }).check(
      Schema.isBetween({ minimum: 0, maximum: recentCommitsMax }),
    ),
  ),
})

/** Where the active worktree is: the argument, else the editor's focused file, else the caller's root. */
const worktreeLocation = (path: string | undefined, caller: ToolCaller) =>
  Effect.gen(function* () {
    if (path !== undefined) {
      const resolved = resolvePath(path, caller)
      if (resolved === undefined)
        return yield* new ToolError({
          code: "VALIDATION_ERROR",
          message: `${path} is relative and this connection has no file: workspace root; pass an absolute path`,
        })
      return { path: resolved, source: "argument" as const }
    }
    const focus = yield* EditorFocus
    const focused = (yield* focus.recent).find((report) => isAbsolute(report.file))
    if (focused !== undefined) return { path: focused.file, source: "editor focus" as const }
    if (caller.rootDir !== undefined) return { path: caller.rootDir, source: "workspace root" as const }
    return yield* new ToolError({
      code: "NOT_FOUND",
      message:
        "no worktree is known: pass path, let the editor report its focus (scripts/nvim/mnemos-focus.lua), or connect with a file: workspace root",
    })
  })

const worktreeTool = editorTool(
  {
    name: "get_active_worktree_context",
    title: "Active Worktree Context",
    description:
      "The Git state of the worktree being worked in (the given path, else the file focused in the editor, else your workspace root): repository root, branch or detached HEAD, HEAD commit, upstream with ahead/behind counts, changed and untracked files, and the most recent commits.",
    readOnly: true,
  },
  WorktreeArgs,
  (args, caller) =>
    Effect.gen(function* () {
      const location = yield* worktreeLocation(args.path, caller)
      const context = yield* readWorktreeContext(location.path, { commitsLimit: args.commitsLimit ?? 10 }).pipe(
        Effect.mapError(worktreeToolError),
      )
      return { structured: { ...context, from: location } } satisfies ToolOutput
    }),
)

const LogsArgs = Schema.Struct({
  limit: Schema.optionalKey(
    Schema.Int.annotate({
      description: `Daemon log lines to return, newest last (default 100, at most ${daemonLogLinesMax})`,
    }).check(Schema.isBetween({ minimum: 0, maximum: daemonLogLinesMax })),
  ),
  level: Schema.optionalKey(
    Schema.Literals(daemonLogLevels).annotate({
      description: "Only daemon lines at this level or above (default: all)",
    }),
  ),
  terminalLimit: Schema.optionalKey(
    Schema.Int.annotate({
      description: `Recent shell commands to return, newest last (default 20, at most ${terminalCommandsMax})`,
    }).check(Schema.isBetween({ minimum: 0, maximum: terminalCommandsMax })),
  ),
})

const logsTool = editorTool(
  {
    name: "get_recent_logs",
    title: "Recent Logs",
    description:
      "What just happened: the mnemos daemon's own recent log lines (warnings, errors, audit of nvim_execute_lua), and the shell commands the terminal hooks reported recently (command, exit code, working directory, output tail).",
    readOnly: true,
  },
  LogsArgs,
  (args) =>
    Effect.gen(function* () {
      const daemonLog = yield* DaemonLog
      const terminal = yield* TerminalLog
      const lines = yield* daemonLog.recent({
        limit: args.limit ?? 100,
        ...(args.level !== undefined ? { minimumLevel: args.level } : {}),
      })
      const total = yield* daemonLog.total
      const commands = yield* terminal.recent(args.terminalLimit ?? 20)
      const text = [
        `daemon log (${lines.length} of ${total} lines since start, ring of ${daemonLog.capacity}):`,
        ...lines.map(
          (line) =>
            `${line.at} ${line.level.toUpperCase()} ${line.message}${line.annotations !== undefined ? ` ${JSON.stringify(line.annotations)}` : ""}`,
        ),
        `terminal (${commands.length} recent commands):`,
        ...commands.map((command) => `${command.at} [exit ${command.exitCode}] ${command.cwd}$ ${command.command}`),
      ].join("\n")
      return {
        structured: { daemon: { capacity: daemonLog.capacity, total, lines }, terminal: { commands } },
        text,
      } satisfies ToolOutput
    }),
)

// ---------------------------------------------------------------------------------------------
// Clipboard

/** Most files one clipboard_write puts on the clipboard. */
export const clipboardFilesMax = 1_000

const formatArg = Schema.optionalKey(
  Schema.Literals(["text", "html", "files"]).annotate({
    description:
      "text (default), html (the text/html format), or files (a file list, text/uri-list, as a file manager copies files; Linux)",
  }),
)

const clipboardReadTool = editorTool(
  {
    name: "clipboard_read",
    title: "Read Clipboard",
    description:
      "What the system clipboard holds, as plain text, HTML or a list of copied files (Linux with wl-clipboard or xclip, macOS for text and HTML). Fails with NOT_FOUND naming the missing tool when there is none, or when the clipboard holds nothing in that format.",
    readOnly: true,
  },
  Schema.Struct({ format: formatArg }),
  (args) =>
    readClipboard(args.format ?? "text").pipe(
      Effect.mapError(clipboardToolError),
      Effect.map(({ content, tool }) => {
        const format = args.format ?? "text"
        if (format !== "files")
          return { structured: { format, content, bytes: Buffer.byteLength(content), tool }, text: content }
        const files = pathsOfUriList(content)
        return { structured: { format, files, tool }, text: files.join("\n") }
      }),
    ),
)

const clipboardWriteTool = editorTool(
  {
    name: "clipboard_write",
    title: "Write Clipboard",
    description:
      "Put text, HTML or a list of files (absolute paths, format files: pasted as files in a file manager; Linux) on the system clipboard for the person to paste (Linux with wl-clipboard or xclip, macOS for text and HTML). Replaces what it held.",
    readOnly: false,
  },
  Schema.Struct({
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
    format: formatArg,
  }),
  (args) =>
    Effect.gen(function* () {
      const format = args.format ?? "text"
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

/** Every editor tool, in `tools/list` order. */
export const editorTools: ReadonlyArray<Tool<never, never>> = [
  ...neovimTools,
  skeletonTool,
  worktreeTool,
  logsTool,
  clipboardReadTool,
  clipboardWriteTool,
  clipboardWatchTool,
] as never
