/**
 * `mnemos serve`: run the engine on a data directory until SIGINT/SIGTERM.
 *
 * As a daemon (the default) it serves MCP over Streamable HTTP, SSE and WebSocket, and the REST
 * API, on `--host`:`--port` (127.0.0.1:7437). If that port already has a mnemos daemon for the
 * same data directory, it says so and exits 0; if anything else holds the port, it exits 1 with
 * a clear message. Every request but `/ping` needs the data directory's bearer token (generated
 * into it, mode 0600), on loopback too: any local user can reach loopback, so only whoever can
 * read the data directory may talk to its daemon (the dashboard logs in with a cookie it keys).
 * It prints a one-time login
 * link to the dashboard (`mnemos dashboard` mints more). Editor focus datagrams are read on loopback UDP `--udp-port` (default: the HTTP
 * port + 1); if that port is taken the daemon says so and runs without them. With `--stdio` the
 * engine speaks MCP on stdin/stdout in this process instead (embedded mode, one agent, no
 * network); logs go to stderr only. Either way the data
 * directory's lock is held for the life of the process, and shutdown answers in-flight work and
 * flushes before exiting 0.
 *
 * This module holds the command and its flags (which most other commands share) and nothing
 * heavy: the run itself is ServeRun.ts, imported by the handler.
 */
import { Effect } from "effect"
import { Command, Flag } from "effect/cli"
import { toolsetNames } from "../tools/Toolsets.ts"
import { defaultHost, defaultPort } from "../transports/Daemon.ts"
import { natsCredsFlag, natsFlag, natsLeaseFlag, natsPrefixFlag, natsReplicasFlag } from "./NatsFlags.ts"

/** `--data-dir`, shared by every command that opens a data directory. */
export const dataDirFlag = Flag.String("data-dir").pipe(
  Flag.withDescription(
    "Data directory (default: $MNEMOS_DATA_DIR, else $MCP_MEMORY_STORE_DIR, else $MEMORY_PATH, else $XDG_DATA_HOME/mnemos, else ~/.local/share/mnemos)",
  ),
  Flag.optional,
)
/** `--port` of the daemon. */
export const portFlag = Flag.Int("port").pipe(
  Flag.withDescription(`HTTP port of the daemon (default ${defaultPort})`),
  Flag.withDefault(defaultPort),
)
/** `--host` of the daemon. */
export const hostFlag = Flag.String("host").pipe(
  Flag.withDescription(`Address to listen on (default ${defaultHost}); every request but /ping needs the bearer token`),
  Flag.withDefault(defaultHost),
)

/** `--udp-port` of the editor focus listener. */
export const udpPortFlag = Flag.Int("udp-port").pipe(
  Flag.withDescription("Loopback UDP port for editor focus datagrams (default: the HTTP port + 1)"),
  Flag.optional,
)

/** `--nvim`: the Neovim instance the editor tools talk to. */
export const nvimFlag = Flag.String("nvim").pipe(
  Flag.withDescription(
    "Neovim RPC address (socket path or host:port) for the nvim_* tools (default: $NVIM, else the last focused Neovim)",
  ),
  Flag.optional,
)
/** `--nvim-allow-lua`: let agents run Lua in Neovim (audited). */
export const nvimAllowLuaFlag = Flag.Boolean("nvim-allow-lua").pipe(
  Flag.withDescription(
    "Enable nvim_execute_lua (arbitrary Lua in the editor; every call audited to nvim-lua-audit.jsonl)",
  ),
  Flag.withDefault(false),
)

/** `--model DIR`: a local sentence model to embed with instead of the chosen or built-in one. */
export const modelFlag = Flag.String("model").pipe(
  Flag.withDescription(
    "A local sentence model directory to embed with (model.onnx + tokenizer.json, e.g. all-MiniLM-L6-v2); default: $MNEMOS_MODEL, else the model chosen with `mnemos model use`, else the built-in GloVe model",
  ),
  Flag.optional,
)

/** `--active-nvim-file`: where the daemon keeps seed 002's active_nvim.txt. */
export const activeNvimFileFlag = Flag.String("active-nvim-file").pipe(
  Flag.withDescription(
    "File kept at the editor's latest focus, one JSON line {session_id, file, line, col} as seed 002's active_nvim.txt (default: $MNEMOS_ACTIVE_NVIM_FILE, else active_nvim.txt in the data directory)",
  ),
  Flag.optional,
)
/** `--toolsets`: which toolsets `tools/list` shows. */
export const toolsetsFlag = Flag.String("toolsets").pipe(
  Flag.withDescription(
    `Comma-separated toolsets to offer (${toolsetNames.join(", ")}; "all"); default: ${toolsetNames.join(",")}`,
  ),
  Flag.optional,
)

export const serveCommand = Command.make(
  "serve",
  {
    dataDir: dataDirFlag,
    stdio: Flag.Boolean("stdio").pipe(
      Flag.withDescription("Speak MCP on stdin/stdout in this process (embedded mode)"),
      Flag.withDefault(false),
    ),
    port: portFlag,
    host: hostFlag,
    udpPort: udpPortFlag,
    activeNvimFile: activeNvimFileFlag,
    toolsets: toolsetsFlag,
    nvim: nvimFlag,
    nvimAllowLua: nvimAllowLuaFlag,
    model: modelFlag,
    nats: natsFlag,
    natsPrefix: natsPrefixFlag,
    natsReplicas: natsReplicasFlag,
    natsCreds: natsCredsFlag,
    natsLeaseMs: natsLeaseFlag,
  },
  // The engine, the transports and the tools load only when the daemon runs (ServeRun.ts).
  (options) =>
    Effect.flatMap(
      Effect.promise(() => import("./ServeRun.ts")),
      ({ serve }) => serve(options),
    ),
).pipe(Command.withDescription("Run the memory engine on a data directory until interrupted (daemon, or --stdio)"))
