/**
 * The product exactly as users get it, for the built-artifact tests: the repository's files (as a
 * fresh clone has them) copied aside, packed by `npm pack` (which builds it: the `prepare`
 * script), and the tarball installed by `npm install` into an empty directory. The tests then run
 * `node_modules/mnemos/dist/cli.js` from there, on the Node.js binary named by MNEMOS_TEST_NODE
 * (scripts/node-runtime.mjs fetches Node 22 and 24 from the npm registry; .ci/run runs these tests
 * on each) or else the one running the tests.
 *
 * Packing and installing take about a minute: the installed product is kept in
 * test-results/shipped/<key>/, where the key is a digest of every file packed, so the runs on
 * other Node versions (and a re-run on unchanged files) use it again.
 */
import { execFileSync } from "node:child_process"
import { createHash } from "node:crypto"
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"

export const repoRoot = join(import.meta.dirname, "..", "..")

/** The Node.js binary the product runs on. */
export const productNode = process.env.MNEMOS_TEST_NODE ?? process.execPath

/** `node --version` of `productNode`. */
export const productNodeVersion = execFileSync(productNode, ["--version"], { encoding: "utf8" }).trim()

/** A file planted in dist/ before the product is packed, as an earlier build would leave one. */
export const leftByAnEarlierBuild = "LeftByAnEarlierBuild.js"

/** The installed product. */
export interface Product {
  /** The directory the tarball was installed into. */
  readonly appDir: string
  /** The installed `mnemos` command's file (run with `productNode`). */
  readonly cli: string
  /** The version package.json names. */
  readonly version: string
}

/** The files a fresh clone has: tracked, and new ones not ignored. */
const cloneFiles = (): Array<string> =>
  execFileSync("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], {
    cwd: repoRoot,
    encoding: "utf8",
  })
    .split("\0")
    .filter((file) => file !== "" && existsSync(join(repoRoot, file)))

const keyOf = (files: ReadonlyArray<string>): string => {
  const hash = createHash("sha256")
  for (const file of files)
    hash
      .update(file)
      .update("\0")
      .update(readFileSync(join(repoRoot, file)))
      .update("\0")
  return hash.digest("hex").slice(0, 16)
}

const run = (command: string, args: ReadonlyArray<string>, cwd: string, env: NodeJS.ProcessEnv = {}) =>
  execFileSync(command, args, {
    cwd,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...env },
    maxBuffer: 64 * 1024 * 1024,
  })

/**
 * The product packed and installed from the repository's current files (once per set of files;
 * one test file calls it, so no two processes build it at once).
 */
export const installedProduct = (): Product => {
  const files = cloneFiles()
  const root = join(repoRoot, "test-results", "shipped")
  const dir = join(root, keyOf(files))
  const appDir = join(dir, "app")
  const done = join(dir, "installed")
  const product = (): Product => ({
    appDir,
    cli: join(appDir, "node_modules", "mnemos", "dist", "cli.js"),
    version: JSON.parse(readFileSync(join(appDir, "node_modules", "mnemos", "package.json"), "utf8")).version,
  })
  if (existsSync(done)) return product()
  // Older products are of other files: gone.
  mkdirSync(root, { recursive: true })
  for (const other of readdirSync(root)) if (join(root, other) !== dir) rmSync(join(root, other), { recursive: true })
  rmSync(dir, { recursive: true, force: true })
  const clone = join(dir, "clone")
  for (const file of files) {
    mkdirSync(dirname(join(clone, file)), { recursive: true })
    cpSync(join(repoRoot, file), join(clone, file))
  }
  // The clone's packages are the repository's (`npm ci` made them); the embedding model, built
  // from one of them, is taken when present (the build checks that it is current, else rebuilds it).
  symlinkSync(join(repoRoot, "node_modules"), join(clone, "node_modules"))
  if (existsSync(join(repoRoot, "dist", "models")))
    cpSync(join(repoRoot, "dist", "models"), join(clone, "dist", "models"), { recursive: true })
  // As an earlier build leaves the compiled file of a source removed since: the build must not ship it.
  mkdirSync(join(clone, "dist", "tools"), { recursive: true })
  writeFileSync(join(clone, "dist", "tools", leftByAnEarlierBuild), "export {}\n")
  const packed = join(dir, "packed")
  mkdirSync(packed)
  run("npm", ["pack", "--pack-destination", packed], clone)
  const [tarball] = readdirSync(packed).filter((name) => name.endsWith(".tgz"))
  if (tarball === undefined) throw new Error("npm pack wrote no tarball")
  mkdirSync(appDir)
  writeFileSync(join(appDir, "package.json"), JSON.stringify({ name: "mnemos-user", private: true }))
  // As a user installs it, offline where npm's cache has the packages. onnxruntime-node's install
  // step would fetch GPU binaries from outside the registry: skipped as the README says.
  run("npm", ["install", "--omit=dev", "--no-audit", "--no-fund", "--prefer-offline", join(packed, tarball)], appDir, {
    ONNXRUNTIME_NODE_INSTALL: "skip",
  })
  rmSync(clone, { recursive: true, force: true })
  writeFileSync(done, `${new Date().toISOString()}\n`)
  return product()
}
