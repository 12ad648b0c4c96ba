/**
 * Where the built `mnemos mcp install | status` look for Claude Desktop's config on this (Linux)
 * machine, with the process's real environment: an empty `XDG_CONFIG_HOME` is unset (nothing is
 * written under the working directory), and seed 000's `~/.config/claude` file is found and named.
 */
import { spawnSync } from "node:child_process"
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, assert, describe, it } from "vitest"
import { removeTempDirs, tempDir } from "../cli/support.ts"
import { builtCli } from "../support/mcpClient.ts"

afterAll(removeTempDirs)

const mnemos = (args: ReadonlyArray<string>, home: string, cwd: string, env: Record<string, string> = {}) => {
  assert.isTrue(existsSync(builtCli), `${builtCli} is missing: run npm run build`)
  const { XDG_CONFIG_HOME: _xdg, ...rest } = process.env
  return spawnSync(process.execPath, [builtCli, ...args], {
    cwd,
    encoding: "utf8",
    env: { ...rest, HOME: home, ...env },
    timeout: 60_000,
  })
}

describe.runIf(process.platform === "linux")("Claude Desktop's config on Linux, through the built CLI", () => {
  it("XDG_CONFIG_HOME set but empty: the file goes to ~/.config/Claude, nothing into the working directory", () => {
    const home = tempDir("mnemos-home-")
    const cwd = join(home, "work")
    mkdirSync(cwd)
    const run = mnemos(["mcp", "install", "--client", "claude-desktop", "--data-dir", join(home, "data")], home, cwd, {
      XDG_CONFIG_HOME: "",
    })
    assert.strictEqual(run.status, 0, run.stderr)
    const path = join(home, ".config", "Claude", "claude_desktop_config.json")
    assert.include(run.stdout, path)
    assert.isObject(
      (JSON.parse(readFileSync(path, "utf8")) as { mcpServers: Record<string, unknown> }).mcpServers.mnemos,
    )
    assert.deepStrictEqual(readdirSync(cwd), [])
  })

  it("mcp status finds seed 000's ~/.config/claude file and says why it chose it", () => {
    const home = tempDir("mnemos-home-")
    const seedFile = join(home, ".config", "claude", "claude_desktop_config.json")
    mkdirSync(join(home, ".config", "claude"), { recursive: true })
    writeFileSync(seedFile, JSON.stringify({ mcpServers: { other: { command: "x", args: [] } } }))
    const status = mnemos(["mcp", "status", "--client", "claude-desktop", "--data-dir", join(home, "data")], home, home)
    assert.strictEqual(status.status, 0, status.stderr)
    assert.match(status.stdout, new RegExp(`Claude Desktop\\s+user\\s+not configured\\s+${seedFile}`))
    assert.include(status.stdout, "chosen: the existing file (also looked for:")
  })
})
