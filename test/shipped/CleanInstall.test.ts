/**
 * `npm ci` on a fresh clone prints nothing a newcomer has to wonder about: every dependency with an
 * install script has a decision in package.json's `allowScripts` (else npm 11.16+ lists it as "not
 * yet covered", and npm 12 skips it), onnxruntime-node's CUDA download is among the skipped, and the
 * project's npm configuration has no key npm does not know ("Unknown project config") but the one
 * npm 10 needs to skip that download (it ignores allowScripts).
 */
import { spawnSync } from "node:child_process"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { assert, describe, it } from "vitest"

const repoRoot = join(import.meta.dirname, "..", "..")
const readJson = (file: string) => JSON.parse(readFileSync(join(repoRoot, file), "utf8"))

const npmMajor = (env: NodeJS.ProcessEnv) =>
  Number(spawnSync("npm", ["--version"], { cwd: repoRoot, encoding: "utf8", env }).stdout.split(".")[0])

describe("a clean first install", () => {
  it("allowScripts decides for every locked package that has an install script", () => {
    const allowScripts = (readJson("package.json") as { allowScripts: Record<string, boolean> }).allowScripts
    const lock = readJson("package-lock.json") as {
      packages: Record<string, { hasInstallScript?: boolean; name?: string }>
    }
    const withScripts = Object.entries(lock.packages)
      .filter(([, entry]) => entry.hasInstallScript === true)
      .map(([path, entry]) => entry.name ?? path.slice(path.lastIndexOf("node_modules/") + "node_modules/".length))
    assert.isNotEmpty(withScripts)
    const undecided = withScripts.filter((name) => typeof allowScripts[name] !== "boolean")
    assert.deepStrictEqual(undecided, [], "packages npm would list as not covered by allowScripts")
    // Its install step only downloads CUDA libraries from outside the registry.
    assert.isFalse(allowScripts["onnxruntime-node"])
    for (const native of ["lmdb", "usearch"]) assert.isTrue(allowScripts[native], native)
  })

  it("npm reads the project's configuration without an unknown key but onnxruntime-node's switch", () => {
    // Without the npm_config_* variables of the npm that may have started this test (it passes its
    // own configuration down that way): the project's files alone.
    const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !/^npm_config_/i.test(key)))
    const run = spawnSync("npm", ["config", "list"], { cwd: repoRoot, encoding: "utf8", env, timeout: 60_000 })
    assert.strictEqual(run.status, 0, run.stderr)
    const unknown = [...run.stderr.matchAll(/Unknown project config "([^"]+)"/g)].map((match) => match[1])
    assert.deepStrictEqual([...new Set(unknown)], npmMajor(env) >= 11 ? ["onnxruntime-node-install"] : [])
    assert.strictEqual(readFileSync(join(repoRoot, ".npmrc"), "utf8").trim(), "onnxruntime-node-install=skip")
  })
})
