/**
 * The built command's code cache (src/cli/CodeCache.ts): a file runs the same with a cache, without
 * one, with a cache V8 refuses, and with a cache made from other bytes of the same length (which V8
 * alone would take, and run the old code: it checks only the source's length), and a cache made
 * after a run is used, also when the run changed a V8 flag (V8 stamps a cache with its flags). Each
 * run is a process of its own: within one, V8 reuses what it compiled for the same source and
 * never looks at a cache.
 */
import { execFileSync } from "node:child_process"
import { readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { afterAll, assert, describe, it } from "vitest"
import { asModuleFunction } from "../../scripts/moduleFunction.mjs"
import { repoRoot } from "../support/mcpClient.ts"
import { removeTempDirs, tempDir } from "./support.ts"

afterAll(removeTempDirs)

/**
 * A module function (as the build makes the bundle) that exports `{ answer }` from a function, so
 * the cache holds more than its top level.
 */
const program = (answer: string) =>
  asModuleFunction(
    `"use strict"\nconst answerOf = (text) => text.toUpperCase()\nmodule.exports = { answer: answerOf(${JSON.stringify(answer)}), dir: __dirname }\n`,
  )

const setUp = (answer: string) => {
  const dir = tempDir("mnemos-code-cache-")
  const file = join(dir, "program.cjs")
  writeFileSync(file, program(answer))
  return { dir, file, cache: join(dir, "program.cjs.cache") }
}

const codeCacheModule = pathToFileURL(join(repoRoot, "src", "cli", "CodeCache.ts")).href

const youngGenerationModule = pathToFileURL(join(repoRoot, "src", "runtime", "YoungGeneration.ts")).href
const idleHeapModule = pathToFileURL(join(repoRoot, "src", "runtime", "IdleHeap.ts")).href
const heapGrowthModule = pathToFileURL(join(repoRoot, "src", "runtime", "HeapGrowth.ts")).href

interface RunOptions {
  /** Write a cache here after the run. */
  readonly writeTo?: string
  /** Hold the young generation during the run, as a small daemon does (a V8 flag set at run time). */
  readonly holdYoungGeneration?: boolean
  /** Collect garbage as a quiet daemon does (V8's `gc`, had by setting a flag for a moment). */
  readonly collectGarbage?: boolean
  /** Bound the heaps' growth as `serve` does (a V8 flag set at run time). */
  readonly boundHeapGrowth?: boolean
}

/**
 * `runWithCodeCache(file, caches)` in a new process; `offered` is the index in `caches` of the
 * cache handed to V8, or -1.
 */
const runWithCodeCache = (file: string, caches: ReadonlyArray<string>, options: RunOptions = {}) => {
  const script = `
    const { runWithCodeCache } = await import(${JSON.stringify(codeCacheModule)})
    const { holdYoungGeneration } = await import(${JSON.stringify(youngGenerationModule)})
    const { collectGarbage } = await import(${JSON.stringify(idleHeapModule)})
    const { boundHeapGrowth } = await import(${JSON.stringify(heapGrowthModule)})
    const run = runWithCodeCache(${JSON.stringify(file)}, ${JSON.stringify(caches)})
    ${options.holdYoungGeneration === true ? "holdYoungGeneration(true)" : ""}
    ${options.collectGarbage === true ? "collectGarbage()" : ""}
    ${options.boundHeapGrowth === true ? "boundHeapGrowth()" : ""}
    ${options.writeTo === undefined ? "" : `run.writeCache(${JSON.stringify(options.writeTo)})`}
    const offered = ${JSON.stringify(caches)}.indexOf(run.offered)
    console.log(JSON.stringify({ offered, rejected: run.rejected, exports: run.exports }))`
  const output = execFileSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
    cwd: repoRoot,
    encoding: "utf8",
  })
  return JSON.parse(output) as { offered: number; rejected: boolean; exports: unknown }
}

describe("running the bundle with a code cache", () => {
  it("runs without a cache, and uses the cache a run wrote", () => {
    const { dir, file, cache } = setUp("first")
    const cold = runWithCodeCache(file, [cache], { writeTo: cache })
    assert.deepStrictEqual(cold.exports, { answer: "FIRST", dir })
    assert.strictEqual(cold.offered, -1)
    const warm = runWithCodeCache(file, [cache])
    assert.deepStrictEqual(warm.exports, { answer: "FIRST", dir })
    assert.strictEqual(warm.offered, 0)
    assert.isFalse(warm.rejected)
  })

  it.each([
    ["the small daemon's young generation held", { holdYoungGeneration: true }],
    ["a quiet daemon's garbage collected", { collectGarbage: true }],
    ["the daemon's heap growth bounded", { boundHeapGrowth: true }],
  ] as const)("V8 takes a cache written after a run that changed V8 flags: %s", (_, changes) => {
    const { file, cache } = setUp("first")
    runWithCodeCache(file, [cache], { writeTo: cache, ...changes })
    const run = runWithCodeCache(file, [cache])
    assert.strictEqual(run.offered, 0)
    assert.isFalse(run.rejected)
  })

  it("offers the first cache made for the file and runtime, skipping others", () => {
    const { dir, file, cache } = setUp("first")
    const stale = join(dir, "stale.cache")
    runWithCodeCache(file, [cache], { writeTo: stale })
    writeFileSync(file, program("other"))
    runWithCodeCache(file, [cache], { writeTo: cache })
    const run = runWithCodeCache(file, [join(dir, "missing.cache"), stale, cache])
    assert.strictEqual(run.offered, 2)
    assert.isFalse(run.rejected)
    assert.deepStrictEqual(run.exports, { answer: "OTHER", dir })
  })

  it("does not use a cache made from other bytes of the same length", () => {
    const { file, cache } = setUp("first")
    runWithCodeCache(file, [cache], { writeTo: cache })
    writeFileSync(file, program("other"))
    const run = runWithCodeCache(file, [cache])
    assert.deepStrictEqual(run.exports, { answer: "OTHER", dir: join(file, "..") })
    assert.strictEqual(run.offered, -1)
  })

  it("compiles the source when V8 refuses the cache", () => {
    const { file, cache } = setUp("first")
    runWithCodeCache(file, [cache], { writeTo: cache })
    const bytes = readFileSync(cache)
    // The digest is kept, the cached data after it is not V8's any more.
    writeFileSync(cache, Buffer.concat([bytes.subarray(0, 32), Buffer.alloc(bytes.length - 32, 7)]))
    const run = runWithCodeCache(file, [cache])
    assert.deepStrictEqual(run.exports, { answer: "FIRST", dir: join(file, "..") })
    assert.strictEqual(run.offered, 0)
    assert.isTrue(run.rejected)
  })

  it("a module function runs as the module when Node's own loader loads it (a run with source maps)", () => {
    const { dir, file } = setUp("first")
    const output = execFileSync(
      process.execPath,
      ["-e", `console.log(JSON.stringify(require(${JSON.stringify(file)})))`],
      {
        encoding: "utf8",
      },
    )
    assert.deepStrictEqual(JSON.parse(output), { answer: "FIRST", dir })
  })
})
