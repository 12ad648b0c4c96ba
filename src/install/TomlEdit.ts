/**
 * Edits the `[mcp_servers.<name>]` table of a Codex `config.toml` at the line level, so every other
 * line — other servers, comments, blank lines, key order — stays byte for byte.
 *
 * No library on the npm registry edits TOML in place well enough for a file people curate by hand:
 * the one that patches documents (toml-patch) re-homed a new table as a dotted key between a
 * comment and the table it described, and dropped that comment again on removal. So the edit is
 * done here, on lines, and checked with a real parser (smol-toml): the file must parse before;
 * after the edit, every value but our table must be deep-equal to before and our table must read
 * back exactly as intended. An entry written in another form (an inline table, dotted keys) or a
 * file the checks fail on is refused with the text to add by hand — never written.
 *
 * An existing table keeps the keys it has besides `command` and `args` (`env`, `enabled`,
 * timeouts), and its `command`/`args` lines are replaced in place.
 */
import { isDeepStrictEqual } from "node:util"
import { parse } from "smol-toml"
import { plainValue } from "./PlainValue.ts"

/** What the managed table holds. */
export interface TomlServer {
  readonly command: string
  readonly args: ReadonlyArray<string>
}

/** The result of an edit: the new text, or why the file was not edited. */
export type TomlEdit =
  | { readonly _tag: "Ok"; readonly text: string }
  | { readonly _tag: "Refused"; readonly message: string }

type TomlTable = Record<string, unknown>

/** Parses TOML; the error message says where it is broken. */
export const parseToml = (
  text: string,
): { readonly _tag: "Ok"; readonly value: TomlTable } | { readonly _tag: "Invalid"; readonly message: string } => {
  try {
    return { _tag: "Ok", value: plainValue(parse(text)) as TomlTable }
  } catch (error) {
    return { _tag: "Invalid", message: error instanceof Error ? error.message.split("\n")[0]! : String(error) }
  }
}

/** The `[mcp_servers.<name>]` value of a parsed file. */
export const serverIn = (document: TomlTable, name: string): unknown => {
  const servers = document.mcp_servers
  return typeof servers === "object" && servers !== null ? (servers as TomlTable)[name] : undefined
}

/** A TOML basic string: JSON's escapes are all valid TOML escapes. */
const tomlString = (value: string): string => JSON.stringify(value)
const tomlArray = (values: ReadonlyArray<string>): string => `[${values.map(tomlString).join(", ")}]`

/** The lines of a new table. */
export const tableLines = (name: string, server: TomlServer): Array<string> => [
  `[mcp_servers.${bareOrQuoted(name)}]`,
  `command = ${tomlString(server.command)}`,
  `args = ${tomlArray(server.args)}`,
]

const bareOrQuoted = (key: string) => (/^[A-Za-z0-9_-]+$/.test(key) ? key : tomlString(key))

const escapeRegex = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

/** Matches the header of `[mcp_servers.<name>]` or of one of its subtables (`.env`). */
const headerOf = (name: string) => {
  const key = `(?:${escapeRegex(name)}|"${escapeRegex(name)}"|'${escapeRegex(name)}')`
  return {
    own: new RegExp(`^\\s*\\[\\s*mcp_servers\\s*\\.\\s*${key}\\s*\\]\\s*(?:#.*)?$`),
    sub: new RegExp(`^\\s*\\[\\s*mcp_servers\\s*\\.\\s*${key}\\s*\\.`),
  }
}
const anyHeader = /^\s*\[/
const isTrivia = (line: string) => /^\s*(?:#.*)?$/.test(line)

/** The line range `[start, end)` of the table (with its subtables), trailing comments and blanks excluded. */
const findTable = (lines: ReadonlyArray<string>, name: string): { start: number; end: number } | undefined => {
  const header = headerOf(name)
  const start = lines.findIndex((line) => header.own.test(line))
  if (start < 0) return undefined
  let end = start + 1
  while (end < lines.length && !(anyHeader.test(lines[end]!) && !header.sub.test(lines[end]!))) end++
  while (end > start + 1 && isTrivia(lines[end - 1]!)) end--
  return { start, end }
}

/** The end (exclusive line index) of a value starting on line `from`: brackets balanced outside strings. */
const valueEnd = (lines: ReadonlyArray<string>, from: number): number => {
  let depth = 0
  let quote: string | undefined
  for (let index = from; index < lines.length; index++) {
    const line = lines[index]!
    const start = index === from ? line.indexOf("=") + 1 : 0
    for (let at = start; at < line.length; at++) {
      const char = line[at]!
      if (quote !== undefined) {
        if (char === "\\" && quote === '"') at++
        else if (char === quote) quote = undefined
      } else if (char === '"' || char === "'") quote = char
      else if (char === "#") break
      else if (char === "[" || char === "{") depth++
      else if (char === "]" || char === "}") depth--
    }
    if (depth <= 0 && quote === undefined) return index + 1
  }
  return lines.length
}

/** Replaces (or adds after the header) the `key = ...` line(s) of the table at `table`. */
const replaceKey = (lines: Array<string>, table: { start: number; end: number }, key: string, line: string) => {
  const pattern = new RegExp(`^\\s*${escapeRegex(key)}\\s*=`)
  for (let index = table.start + 1; index < table.end; index++) {
    if (anyHeader.test(lines[index]!)) break // a subtable: the key was not in the table itself
    if (pattern.test(lines[index]!)) {
      const end = valueEnd(lines, index)
      lines.splice(index, end - index, line)
      table.end -= end - index - 1
      return
    }
  }
  lines.splice(table.start + 1, 0, line)
  table.end++
}

const withoutServer = (document: TomlTable, name: string): TomlTable => {
  const servers = document.mcp_servers
  if (typeof servers !== "object" || servers === null) return document
  const { [name]: _removed, ...rest } = servers as TomlTable
  const copy = { ...document }
  // An empty [mcp_servers] and none at all mean the same.
  if (Object.keys(rest).length === 0) delete copy.mcp_servers
  else copy.mcp_servers = rest
  return copy
}

const manual = (name: string, server: TomlServer | undefined, why: string): TomlEdit => ({
  _tag: "Refused",
  message:
    server === undefined
      ? `${why}; remove the [mcp_servers.${name}] entry by hand`
      : `${why}; add this by hand:\n${tableLines(name, server).join("\n")}`,
})

/** Sets (`server`) or removes (`undefined`) the table `[mcp_servers.<name>]` of `text`. */
export const editTomlServer = (text: string, name: string, server: TomlServer | undefined): TomlEdit => {
  const before = parseToml(text)
  if (before._tag === "Invalid") return manual(name, server, `the file is not valid TOML (${before.message})`)
  const eol = text.includes("\r\n") ? "\r\n" : "\n"
  const lines = text.split(/\r?\n/)
  const endsWithNewline = text === "" || text.endsWith("\n")
  if (endsWithNewline) lines.pop()
  const existing = serverIn(before.value, name)
  const table = findTable(lines, name)
  if (existing !== undefined && table === undefined)
    return manual(
      name,
      server,
      `mcp_servers.${name} is written as an inline table or dotted keys, which this edit does not rewrite`,
    )
  if (server === undefined) {
    if (table === undefined) return { _tag: "Ok", text }
    let start = table.start
    // Take the blank line that separated the table from what came before.
    if (start > 0 && lines[start - 1]!.trim() === "" && (table.end >= lines.length || lines[table.end]!.trim() === ""))
      start--
    lines.splice(start, table.end - start)
  } else if (table === undefined) {
    while (lines.length > 0 && lines[lines.length - 1]!.trim() === "") lines.pop()
    if (lines.length > 0) lines.push("")
    lines.push(...tableLines(name, server))
  } else {
    replaceKey(lines, table, "args", `args = ${tomlArray(server.args)}`)
    replaceKey(lines, table, "command", `command = ${tomlString(server.command)}`)
  }
  const edited = lines.length === 0 ? "" : lines.join(eol) + (endsWithNewline || server !== undefined ? eol : "")
  const after = parseToml(edited)
  if (after._tag === "Invalid") return manual(name, server, `editing the file would break it (${after.message})`)
  if (!isDeepStrictEqual(withoutServer(after.value, name), withoutServer(before.value, name)))
    return manual(name, server, "the edit would change other settings of the file")
  const written = serverIn(after.value, name) as TomlTable | undefined
  const intended =
    server === undefined
      ? undefined
      : { ...(existing as TomlTable | undefined), command: server.command, args: [...server.args] }
  if (!isDeepStrictEqual(written, intended)) return manual(name, server, "the edit did not read back as intended")
  return { _tag: "Ok", text: edited }
}
