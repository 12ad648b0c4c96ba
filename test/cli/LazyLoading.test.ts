/**
 * The command line loads what the command it runs needs, and no more: the shim that MCP clients
 * launch (`mnemos mcp`) and `mnemos serve` until its engine starts load neither the engine, the
 * tools, LMDB nor onnxruntime (module loading is most of a process's start). The modules a
 * process loads are recorded by a module resolution hook (node:module `register`).
 */
import { execFileSync } from "node:child_process"
import { readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { afterAll, assert, describe, it } from "vitest"
import { mcpSubcommandNames } from "../../src/cli/McpCommand.ts"
import { mcpInstallCommands } from "../../src/cli/McpInstallCommands.ts"
import { catalogue, defaultToolsets, toolsets } from "../../src/tools/Catalogue.ts"
import { toolsetNames } from "../../src/tools/Toolsets.ts"
import { removeTempDirs, tempDir } from "./support.ts"

afterAll(removeTempDirs)

/** The URLs of every module `mnemos args...` resolves (run from source, as the tests do). */
const modulesLoadedBy = (args: ReadonlyArray<string>): Array<string> => {
  const dir = tempDir("mnemos-modules-")
  const log = join(dir, "modules.txt")
  const hooks = join(dir, "hooks.mjs")
  writeFileSync(
    hooks,
    `import { appendFileSync } from "node:fs"
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context)
  appendFileSync(${JSON.stringify(log)}, resolved.url + "\\n")
  return resolved
}
`,
  )
  const register = join(dir, "register.mjs")
  writeFileSync(
    register,
    `import { register } from "node:module"\nregister(${JSON.stringify(pathToFileURL(hooks).href)})\n`,
  )
  writeFileSync(log, "")
  execFileSync(process.execPath, ["--import", register, "--import", "tsx", "src/cli.ts", ...args], {
    encoding: "utf8",
  })
  return readFileSync(log, "utf8")
    .split("\n")
    .filter((url) => url !== "")
}

const heavy = [/\/src\/Engine\.ts$/, /\/src\/tools\/Catalogue\.ts$/, /\/node_modules\/lmdb\//, /onnxruntime-node/]
const heavyIn = (urls: ReadonlyArray<string>) => urls.filter((url) => heavy.some((pattern) => pattern.test(url)))

describe("lazy loading of the command line", () => {
  it("mnemos mcp (the shim) and serve's flags load neither the engine, the tools, LMDB nor onnxruntime", () => {
    assert.deepStrictEqual(heavyIn(modulesLoadedBy(["mcp", "--help"])), [])
    assert.deepStrictEqual(heavyIn(modulesLoadedBy(["serve", "--help"])), [])
    // A command that opens the engine does load it: the hook sees what it should.
    assert.isNotEmpty(heavyIn(modulesLoadedBy(["--help"])))
  })

  it("mnemos mcp (the shim) loads none of the install commands, which mcp --help lists", () => {
    const install = [/\/src\/cli\/McpInstallCommands\.ts$/, /\/node_modules\/(jsonc-parser|smol-toml)\//]
    const installIn = (urls: ReadonlyArray<string>) =>
      urls.filter((url) => install.some((pattern) => pattern.test(url)))
    // No daemon answers on this port and none may be started: the shim ends with its (empty) stdin.
    const shim = ["mcp", "--no-start", "--data-dir", tempDir("mnemos-shim-"), "--port", "9"]
    assert.deepStrictEqual(installIn(modulesLoadedBy(shim)), [])
    assert.isNotEmpty(installIn(modulesLoadedBy(["mcp", "--help"])))
    assert.deepStrictEqual(
      mcpSubcommandNames,
      mcpInstallCommands.map((command) => command.name),
    )
  })

  it("serve --toolsets names exactly the catalogue's toolsets", () => {
    assert.deepStrictEqual(toolsetNames, toolsets)
    assert.deepStrictEqual(toolsetNames, defaultToolsets)
    assert.deepStrictEqual([...new Set(catalogue.map((tool) => tool.toolset))], [...toolsetNames])
  })
})
