/**
 * `mnemos --version` says exactly which code runs: version, git commit and build time.
 */
import { execFileSync, spawnSync } from "node:child_process"
import { readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"

describe("mnemos --version and --help", () => {
  it("prints the package version and the current git commit", () => {
    const output = execFileSync(process.execPath, ["--import", "tsx", "src/cli.ts", "--version"], { encoding: "utf8" })
    const { version } = JSON.parse(readFileSync("package.json", "utf8")) as { version: string }
    const commit = execFileSync("git", ["rev-parse", "--short=12", "HEAD"], { encoding: "utf8" }).trim()
    expect(output).toContain(version)
    expect(output).toContain(`commit ${commit}`)
    expect(output).toMatch(/built /)
  })

  it("lists the commands in --help and rejects an unknown flag with a non-zero exit", () => {
    const help = execFileSync(process.execPath, ["--import", "tsx", "src/cli.ts", "--help"], { encoding: "utf8" })
    for (const command of ["serve", "mcp", "import", "export"]) expect(help).toContain(command)
    const bad = spawnSync(process.execPath, ["--import", "tsx", "src/cli.ts", "serve", "--no-such-flag"], {
      encoding: "utf8",
    })
    expect(bad.status).not.toBe(0)
    expect(bad.stdout + bad.stderr).toContain("--no-such-flag")
  })
})
