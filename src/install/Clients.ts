/**
 * The MCP clients `mnemos mcp install` knows: where each keeps its MCP servers on macOS, Windows
 * and Linux, in which format, under which key, and what an entry looks like.
 *
 * Everything is computed from an explicit `InstallEnvironment` (platform, home, the few
 * environment variables that move config directories, the project directory), never from the
 * process directly, so tests run every OS layout against temporary homes. The platform chooses the
 * layout (which directories); paths are joined with the host's separator, since the files are
 * on the host. Sources for each location are cited in docs/cli.md.
 *
 * A client may read its config from more than one place (Claude Desktop: `~/.config/Claude` and
 * the lowercase `~/.config/claude` seed 000 names on Linux; on Windows the MSIX package's
 * virtualized folder besides `%APPDATA%`): every place is looked for, and `chooseConfigPath` picks
 * the existing file, the one the client reads when several exist, and says why. Environment
 * variables that are empty (or, for the XDG ones, relative) count as unset, as the XDG spec says.
 */
import { existsSync } from "node:fs"
import { dirname, isAbsolute, join } from "node:path"

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
  /** Windows `%LOCALAPPDATA%` (default `<home>\AppData\Local`), where MSIX packages keep their files. */
  readonly localAppData?: string | undefined
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
  appData: setOrUndefined(env.APPDATA),
  localAppData: setOrUndefined(env.LOCALAPPDATA),
  // The XDG spec: an empty or relative $XDG_CONFIG_HOME is invalid and ignored (never `./Claude/...`).
  xdgConfigHome: env.XDG_CONFIG_HOME && isAbsolute(env.XDG_CONFIG_HOME) ? env.XDG_CONFIG_HOME : undefined,
  codexHome: setOrUndefined(env.CODEX_HOME),
  projectDir,
})

/** An empty variable is an unset one. */
const setOrUndefined = (value: string | undefined) => (value === "" ? undefined : value)

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
  /** Where the config file of `scope` can be, or undefined when the client has none on this platform. */
  readonly configPlaces: (environment: InstallEnvironment, scope: InstallScope) => ConfigPlaces | undefined
  /** A directory whose existence means the client is installed (for detection). */
  readonly presence: (environment: InstallEnvironment) => ReadonlyArray<string>
  /** The entry for `launch`, as this client wants it. */
  readonly entry: (launch: ServerLaunch) => Record<string, unknown>
}

/** Every place a client's config file can be. */
export interface ConfigPlaces {
  /** The files the client may read; when several exist, it reads the first. */
  readonly candidates: ReadonlyArray<string>
  /** The one to create when no candidate exists, nor its folder. */
  readonly fresh: string
}

/** The one file a client reads. */
const only = (path: string): ConfigPlaces => ({ candidates: [path], fresh: path })

/** The file chosen among a client's places, and why (when there was a choice). */
export interface ChosenConfig {
  readonly path: string
  readonly why: string | undefined
  /** The other candidates that exist as files. */
  readonly alsoPresent: ReadonlyArray<string>
}

/**
 * Picks the file to read and edit: the existing one; of several, the first (the one the client
 * reads); of none, the one whose folder exists (the client made it), else `fresh`.
 */
export const chooseConfigPath = (
  client: Pick<ClientDefinition, "displayName">,
  places: ConfigPlaces,
  exists: (path: string) => boolean = existsSync,
): ChosenConfig => {
  const { candidates } = places
  const existing = candidates.filter(exists)
  const elsewhere = (path: string) => candidates.filter((candidate) => candidate !== path).join(", ")
  if (existing.length > 1)
    return {
      path: existing[0]!,
      why: `${existing.join(" and ")} all exist: ${client.displayName} reads ${existing[0]}, the one used; the other is left as it is`,
      alsoPresent: existing.slice(1),
    }
  if (existing.length === 1)
    return {
      path: existing[0]!,
      why: candidates.length > 1 ? `the existing file (also looked for: ${elsewhere(existing[0]!)})` : undefined,
      alsoPresent: [],
    }
  const withFolder = candidates.find((candidate) => exists(dirname(candidate)))
  const path = withFolder ?? places.fresh
  return {
    path,
    why:
      candidates.length > 1
        ? `no config file yet; ${withFolder !== undefined ? `${dirname(path)} exists` : `${client.displayName}'s default`} (also looked for: ${elsewhere(path)})`
        : undefined,
    alsoPresent: [],
  }
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
const claudeDesktopFile = "claude_desktop_config.json"
/** The Microsoft Store / MSIX package of Claude Desktop (the Windows installer's since 2026). */
const claudeDesktopPackage = (environment: InstallEnvironment) =>
  join(environment.localAppData ?? join(environment.home, "AppData", "Local"), "Packages", "Claude_pzs8sxrjxfjjc")
const claudeDesktopPlaces = (environment: InstallEnvironment): ConfigPlaces => {
  const classic = join(appConfigDir(environment), "Claude", claudeDesktopFile)
  switch (environment.platform) {
    case "darwin":
      return only(classic)
    case "win32": {
      // A packaged app reads its virtualized copy of %APPDATA%, never the real one.
      const packaged = join(claudeDesktopPackage(environment), "LocalCache", "Roaming", "Claude", claudeDesktopFile)
      return {
        candidates: [packaged, classic],
        fresh: existsSync(claudeDesktopPackage(environment)) ? packaged : classic,
      }
    }
    case "linux":
      // No official Linux build: community builds (Electron, product name "Claude") read
      // ~/.config/Claude; seed 000 documents the lowercase ~/.config/claude.
      return { candidates: [classic, join(appConfigDir(environment), "claude", claudeDesktopFile)], fresh: classic }
  }
}

/** Every client, in the order `status` lists them. */
export const clients: ReadonlyArray<ClientDefinition> = [
  {
    id: "claude-desktop",
    displayName: "Claude Desktop",
    scopes: ["user"],
    format: "json",
    serversPath: ["mcpServers"],
    configPlaces: (environment, scope) => (scope === "user" ? claudeDesktopPlaces(environment) : undefined),
    presence: (environment) => [
      ...claudeDesktopPlaces(environment).candidates.map((candidate) => dirname(candidate)),
      ...(environment.platform === "win32" ? [claudeDesktopPackage(environment)] : []),
    ],
    entry: plainEntry,
  },
  {
    id: "claude-code",
    displayName: "Claude Code",
    scopes: ["user", "project"],
    format: "json",
    serversPath: ["mcpServers"],
    configPlaces: (environment, scope) =>
      only(scope === "user" ? inHome(environment, ".claude.json") : inProject(environment, ".mcp.json")),
    presence: (environment) => [inHome(environment, ".claude"), inHome(environment, ".claude.json")],
    entry: stdioEntry,
  },
  {
    id: "cursor",
    displayName: "Cursor",
    scopes: ["user", "project"],
    format: "json",
    serversPath: ["mcpServers"],
    configPlaces: (environment, scope) =>
      only(
        scope === "user" ? inHome(environment, ".cursor", "mcp.json") : inProject(environment, ".cursor", "mcp.json"),
      ),
    presence: (environment) => [inHome(environment, ".cursor")],
    entry: plainEntry,
  },
  {
    id: "vscode",
    displayName: "VS Code",
    scopes: ["user", "project"],
    format: "json",
    serversPath: ["servers"],
    configPlaces: (environment, scope) =>
      only(
        scope === "user" ? join(vscodeUserDir(environment), "mcp.json") : inProject(environment, ".vscode", "mcp.json"),
      ),
    presence: (environment) => [vscodeUserDir(environment)],
    entry: stdioEntry,
  },
  {
    id: "windsurf",
    displayName: "Windsurf",
    scopes: ["user"],
    format: "json",
    serversPath: ["mcpServers"],
    configPlaces: (environment, scope) =>
      scope === "user" ? only(inHome(environment, ".codeium", "windsurf", "mcp_config.json")) : undefined,
    presence: (environment) => [inHome(environment, ".codeium", "windsurf")],
    entry: plainEntry,
  },
  {
    id: "codex",
    displayName: "Codex CLI",
    scopes: ["user", "project"],
    format: "toml",
    serversPath: ["mcp_servers"],
    configPlaces: (environment, scope) =>
      only(
        scope === "user"
          ? join(codexHome(environment), "config.toml")
          : inProject(environment, ".codex", "config.toml"),
      ),
    presence: (environment) => [codexHome(environment)],
    entry: plainEntry,
  },
  {
    id: "gemini",
    displayName: "Gemini CLI",
    scopes: ["user", "project"],
    format: "json",
    serversPath: ["mcpServers"],
    configPlaces: (environment, scope) =>
      only(
        scope === "user"
          ? inHome(environment, ".gemini", "settings.json")
          : inProject(environment, ".gemini", "settings.json"),
      ),
    presence: (environment) => [inHome(environment, ".gemini")],
    entry: plainEntry,
  },
]

/** The client named `id`. */
export const clientById = (id: ClientId): ClientDefinition => clients.find((client) => client.id === id)!
