/**
 * The MCP clients `mnemos mcp install` knows: where each keeps its MCP servers on macOS, Windows
 * and Linux, in which format, under which key, and what an entry looks like.
 *
 * Everything is computed from an explicit `InstallEnvironment` (platform, home, the few
 * environment variables that move config directories, the project directory), never from the
 * process directly, so tests run every OS layout against temporary homes. The platform chooses the
 * layout (which directories); paths are joined with the host's separator, since the files are
 * on the host. Sources for each location are cited in docs/cli.md.
 */
import { join } from "node:path"

/** The clients, by the name `--client` takes. */
export const clientIds = ["claude-desktop", "claude-code", "cursor", "vscode", "windsurf", "codex", "gemini"] as const
export type ClientId = (typeof clientIds)[number]

/** Where an entry goes: the user's own config, or the project's (checked in, shared). */
export type InstallScope = "user" | "project"

/** The operating systems whose layouts differ. */
export type InstallPlatform = "darwin" | "win32" | "linux"

/** Everything a config location depends on. */
export interface InstallEnvironment {
  readonly platform: InstallPlatform
  readonly home: string
  /** Windows `%APPDATA%` (default `<home>\AppData\Roaming`). */
  readonly appData?: string | undefined
  /** `$XDG_CONFIG_HOME` (default `<home>/.config`), Linux only. */
  readonly xdgConfigHome?: string | undefined
  /** `$CODEX_HOME` (default `<home>/.codex`). */
  readonly codexHome?: string | undefined
  /** The project a `project`-scope entry belongs to (default: the working directory). */
  readonly projectDir: string
}

/** The environment of this process. */
export const currentEnvironment = (home: string, projectDir: string, env: NodeJS.ProcessEnv): InstallEnvironment => ({
  platform: process.platform === "darwin" || process.platform === "win32" ? process.platform : "linux",
  home,
  appData: env.APPDATA,
  xdgConfigHome: env.XDG_CONFIG_HOME,
  codexHome: env.CODEX_HOME,
  projectDir,
})

/** How the client is started: the stdio shim of one data directory. */
export interface ServerLaunch {
  readonly command: string
  readonly args: ReadonlyArray<string>
}

/** A client's config file format. */
export type ConfigFormat = "json" | "toml"

/** One MCP client. */
export interface ClientDefinition {
  readonly id: ClientId
  readonly displayName: string
  readonly scopes: ReadonlyArray<InstallScope>
  readonly format: ConfigFormat
  /** The object holding the servers, as a JSON path (`["mcpServers"]`); TOML uses `mcp_servers`. */
  readonly serversPath: ReadonlyArray<string>
  /** The config file of `scope`, or undefined when the client has none on this platform. */
  readonly configPath: (environment: InstallEnvironment, scope: InstallScope) => string | undefined
  /** A directory whose existence means the client is installed (for detection). */
  readonly presence: (environment: InstallEnvironment) => ReadonlyArray<string>
  /** The entry for `launch`, as this client wants it. */
  readonly entry: (launch: ServerLaunch) => Record<string, unknown>
}

/** `%APPDATA%` / `~/Library/Application Support` / `$XDG_CONFIG_HOME`: per-user application settings. */
const appConfigDir = (environment: InstallEnvironment): string => {
  switch (environment.platform) {
    case "darwin":
      return join(environment.home, "Library", "Application Support")
    case "win32":
      return environment.appData ?? join(environment.home, "AppData", "Roaming")
    case "linux":
      return environment.xdgConfigHome ?? join(environment.home, ".config")
  }
}

const inHome = (environment: InstallEnvironment, ...parts: Array<string>) => join(environment.home, ...parts)
const inProject = (environment: InstallEnvironment, ...parts: Array<string>) => join(environment.projectDir, ...parts)

const plainEntry = (launch: ServerLaunch) => ({ command: launch.command, args: [...launch.args] })
const stdioEntry = (launch: ServerLaunch) => ({ type: "stdio", command: launch.command, args: [...launch.args] })

const codexHome = (environment: InstallEnvironment) => environment.codexHome ?? inHome(environment, ".codex")
const vscodeUserDir = (environment: InstallEnvironment) => join(appConfigDir(environment), "Code", "User")
const claudeDesktopDir = (environment: InstallEnvironment) =>
  // No official Linux build; community builds use ~/.config/Claude like the other platforms' layout.
  join(appConfigDir(environment), "Claude")

/** Every client, in the order `status` lists them. */
export const clients: ReadonlyArray<ClientDefinition> = [
  {
    id: "claude-desktop",
    displayName: "Claude Desktop",
    scopes: ["user"],
    format: "json",
    serversPath: ["mcpServers"],
    configPath: (environment, scope) =>
      scope === "user" ? join(claudeDesktopDir(environment), "claude_desktop_config.json") : undefined,
    presence: (environment) => [claudeDesktopDir(environment)],
    entry: plainEntry,
  },
  {
    id: "claude-code",
    displayName: "Claude Code",
    scopes: ["user", "project"],
    format: "json",
    serversPath: ["mcpServers"],
    configPath: (environment, scope) =>
      scope === "user" ? inHome(environment, ".claude.json") : inProject(environment, ".mcp.json"),
    presence: (environment) => [inHome(environment, ".claude"), inHome(environment, ".claude.json")],
    entry: stdioEntry,
  },
  {
    id: "cursor",
    displayName: "Cursor",
    scopes: ["user", "project"],
    format: "json",
    serversPath: ["mcpServers"],
    configPath: (environment, scope) =>
      scope === "user" ? inHome(environment, ".cursor", "mcp.json") : inProject(environment, ".cursor", "mcp.json"),
    presence: (environment) => [inHome(environment, ".cursor")],
    entry: plainEntry,
  },
  {
    id: "vscode",
    displayName: "VS Code",
    scopes: ["user", "project"],
    format: "json",
    serversPath: ["servers"],
    configPath: (environment, scope) =>
      scope === "user" ? join(vscodeUserDir(environment), "mcp.json") : inProject(environment, ".vscode", "mcp.json"),
    presence: (environment) => [vscodeUserDir(environment)],
    entry: stdioEntry,
  },
  {
    id: "windsurf",
    displayName: "Windsurf",
    scopes: ["user"],
    format: "json",
    serversPath: ["mcpServers"],
    configPath: (environment, scope) =>
      scope === "user" ? inHome(environment, ".codeium", "windsurf", "mcp_config.json") : undefined,
    presence: (environment) => [inHome(environment, ".codeium", "windsurf")],
    entry: plainEntry,
  },
  {
    id: "codex",
    displayName: "Codex CLI",
    scopes: ["user", "project"],
    format: "toml",
    serversPath: ["mcp_servers"],
    configPath: (environment, scope) =>
      scope === "user" ? join(codexHome(environment), "config.toml") : inProject(environment, ".codex", "config.toml"),
    presence: (environment) => [codexHome(environment)],
    entry: plainEntry,
  },
  {
    id: "gemini",
    displayName: "Gemini CLI",
    scopes: ["user", "project"],
    format: "json",
    serversPath: ["mcpServers"],
    configPath: (environment, scope) =>
      scope === "user"
        ? inHome(environment, ".gemini", "settings.json")
        : inProject(environment, ".gemini", "settings.json"),
    presence: (environment) => [inHome(environment, ".gemini")],
    entry: plainEntry,
  },
]

/** The client named `id`. */
export const clientById = (id: ClientId): ClientDefinition => clients.find((client) => client.id === id)!
