// Bundles the CLI for start-up time and memory: src/cli.ts (and the embedder's worker) into
// dist/bundle/, one file per part that is imported lazily, with effect, the MCP SDK and zod inside
// and tree-shaken. Loaded module by module, the CLI's ~1,700 ES modules cost 2.2 s of CPU and
// 150 MiB before doing anything (effect's and @effect/platform-node's index modules load every
// module they re-export); measured in docs/benchmarks.md (footprint). dist/cli.js becomes a
// launcher of dist/bundle/cli.js.
//
// Every bundled file sits exactly one directory below dist/, as the files tsc writes to
// dist/<area>/ do, so the paths modules compute from import.meta.url (build-info.json, the
// packaged model, the dashboard, the worker beside the embedder) are the same bundled or not.
// Packages with native addons, or that find files or modules of their own at run time, stay
// external and load from node_modules as before.
import { chmodSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { build } from "esbuild"

/** The packages bundled (with what they import); every other dependency stays external. */
const bundled = new Set(["effect", "@effect/platform-node", "@modelcontextprotocol/sdk"])
const { dependencies } = JSON.parse(readFileSync("package.json", "utf8"))
const external = Object.keys(dependencies)
  .filter((name) => !bundled.has(name))
  .flatMap((name) => [name, `${name}/*`])

rmSync("dist/bundle", { recursive: true, force: true })
const result = await build({
  entryPoints: {
    cli: "src/cli.ts",
    EmbedderWorker: "src/search/EmbedderWorker.ts",
    SearchWorker: "src/search/SearchWorker.ts",
  },
  outdir: "dist/bundle",
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  chunkNames: "[name]-[hash]",
  external,
  sourcemap: "linked",
  legalComments: "none",
  logLevel: "warning",
  // CommonJS dependencies bundled into ES modules still call require().
  banner: {
    js: 'import { createRequire as __mnemosRequire } from "node:module";const require = __mnemosRequire(import.meta.url);',
  },
  metafile: true,
})
const outputs = Object.entries(result.metafile.outputs).filter(([file]) => file.endsWith(".js"))
const bytes = outputs.reduce((sum, [, output]) => sum + output.bytes, 0)
writeFileSync(
  "dist/cli.js",
  '#!/usr/bin/env node\n// The bundled CLI (scripts/bundle.mjs); dist/<area>/*.js are the unbundled modules.\nimport "./bundle/cli.js"\n',
)
chmodSync("dist/cli.js", 0o755)
console.log(
  `bundle: dist/bundle/ ${outputs.length} files, ${(bytes / 1024 / 1024).toFixed(1)} MiB, from ${Object.keys(result.metafile.inputs).length} modules`,
)
