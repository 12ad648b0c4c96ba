/**
 * File skeletons of real sample files (test/fixtures/skeleton) in TypeScript, JavaScript,
 * Python, Rust and Go: every declaration with its kind, line range and export status, and the
 * signatures; plus TSX, export clauses and `__all__`, syntax errors, limits, and the tool's
 * path handling and errors.
 */
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import {
  type FileSkeleton,
  readFileSkeleton,
  type SkeletonSymbol,
  skeletonFileBytesMax,
  skeletonSymbolsMax,
} from "../../src/editor/FileSkeleton.ts"
import { caller, callTool, removeTempDirs, tempDir, toolFailure } from "./harness.ts"

const fixtures = join(import.meta.dirname, "..", "fixtures", "skeleton")

/** One line per symbol: "kind name start-end [exported|private]", members indented. */
const outline = (symbols: ReadonlyArray<SkeletonSymbol>, depth = 0): Array<string> =>
  symbols.flatMap((symbol) => [
    `${"  ".repeat(depth)}${symbol.kind} ${symbol.name} ${symbol.line}-${symbol.endLine}${symbol.exported === undefined ? "" : symbol.exported ? " exported" : " private"}`,
    ...outline(symbol.children ?? [], depth + 1),
  ])

const signatures = (skeleton: FileSkeleton) => {
  const all: Array<string> = []
  const walk = (symbols: ReadonlyArray<SkeletonSymbol>) => {
    for (const symbol of symbols) {
      all.push(symbol.signature)
      walk(symbol.children ?? [])
    }
  }
  walk(skeleton.symbols)
  return all
}

const skeletonOf = (name: string) => readFileSkeleton(join(fixtures, name))

afterAll(removeTempDirs)

describe("file skeletons of sample files", () => {
  it.live("TypeScript: exports, interfaces, types, enums, classes with members, namespaces", () =>
    Effect.gen(function* () {
      const skeleton = yield* skeletonOf("sample.ts")
      assert.strictEqual(skeleton.language, "typescript")
      assert.strictEqual(skeleton.lineCount, 63)
      assert.strictEqual(skeleton.parseErrors, false)
      assert.deepStrictEqual(outline(skeleton.symbols), [
        "constant defaultLimit 6-6 exported",
        "constant privateCounter 8-8 private",
        "constant greeting 11-11 exported",
        "interface Shape 13-16 exported",
        "  property name 14-14",
        "  method area 15-15",
        "type ShapeName 18-18 exported",
        "enum Color 20-23 exported",
        "function readText 26-28 exported",
        "function double 30-30 exported",
        "class Base 32-34 exported",
        "  method describe 33-33",
        "class Circle 36-53 exported",
        "  property name 37-37",
        "  method constructor 38-40",
        "  method area 42-44",
        "  method describe 46-48",
        "  method unit 50-52",
        "namespace Internal 55-59 private",
        "  function helper 56-58",
        "function main 61-63 exported",
      ])
      const shown = signatures(skeleton)
      assert.include(shown, "export function readText(path: string): string")
      assert.include(shown, "export class Circle extends Base implements Shape")
      assert.include(shown, "constructor(private readonly radius: number)")
      assert.include(shown, "export default function main(): void")
      assert.include(shown, 'export const greeting = "héllo wörld ✓ 🎉"')
      assert.strictEqual(skeleton.symbolCount, 21)
    }),
  )

  it.live("JavaScript: functions, generators, classes with fields, getters and methods", () =>
    Effect.gen(function* () {
      const skeleton = yield* skeletonOf("sample.js")
      assert.strictEqual(skeleton.language, "javascript")
      assert.deepStrictEqual(outline(skeleton.symbols), [
        "constant version 4-4 exported",
        "function greet 6-8 exported",
        "class Queue 10-21 exported",
        "  property #items 11-11",
        "  method push 13-16",
        "  method size 18-20",
        "function internal 23-25 private",
        "function numbers 27-29 exported",
        "class Registry 31-35 exported",
        "  method register 32-34",
      ])
      assert.include(signatures(skeleton), "export async function* numbers()")
    }),
  )

  it.live("Python: functions, decorated classes, methods, class attributes, nested classes", () =>
    Effect.gen(function* () {
      const skeleton = yield* skeletonOf("sample.py")
      assert.strictEqual(skeleton.language, "python")
      assert.deepStrictEqual(outline(skeleton.symbols), [
        "constant MAX_ITEMS 4-4 exported",
        "variable _cache 5-5 private",
        "function load 8-11 exported",
        "function _private_helper 14-15 private",
        "class Point 19-28 exported",
        "  property x 20-20",
        "  property y 21-21",
        "  method norm 23-24",
        "  method origin 27-28",
        "class Repository 31-36 exported",
        "  class Error 32-33",
        "  method fetch 35-36",
      ])
      const shown = signatures(skeleton)
      assert.include(shown, "def load(path: str) -> str")
      assert.include(shown, "async def fetch(self, key)")
    }),
  )

  it.live("Rust: items with pub, traits, inherent and trait impls, modules, macros", () =>
    Effect.gen(function* () {
      const skeleton = yield* skeletonOf("sample.rs")
      assert.strictEqual(skeleton.language, "rust")
      assert.deepStrictEqual(outline(skeleton.symbols), [
        "constant MAX_ITEMS 4-4 exported",
        "constant GREETING 5-5 private",
        "struct Point 7-10 exported",
        "enum Direction 12-15 private",
        "trait Shape 17-22 exported",
        "  method area 18-18",
        "  method name 19-21",
        "impl Point 24-32",
        "  method new 25-27 exported",
        "  method norm 29-31 private",
        "impl fmt::Display for Point 34-38",
        "  method fmt 35-37",
        "type Meters 40-40 exported",
        "module geometry 42-46 exported",
        "  function distance 43-45 exported",
        "macro square 48-52 private",
        "function main 54-57 private",
      ])
      const shown = signatures(skeleton)
      assert.include(shown, "pub fn new(x: f64, y: f64) -> Self")
      assert.include(shown, "fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result")
    }),
  )

  it.live("Go: constants, variables, struct/interface/named types, functions and methods", () =>
    Effect.gen(function* () {
      const skeleton = yield* skeletonOf("sample.go")
      assert.strictEqual(skeleton.language, "go")
      assert.deepStrictEqual(outline(skeleton.symbols), [
        "constant MaxItems 6-6 exported",
        "variable defaultName 8-8 private",
        "struct Point 10-12 exported",
        "interface Shape 14-16 exported",
        "type Meters 18-18 exported",
        "function NewPoint 20-22 exported",
        "method Norm 24-26 exported",
        "method String 28-30 exported",
        "function helper 32-34 private",
      ])
      const shown = signatures(skeleton)
      assert.include(shown, "func (p *Point) Norm() float64")
      assert.include(shown, "type Point struct")
      assert.include(shown, "const MaxItems = 100")
    }),
  )
})

describe("skeleton details", () => {
  it.live("TSX components; `export { a }` clauses mark exports", () =>
    Effect.gen(function* () {
      const dir = tempDir("mnemos-skeleton-")
      const file = join(dir, "view.tsx")
      writeFileSync(
        file,
        [
          "const Hidden = () => <div />",
          "function Button(props: { label: string }) {",
          "  return <button>{props.label}</button>",
          "}",
          "export { Button }",
        ].join("\n"),
      )
      const skeleton = yield* readFileSkeleton(file)
      assert.strictEqual(skeleton.language, "tsx")
      assert.deepStrictEqual(outline(skeleton.symbols), ["function Hidden 1-1 private", "function Button 2-4 exported"])
    }),
  )

  it.live("Python `__all__` decides what is exported", () =>
    Effect.gen(function* () {
      const file = join(tempDir("mnemos-skeleton-"), "mod.py")
      writeFileSync(file, '__all__ = ["public"]\n\ndef public():\n    pass\n\ndef helper():\n    pass\n')
      const skeleton = yield* readFileSkeleton(file)
      assert.deepStrictEqual(outline(skeleton.symbols), [
        "variable __all__ 1-1 private",
        "function public 3-4 exported",
        "function helper 6-7 private",
      ])
    }),
  )

  it.live("a file with syntax errors still has an outline, marked", () =>
    Effect.gen(function* () {
      const file = join(tempDir("mnemos-skeleton-"), "broken.ts")
      writeFileSync(file, "export function ok(): number {\n  return 1\n}\n\nexport function broken(: {\n")
      const skeleton = yield* readFileSkeleton(file)
      assert.strictEqual(skeleton.parseErrors, true)
      assert.strictEqual(outline(skeleton.symbols)[0], "function ok 1-3 exported")
    }),
  )

  it.live("outlines stop at the symbol limit and say so", () =>
    Effect.gen(function* () {
      const file = join(tempDir("mnemos-skeleton-"), "many.go")
      const count = skeletonSymbolsMax + 50
      writeFileSync(
        file,
        `package many\n${Array.from({ length: count }, (_, index) => `func F${index}() {}`).join("\n")}\n`,
      )
      const skeleton = yield* readFileSkeleton(file)
      assert.strictEqual(skeleton.truncated, true)
      assert.strictEqual(skeleton.symbolCount, skeletonSymbolsMax)
    }),
  )

  it.live("the language can be given for an unknown extension", () =>
    Effect.gen(function* () {
      const file = join(tempDir("mnemos-skeleton-"), "script")
      writeFileSync(file, "def run():\n    pass\n")
      const unknown = yield* readFileSkeleton(file).pipe(Effect.flip)
      assert.strictEqual(unknown.reason, "UnknownLanguage")
      const skeleton = yield* readFileSkeleton(file, "python")
      assert.deepStrictEqual(outline(skeleton.symbols), ["function run 1-2 exported"])
    }),
  )
})

describe("read_file_skeleton", () => {
  it.live("resolves a relative path against the workspace root and answers the outline as text", () =>
    Effect.gen(function* () {
      const result = yield* callTool("read_file_skeleton", { path: "sample.go" }, caller(fixtures))
      assert.strictEqual(result.structured.path, join(fixtures, "sample.go"))
      const text = (result.text ?? "").split("\n")
      assert.match(text[0] ?? "", /sample\.go \(go, 34 lines, 9 symbols\)$/)
      assert.include(text, "24-26  func (p *Point) Norm() float64")
    }),
  )

  it.live("clear errors: relative path without a root, missing file, unknown language, too large, binary", () =>
    Effect.gen(function* () {
      const relative = yield* toolFailure(callTool("read_file_skeleton", { path: "sample.go" }))
      assert.strictEqual(relative.code, "VALIDATION_ERROR")
      assert.include(relative.message, "pass an absolute path")
      const missing = yield* toolFailure(callTool("read_file_skeleton", { path: join(fixtures, "nope.ts") }))
      assert.strictEqual(missing.code, "NOT_FOUND")
      const dir = tempDir("mnemos-skeleton-")
      writeFileSync(join(dir, "notes.txt"), "hello")
      const unknown = yield* toolFailure(callTool("read_file_skeleton", { path: join(dir, "notes.txt") }))
      assert.strictEqual(unknown.code, "VALIDATION_ERROR")
      assert.include(unknown.message, "pass language")
      writeFileSync(join(dir, "huge.js"), Buffer.alloc(skeletonFileBytesMax + 1, 0x20))
      const huge = yield* toolFailure(callTool("read_file_skeleton", { path: join(dir, "huge.js") }))
      assert.strictEqual(huge.code, "VALIDATION_ERROR")
      assert.include(huge.message, `up to ${skeletonFileBytesMax} bytes`)
      writeFileSync(join(dir, "blob.rs"), Buffer.from([0x66, 0x6e, 0x00, 0x01]))
      const binary = yield* toolFailure(callTool("read_file_skeleton", { path: join(dir, "blob.rs") }))
      assert.include(binary.message, "binary")
      const badLanguage = yield* toolFailure(
        callTool("read_file_skeleton", { path: join(dir, "notes.txt"), language: "cobol" }),
      )
      assert.strictEqual(badLanguage.code, "SCHEMA")
    }),
  )
})
