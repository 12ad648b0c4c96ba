/**
 * The built `mnemos` command (dist/cli.js): runs the bundled CLI, dist/bundle/cli.cjs (one
 * CommonJS file; scripts/bundle.mjs), without compiling its code again at every start: compiling
 * it was about a fifth of the CPU a process spent before its first MCP answer (docs/benchmarks.md,
 * footprint).
 *
 * - Node 22 and later: Node's own compile cache (`module.enableCompileCache`), kept per user
 *   (CompileCacheDir.ts), and the bundle loaded by `require` as any CommonJS file.
 * - Node 20, which has no compile cache: V8's code cache of the bundle (CodeCache.ts), written at
 *   build time by a daemon that answers a first MCP session (scripts/codeCache.mjs), so that it
 *   holds the functions a start runs and not only the bundle's top level.
 *
 * Either way the bundle's `import()` of the packages left outside it is made here
 * (PackageImport.ts): code restored from V8's code cache on Node 20 cannot run `import()`.
 */
import module from "node:module"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { runWithCodeCache } from "./CodeCache.ts"
import { compileCacheDir } from "./CompileCacheDir.ts"
import { packageImporterKey } from "./PackageImport.ts"

/** Set (to a file) by the build: write the code cache there when this process exits (Node 20). */
const codeCacheOutEnv = "MNEMOS_CODE_CACHE_OUT"

const bundle = join(dirname(fileURLToPath(import.meta.url)), "bundle", "cli.cjs")
const cacheOut = process.env[codeCacheOutEnv]
// Only this process writes it: not the daemon a shim starts, nor any other child.
delete process.env[codeCacheOutEnv]
;(globalThis as { [packageImporterKey]?: (specifier: string) => Promise<unknown> })[packageImporterKey] = (specifier) =>
  import(specifier)

/** Node 22.1 and later (not in Node 20's types). */
const enableCompileCache = (module as { enableCompileCache?: (dir: string) => unknown }).enableCompileCache

if (enableCompileCache !== undefined) {
  const dir = compileCacheDir()
  // A cache that cannot be kept (no home, a read-only one) costs only the compilation it saves.
  if (dir !== undefined) enableCompileCache(dir)
  module.createRequire(import.meta.url)(bundle)
} else {
  const run = runWithCodeCache(bundle, `${bundle}.cache`)
  // After the run, so that the cache holds every function it compiled.
  if (cacheOut !== undefined) process.once("exit", () => run.writeCache(cacheOut))
}
