/**
 * File skeletons: the outline of a source file — its functions, classes, methods, types and
 * top-level constants, with line ranges, signatures and what is exported — read with
 * tree-sitter (`web-tree-sitter` and the grammars' own `.wasm` builds from npm).
 *
 * The tree-sitter runtime and each grammar load once per process, on first use. A parse never
 * fails: syntax errors leave `ERROR` nodes, the outline shows what parsed, and `parseErrors`
 * says so. Every input is bounded (`skeletonFileBytesMax`), as is every output (symbols,
 * nesting, signature length); a cut outline says `truncated`. Trees live in wasm memory and are
 * freed after each parse.
 */
import { readFile, stat } from "node:fs/promises"
import { createRequire } from "node:module"
import { Effect, Schema } from "effect"
import type { Language, Node, Parser } from "web-tree-sitter"
import { importPackage } from "../cli/PackageImport.ts"
import {
  type Declaration,
  languageOfPath,
  languageRules,
  type SkeletonLanguage,
  type SymbolKind,
} from "./SkeletonLanguages.ts"

/** Largest file outlined. */
export const skeletonFileBytesMax = 2 * 1024 * 1024
/** Most symbols in one outline. */
export const skeletonSymbolsMax = 2_000
/** Deepest nesting outlined (a class in a namespace in a module ...). */
export const skeletonDepthMax = 6
/** Longest signature, in UTF-16 code units. */
export const signatureCharsMax = 200

/** One declaration in the outline. Lines are 1-based. */
export interface SkeletonSymbol {
  readonly kind: SymbolKind
  readonly name: string
  readonly line: number
  readonly endLine: number
  /** The declaration up to its body, whitespace collapsed (`function f(a: T): U`). */
  readonly signature: string
  /** Set for top-level declarations, and wherever the language marks visibility (Rust `pub`, Go case). */
  readonly exported?: boolean
  readonly children?: ReadonlyArray<SkeletonSymbol>
}

/** A file's outline. */
export interface FileSkeleton {
  readonly path: string
  readonly language: SkeletonLanguage
  readonly lineCount: number
  readonly symbols: ReadonlyArray<SkeletonSymbol>
  /** How many symbols the outline holds, nested ones included. */
  readonly symbolCount: number
  readonly truncated: boolean
  /** The parser met syntax errors; the outline shows what it could read. */
  readonly parseErrors: boolean
}

/** Why no skeleton could be made. */
export class SkeletonError extends Schema.TaggedError<SkeletonError>()("SkeletonError", {
  reason: Schema.Literals([
    "NotFound",
    "NotAFile",
    "TooLarge",
    "Binary",
    "UnknownLanguage",
    "ReadFailed",
    "GrammarFailed",
  ]),
  message: Schema.String,
}) {}

const require = createRequire(import.meta.url)

let runtime: Promise<typeof import("web-tree-sitter")> | undefined
const languages = new Map<SkeletonLanguage, Promise<Language>>()

const loadRuntime = () =>
  (runtime ??= importPackage<typeof import("web-tree-sitter")>("web-tree-sitter").then(async (module) => {
    await module.Parser.init()
    return module
  }))

const loadLanguage = (language: SkeletonLanguage): Promise<Language> => {
  let loaded = languages.get(language)
  if (loaded === undefined) {
    loaded = loadRuntime().then((module) => module.Language.load(require.resolve(languageRules[language].wasm)))
    loaded.catch(() => languages.delete(language))
    languages.set(language, loaded)
  }
  return loaded
}

const grammar = (language: SkeletonLanguage) =>
  Effect.tryPromise({
    try: async () => {
      const [module, loaded] = await Promise.all([loadRuntime(), loadLanguage(language)])
      const parser: Parser = new module.Parser()
      parser.setLanguage(loaded)
      return parser
    },
    catch: (error) =>
      new SkeletonError({
        reason: "GrammarFailed",
        message: `cannot load the ${language} grammar: ${error instanceof Error ? error.message : String(error)}`,
      }),
  })

/** The declaration up to its body (or its first line); from `from` when an `export` precedes it. */
const signatureOf = (source: string, declaration: Declaration, from: number): string => {
  const { node, bodyStart } = declaration
  const end =
    bodyStart !== undefined && bodyStart.startIndex > node.startIndex
      ? bodyStart.startIndex
      : source.indexOf("\n", node.startIndex)
  const text =
    `${declaration.signaturePrefix ?? ""}${source.slice(from, end < 0 ? node.endIndex : Math.min(end, node.endIndex))}`
      .replace(/\s+/g, " ")
      .trim()
      .replace(/\s*[{:=]$/, "")
  return text.length <= signatureCharsMax ? text : `${text.slice(0, signatureCharsMax - 1)}…`
}

const endLineOf = (node: Node) =>
  node.endPosition.column === 0 && node.endPosition.row > node.startPosition.row
    ? node.endPosition.row
    : node.endPosition.row + 1

type Outline = Pick<FileSkeleton, "symbols" | "symbolCount" | "truncated" | "parseErrors">

const outlineOf = (root: Node, source: string, language: SkeletonLanguage): Outline => {
  const rules = languageRules[language]
  const exportedName = rules.exportedNames?.(root)
  let count = 0
  let truncated = false

  /** `exporting` is the `export` statement around `node`'s declarations, if any. */
  const collect = (node: Node, container: Declaration | undefined, depth: number, exporting: Node | undefined) => {
    const out: Array<SkeletonSymbol> = []
    for (const child of node.namedChildren) {
      if (child === null) continue
      const declarations = rules.declarations(child, container)
      if (declarations === undefined) {
        if (rules.transparent.has(child.type))
          out.push(...collect(child, container, depth, rules.exporting?.has(child.type) ? child : exporting))
        continue
      }
      for (const declaration of declarations) {
        if (count >= skeletonSymbolsMax) {
          truncated = true
          return out
        }
        count++
        const exported =
          declaration.exported === null
            ? undefined
            : (declaration.exported ??
              (depth === 0 ? exporting !== undefined || (exportedName?.(declaration.name) ?? false) : undefined))
        let children: Array<SkeletonSymbol> = []
        if (declaration.members !== undefined) {
          if (depth + 1 >= skeletonDepthMax) truncated = true
          else children = collect(declaration.members, declaration, depth + 1, undefined)
        }
        out.push({
          kind: declaration.kind,
          name: declaration.name,
          line: declaration.node.startPosition.row + 1,
          endLine: endLineOf(declaration.node),
          signature: signatureOf(source, declaration, (exporting ?? declaration.node).startIndex),
          ...(exported !== undefined ? { exported } : {}),
          ...(children.length > 0 ? { children } : {}),
        })
      }
    }
    return out
  }

  const symbols = collect(root, undefined, 0, undefined)
  return { symbols, symbolCount: count, truncated, parseErrors: root.hasError }
}

/** The outline of `source`, parsed as `language`. */
export const skeletonOfSource = (source: string, language: SkeletonLanguage): Effect.Effect<Outline, SkeletonError> =>
  Effect.acquireUseRelease(
    grammar(language),
    (parser) =>
      Effect.suspend(() => {
        const tree = parser.parse(source)
        if (tree === null)
          return Effect.fail(
            new SkeletonError({ reason: "GrammarFailed", message: `the ${language} parser gave no tree` }),
          )
        return Effect.sync(() => outlineOf(tree.rootNode, source, language)).pipe(
          Effect.ensuring(Effect.sync(() => tree.delete())),
        )
      }),
    (parser) => Effect.sync(() => parser.delete()),
  )

const readSource = (path: string) =>
  Effect.tryPromise({
    try: async () => {
      const info = await stat(path)
      if (!info.isFile()) return { _tag: "NotAFile" as const }
      if (info.size > skeletonFileBytesMax) return { _tag: "TooLarge" as const, size: info.size }
      return { _tag: "Read" as const, bytes: await readFile(path) }
    },
    catch: (error) => {
      const code = (error as NodeJS.ErrnoException).code
      return code === "ENOENT" || code === "ENOTDIR"
        ? new SkeletonError({ reason: "NotFound", message: `${path} does not exist` })
        : new SkeletonError({ reason: "ReadFailed", message: `cannot read ${path}: ${(error as Error).message}` })
    },
  })

/** The outline of the file at `path` (absolute); the language comes from its extension unless given. */
export const readFileSkeleton = (
  path: string,
  language?: SkeletonLanguage,
): Effect.Effect<FileSkeleton, SkeletonError> =>
  Effect.gen(function* () {
    const chosen = language ?? languageOfPath(path)
    if (chosen === undefined)
      return yield* new SkeletonError({
        reason: "UnknownLanguage",
        message: `cannot tell the language of ${path} from its extension; pass language (one of ${Object.keys(languageRules).join(", ")})`,
      })
    const read = yield* readSource(path)
    if (read._tag === "NotAFile")
      return yield* new SkeletonError({ reason: "NotAFile", message: `${path} is not a file` })
    if (read._tag === "TooLarge")
      return yield* new SkeletonError({
        reason: "TooLarge",
        message: `${path} has ${read.size} bytes; skeletons are made of files up to ${skeletonFileBytesMax} bytes`,
      })
    if (read.bytes.subarray(0, 8 * 1024).includes(0))
      return yield* new SkeletonError({ reason: "Binary", message: `${path} is a binary file` })
    const source = read.bytes.toString("utf8")
    const outline = yield* skeletonOfSource(source, chosen)
    const lineCount = source === "" ? 0 : source.split("\n").length - (source.endsWith("\n") ? 1 : 0)
    return { path, language: chosen, lineCount, ...outline }
  })

const formatSymbols = (symbols: ReadonlyArray<SkeletonSymbol>, depth: number, width: number, lines: Array<string>) => {
  for (const symbol of symbols) {
    const range = symbol.endLine > symbol.line ? `${symbol.line}-${symbol.endLine}` : `${symbol.line}`
    lines.push(`${range.padStart(width)}  ${"  ".repeat(depth)}${symbol.signature}`)
    if (symbol.children !== undefined) formatSymbols(symbol.children, depth + 1, width, lines)
  }
}

/** The outline as text: one line per symbol, `start-end  signature`, members indented. */
export const formatSkeleton = (skeleton: FileSkeleton): string => {
  const lines = [
    `${skeleton.path} (${skeleton.language}, ${skeleton.lineCount} lines, ${skeleton.symbolCount} symbols${skeleton.truncated ? ", truncated" : ""}${skeleton.parseErrors ? ", has syntax errors" : ""})`,
  ]
  const width = `${skeleton.lineCount}-${skeleton.lineCount}`.length
  formatSymbols(skeleton.symbols, 0, width, lines)
  return lines.join("\n")
}
