/**
 * `mnemos mcp install | uninstall | status` against temporary homes, for every client and every OS
 * layout (macOS, Windows, Linux): each client's real config location and format, a config that
 * already has other servers (and comments, where the format has them) that must survive byte for
 * byte, a backup beside the file, idempotence, `--dry-run`, the user's own settings of an existing
 * entry, symbolic links, files that must not be touched, and the no-`--client` paths.
 */
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs"
import { basename, dirname, join } from "node:path"
import { afterAll, assert, describe, it } from "vitest"
import { installCommand, statusCommand, uninstallCommand } from "../../src/cli/McpInstallCommands.ts"
import {
  type ClientId,
  currentEnvironment,
  type InstallEnvironment,
  type InstallPlatform,
} from "../../src/install/Clients.ts"
import { parseJsonc, valueAt } from "../../src/install/JsoncEdit.ts"
import { parseToml, serverIn } from "../../src/install/TomlEdit.ts"
import { removeTempDirs, runCommand, tempDir } from "../cli/support.ts"

afterAll(removeTempDirs)

const launch = (dataDir: string) => ({
  command: "/opt/node/bin/node",
  args: ["/opt/mnemos/dist/cli.js", "mcp", "--data-dir", dataDir],
})

const machineFor = (platform: InstallPlatform, home: string, projectDir: string, interactive = false) => ({
  environment: {
    platform,
    home,
    appData: platform === "win32" ? join(home, "AppData", "Roaming") : undefined,
    xdgConfigHome: undefined,
    codexHome: undefined,
    projectDir,
  } satisfies InstallEnvironment,
  interactive,
  now: () => new Date("2026-01-02T03:04:05.678Z"),
  launch,
})

/** Where each client keeps its user-scope config, written out literally per OS (not computed by the code under test). */
const userConfigPath = (client: ClientId, platform: InstallPlatform, home: string): string => {
  const appConfig =
    platform === "darwin"
      ? join(home, "Library", "Application Support")
      : platform === "win32"
        ? join(home, "AppData", "Roaming")
        : join(home, ".config")
  switch (client) {
    case "claude-desktop":
      return join(appConfig, "Claude", "claude_desktop_config.json")
    case "claude-code":
      return join(home, ".claude.json")
    case "cursor":
      return join(home, ".cursor", "mcp.json")
    case "vscode":
      return join(appConfig, "Code", "User", "mcp.json")
    case "windsurf":
      return join(home, ".codeium", "windsurf", "mcp_config.json")
    case "codex":
      return join(home, ".codex", "config.toml")
    case "gemini":
      return join(home, ".gemini", "settings.json")
  }
}

const projectConfigPath: Partial<Record<ClientId, ReadonlyArray<string>>> = {
  "claude-code": [".mcp.json"],
  cursor: [".cursor", "mcp.json"],
  vscode: [".vscode", "mcp.json"],
  codex: [".codex", "config.toml"],
  gemini: [".gemini", "settings.json"],
}

/** A config somebody curated: other servers, their own formatting, comments where the format has them. */
const curatedConfig = (client: ClientId): string => {
  switch (client) {
    case "vscode":
      return `// My VS Code MCP servers
{
\t"servers": {
\t\t// GitHub, over HTTP
\t\t"github": { "type": "http", "url": "https://api.githubcopilot.com/mcp/" }, // keep me
\t\t"fs": {
\t\t\t"type": "stdio",
\t\t\t"command": "npx",
\t\t\t"args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/me"], /* block comment */
\t\t},
\t},
\t"inputs": [
\t\t{ "type": "promptString", "id": "token", "description": "API token", "password": true },
\t],
}
`
    case "codex":
      return `# Codex configuration
model = "o3"  # the model I like

# Documentation lookups
[mcp_servers.context7]
command = "npx"   # through npx
args = ["-y", "@upstash/context7-mcp"]

[mcp_servers.context7.env]
DEBUG = "1"

# Profiles below
[profiles.fast]
model = "gpt-4.1"
`
    case "claude-code":
      return `{
  "numStartups": 42,
  "projects": {
    "/home/me/app": { "allowedTools": [], "mcpServers": {} }
  },
  "mcpServers": {
    "playwright": {
      "type": "stdio",
      "command": "npx",
      "args": ["@playwright/mcp@latest"],
      "env": {}
    }
  },
  "theme": "dark"
}
`
    case "gemini":
      return `{
    "theme": "Dracula",
    "mcpServers": {
        "git": {
            "command": "uvx",
            "args": ["mcp-server-git"]
        }
    }
}
`
    default:
      return `{
  "mcpServers": {
    "filesystem": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"],
      "env": { "DEBUG": "1" }
    }
  },
  "globalShortcut": "Ctrl+Space"
}
`
  }
}

const serversKey = (client: ClientId) => (client === "vscode" ? "servers" : "mcpServers")

/** The mnemos entry of a config file, as its client reads it. */
const entryIn = (client: ClientId, text: string): unknown => {
  if (client === "codex") {
    const parsed = parseToml(text)
    assert.strictEqual(parsed._tag, "Ok")
    return parsed._tag === "Ok" ? serverIn(parsed.value, "mnemos") : undefined
  }
  const parsed = parseJsonc(text)
  assert.strictEqual(parsed._tag, "Ok", text)
  return parsed._tag === "Ok" ? valueAt(parsed, [serversKey(client), "mnemos"]) : undefined
}

const expectedEntry = (client: ClientId, dataDir: string) => {
  const { command, args } = launch(dataDir)
  return client === "claude-code" || client === "vscode" ? { type: "stdio", command, args } : { command, args }
}

const backupsOf = (path: string) =>
  readdirSync(dirname(path)).filter((name) => name.startsWith(`${basename(path)}.mnemos-backup-`))

const clientsUnderTest: ReadonlyArray<ClientId> = [
  "claude-desktop",
  "claude-code",
  "cursor",
  "vscode",
  "windsurf",
  "codex",
  "gemini",
]
const platforms: ReadonlyArray<InstallPlatform> = ["darwin", "win32", "linux"]

describe("install, status and uninstall in every client, on every OS layout", () => {
  for (const platform of platforms)
    for (const client of clientsUnderTest)
      it(`${client} on ${platform}: other servers and comments survive; backup; idempotent; uninstall restores the file`, async () => {
        const home = tempDir("mnemos-home-")
        const machine = machineFor(platform, home, join(home, "project"))
        const path = userConfigPath(client, platform, home)
        mkdirSync(dirname(path), { recursive: true })
        const original = curatedConfig(client)
        writeFileSync(path, original)
        const dataDir = join(home, "memory")

        const dry = await runCommand(installCommand, ["--client", client, "--data-dir", dataDir, "--dry-run"], {
          machine,
        })
        assert.isTrue(dry.ok, dry.stderr)
        assert.include(dry.stdout, `--- ${path}`)
        assert.include(dry.stdout, "+")
        assert.strictEqual(readFileSync(path, "utf8"), original, "--dry-run writes nothing")
        assert.deepStrictEqual(backupsOf(path), [])

        const first = await runCommand(installCommand, ["--client", client, "--data-dir", dataDir], { machine })
        assert.isTrue(first.ok, `${first.stderr} ${first.error?.message}`)
        const installed = readFileSync(path, "utf8")
        assert.deepStrictEqual(entryIn(client, installed), expectedEntry(client, dataDir))
        // Every line of the original is still there, in order (only lines were added, or a comma).
        const lines = installed.split("\n").map((line) => line.trimEnd().replace(/,$/, ""))
        let at = 0
        for (const line of original.split("\n").map((l) => l.trimEnd().replace(/,$/, ""))) {
          at = lines.indexOf(line, at)
          assert.isAtLeast(at, 0, `line lost: ${line}\n---\n${installed}`)
        }
        const backups = backupsOf(path)
        assert.strictEqual(backups.length, 1)
        assert.strictEqual(readFileSync(join(dirname(path), backups[0]!), "utf8"), original)

        const again = await runCommand(installCommand, ["--client", client, "--data-dir", dataDir], { machine })
        assert.isTrue(again.ok)
        assert.include(again.stdout, "already configured")
        assert.strictEqual(readFileSync(path, "utf8"), installed)
        assert.strictEqual(backupsOf(path).length, 1, "an install that changes nothing makes no backup")

        const status = await runCommand(statusCommand, ["--client", client, "--data-dir", dataDir, "--json"], {
          machine,
        })
        assert.isTrue(status.ok, status.stderr)
        const report = JSON.parse(status.stdout) as {
          clients: Array<{ scope: string; path: string; configured: boolean; current: boolean }>
          daemon: { answers: boolean }
        }
        const user = report.clients.find((row) => row.scope === "user")!
        assert.strictEqual(user.path, path)
        assert.isTrue(user.configured && user.current)
        assert.isFalse(report.daemon.answers)

        const removed = await runCommand(uninstallCommand, ["--client", client], { machine })
        assert.isTrue(removed.ok, removed.stderr)
        assert.strictEqual(readFileSync(path, "utf8"), original, "uninstall gives back the original bytes")
        assert.strictEqual(backupsOf(path).length, 2)
      })
})

describe("project scope", () => {
  for (const [client, parts] of Object.entries(projectConfigPath) as Array<[ClientId, ReadonlyArray<string>]>)
    it(`${client}: writes the project's ${parts.join("/")}, creating it`, async () => {
      const home = tempDir("mnemos-home-")
      const project = join(home, "project")
      mkdirSync(project)
      const machine = machineFor("linux", home, join(home, "elsewhere"))
      const dataDir = join(home, "memory")
      const run = await runCommand(
        installCommand,
        ["--client", client, "--scope", "project", "--project-dir", project, "--data-dir", dataDir],
        { machine },
      )
      assert.isTrue(run.ok, `${run.stderr} ${run.error?.message}`)
      const path = join(project, ...parts)
      assert.deepStrictEqual(entryIn(client, readFileSync(path, "utf8")), expectedEntry(client, dataDir))
      assert.deepStrictEqual(backupsOf(path), [], "a new file has nothing to back up")
      const removed = await runCommand(
        uninstallCommand,
        ["--client", client, "--scope", "project", "--project-dir", project],
        { machine },
      )
      assert.isTrue(removed.ok, removed.stderr)
      assert.isUndefined(entryIn(client, readFileSync(path, "utf8")))
    })

  it("a client without project scope says so", async () => {
    const home = tempDir("mnemos-home-")
    const run = await runCommand(installCommand, ["--client", "windsurf", "--scope", "project"], {
      machine: machineFor("linux", home, home),
    })
    assert.isFalse(run.ok)
    assert.include(run.error?.message ?? "", "Windsurf has no project-scope configuration")
  })
})

describe("every place a client's config can be", () => {
  const seedFile = (home: string) => join(home, ".config", "claude", "claude_desktop_config.json")
  const appFile = (home: string) => join(home, ".config", "Claude", "claude_desktop_config.json")
  const write = (path: string, text: string) => {
    mkdirSync(dirname(path), { recursive: true })
    writeFileSync(path, text)
  }

  it("Claude Desktop on Linux: seed 000's ~/.config/claude file alone is found, detected, used, and status says why", async () => {
    const home = tempDir("mnemos-home-")
    const machine = machineFor("linux", home, home)
    const original = curatedConfig("claude-desktop")
    write(seedFile(home), original)
    const before = await runCommand(statusCommand, ["--client", "claude-desktop", "--data-dir", "/data"], { machine })
    assert.isTrue(before.ok, before.stderr)
    assert.include(before.stdout, `not configured`)
    assert.include(before.stdout, seedFile(home))
    assert.include(before.stdout, `chosen: the existing file (also looked for: ${appFile(home)})`)
    assert.notInclude(before.stdout, "not detected: Claude Desktop")

    const run = await runCommand(installCommand, ["--client", "claude-desktop", "--data-dir", "/data"], { machine })
    assert.isTrue(run.ok, run.stderr)
    assert.deepStrictEqual(entryIn("claude-desktop", readFileSync(seedFile(home), "utf8")), {
      ...expectedEntry("claude-desktop", "/data"),
    })
    assert.isFalse(existsSync(dirname(appFile(home))), "no second file is written")
  })

  it("Claude Desktop on Linux: with both spellings present, says so and uses ~/.config/Claude, which the app reads", async () => {
    const home = tempDir("mnemos-home-")
    const machine = machineFor("linux", home, home)
    const original = curatedConfig("claude-desktop")
    write(seedFile(home), original)
    write(appFile(home), original)
    const run = await runCommand(installCommand, ["--client", "claude-desktop", "--data-dir", "/data"], { machine })
    assert.isTrue(run.ok, run.stderr)
    assert.include(
      run.stdout,
      `${appFile(home)} and ${seedFile(home)} all exist: Claude Desktop reads ${appFile(home)}`,
    )
    assert.deepStrictEqual(entryIn("claude-desktop", readFileSync(appFile(home), "utf8")), {
      ...expectedEntry("claude-desktop", "/data"),
    })
    assert.strictEqual(readFileSync(seedFile(home), "utf8"), original, "the other file is left as it was")
    const status = await runCommand(statusCommand, ["--client", "claude-desktop", "--data-dir", "/data", "--json"], {
      machine,
    })
    const [row] = (
      JSON.parse(status.stdout) as { clients: Array<{ path: string; why: string; alsoPresent: string[] }> }
    ).clients
    assert.strictEqual(row!.path, appFile(home))
    assert.deepStrictEqual(row!.alsoPresent, [seedFile(home)])
    assert.include(row!.why, "all exist")
  })

  it("Claude Desktop on Windows: the MSIX package's virtualized file is the one the packaged app reads", async () => {
    const home = tempDir("mnemos-home-")
    const machine = machineFor("win32", home, home)
    const packaged = join(
      home,
      "AppData",
      "Local",
      "Packages",
      "Claude_pzs8sxrjxfjjc",
      "LocalCache",
      "Roaming",
      "Claude",
      "claude_desktop_config.json",
    )
    const classic = userConfigPath("claude-desktop", "win32", home)
    // Installed from the Store, never started: the package exists, its config folder not yet.
    mkdirSync(join(home, "AppData", "Local", "Packages", "Claude_pzs8sxrjxfjjc"), { recursive: true })
    const fresh = await runCommand(installCommand, ["--client", "claude-desktop", "--data-dir", "/data"], { machine })
    assert.isTrue(fresh.ok, fresh.stderr)
    assert.deepStrictEqual(entryIn("claude-desktop", readFileSync(packaged, "utf8")), {
      ...expectedEntry("claude-desktop", "/data"),
    })
    assert.isFalse(existsSync(classic))
    // A stale %APPDATA% file (from the older installer) does not win over the packaged one.
    write(classic, curatedConfig("claude-desktop"))
    const again = await runCommand(installCommand, ["--client", "claude-desktop", "--data-dir", "/other"], { machine })
    assert.isTrue(again.ok, again.stderr)
    assert.include(again.stdout, `Claude Desktop reads ${packaged}`)
    assert.deepStrictEqual(entryIn("claude-desktop", readFileSync(packaged, "utf8")), {
      ...expectedEntry("claude-desktop", "/other"),
    })
    assert.strictEqual(readFileSync(classic, "utf8"), curatedConfig("claude-desktop"))
  })

  it("empty XDG_CONFIG_HOME, APPDATA, LOCALAPPDATA and CODEX_HOME count as unset, and a relative XDG_CONFIG_HOME is ignored", () => {
    const empty = currentEnvironment("/home/u", "/work", {
      XDG_CONFIG_HOME: "",
      APPDATA: "",
      LOCALAPPDATA: "",
      CODEX_HOME: "",
    })
    assert.deepStrictEqual(
      [empty.xdgConfigHome, empty.appData, empty.localAppData, empty.codexHome],
      [undefined, undefined, undefined, undefined],
    )
    assert.isUndefined(currentEnvironment("/home/u", "/work", { XDG_CONFIG_HOME: "config" }).xdgConfigHome)
    assert.strictEqual(currentEnvironment("/home/u", "/work", { XDG_CONFIG_HOME: "/xdg" }).xdgConfigHome, "/xdg")
  })
})

describe("the entry and the file", () => {
  it("a fresh install creates the directory and a file holding only the entry", async () => {
    const home = tempDir("mnemos-home-")
    const machine = machineFor("darwin", home, home)
    const run = await runCommand(installCommand, ["--client", "claude-desktop", "--data-dir", "/data"], { machine })
    assert.isTrue(run.ok, run.stderr)
    const path = userConfigPath("claude-desktop", "darwin", home)
    assert.deepStrictEqual(JSON.parse(readFileSync(path, "utf8")), {
      mcpServers: { mnemos: expectedEntry("claude-desktop", "/data") },
    })
  })

  it("reinstalling for another data directory updates command and args and keeps the user's own settings", async () => {
    const home = tempDir("mnemos-home-")
    const machine = machineFor("linux", home, home)
    const path = userConfigPath("cursor", "linux", home)
    mkdirSync(dirname(path), { recursive: true })
    writeFileSync(
      path,
      JSON.stringify(
        {
          mcpServers: {
            mnemos: {
              command: "old-node",
              args: ["old"],
              env: { NODE_OPTIONS: "--max-old-space-size=512" },
              disabled: false,
            },
          },
        },
        null,
        2,
      ),
    )
    const run = await runCommand(installCommand, ["--client", "cursor", "--data-dir", "/new"], { machine })
    assert.isTrue(run.ok, run.stderr)
    assert.include(run.stdout, "updated in")
    assert.deepStrictEqual(JSON.parse(readFileSync(path, "utf8")).mcpServers.mnemos, {
      ...expectedEntry("cursor", "/new"),
      env: { NODE_OPTIONS: "--max-old-space-size=512" },
      disabled: false,
    })
  })

  it("codex: an existing table keeps its other keys and subtables; its command and args are replaced in place", async () => {
    const home = tempDir("mnemos-home-")
    const machine = machineFor("linux", home, home)
    const path = userConfigPath("codex", "linux", home)
    mkdirSync(dirname(path), { recursive: true })
    const original = `[mcp_servers.mnemos]
command = "old"
args = [
  "x",
]
startup_timeout_sec = 30 # slow disk

[mcp_servers.mnemos.env]
A = "1"

# next
[profiles.p]
model = "m"
`
    writeFileSync(path, original)
    const run = await runCommand(installCommand, ["--client", "codex", "--data-dir", "/d"], { machine })
    assert.isTrue(run.ok, `${run.stderr} ${run.error?.message}`)
    const text = readFileSync(path, "utf8")
    assert.deepStrictEqual(entryIn("codex", text), { ...launch("/d"), startup_timeout_sec: 30, env: { A: "1" } })
    assert.include(text, "startup_timeout_sec = 30 # slow disk")
    assert.include(text, "# next\n[profiles.p]")
  })

  it("a symbolic link to the config stays a link; the file it points to is edited", async () => {
    const home = tempDir("mnemos-home-")
    const machine = machineFor("linux", home, home)
    const dotfiles = join(home, "dotfiles")
    mkdirSync(dotfiles)
    writeFileSync(join(dotfiles, "gemini.json"), curatedConfig("gemini"))
    const path = userConfigPath("gemini", "linux", home)
    mkdirSync(dirname(path), { recursive: true })
    symlinkSync(join(dotfiles, "gemini.json"), path)
    const run = await runCommand(installCommand, ["--client", "gemini", "--data-dir", "/d"], { machine })
    assert.isTrue(run.ok, run.stderr)
    assert.isTrue(lstatSync(path).isSymbolicLink())
    assert.deepStrictEqual(
      entryIn("gemini", readFileSync(join(dotfiles, "gemini.json"), "utf8")),
      expectedEntry("gemini", "/d"),
    )
  })

  it("a file that does not parse is refused and left exactly as it was", async () => {
    const home = tempDir("mnemos-home-")
    const machine = machineFor("linux", home, home)
    const path = userConfigPath("windsurf", "linux", home)
    mkdirSync(dirname(path), { recursive: true })
    const broken = '{ "mcpServers": { "a": { "command": "x" }\n'
    writeFileSync(path, broken)
    const run = await runCommand(installCommand, ["--client", "windsurf", "--data-dir", "/d"], { machine })
    assert.isFalse(run.ok)
    assert.include(run.stderr, "cannot edit")
    assert.strictEqual(readFileSync(path, "utf8"), broken)
    assert.deepStrictEqual(backupsOf(path), [])
  })

  it("codex: an entry written as an inline table is refused with the text to add by hand", async () => {
    const home = tempDir("mnemos-home-")
    const machine = machineFor("linux", home, home)
    const path = userConfigPath("codex", "linux", home)
    mkdirSync(dirname(path), { recursive: true })
    const original = `mcp_servers.mnemos = { command = "x", args = [] }\n`
    writeFileSync(path, original)
    const run = await runCommand(installCommand, ["--client", "codex", "--data-dir", "/d"], { machine })
    assert.isFalse(run.ok)
    assert.include(run.stderr, "[mcp_servers.mnemos]")
    assert.strictEqual(readFileSync(path, "utf8"), original)
  })
})

describe("choosing clients", () => {
  const homeWith = (...dirs: Array<Array<string>>) => {
    const home = tempDir("mnemos-home-")
    for (const dir of dirs) mkdirSync(join(home, ...dir), { recursive: true })
    return home
  }

  it("without --client and without a terminal: lists the detected clients, writes nothing, exits 2", async () => {
    const home = homeWith([".cursor"], [".codex"])
    const run = await runCommand(installCommand, ["--data-dir", "/d"], {
      machine: machineFor("linux", home, home, false),
    })
    assert.isFalse(run.ok)
    assert.strictEqual(run.error?.tag, "UserError") // a CliError: the process exits 2
    assert.include(run.error?.message ?? "", "cursor, codex")
    assert.include(run.error?.message ?? "", "--client")
    assert.isFalse(existsSync(join(home, ".cursor", "mcp.json")))
  })

  it("--client all installs into every detected client and no other", async () => {
    const home = homeWith([".cursor"], [".gemini"])
    const run = await runCommand(installCommand, ["--client", "all", "--data-dir", "/d"], {
      machine: machineFor("linux", home, home),
    })
    assert.isTrue(run.ok, run.stderr)
    assert.isTrue(existsSync(join(home, ".cursor", "mcp.json")))
    assert.isTrue(existsSync(join(home, ".gemini", "settings.json")))
    assert.isFalse(existsSync(join(home, ".codex", "config.toml")))
    assert.isFalse(existsSync(join(home, ".claude.json")))
  })

  it("with nothing detected, says to name a client", async () => {
    const home = homeWith()
    const run = await runCommand(installCommand, [], { machine: machineFor("linux", home, home, true) })
    assert.isFalse(run.ok)
    assert.include(run.error?.message ?? "", "no MCP client detected")
  })

  it("uninstall without --client offers the clients that have mnemos configured", async () => {
    const home = homeWith([".cursor"], [".gemini"])
    const machine = machineFor("linux", home, home, false)
    await runCommand(installCommand, ["--client", "gemini", "--data-dir", "/d"], { machine })
    const run = await runCommand(uninstallCommand, [], { machine })
    assert.isFalse(run.ok)
    assert.include(run.error?.message ?? "", "Configured in: gemini")
  })
})
