/**
 * The built `mnemos` command (dist/cli.js): runs the bundled CLI, dist/bundle/cli.cjs (one
 * CommonJS file; scripts/bundle.mjs), with V8's code cache of it (CodeCache.ts), so that its code
 * is not compiled again at every start: compiling it was about a fifth of the CPU a process spent
 * before its first MCP answer (docs/benchmarks.md, footprint).
 *
 * Which cache, on which Node:
 * - The build's, dist/bundle/cli.cjs.cache, written by a daemon that answered a first MCP session
 *   (scripts/codeCache.mjs), so that it holds the functions a start runs and not only the bundle's
 *   top level. It is made for the Node that ran the build.
 * - On any other Node (users run 20, 22 and 24), or when V8 refuses the build's (other V8 flags),
 *   one of the user's own (CodeCacheDir.ts), per runtime and per role: `mcp` for the shim, `serve`
 *   for everything else; after a refusal of the build's, offered before it. A `serve` or `mcp`
 *   process that V8 took no cache from writes it (and a `serve` whose cache was thin, `thinShare`,
 *   writes it again), trained by what it
 *   ran, before its first idle collection (CodeCacheWriter.ts) or as it exits if none came; the
 *   next start on that runtime uses it. Two installations of different builds
 *   on one runtime take turns at it (each start then compiles, as without a cache).
 *
 * Node's own compile cache (`module.enableCompileCache`, Node 22 and later) is not used: it keeps
 * only the code compiling the bundle produced, its top level, and measured no faster to a first
 * answer than no cache (docs/benchmarks.md, footprint).
 *
 * The bundle's `import()` of the packages left outside it is made here (PackageImport.ts): code
 * restored from V8's code cache cannot run `import()`.
 */
import { existsSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { withAllocatorSettings } from "../runtime/AllocatorEnv.ts"
import { leaveCodeCacheWriter, writePendingCodeCache } from "../runtime/CodeCacheWriter.ts"
import { fileSize, runWithCodeCache } from "./CodeCache.ts"
import { codeCacheDir } from "./CodeCacheDir.ts"
import { packageImporterKey } from "./PackageImport.ts"

// A daemon runs with glibc's thresholds fixed: this re-executes it with them where it can.
if (process.argv[2] === "serve") withAllocatorSettings()

/** Set (to a file) by the build: write the code cache there when this process exits. */
const codeCacheOutEnv = "MNEMOS_CODE_CACHE_OUT"

const bundle = join(dirname(fileURLToPath(import.meta.url)), "bundle", "cli.cjs")
const cacheOut = process.env[codeCacheOutEnv]
// Only this process writes it: not the daemon a shim starts, nor any other child.
delete process.env[codeCacheOutEnv]
;(globalThis as { [packageImporterKey]?: (specifier: string) => Promise<unknown> })[packageImporterKey] = (specifier) =>
  import(specifier)

/**
 * A user's `serve` cache under this share of the build's size (which a whole first session
 * trained: 2.8–3.0 MB) was written before its process ran the usual calls: on Node 22 and 24 caches
 * written after a session measured 89–97 % of it, one written by a `serve` closed at once 83 %,
 * two written early 53 and 60 %, and starts from those took 30–130 ms longer (docs/benchmarks.md,
 * "A thin code cache written again"). V8 takes such a cache, so nothing else would replace it: a
 * `serve` started from one writes it again, if what it ran makes a larger one.
 */
const thinShare = 0.85

/** Runs the bundle with V8's code cache, and writes a cache of its own after the run where it had none. */
const runCached = () => {
  const command = process.argv[2]
  const userCacheDir = codeCacheDir()
  const userCache =
    userCacheDir === undefined
      ? undefined
      : join(userCacheDir, `${command === "mcp" ? "mcp" : "serve"}-${process.version}-${process.arch}.cache`)
  const buildCache = `${bundle}.cache`
  // V8 takes the first cache offered or none (a second offer in one process meets the code it
  // compiled for the first), so the order is chosen before: the build's first, since it holds what
  // a whole first session ran; the user's first once V8 has refused the build's here (other V8
  // flags: `--max-old-space-size` in NODE_OPTIONS is one), which `refusedMark` records. Offering
  // the user's first always made a poor one (written once by a process the build's did not serve)
  // every later start's, ~100 ms slower (docs/benchmarks.md, "The build's code cache first").
  const refusedMark = userCache === undefined ? undefined : `${userCache}.build-refused`
  const userFirst = refusedMark !== undefined && existsSync(refusedMark)
  const caches = userCache === undefined ? [buildCache] : userFirst ? [userCache, buildCache] : [buildCache, userCache]
  const run = runWithCodeCache(bundle, caches)
  // A `serve` started from a thin cache of the user's writes it again, if larger (`thinShare`).
  const userTaken = command === "serve" && run.offered !== undefined && run.offered === userCache && !run.rejected
  const userSize = userTaken ? fileSize(run.offered) : 0
  const thinSize = userTaken && userSize < thinShare * fileSize(buildCache) ? userSize : undefined
  if (run.offered === buildCache && run.rejected && refusedMark !== undefined)
    try {
      writeFileSync(refusedMark, "", { mode: 0o600 })
    } catch {}
  const writeTo =
    cacheOut ??
    ((command === "serve" || command === "mcp") && (run.offered === undefined || run.rejected || thinSize !== undefined)
      ? userCache
      : undefined)
  // After the run, so that the cache holds every function it compiled: before the first idle
  // collection (which drops the bytecode of what is not running, CodeCacheWriter.ts), or as the
  // process exits if none came. A cache that cannot be written (a full disk, a read-only home)
  // costs only the next start's compilation.
  if (writeTo !== undefined) {
    leaveCodeCacheWriter(() => {
      try {
        run.writeCache(writeTo, cacheOut === undefined ? thinSize : undefined)
      } catch {}
    })
    // Writes it only if the idle collection has not (the writer is taken once).
    process.once("exit", writePendingCodeCache)
  }
}

// With source maps on (`node --enable-source-maps`, or in NODE_OPTIONS), Node's own CommonJS loader
// runs the bundle: it maps stack traces through the bundle's source map (dist/bundle/cli.cjs.map) to
// the sources, which it does not for code compiled by `vm.Script`. Such a run compiles the bundle
// without a code cache (a debugging run; docs/operations.md).
if (process.sourceMapsEnabled) createRequire(import.meta.url)(bundle)
else runCached()
