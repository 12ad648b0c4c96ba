/**
 * The Neovim tools of the editor toolset: read and move the cursor, read buffers, selections and
 * diagnostics, set diagnostics, and (only with `--nvim-allow-lua`) run Lua. Each call goes to
 * the instance `resolveServer` finds (`--nvim`, `$NVIM`, the last focused Neovim) over one
 * short-lived RPC connection; the Lua behind each tool is in `src/editor/NeovimLua.ts`.
 *
 * `nvim_execute_lua` runs arbitrary code in the editor, so every call is audited before it
 * runs: a warning in the daemon log (code and arguments quoted briefly) and a JSON line in the
 * data directory's `nvim-lua-audit.jsonl` (whole); if the audit line cannot be written, the
 * code does not run.
 */
import { createHash, randomUUID } from "node:crypto"
import { appendFile } from "node:fs/promises"
import { Effect, Schema } from "effect"
import {
  execLua,
  NeovimConfig,
  type NeovimConnection,
  type NeovimError,
  type NeovimServer,
  withNeovim,
} from "../editor/Neovim.ts"
import {
  activeBuffer,
  cursor,
  diagnosticSeverities,
  diagnosticsWriteMax,
  getDiagnostics,
  gotoLine,
  type LuaOutcome,
  listBuffers,
  setDiagnostics,
  visualSelection,
} from "../editor/NeovimLua.ts"
import { isMaxUtf8Bytes } from "../graph/Model.ts"
import { editorTool, lineNumber, pathArg, resolvePath } from "./EditorToolSupport.ts"
import { type Tool, type ToolCaller, ToolError, type ToolOutput } from "./Tool.ts"

/** Longest Lua chunk `nvim_execute_lua` runs. */
export const luaCodeBytesMax = 64 * 1024
/** Most arguments passed to a Lua chunk, and their largest JSON size. */
export const luaArgsMax = 64
export const luaArgsBytesMax = 64 * 1024
/** Largest Lua result returned whole (as JSON); a larger one is cut. */
export const luaResultBytesMax = 256 * 1024
/** Longest diagnostic message set. */
export const diagnosticMessageBytesMax = 8 * 1024

const neovimToolError = (error: NeovimError): ToolError => {
  switch (error.reason) {
    case "NoInstance":
    case "ConnectFailed":
    case "NotNeovim":
      return new ToolError({ code: "NOT_FOUND", message: error.message })
    case "Timeout":
      return new ToolError({ code: "BUSY", message: error.message })
    case "RequestFailed":
      return new ToolError({ code: "VALIDATION_ERROR", message: `Neovim refused: ${error.message}` })
    default:
      return new ToolError({ code: "INTERNAL_ERROR", message: error.message })
  }
}

const serverJson = (server: NeovimServer) => ({ address: server.address, source: server.source })

/** Runs one editor operation in the resolved instance; a chunk's own failure becomes its code. */
const onNeovim = <A>(operation: (connection: NeovimConnection) => Effect.Effect<LuaOutcome<A>, NeovimError>) =>
  withNeovim((connection) =>
    operation(connection).pipe(Effect.map((outcome) => ({ outcome, server: connection.server }))),
  ).pipe(
    Effect.mapError(neovimToolError),
    Effect.flatMap(({ outcome, server }) =>
      outcome._tag === "Failure"
        ? Effect.fail(new ToolError({ code: outcome.failure.code, message: outcome.failure.message }))
        : Effect.succeed({ reply: outcome.reply, server: serverJson(server) }),
    ),
  )

/** For Neovim, a relative path without a root is left to Neovim (its working directory). */
const editorPath = (path: string | undefined, caller: ToolCaller) =>
  path === undefined ? undefined : (resolvePath(path, caller) ?? path)

const numbered = (lines: ReadonlyArray<string>, first: number) => {
  const width = String(first + lines.length - 1).length
  return lines.map((line, index) => `${String(first + index).padStart(width)}  ${line}`).join("\n")
}

const ActiveBufferArgs = Schema.Struct({
  startLine: Schema.optionalKey(lineNumber("First line to return (1-based, default 1)")),
  endLine: Schema.optionalKey(lineNumber("Last line to return (default: the last; at most 5000 lines per call)")),
})

const activeBufferTool = editorTool(
  {
    name: "nvim_get_active_buffer",
    title: "Neovim: Active Buffer",
    description:
      "The buffer in Neovim's current window: file name, filetype, whether it has unsaved changes, line count, the cursor, and its text (including unsaved edits), optionally a line range. Lines are 1-based.",
    readOnly: true,
  },
  ActiveBufferArgs,
  (args) =>
    Effect.gen(function* () {
      if (args.startLine !== undefined && args.endLine !== undefined && args.endLine < args.startLine)
        return yield* new ToolError({ code: "VALIDATION_ERROR", message: "endLine is before startLine" })
      const { reply, server } = yield* onNeovim((connection) => activeBuffer(connection, args))
      const header = `${reply.name || "[No Name]"} (${reply.filetype || "no filetype"}, ${reply.lineCount} lines${reply.modified ? ", unsaved changes" : ""}; cursor ${reply.cursor.line}:${reply.cursor.col}) lines ${reply.firstLine}-${reply.lastLine}${reply.truncated ? " (more follow)" : ""}`
      return {
        structured: { server, ...reply, text: reply.lines.join("\n") },
        text: `${header}\n${numbered(reply.lines, reply.firstLine)}`,
      } satisfies ToolOutput
    }),
)

const cursorTool = editorTool(
  {
    name: "nvim_get_cursor",
    title: "Neovim: Cursor",
    description:
      "Where Neovim's cursor is: file, line and column (1-based; the column counts bytes, like col('.')), the mode (n, i, v, ...), and the text of the cursor's line.",
    readOnly: true,
  },
  Schema.Struct({}),
  () => onNeovim(cursor).pipe(Effect.map(({ reply, server }) => ({ structured: { server, ...reply } }))),
)

const GotoArgs = Schema.Struct({
  line: lineNumber("Line to move the cursor to (1-based; clamped to the buffer)"),
  col: Schema.optionalKey(lineNumber("Column (1-based byte column, default 1; clamped to the line)")),
  file: Schema.optionalKey(
    pathArg(
      "File to open first (absolute, or relative to your workspace root); default: stay in the current buffer. A modified buffer being left stays loaded with its changes.",
    ),
  ),
})

const gotoTool = editorTool(
  {
    name: "nvim_goto_line",
    title: "Neovim: Go To Line",
    description:
      "Move Neovim's cursor to a line (and column), in the current buffer or after opening a file, so the person sees that place. Answers where the cursor ended up (clamped to the buffer).",
    readOnly: false,
  },
  GotoArgs,
  (args, caller) =>
    onNeovim((connection) =>
      gotoLine(connection, { line: args.line, col: args.col, file: editorPath(args.file, caller) }),
    ).pipe(Effect.map(({ reply, server }) => ({ structured: { server, ...reply } }))),
)

const listBuffersTool = editorTool(
  {
    name: "nvim_list_buffers",
    title: "Neovim: List Buffers",
    description:
      "Neovim's listed buffers: file name, whether loaded, whether modified (unsaved work), filetype, line count, whether current and in how many windows it shows.",
    readOnly: true,
  },
  Schema.Struct({}),
  () =>
    onNeovim(listBuffers).pipe(
      Effect.map(({ reply, server }) => ({
        structured: { server, ...reply },
        text: [
          `${reply.buffers.length} buffers${reply.truncated ? " (more not listed)" : ""} in Neovim at ${server.address}`,
          ...reply.buffers.map(
            (buffer) =>
              `${buffer.current ? "%" : " "}${buffer.modified ? "+" : " "} ${String(buffer.bufnr).padStart(3)}  ${buffer.name || "[No Name]"}  (${buffer.loaded ? `${buffer.lineCount} lines` : "not loaded"}${buffer.filetype !== "" ? `, ${buffer.filetype}` : ""}${buffer.buftype !== "" ? `, ${buffer.buftype}` : ""})`,
          ),
        ].join("\n"),
      })),
    ),
)

const selectionTool = editorTool(
  {
    name: "nvim_get_visual_selection",
    title: "Neovim: Visual Selection",
    description:
      "The text selected in Neovim: the Visual selection now if Visual mode is on, else the last one (from the '< and '> marks). Handles charwise (v), linewise (V) and blockwise (Ctrl-V) selections; start and end are 1-based line/byte-column positions.",
    readOnly: true,
  },
  Schema.Struct({}),
  () =>
    onNeovim(visualSelection).pipe(
      Effect.map(({ reply, server }) => ({
        structured: { server, ...reply, text: reply.lines.join("\n") },
        text:
          reply.kind === "none"
            ? "nothing has been selected in this buffer"
            : `${reply.name || "[No Name]"} ${reply.kind}wise selection ${reply.start?.line}:${reply.start?.col}-${reply.end?.line}:${reply.end?.col}${reply.active ? " (Visual mode on)" : ""}${reply.truncated ? " (cut)" : ""}\n${reply.lines.join("\n")}`,
      })),
    ),
)

const DiagnosticsArgs = Schema.Struct({
  file: Schema.optionalKey(pathArg("An open file whose diagnostics to read (default: the current buffer)")),
  allBuffers: Schema.optionalKey(Schema.Boolean.annotate({ description: "Read the diagnostics of every buffer" })),
})

const diagnosticsTool = editorTool(
  {
    name: "nvim_get_diagnostics",
    title: "Neovim: Get Diagnostics",
    description:
      "The live diagnostics in Neovim (from LSP servers, linters, and those set by nvim_set_diagnostics) of the current buffer, an open file, or every buffer: file, 1-based line/column range, severity, message, source, code. Read these instead of running the compiler.",
    readOnly: true,
  },
  DiagnosticsArgs,
  (args, caller) =>
    onNeovim((connection) =>
      getDiagnostics(connection, { file: editorPath(args.file, caller), allBuffers: args.allBuffers }),
    ).pipe(
      Effect.map(({ reply, server }) => ({
        structured: { server, ...reply },
        text: [
          `${reply.total} diagnostics${reply.total > reply.diagnostics.length ? ` (first ${reply.diagnostics.length} shown)` : ""}`,
          ...reply.diagnostics.map(
            (diagnostic) =>
              `${diagnostic.file}:${diagnostic.line}:${diagnostic.col}: ${diagnostic.severity}: ${diagnostic.message}${diagnostic.source !== undefined ? ` [${diagnostic.source}${diagnostic.code !== undefined ? ` ${diagnostic.code}` : ""}]` : ""}`,
          ),
        ].join("\n"),
      })),
    ),
)

const DiagnosticArg = Schema.Struct({
  line: lineNumber("First line (1-based)"),
  col: Schema.optionalKey(lineNumber("First column (1-based byte column, default 1)")),
  endLine: Schema.optionalKey(lineNumber("Last line (default: line)")),
  endCol: Schema.optionalKey(lineNumber("Column where the range ends (default: col)")),
  severity: Schema.Literals(diagnosticSeverities).annotate({ description: "error, warning, info or hint" }),
  message: Schema.String.annotate({ description: "What is wrong" }).check(
    Schema.isMinLength(1),
    isMaxUtf8Bytes(diagnosticMessageBytesMax),
  ),
  source: Schema.optionalKey(
    Schema.String.annotate({ description: 'Who reports it (default "mnemos")' }).check(isMaxUtf8Bytes(256)),
  ),
  code: Schema.optionalKey(Schema.String.annotate({ description: "A rule or error code" }).check(isMaxUtf8Bytes(256))),
})

const SetDiagnosticsArgs = Schema.Struct({
  file: Schema.optionalKey(
    pathArg(
      "File to annotate (absolute, or relative to your workspace root; loaded if not open). Default: the current buffer",
    ),
  ),
  diagnostics: Schema.Array(DiagnosticArg)
    .annotate({
      description: "The diagnostics to show; they replace the ones mnemos set before in that buffer ([] clears them)",
    })
    .check(Schema.isMaxLength(diagnosticsWriteMax)),
})

const setDiagnosticsTool = editorTool(
  {
    name: "nvim_set_diagnostics",
    title: "Neovim: Set Diagnostics",
    description:
      'Show diagnostics in Neovim (signs, underlines, virtual text) on a buffer, in the "mnemos" namespace: point the person at problems you found. Replaces the diagnostics mnemos set before in that buffer; an empty list clears them; LSP diagnostics are left alone.',
    readOnly: false,
  },
  SetDiagnosticsArgs,
  (args, caller) =>
    onNeovim((connection) =>
      setDiagnostics(connection, { file: editorPath(args.file, caller), diagnostics: args.diagnostics }),
    ).pipe(Effect.map(({ reply, server }) => ({ structured: { server, ...reply } }))),
)

const ExecuteLuaArgs = Schema.Struct({
  code: Schema.String.annotate({
    description: "A Lua chunk; `...` holds args; its return value is the result (tables become JSON)",
  }).check(Schema.isMinLength(1), isMaxUtf8Bytes(luaCodeBytesMax)),
  args: Schema.optionalKey(
    Schema.Array(Schema.Unknown)
      .annotate({ description: "JSON values passed to the chunk as `...`" })
      .check(Schema.isMaxLength(luaArgsMax)),
  ),
})

/** Lua results as JSON: bytes as UTF-8 text, Neovim handles (buffers, windows) as their numbers. */
const luaResultJson = (value: unknown): string =>
  JSON.stringify(value, (_key, item: unknown) =>
    item instanceof Uint8Array
      ? Buffer.from(item).toString("utf8")
      : typeof item === "object" && item !== null && "data" in item && "transport" in item
        ? (item as { data: unknown }).data
        : item,
  ) ?? "null"

/** How much of the code and arguments the daemon log line quotes (the audit file keeps them whole). */
const auditExcerptChars = 200

const excerpt = (text: unknown) =>
  typeof text === "string" && text.length > auditExcerptChars ? `${text.slice(0, auditExcerptChars)}…` : text

const audit = (file: string | undefined, entry: Record<string, unknown>) =>
  Effect.gen(function* () {
    const logged: Record<string, unknown> = { ...entry }
    for (const key of ["code", "argsJson"]) if (key in logged) logged[key] = excerpt(logged[key])
    yield* Effect.logWarning("nvim_execute_lua").pipe(Effect.annotateLogs(logged))
    if (file === undefined) return
    yield* Effect.tryPromise({
      try: () => appendFile(file, `${JSON.stringify(entry)}\n`, { mode: 0o600 }),
      catch: (error) =>
        new ToolError({
          code: "IO_ERROR",
          message: `cannot audit nvim_execute_lua to ${file} (${(error as Error).message}); the code was not run`,
        }),
    })
  })

const executeLuaTool = editorTool(
  {
    name: "nvim_execute_lua",
    title: "Neovim: Execute Lua",
    description:
      "Run a Lua chunk inside Neovim and return its result as JSON: the escape hatch for anything the other Neovim tools do not cover. Off unless the daemon was started with --nvim-allow-lua; every call is audited.",
    readOnly: false,
    openWorld: true,
  },
  ExecuteLuaArgs,
  (args, caller) =>
    Effect.gen(function* () {
      const settings = yield* NeovimConfig
      if (!settings.executeLuaEnabled)
        return yield* new ToolError({
          code: "VALIDATION_ERROR",
          message:
            "nvim_execute_lua is disabled: it runs arbitrary code in the editor, so the daemon must be started with --nvim-allow-lua to allow it",
        })
      const luaArgs = args.args ?? []
      if (Buffer.byteLength(JSON.stringify(luaArgs)) > luaArgsBytesMax)
        return yield* new ToolError({
          code: "VALIDATION_ERROR",
          message: `args take more than ${luaArgsBytesMax} bytes as JSON`,
        })
      const id = randomUUID()
      const base = {
        id,
        client: caller.client,
        project: caller.project,
        codeSha256: createHash("sha256").update(args.code).digest("hex"),
      }
      return yield* withNeovim((connection) =>
        Effect.gen(function* () {
          const server = serverJson(connection.server)
          yield* audit(settings.luaAuditFile, {
            ...base,
            at: new Date().toISOString(),
            event: "run",
            server: server.address,
            code: args.code,
            argsJson: JSON.stringify(luaArgs),
          })
          const result = yield* execLua(connection, args.code, luaArgs).pipe(
            Effect.tapError((error) =>
              audit(settings.luaAuditFile, {
                ...base,
                at: new Date().toISOString(),
                event: "failed",
                message: error.message,
              }).pipe(Effect.ignore),
            ),
          )
          yield* audit(settings.luaAuditFile, { ...base, at: new Date().toISOString(), event: "done" }).pipe(
            Effect.ignore,
          )
          const json = luaResultJson(result)
          if (Buffer.byteLength(json) > luaResultBytesMax)
            return {
              structured: { server, truncated: true, resultPreview: json.slice(0, luaResultBytesMax / 4) },
              text: `the result takes ${Buffer.byteLength(json)} bytes as JSON, more than ${luaResultBytesMax}; its start:\n${json.slice(0, luaResultBytesMax / 4)}`,
            } satisfies ToolOutput
          return { structured: { server, result: JSON.parse(json) as unknown }, text: json } satisfies ToolOutput
        }),
      ).pipe(Effect.mapError((error) => (error instanceof ToolError ? error : neovimToolError(error))))
    }),
)

/** The Neovim tools, in `tools/list` order. */
export const neovimTools: ReadonlyArray<Tool<never, never>> = [
  activeBufferTool,
  cursorTool,
  gotoTool,
  listBuffersTool,
  selectionTool,
  diagnosticsTool,
  setDiagnosticsTool,
  executeLuaTool,
] as never
