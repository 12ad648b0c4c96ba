/**
 * The editor operations, each one Lua chunk run in Neovim by one `nvim_exec_lua` request, so it
 * sees one consistent editor state, and each with a Schema for its reply (the only shape the
 * tools see). The chunks work on Neovim 0.7 and later.
 *
 * Conventions: lines and columns are 1-based; columns count bytes, as Neovim's `col('.')` does.
 * A chunk that cannot do what was asked returns `{ failure = { code, message } }` instead of
 * raising, so the caller learns a precise code (a Lua error is Neovim refusing the request).
 * Options tables never carry nil-valued keys: msgpack nil arrives in Lua as `vim.NIL`, which is
 * truthy.
 */
import { Effect, Schema } from "effect"
import { execLua, type NeovimConnection, NeovimError } from "./Neovim.ts"

/** Most buffer lines one read returns. */
export const bufferLinesMax = 5_000
/** Most bytes of buffer text one read returns. */
export const bufferBytesMax = 512 * 1024
/** Most bytes of one line quoted beside the cursor. */
export const cursorLineBytesMax = 4 * 1024
/** Most buffers listed. */
export const buffersListedMax = 1_000
/** Most diagnostics one read returns. */
export const diagnosticsReadMax = 2_000
/** Most diagnostics one write sets. */
export const diagnosticsWriteMax = 1_000
/** Most bytes of selected text returned. */
export const selectionBytesMax = 256 * 1024

/** Shared helpers, prepended to every chunk. */
const prelude = `
local function buffer_named(file)
  local path = vim.fn.fnamemodify(file, ":p")
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_get_name(b) == path then return b, path end
  end
  return nil, path
end
local function target_buffer(opts)
  if opts.file == nil then return vim.api.nvim_get_current_buf() end
  local b, path = buffer_named(opts.file)
  if b == nil then return nil, { code = "NOT_FOUND", message = path .. " is not open in Neovim" } end
  return b
end
local function bounded_lines(lines, bytes_max)
  local out, used = {}, 0
  for i, line in ipairs(lines) do
    if used + #line > bytes_max then return out, true end
    used = used + #line + 1
    out[i] = line
  end
  return out, false
end
local function char_end(text, col)
  local n = col
  while n < #text do
    local byte = text:byte(n + 1)
    if byte >= 0x80 and byte < 0xC0 then n = n + 1 else break end
  end
  return n
end
`

const chunk = (body: string) => `${prelude}\nlocal opts = ...\n${body}`

const Failure = Schema.Struct({
  failure: Schema.Struct({ code: Schema.Literals(["NOT_FOUND", "VALIDATION_ERROR"]), message: Schema.String }),
})
type Failure = (typeof Failure.Type)["failure"]

/** What a chunk answered: its reply, or the failure it reported. */
export type LuaOutcome<A> =
  | { readonly _tag: "Reply"; readonly reply: A }
  | { readonly _tag: "Failure"; readonly failure: Failure }

const withoutUndefined = (options: Record<string, unknown>): Record<string, unknown> =>
  Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined))

/** Runs one operation's chunk and decodes its reply. */
const runChunk = <A>(
  connection: NeovimConnection,
  code: string,
  reply: Schema.Codec<A, unknown>,
  options: Record<string, unknown>,
): Effect.Effect<LuaOutcome<A>, NeovimError> =>
  Effect.gen(function* () {
    const raw = yield* execLua(connection, code, [withoutUndefined(options)])
    const failed = Schema.decodeUnknownOption(Failure)(raw)
    if (failed._tag === "Some") return { _tag: "Failure", failure: failed.value.failure } as const
    const decoded = yield* Schema.decodeUnknownEffect(reply)(raw).pipe(
      Effect.mapError(
        (error) => new NeovimError({ reason: "BadReply", message: `unexpected reply from Neovim: ${error.message}` }),
      ),
    )
    return { _tag: "Reply", reply: decoded } as const
  })

const Position = Schema.Struct({ line: Schema.Int, col: Schema.Int })
/** Neovim sends an empty Lua table as an empty array. */
const Lines = Schema.Array(Schema.String)

// --- nvim_get_active_buffer ------------------------------------------------------------------

export const ActiveBuffer = Schema.Struct({
  bufnr: Schema.Int,
  name: Schema.String,
  filetype: Schema.String,
  modified: Schema.Boolean,
  lineCount: Schema.Int,
  firstLine: Schema.Int,
  lastLine: Schema.Int,
  truncated: Schema.Boolean,
  lines: Lines,
  cursor: Position,
})
export type ActiveBuffer = typeof ActiveBuffer.Type

const activeBufferLua = chunk(`
local win = vim.api.nvim_get_current_win()
local buf = vim.api.nvim_win_get_buf(win)
local count = vim.api.nvim_buf_line_count(buf)
local first = math.max(1, opts.startLine or 1)
local last = math.min(count, opts.endLine or count, first + opts.linesMax - 1)
local lines, cut = {}, false
if first <= last then lines, cut = bounded_lines(vim.api.nvim_buf_get_lines(buf, first - 1, last, false), opts.bytesMax) end
local cursor = vim.api.nvim_win_get_cursor(win)
return {
  bufnr = buf, name = vim.api.nvim_buf_get_name(buf), filetype = vim.bo[buf].filetype,
  modified = vim.bo[buf].modified, lineCount = count, firstLine = first, lastLine = first + #lines - 1,
  truncated = cut or (last < (opts.endLine or count) and last < count), lines = lines,
  cursor = { line = cursor[1], col = cursor[2] + 1 },
}
`)

/** The current window's buffer: its name, state and (a bounded range of) its lines. */
export const activeBuffer = (
  connection: NeovimConnection,
  range: { readonly startLine?: number | undefined; readonly endLine?: number | undefined },
) =>
  runChunk(connection, activeBufferLua, ActiveBuffer, {
    ...range,
    linesMax: bufferLinesMax,
    bytesMax: bufferBytesMax,
  })

// --- nvim_get_cursor -------------------------------------------------------------------------

export const Cursor = Schema.Struct({
  bufnr: Schema.Int,
  name: Schema.String,
  line: Schema.Int,
  col: Schema.Int,
  mode: Schema.String,
  lineCount: Schema.Int,
  lineText: Schema.String,
})
export type Cursor = typeof Cursor.Type

const cursorLua = chunk(`
local win = vim.api.nvim_get_current_win()
local buf = vim.api.nvim_win_get_buf(win)
local cursor = vim.api.nvim_win_get_cursor(win)
local text = vim.api.nvim_buf_get_lines(buf, cursor[1] - 1, cursor[1], false)[1] or ""
return {
  bufnr = buf, name = vim.api.nvim_buf_get_name(buf), line = cursor[1], col = cursor[2] + 1,
  mode = vim.api.nvim_get_mode().mode, lineCount = vim.api.nvim_buf_line_count(buf),
  lineText = text:sub(1, opts.lineBytesMax),
}
`)

/** Where the cursor is, in which buffer and mode, and the text of its line. */
export const cursor = (connection: NeovimConnection) =>
  runChunk(connection, cursorLua, Cursor, { lineBytesMax: cursorLineBytesMax })

// --- nvim_goto_line --------------------------------------------------------------------------

export const GotoResult = Schema.Struct({
  bufnr: Schema.Int,
  name: Schema.String,
  line: Schema.Int,
  col: Schema.Int,
  lineCount: Schema.Int,
  clamped: Schema.Boolean,
})
export type GotoResult = typeof GotoResult.Type

const gotoLua = chunk(`
if opts.file ~= nil then
  local existing, path = buffer_named(opts.file)
  if existing == nil and vim.fn.filereadable(path) == 0 then
    return { failure = { code = "NOT_FOUND", message = path .. " does not exist (or cannot be read)" } }
  end
  -- 'hide' keeps a modified current buffer (and its changes) loaded instead of refusing with E37;
  -- 'shortmess' A answers the swap-file question instead of waiting at a prompt.
  local shortmess = vim.o.shortmess
  vim.o.shortmess = shortmess .. "A"
  local ok, err = pcall(vim.cmd, "hide edit " .. vim.fn.fnameescape(path))
  vim.o.shortmess = shortmess
  if not ok then error(err, 0) end
end
local buf = vim.api.nvim_get_current_buf()
local count = vim.api.nvim_buf_line_count(buf)
local line = math.min(math.max(opts.line, 1), count)
local text = vim.api.nvim_buf_get_lines(buf, line - 1, line, false)[1] or ""
local col = math.min(math.max((opts.col or 1) - 1, 0), math.max(#text - 1, 0))
vim.api.nvim_win_set_cursor(0, { line, col })
pcall(vim.cmd, "normal! zv")
return {
  bufnr = buf, name = vim.api.nvim_buf_get_name(buf), line = line, col = col + 1,
  lineCount = count, clamped = line ~= opts.line or col + 1 ~= (opts.col or 1),
}
`)

/** Opens `file` (when given) and moves the cursor to `line`/`col`, clamped to the buffer. */
export const gotoLine = (
  connection: NeovimConnection,
  target: { readonly file?: string | undefined; readonly line: number; readonly col?: number | undefined },
) => runChunk(connection, gotoLua, GotoResult, { ...target })

// --- nvim_list_buffers -----------------------------------------------------------------------

export const BufferInfo = Schema.Struct({
  bufnr: Schema.Int,
  name: Schema.String,
  loaded: Schema.Boolean,
  modified: Schema.Boolean,
  filetype: Schema.String,
  buftype: Schema.String,
  lineCount: Schema.Int,
  current: Schema.Boolean,
  windows: Schema.Int,
})
export type BufferInfo = typeof BufferInfo.Type

export const BufferList = Schema.Struct({
  buffers: Schema.Array(BufferInfo),
  truncated: Schema.Boolean,
})

const listBuffersLua = chunk(`
local current = vim.api.nvim_get_current_buf()
local out, cut = {}, false
for _, b in ipairs(vim.api.nvim_list_bufs()) do
  if vim.bo[b].buflisted then
    if #out >= opts.buffersMax then cut = true break end
    local loaded = vim.api.nvim_buf_is_loaded(b)
    out[#out + 1] = {
      bufnr = b, name = vim.api.nvim_buf_get_name(b), loaded = loaded, modified = vim.bo[b].modified,
      filetype = vim.bo[b].filetype, buftype = vim.bo[b].buftype,
      lineCount = loaded and vim.api.nvim_buf_line_count(b) or 0,
      current = b == current, windows = #vim.fn.win_findbuf(b),
    }
  end
end
return { buffers = out, truncated = cut }
`)

/** The listed buffers: names, whether loaded, modified (unsaved work), shown, current. */
export const listBuffers = (connection: NeovimConnection) =>
  runChunk(connection, listBuffersLua, BufferList, { buffersMax: buffersListedMax })

// --- nvim_get_visual_selection ---------------------------------------------------------------

export const Selection = Schema.Struct({
  bufnr: Schema.Int,
  name: Schema.String,
  /** Whether Visual mode is on now (else this is the last selection, from the '< and '> marks). */
  active: Schema.Boolean,
  kind: Schema.Literals(["none", "char", "line", "block"]),
  start: Schema.optionalKey(Position),
  end: Schema.optionalKey(Position),
  lines: Lines,
  truncated: Schema.Boolean,
})
export type Selection = typeof Selection.Type

const selectionLua = chunk(`
local buf = vim.api.nvim_get_current_buf()
local name = vim.api.nvim_buf_get_name(buf)
local mode = vim.api.nvim_get_mode().mode
local active = mode == "v" or mode == "V" or mode == "\\22"
local visual, s, e
if active then
  visual, s, e = mode, vim.fn.getpos("v"), vim.fn.getpos(".")
else
  visual, s, e = vim.fn.visualmode(), vim.fn.getpos("'<"), vim.fn.getpos("'>")
end
if visual == "" or s[2] == 0 or e[2] == 0 then
  return { bufnr = buf, name = name, active = false, kind = "none", lines = {}, truncated = false }
end
local sl, sc, el, ec = s[2], s[3], e[2], e[3]
if sl > el or (sl == el and sc > ec) then sl, sc, el, ec = el, ec, sl, sc end
local lines = vim.api.nvim_buf_get_lines(buf, sl - 1, el, false)
local kind = "char"
if visual == "V" then
  kind = "line"
elseif visual == "v" then
  local last = lines[#lines] or ""
  ec = math.min(ec, #last)
  lines[#lines] = last:sub(1, char_end(last, ec))
  lines[1] = (lines[1] or ""):sub(sc)
else
  kind = "block"
  local left, right = math.min(sc, ec), math.max(sc, ec)
  for i, line in ipairs(lines) do lines[i] = line:sub(left, char_end(line, math.min(right, #line))) end
  sc, ec = left, right
end
local out, cut = bounded_lines(lines, opts.bytesMax)
local last_col = ec
if kind == "line" then last_col = math.max(#(vim.api.nvim_buf_get_lines(buf, el - 1, el, false)[1] or ""), 1) end
return {
  bufnr = buf, name = name, active = active, kind = kind,
  start = { line = sl, col = kind == "line" and 1 or sc }, ["end"] = { line = el, col = math.min(last_col, 2147483647) },
  lines = out, truncated = cut,
}
`)

/** The Visual selection now, or else the last one; charwise, linewise or blockwise. */
export const visualSelection = (connection: NeovimConnection) =>
  runChunk(connection, selectionLua, Selection, { bytesMax: selectionBytesMax })

// --- nvim_get_diagnostics / nvim_set_diagnostics ---------------------------------------------

export const diagnosticSeverities = ["error", "warning", "info", "hint"] as const
export type DiagnosticSeverity = (typeof diagnosticSeverities)[number]

export const Diagnostic = Schema.Struct({
  file: Schema.String,
  bufnr: Schema.Int,
  line: Schema.Int,
  col: Schema.Int,
  endLine: Schema.Int,
  endCol: Schema.Int,
  severity: Schema.Literals(diagnosticSeverities),
  message: Schema.String,
  source: Schema.optionalKey(Schema.String),
  code: Schema.optionalKey(Schema.String),
  namespace: Schema.optionalKey(Schema.String),
})
export type Diagnostic = typeof Diagnostic.Type

export const DiagnosticList = Schema.Struct({
  diagnostics: Schema.Array(Diagnostic),
  total: Schema.Int,
})

const getDiagnosticsLua = chunk(`
local target = nil
if not opts.allBuffers then
  local b, failure = target_buffer(opts)
  if failure ~= nil then return { failure = failure } end
  target = b
end
local names = {}
for name, id in pairs(vim.api.nvim_get_namespaces()) do names[id] = name end
local severities = { "error", "warning", "info", "hint" }
local all = vim.diagnostic.get(target)
table.sort(all, function(a, b)
  if a.bufnr ~= b.bufnr then return a.bufnr < b.bufnr end
  if a.lnum ~= b.lnum then return a.lnum < b.lnum end
  return a.col < b.col
end)
local out = {}
for i, d in ipairs(all) do
  if i > opts.diagnosticsMax then break end
  out[i] = {
    file = vim.api.nvim_buf_get_name(d.bufnr), bufnr = d.bufnr,
    line = d.lnum + 1, col = d.col + 1, endLine = (d.end_lnum or d.lnum) + 1, endCol = (d.end_col or d.col) + 1,
    severity = severities[d.severity] or "error", message = d.message,
    source = d.source, code = d.code ~= nil and tostring(d.code) or nil, namespace = names[d.namespace],
  }
end
return { diagnostics = out, total = #all }
`)

/** The diagnostics (LSP and others) of the current buffer, a named open file, or every buffer. */
export const getDiagnostics = (
  connection: NeovimConnection,
  target: { readonly file?: string | undefined; readonly allBuffers?: boolean | undefined },
) => runChunk(connection, getDiagnosticsLua, DiagnosticList, { ...target, diagnosticsMax: diagnosticsReadMax })

/** A diagnostic to set; positions are 1-based, the end defaults to the start. */
export interface DiagnosticInput {
  readonly line: number
  readonly col?: number | undefined
  readonly endLine?: number | undefined
  readonly endCol?: number | undefined
  readonly severity: DiagnosticSeverity
  readonly message: string
  readonly source?: string | undefined
  readonly code?: string | undefined
}

export const SetDiagnosticsResult = Schema.Struct({
  bufnr: Schema.Int,
  name: Schema.String,
  namespace: Schema.String,
  count: Schema.Int,
})

/** The namespace mnemos's diagnostics live in (setting replaces only these). */
export const diagnosticNamespace = "mnemos"

const setDiagnosticsLua = chunk(`
local buf, failure = target_buffer(opts)
if failure ~= nil then
  if vim.fn.filereadable(vim.fn.fnamemodify(opts.file, ":p")) == 0 then return { failure = failure } end
  buf = vim.fn.bufadd(vim.fn.fnamemodify(opts.file, ":p"))
  vim.fn.bufload(buf)
end
local count = vim.api.nvim_buf_line_count(buf)
local items = {}
for i, d in ipairs(opts.diagnostics) do
  local last = d.endLine or d.line
  if d.line > count or last > count or last < d.line then
    return { failure = { code = "VALIDATION_ERROR", message = "diagnostic " .. i .. " spans lines " .. d.line .. "-" .. last .. ", outside the buffer's " .. count .. " lines" } }
  end
  items[i] = {
    lnum = d.line - 1, col = (d.col or 1) - 1, end_lnum = last - 1, end_col = (d.endCol or d.col or 1) - 1,
    severity = d.severity, message = d.message, source = d.source or "mnemos", code = d.code,
  }
end
local ns = vim.api.nvim_create_namespace(opts.namespace)
vim.diagnostic.set(ns, buf, items)
return { bufnr = buf, name = vim.api.nvim_buf_get_name(buf), namespace = opts.namespace, count = #items }
`)

/**
 * Replaces mnemos's diagnostics of the current buffer or of `file` (loaded if it is not open);
 * an empty list clears them. Other sources' diagnostics (LSP) are left alone.
 */
export const setDiagnostics = (
  connection: NeovimConnection,
  target: { readonly file?: string | undefined; readonly diagnostics: ReadonlyArray<DiagnosticInput> },
) =>
  runChunk(connection, setDiagnosticsLua, SetDiagnosticsResult, {
    ...(target.file !== undefined ? { file: target.file } : {}),
    namespace: diagnosticNamespace,
    diagnostics: target.diagnostics.map((diagnostic) =>
      withoutUndefined({ ...diagnostic, severity: diagnosticSeverities.indexOf(diagnostic.severity) + 1 }),
    ),
  })
