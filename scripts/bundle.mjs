// Bundles the CLI for start-up time and memory: src/cli.ts into one CommonJS file,
// dist/bundle/cli.cjs, with effect, the MCP SDK and zod inside and tree-shaken; the embedder's
// worker into dist/bundle/ as an ES module; and dist/cli.js, the launcher that runs the bundle
// with V8's code cache (src/cli/Launcher.ts; the cache is written by scripts/codeCache.mjs once
// the build is complete). Loaded module by module, the CLI's ~1,700 ES modules cost 2.2 s of CPU
// and 150 MiB before doing anything (effect's and @effect/platform-node's index modules load every
// module they re-export); bundled as ES modules, compiling them was still about a fifth of the CPU
// before a first MCP answer, and Node 20 caches compiled code for CommonJS only (vm.Script). The
// subcommands a run does not name are still not evaluated: esbuild wraps what is reached only by
// import() in functions run on first import. Measured in docs/benchmarks.md (footprint).
//
// Every bundled file sits exactly one directory below dist/, as the files tsc writes to
// dist/<area>/ do, so the paths modules compute from import.meta.url (build-info.json, the
// packaged model, the dashboard, the worker beside the embedder) are the same bundled or not.
// Packages with native addons, or that find files or modules of their own at run time, stay
// external and load from node_modules as before (by require(): each has a CommonJS entry).
import { chmodSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { readFile } from "node:fs/promises"
import { resolve as resolvePath } from "node:path"
import { build } from "esbuild"
import { asModuleFunction } from "./moduleFunction.mjs"

/**
 * The packages bundled (with what they import); every other dependency stays external. ws,
 * ulid, crc-32 and content-type (the Streamable HTTP transport's media type check, MediaType.ts) are
 * plain JavaScript (ws's optional native helpers, bufferutil and utf-8-validate, stay outside):
 * bundled, their code is in the code cache instead of compiled by every process that loads them
 * (~20 and ~10 ms).
 *
 * The MCP SDK is in no process: the session's protocol and the transports are mnemos's own (src/tools/McpServer.ts),
 * and the SDK is a devDependency, for its types and the tests' clients (docs/benchmarks.md, "The MCP
 * session without the SDK's server").
 */
const bundled = new Set(["effect", "@effect/platform-node", "ws", "ulid", "crc-32", "content-type"])
const { dependencies } = JSON.parse(readFileSync("package.json", "utf8"))
const externalBut = (inside) =>
  [
    ...Object.keys(dependencies).filter((name) => !bundled.has(name) && !inside.includes(name)),
    "utf-8-validate",
  ].flatMap((name) => [name, `${name}/*`])
const external = externalBut([])

/**
 * lmdb-js in the CLI's bundle: its JavaScript (one CommonJS file, with msgpackr, ordered-binary and
 * weak-lru-cache) was compiled from source by every process, and msgpackr loaded its native string
 * extractor (msgpackr-extract, a second addon found by a second search of node_modules) that mnemos
 * never needs: its values are JSON or bytes, msgpack only LMDB's counters. Loading lmdb-js took 34 ms
 * of a process alone, and 17 bundled (docs/benchmarks.md, footprint). Its addon is still found by
 * lmdb-js's own search (node-gyp-build-optional-packages), from its directory in node_modules: the
 * module's own URL, which lmdb-js computes from `__filename` in three places, is made the installed
 * lmdb's (the search thread's worker loads lmdb-js from node_modules, and both must load the same
 * addon). If lmdb-js's code changes so that the three are not found, the build says so and leaves
 * lmdb-js outside the bundle, as before.
 */
const lmdbModuleUrl =
  "(typeof document === 'undefined' ? new (require('u' + 'rl').URL)('file:' + __filename).href : (document.currentScript && document.currentScript.tagName.toUpperCase() === 'SCRIPT' && document.currentScript.src || new URL('index.cjs', document.baseURI).href))"
const lmdbIndex = "node_modules/lmdb/dist/index.cjs"
const lmdbBundled = readFileSync(lmdbIndex, "utf8").split(lmdbModuleUrl).length - 1 === 3
if (!lmdbBundled)
  console.warn(`bundle: ${lmdbIndex} no longer finds its directory as expected; left outside the bundle`)
const lmdbInside = {
  name: "lmdb-inside",
  setup: (build) => {
    // Its CommonJS build (mnemos imports it, which would resolve to its ES module sources).
    build.onResolve({ filter: /^lmdb$/ }, () => ({ path: resolvePath(lmdbIndex) }))
    build.onLoad({ filter: /[\\/]lmdb[\\/]dist[\\/]index\.cjs$/ }, async ({ path }) => {
      const source = await readFile(path, "utf8")
      const installed =
        'const __lmdbModuleUrl = require("node:url").pathToFileURL(require("node:module").createRequire(__filename).resolve("lmdb")).href;\n'
      return { contents: installed + source.replaceAll(lmdbModuleUrl, "__lmdbModuleUrl"), loader: "js" }
    })
    // msgpackr goes on without it, as where the addon is not installed.
    build.onResolve({ filter: /^msgpackr-extract$/ }, () => ({ path: "msgpackr-extract", namespace: "left-out" }))
    build.onLoad({ filter: /.*/, namespace: "left-out" }, () => ({
      contents: 'throw new Error("msgpackr-extract is left out of the bundle (scripts/bundle.mjs)")',
      loader: "js",
    }))
  },
}

/**
 * effect's CLI builds an `Intl.Segmenter` when its module loads (about 17 ms: ICU loads its break
 * rules), in every process, though only help and error output measures text with it: here it is
 * built on first use instead. If effect's code changes so that the line is not found, the build
 * says so and bundles it unchanged.
 */
const lazyGraphemeSegmenter = {
  name: "lazy-grapheme-segmenter",
  setup: (build) =>
    build.onLoad({ filter: /[\\/]effect[\\/]dist[\\/]cli[\\/]CliOutput\.js$/ }, async ({ path }) => {
      const source = await readFile(path, "utf8")
      const eager =
        /const graphemeSegmenter = \/\*#__PURE__\*\/new Intl\.Segmenter\(undefined, \{\s*granularity: "grapheme"\s*\}\);/
      if (!eager.test(source)) {
        console.warn(`bundle: ${path} no longer builds its Intl.Segmenter as expected; bundled unchanged`)
        return undefined
      }
      const lazy =
        'let graphemeSegmenterBuilt; const graphemeSegmenter = { segment: (text) => (graphemeSegmenterBuilt ??= new Intl.Segmenter(undefined, { granularity: "grapheme" })).segment(text) };'
      return { contents: source.replace(eager, lazy), loader: "js" }
    }),
}

/**
 * effect's bounded PubSub fills its two rings with `Array.from({ length: capacity })`, element by
 * element: for the event bus's 65,536 slots (src/stores/EventBus.ts) 8 ms of every start on Node 20
 * and 14 ms on Node 22, before a first answer. `new Array(capacity)` makes the same rings (holes
 * read as `undefined`, and the rings are only ever indexed) in half the time, most of it the
 * pages' first touch. As above, a changed effect file is bundled unchanged, with a warning.
 */
const pubSubRings = {
  name: "pubsub-rings",
  setup: (build) =>
    build.onLoad({ filter: /[\\/]effect[\\/]dist[\\/]PubSub\.js$/ }, async ({ path }) => {
      const source = await readFile(path, "utf8")
      const filled = /Array\.from\(\{\s*length: capacity\s*\}\)/g
      const rings = source.match(filled)?.length ?? 0
      if (rings !== 6) {
        console.warn(`bundle: ${path} no longer makes its rings as expected; bundled unchanged`)
        return undefined
      }
      return { contents: source.replace(filled, "new Array(capacity)"), loader: "js" }
    }),
}

/**
 * Comments and whitespace are a quarter of the bundle's bytes (4.3 → 3.1 MiB), and every start
 * reads them, hashes them (the code cache's key), copies them into the heap and hands them to V8:
 * without them, a first answer from `serve --stdio` at 1,000 entities came 26 ms sooner (395 → 369
 * ms, medians of 8 alternating starts; docs/benchmarks.md, footprint). Names stay (stack traces
 * name their functions); positions map back to the sources through the linked source maps
 * (`node --enable-source-maps`, docs/operations.md).
 */
const common = {
  bundle: true,
  platform: "node",
  target: "node20",
  external,
  sourcemap: "linked",
  legalComments: "none",
  minifyWhitespace: true,
  logLevel: "warning",
  metafile: true,
}

rmSync("dist/bundle", { recursive: true, force: true })
const cli = await build({
  ...common,
  entryPoints: ["src/cli.ts"],
  outfile: "dist/bundle/cli.cjs",
  format: "cjs",
  external: externalBut(lmdbBundled ? ["lmdb"] : []),
  plugins: [lazyGraphemeSegmenter, pubSubRings, ...(lmdbBundled ? [lmdbInside] : [])],
  // ASCII only (other characters escaped): the launcher decodes it as Latin-1 into a one-byte string,
  // several times faster than UTF-8 into a two-byte one, and V8 scans one-byte source faster.
  charset: "ascii",
  // What import.meta means in an ES module, for the bundle's one file.
  banner: {
    js: '"use strict";const __mnemosImportMetaUrl = require("node:url").pathToFileURL(__filename).href;',
  },
  define: {
    "import.meta.url": "__mnemosImportMetaUrl",
    "import.meta.dirname": "__dirname",
    "import.meta.filename": "__filename",
  },
})
// The bundle becomes a module function (scripts/moduleFunction.mjs): src/cli.ts's #! line becomes a
// comment of the same length, after the wrapper's head. esbuild leaves other characters than ASCII
// in comments and regular expressions, where \uXXXX means the same character (a pair of them, one
// outside the BMP).
const cliSource = readFileSync("dist/bundle/cli.cjs", "utf8")
writeFileSync(
  "dist/bundle/cli.cjs",
  asModuleFunction(
    cliSource
      .replace(/^#!/, "//")
      .replace(/[^\0-\x7f]/g, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`),
  ),
)
chmodSync("dist/bundle/cli.cjs", 0o644)
const workers = await build({
  ...common,
  entryPoints: {
    EmbedderWorker: "src/search/embedding/EmbedderWorker.ts",
    SearchWorker: "src/search/thread/SearchWorker.ts",
  },
  outdir: "dist/bundle",
  splitting: true,
  format: "esm",
  chunkNames: "[name]-[hash]",
  // CommonJS dependencies bundled into ES modules still call require().
  banner: {
    js: 'import { createRequire as __mnemosRequire } from "node:module";const require = __mnemosRequire(import.meta.url);',
  },
})
await build({
  ...common,
  entryPoints: ["src/cli/Launcher.ts"],
  outfile: "dist/cli.js",
  format: "esm",
  sourcemap: false,
  banner: { js: "#!/usr/bin/env node\n// Runs the bundled CLI, dist/bundle/cli.cjs (scripts/bundle.mjs)." },
})
chmodSync("dist/cli.js", 0o755)
const outputs = [cli, workers].flatMap((result) =>
  Object.keys(result.metafile.outputs).filter((file) => !file.endsWith(".map")),
)
const bytes = outputs.reduce((sum, file) => sum + statSync(file).size, 0)
const inputs = new Set([cli, workers].flatMap((result) => Object.keys(result.metafile.inputs)))
console.log(
  `bundle: dist/bundle/ ${outputs.length} files, ${(bytes / 1024 / 1024).toFixed(1)} MiB, from ${inputs.size} modules`,
)
