/**
 * Edits one value of a JSON or JSONC config file (VS Code's files have comments and trailing
 * commas) without touching anything else.
 *
 * jsonc-parser finds where things are (node offsets, the tokens between them); the text edits are
 * made here, because its own `modify` re-formats the neighbours of an edit and drops their line
 * comments. Each edit is the smallest splice: a replaced value takes the place of the old one
 * (inline if the old one was inline); a new property goes on its own line after the last one, in
 * the file's indentation, keeping the file's trailing-comma style; a removed property takes its
 * lines (or its comma) with it. Every edit is then checked by parsing the result: the path must
 * read back as intended and every other value must be unchanged, or the edit is refused.
 */
import { isDeepStrictEqual } from "node:util"
import {
  createScanner,
  findNodeAtLocation,
  getNodeValue,
  type JSONPath,
  type Node,
  type ParseError,
  parseTree,
  printParseErrorCode,
} from "jsonc-parser"
import { plainValue } from "./PlainValue.ts"

/** The parsed document, or why it cannot be edited. */
export type JsoncDocument =
  | { readonly _tag: "Ok"; readonly root: Node | undefined; readonly text: string }
  | { readonly _tag: "Invalid"; readonly message: string }

/** jsonc-parser's `SyntaxKind.CommaToken` (a const enum, which isolated modules cannot import). */
const commaToken = 5

const lineAndColumn = (text: string, offset: number) => {
  const before = text.slice(0, offset).split("\n")
  return `line ${before.length}, column ${before[before.length - 1]!.length + 1}`
}

/** Parses `text` leniently (comments, trailing commas); an empty file is an empty object. */
export const parseJsonc = (text: string): JsoncDocument => {
  if (text.trim() === "") return { _tag: "Ok", root: undefined, text }
  const errors: Array<ParseError> = []
  const root = parseTree(text, errors, { allowTrailingComma: true, disallowComments: false })
  const first = errors[0]
  if (first !== undefined)
    return { _tag: "Invalid", message: `${printParseErrorCode(first.error)} at ${lineAndColumn(text, first.offset)}` }
  if (root === undefined || root.type !== "object")
    return { _tag: "Invalid", message: "the top level is not a JSON object" }
  return { _tag: "Ok", root, text }
}

/** The value at `path`, or undefined. */
export const valueAt = (document: JsoncDocument & { _tag: "Ok" }, path: JSONPath): unknown => {
  if (document.root === undefined) return undefined
  const node = findNodeAtLocation(document.root, path)
  return node === undefined ? undefined : plainValue(getNodeValue(node))
}

/** The file's line ending and indentation unit (two spaces and "\n" for a new file). */
export const detectFormatting = (text: string): { readonly eol: string; readonly unit: string } => {
  const eol = text.includes("\r\n") ? "\r\n" : "\n"
  const indented = /\n([ \t]+)\S/.exec(text)
  const found = indented?.[1] ?? "  "
  return { eol, unit: found.startsWith("\t") ? "\t" : " ".repeat(Math.min(found.length, 8)) }
}

const lineStartOf = (text: string, offset: number) => text.lastIndexOf("\n", offset - 1) + 1
const lineEndOf = (text: string, offset: number) => {
  const end = text.indexOf("\n", offset)
  return end < 0 ? text.length : end
}
/** The whitespace before `offset` on its line, if only whitespace precedes it there. */
const indentBefore = (text: string, offset: number): string | undefined => {
  const prefix = text.slice(lineStartOf(text, offset), offset)
  return /^[ \t]*$/.test(prefix) ? prefix : undefined
}

const renderInline = (value: unknown): string => {
  if (Array.isArray(value)) return `[${value.map(renderInline).join(", ")}]`
  if (typeof value === "object" && value !== null)
    return `{ ${Object.entries(value)
      .map(([key, item]) => `${JSON.stringify(key)}: ${renderInline(item)}`)
      .join(", ")} }`
  return JSON.stringify(value)
}
const renderBlock = (value: unknown, indent: string, unit: string, eol: string) =>
  JSON.stringify(value, null, unit).replace(/\n/g, `${eol}${indent}`)

/** The first token at or after `offset`, skipping whitespace and comments. */
const nextToken = (text: string, offset: number) => {
  const scanner = createScanner(text, true)
  scanner.setPosition(offset)
  const kind = scanner.scan()
  return { kind, offset: scanner.getTokenOffset(), end: scanner.getTokenOffset() + scanner.getTokenLength() }
}

const splice = (text: string, start: number, end: number, insert: string) =>
  text.slice(0, start) + insert + text.slice(end)

const replaceValue = (text: string, node: Node, value: unknown): string => {
  const old = text.slice(node.offset, node.offset + node.length)
  const { eol, unit } = detectFormatting(text)
  const rendered = old.includes("\n")
    ? renderBlock(value, text.slice(lineStartOf(text, node.offset)).match(/^[ \t]*/)![0], unit, eol)
    : renderInline(value)
  return splice(text, node.offset, node.offset + node.length, rendered)
}

const insertProperty = (text: string, object: Node, key: string, value: unknown): string => {
  const { eol, unit } = detectFormatting(text)
  const properties = object.children ?? []
  const last = properties[properties.length - 1]
  const name = JSON.stringify(key)
  if (last === undefined) {
    // An empty object: open it up onto lines of its own.
    const outer = text.slice(lineStartOf(text, object.offset)).match(/^[ \t]*/)![0]
    const inner = outer + unit
    return splice(
      text,
      object.offset,
      object.offset + object.length,
      `{${eol}${inner}${name}: ${renderBlock(value, inner, unit, eol)}${eol}${outer}}`,
    )
  }
  const afterLast = nextToken(text, last.offset + last.length)
  const trailingComma = afterLast.kind === commaToken
  const multiline = text.slice(object.offset, object.offset + object.length).includes("\n")
  const indent = multiline ? text.slice(lineStartOf(text, last.offset)).match(/^[ \t]*/)![0] : undefined
  if (indent === undefined) {
    // Properties written inline: add ours inline after the last one.
    const at = trailingComma ? afterLast.end : last.offset + last.length
    return splice(
      text,
      at,
      at,
      `${trailingComma ? " " : ", "}${name}: ${renderInline(value)}${trailingComma ? "," : ""}`,
    )
  }
  // Our property goes on a new line after the line the last one ends on (after its comma and comment).
  const lineEnd = lineEndOf(text, trailingComma ? afterLast.end : last.offset + last.length)
  const lineEndClean = text[lineEnd - 1] === "\r" ? lineEnd - 1 : lineEnd
  const added = `${eol}${indent}${name}: ${renderBlock(value, indent, unit, eol)}${trailingComma ? "," : ""}`
  const withProperty = splice(text, lineEndClean, lineEndClean, added)
  return trailingComma ? withProperty : splice(withProperty, last.offset + last.length, last.offset + last.length, ",")
}

const removeProperty = (text: string, object: Node, property: Node): string => {
  const properties = object.children ?? []
  const index = properties.indexOf(property)
  const end = property.offset + property.length
  const after = nextToken(text, end)
  const hasCommaAfter = after.kind === commaToken
  let removeEnd = hasCommaAfter ? after.end : end
  let removeStart = property.offset
  const indent = indentBefore(text, property.offset)
  const restOfLine = text.slice(removeEnd, lineEndOf(text, removeEnd))
  if (indent !== undefined && /^[ \t]*(?:\/\/.*)?\r?$/.test(restOfLine)) {
    // The property owns its lines: take them whole.
    removeStart = lineStartOf(text, property.offset)
    const lineEnd = lineEndOf(text, removeEnd)
    removeEnd = lineEnd < text.length ? lineEnd + 1 : lineEnd
  }
  const ownsLines = removeStart !== property.offset
  if (!ownsLines && !hasCommaAfter && index > 0) {
    // The last of inline properties: take the separator before it too (", ").
    const previous = properties[index - 1]!
    return splice(text, previous.offset + previous.length, end, "")
  }
  if (!ownsLines && hasCommaAfter) removeEnd += /^[ \t]*/.exec(text.slice(removeEnd))![0].length
  let edited = splice(text, removeStart, removeEnd, "")
  if (!hasCommaAfter && index > 0) {
    // It was the last property: the comma after the one before it must go too (strict JSON).
    const previous = properties[index - 1]!
    const comma = nextToken(edited, previous.offset + previous.length)
    if (comma.kind === commaToken && comma.offset < removeStart) edited = splice(edited, comma.offset, comma.end, "")
  }
  return edited
}

/** Why an edit was refused. */
export class JsoncEditRefused extends Error {}

/** `value` without `path`, and without the objects on the path that this leaves empty. */
const withoutPath = (value: unknown, path: JSONPath): unknown => {
  if (path.length === 0 || typeof value !== "object" || value === null || Array.isArray(value)) return value
  const [head, ...rest] = path
  const copy: Record<string, unknown> = { ...(value as Record<string, unknown>) }
  const key = String(head)
  if (rest.length > 0 && copy[key] !== undefined) copy[key] = withoutPath(copy[key], rest)
  const child = copy[key]
  if (
    rest.length === 0 ||
    (typeof child === "object" && child !== null && !Array.isArray(child) && Object.keys(child).length === 0)
  )
    delete copy[key]
  return copy
}

/**
 * `text` with `value` at `path` (undefined removes it); missing parent objects are created.
 * Throws `JsoncEditRefused` if the result would not read back as intended.
 */
export const setAt = (text: string, path: JSONPath, value: unknown): string => {
  const document = parseJsonc(text)
  if (document._tag === "Invalid") throw new JsoncEditRefused(document.message)
  const { eol, unit } = detectFormatting(text)
  let edited: string
  if (document.root === undefined) {
    if (value === undefined) return text
    const nested = path.slice(1).reduceRight<unknown>((inner, key) => ({ [key as string]: inner }), value)
    edited = `{${eol}${unit}${JSON.stringify(path[0])}: ${renderBlock(nested, unit, unit, eol)}${eol}}${eol}`
  } else {
    const existing = findNodeAtLocation(document.root, path)
    if (existing !== undefined) {
      const property = existing.parent!
      edited =
        value === undefined ? removeProperty(text, property.parent!, property) : replaceValue(text, existing, value)
    } else {
      if (value === undefined) return text
      let depth = path.length - 1
      let parent = depth === 0 ? document.root : findNodeAtLocation(document.root, path.slice(0, depth))
      while (parent === undefined && depth > 0) {
        depth--
        parent = depth === 0 ? document.root : findNodeAtLocation(document.root, path.slice(0, depth))
      }
      if (parent === undefined || parent.type !== "object")
        throw new JsoncEditRefused(`"${path.slice(0, depth).join(".")}" is not an object`)
      const nested = path.slice(depth + 1).reduceRight<unknown>((inner, key) => ({ [key as string]: inner }), value)
      edited = insertProperty(text, parent, String(path[depth]), nested)
    }
  }
  const check = parseJsonc(edited)
  if (check._tag === "Invalid") throw new JsoncEditRefused(`the edit would break the file (${check.message})`)
  const before = document.root === undefined ? {} : plainValue(getNodeValue(document.root))
  const after = check.root === undefined ? {} : plainValue(getNodeValue(check.root))
  if (
    !isDeepStrictEqual(withoutPath(after, path), withoutPath(before, path)) ||
    !isDeepStrictEqual(valueAt(check, path), value)
  )
    throw new JsoncEditRefused("the edit did not read back as intended")
  return edited
}
