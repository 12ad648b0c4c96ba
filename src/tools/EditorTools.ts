/**
 * The editor toolset: what the person sees in the editor, and acting on it. The Neovim tools
 * (`NeovimTools.ts`), file skeletons, the active Git worktree, the daemon's and the terminal's
 * recent logs, and the clipboard (`ClipboardTools.ts`).
 *
 * Handlers read their services as `Context.Reference`s with working defaults (Neovim from
 * `$NVIM`, no focus, no terminal, an empty log), so the
 * tools need nothing beyond `SessionServices`; `mnemos serve` provides the real ones
 * (`src/editor/EditorServices.ts`, and in the daemon its telemetry through `TelemetryFeeds.ts`).
 */
import { isAbsolute } from "node:path"
import { Effect, Schema } from "effect"
import { DaemonLog, daemonLogLevels, daemonLogLinesMax } from "../editor/DaemonLog.ts"
import { EditorFocus } from "../editor/EditorFocus.ts"
import { formatSkeleton, readFileSkeleton, type SkeletonError } from "../editor/FileSkeleton.ts"
import { skeletonLanguages } from "../editor/SkeletonLanguages.ts"
import { TerminalLog } from "../editor/TerminalLog.ts"
import { readWorktreeContext, recentCommitsMax, type WorktreeError } from "../editor/WorktreeContext.ts"
import { clipboardTools } from "./ClipboardTools.ts"
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

/** Every editor tool, in `tools/list` order. */
export const editorTools: ReadonlyArray<Tool<never, never>> = [
  ...neovimTools,
  skeletonTool,
  worktreeTool,
  logsTool,
  ...clipboardTools,
] as never
