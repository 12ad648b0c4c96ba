/**
 * Seed 000's `MEMORY_PATH`, as its Claude Desktop configuration sets it (`"~/.claude-code/memory"`,
 * passed verbatim by the client), selects the data directory of the built CLI: `mnemos config`
 * names it and its source, and a command's data really lands there. A MEMORY_PATH naming a file is
 * refused with a message, and the file is left alone.
 */
import { spawnSync } from "node:child_process"
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, assert, describe, it } from "vitest"
import { builtCli } from "../support/mcpClient.ts"
import { removeTempDirs, tempDir } from "./support.ts"

afterAll(removeTempDirs)

/** Runs the built CLI with the environment `env` and no data directory variable of the test's own. */
const mnemos = (args: ReadonlyArray<string>, env: Record<string, string>) => {
  assert.isTrue(existsSync(builtCli), `${builtCli} is missing: run npm run build`)
  const {
    MNEMOS_DATA_DIR: _mine,
    MCP_MEMORY_STORE_DIR: _seed2,
    MEMORY_PATH: _seed0,
    XDG_DATA_HOME: _xdg,
    ...rest
  } = process.env
  return spawnSync(process.execPath, [builtCli, ...args], {
    encoding: "utf8",
    env: { ...rest, ...env },
    timeout: 60_000,
  })
}

const entityLine = JSON.stringify({ type: "entity", name: "DuckDB", entityType: "tool", observations: ["event store"] })

describe("MEMORY_PATH", () => {
  it("is the data directory of mnemos config, import and export, ~ expanded", () => {
    const home = tempDir("mnemos-home-")
    const env = { HOME: home, MEMORY_PATH: "~/.claude-code/memory" }
    const expected = join(home, ".claude-code", "memory")

    const config = mnemos(["config", "--json"], env)
    assert.strictEqual(config.status, 0, config.stderr)
    const dataDir = (JSON.parse(config.stdout) as { values: Array<{ key: string; value: unknown; from: string }> })
      .values[0]!
    assert.deepStrictEqual([dataDir.key, dataDir.value, dataDir.from], ["dataDir", expected, "MEMORY_PATH"])

    const source = join(home, "memory.jsonl")
    writeFileSync(source, entityLine)
    const imported = mnemos(["import", "--format", "official-jsonl", source], env)
    assert.strictEqual(imported.status, 0, imported.stderr)
    // Read back through the directory named explicitly: the import went there.
    const out = join(home, "out.jsonl")
    const exported = mnemos(["export", "--format", "official-jsonl", out, "--data-dir", expected], {})
    assert.strictEqual(exported.status, 0, exported.stderr)
    assert.include(readFileSync(out, "utf8"), '"name":"DuckDB"')
  })

  it("yields to MNEMOS_DATA_DIR, and mnemos config says which one it used", () => {
    const home = tempDir("mnemos-home-")
    const mine = join(home, "mine")
    const config = mnemos(["config"], { HOME: home, MEMORY_PATH: join(home, "seed"), MNEMOS_DATA_DIR: mine })
    assert.strictEqual(config.status, 0, config.stderr)
    assert.match(config.stdout, new RegExp(`dataDir\\s+${mine}\\s+\\(environment: MNEMOS_DATA_DIR\\)`))
  })

  it("naming a file (the official server's memory.jsonl) is refused with what to do, the file untouched", () => {
    const home = tempDir("mnemos-home-")
    const file = join(home, "memory.jsonl")
    writeFileSync(file, entityLine)
    const source = join(home, "other.jsonl")
    writeFileSync(source, entityLine)
    const imported = mnemos(["import", "--format", "official-jsonl", source], { HOME: home, MEMORY_PATH: file })
    assert.strictEqual(imported.status, 1)
    assert.include(imported.stderr, `${file} is a file, not a directory`)
    assert.include(imported.stderr, "mnemos import --format official-jsonl")
    assert.strictEqual(readFileSync(file, "utf8"), entityLine)
    const config = mnemos(["config"], { HOME: home, MEMORY_PATH: file })
    assert.strictEqual(config.status, 1)
    assert.include(config.stderr, "not a directory")
  })
})
