/**
 * The built command's code cache (src/cli/CodeCache.ts): a file runs the same with a cache, without
 * one, with a cache V8 refuses, and with a cache made from other bytes of the same length (which V8
 * alone would take, and run the old code: it checks only the source's length), and a cache made
 * after a run is used. Each run is a process of its own: within one, V8 reuses what it compiled
 * for the same source and never looks at a cache.
 */
import { execFileSync } from "node:child_process"
import { readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { afterAll, assert, describe, it } from "vitest"
import { repoRoot } from "../support/mcpClient.ts"
import { removeTempDirs, tempDir } from "./support.ts"

afterAll(removeTempDirs)

/** A CommonJS file that exports `{ answer }` from a function, so the cache holds more than its top level. */
const program = (answer: string) =>
  `"use strict"\nconst answerOf = (text) => text.toUpperCase()\nmodule.exports = { answer: answerOf(${JSON.stringify(answer)}), dir: __dirname }\n`

const setUp = (answer: string) => {
  const dir = tempDir("mnemos-code-cache-")
  const file = join(dir, "program.cjs")
  writeFileSync(file, program(answer))
  return { dir, file, cache: join(dir, "program.cjs.cache") }
}

const codeCacheModule = pathToFileURL(join(repoRoot, "src", "cli", "CodeCache.ts")).href

/** `runWithCodeCache(file, cache)` in a new process, writing a cache to `writeTo` after the run. */
const runWithCodeCache = (file: string, cache: string, writeTo?: string) => {
  const script = `
    const { runWithCodeCache } = await import(${JSON.stringify(codeCacheModule)})
    const run = runWithCodeCache(${JSON.stringify(file)}, ${JSON.stringify(cache)})
    ${writeTo === undefined ? "" : `run.writeCache(${JSON.stringify(writeTo)})`}
    console.log(JSON.stringify({ offered: run.offered, rejected: run.rejected, exports: run.exports }))`
  const output = execFileSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
    cwd: repoRoot,
    encoding: "utf8",
  })
  return JSON.parse(output) as { offered: boolean; rejected: boolean; exports: unknown }
}

describe("running the bundle with a code cache", () => {
  it("runs without a cache, and uses the cache a run wrote", () => {
    const { dir, file, cache } = setUp("first")
    const cold = runWithCodeCache(file, cache, cache)
    assert.deepStrictEqual(cold.exports, { answer: "FIRST", dir })
    assert.isFalse(cold.offered)
    const warm = runWithCodeCache(file, cache)
    assert.deepStrictEqual(warm.exports, { answer: "FIRST", dir })
    assert.isTrue(warm.offered)
    assert.isFalse(warm.rejected)
  })

  it("does not use a cache made from other bytes of the same length", () => {
    const { file, cache } = setUp("first")
    runWithCodeCache(file, cache, cache)
    writeFileSync(file, program("other"))
    const run = runWithCodeCache(file, cache)
    assert.deepStrictEqual(run.exports, { answer: "OTHER", dir: join(file, "..") })
    assert.isFalse(run.offered)
  })

  it("compiles the source when V8 refuses the cache", () => {
    const { file, cache } = setUp("first")
    runWithCodeCache(file, cache, cache)
    const bytes = readFileSync(cache)
    // The digest is kept, the cached data after it is not V8's any more.
    writeFileSync(cache, Buffer.concat([bytes.subarray(0, 32), Buffer.alloc(bytes.length - 32, 7)]))
    const run = runWithCodeCache(file, cache)
    assert.deepStrictEqual(run.exports, { answer: "FIRST", dir: join(file, "..") })
    assert.isTrue(run.offered)
    assert.isTrue(run.rejected)
  })
})
