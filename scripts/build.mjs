// Builds dist/: compiles src/ with tsc, bundles the dashboard with Vite and the CLI with esbuild, and records what was
// built (version, git commit, time) so `mnemos --version` and `/api/version` can say exactly which
// code is running.
import { execFileSync } from "node:child_process"
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"

const run = (cmd, args) => execFileSync(cmd, args, { stdio: "inherit" })
// What an earlier build left goes first: the compiled file of a source removed since would otherwise
// ship in the package (`files` takes all of dist/). The embedding model stays: converting it is slow,
// and scripts/build-embeddings.mjs checks that it is current.
for (const entry of existsSync("dist") ? readdirSync("dist") : [])
  if (entry !== "models") rmSync(join("dist", entry), { recursive: true, force: true })
run(process.execPath, ["node_modules/typescript/bin/tsc", "-p", "tsconfig.json"])
// The dashboard: type-checked on its own (browser types), then bundled by Vite into dist/dashboard
// (see vite.config.ts).
run(process.execPath, ["node_modules/typescript/bin/tsc", "-p", "src/dashboard/tsconfig.json"])
run(process.execPath, ["node_modules/vite/bin/vite.js", "build"])
run(process.execPath, ["scripts/build-embeddings.mjs"])
// The CLI as a few bundled files (start-up time and memory; see scripts/bundle.mjs).
run(process.execPath, ["scripts/bundle.mjs"])

const gitCommit = (() => {
  try {
    return execFileSync("git", ["rev-parse", "--short=12", "HEAD"], { stdio: ["ignore", "pipe", "ignore"] })
      .toString()
      .trim()
  } catch {
    return "unknown"
  }
})()
const { version } = JSON.parse(readFileSync("package.json", "utf8"))
mkdirSync("dist", { recursive: true })
writeFileSync(
  "dist/build-info.json",
  JSON.stringify({ version, gitCommit, builtAt: new Date().toISOString() }, null, 2),
)
chmodSync("dist/cli.js", 0o755)
// Last, on the finished build: the code cache of the bundled CLI (see scripts/codeCache.mjs).
run(process.execPath, ["scripts/codeCache.mjs"])
