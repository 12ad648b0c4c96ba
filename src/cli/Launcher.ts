/**
 * The built `mnemos` command (dist/cli.js): runs the bundled CLI, dist/bundle/cli.cjs (one
 * CommonJS file; scripts/bundle.mjs), with V8's code cache (CodeCache.ts), so that a process
 * starts without compiling the CLI's code again: compiling it was about a fifth of the CPU a
 * process spent before its first MCP answer (docs/benchmarks.md, footprint).
 *
 * The cache, dist/bundle/cli.cjs.cache, is written at build time by a daemon that answers a first
 * MCP session (scripts/codeCache.mjs), so it holds the functions a start runs and not only the
 * bundle's top level.
 */
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { runWithCodeCache } from "./CodeCache.ts"

/** Set (to a file) by the build: write the code cache there when this process exits. */
const codeCacheOutEnv = "MNEMOS_CODE_CACHE_OUT"

const bundle = join(dirname(fileURLToPath(import.meta.url)), "bundle", "cli.cjs")
const cacheOut = process.env[codeCacheOutEnv]
// Only this process writes it: not the daemon a shim starts, nor any other child.
delete process.env[codeCacheOutEnv]
const run = runWithCodeCache(bundle, `${bundle}.cache`)
// After the run, so that the cache holds every function it compiled.
if (cacheOut !== undefined) process.once("exit", () => run.writeCache(cacheOut))
