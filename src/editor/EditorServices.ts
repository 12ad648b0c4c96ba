/**
 * The editor services of a running engine (`mnemos serve`, daemon or `--stdio`): the Neovim
 * settings from the command line and environment, and the ring of the daemon's recent log lines.
 * In the daemon, `EditorFocus` and `TerminalLog` come from its telemetry (`TelemetryFeeds.ts`).
 */
import { join } from "node:path"
import { Layer } from "effect"
import { layerRing } from "./DaemonLog.ts"
import { NeovimConfig, settingsFromEnvironment } from "./Neovim.ts"

/** The file `nvim_execute_lua` calls are audited to, in the data directory. */
export const luaAuditFileName = "nvim-lua-audit.jsonl"

/** What `mnemos serve` was told about the editor. */
export interface EditorOptions {
  readonly dataDir: string
  /** `--nvim`: the Neovim address to use, over `$NVIM` and the focus telemetry. */
  readonly nvim?: string | undefined
  /** `--nvim-allow-lua`: let `nvim_execute_lua` run. */
  readonly allowLua: boolean
}

/** Provides `NeovimConfig` and the daemon log ring (which also installs its logger). */
export const layer = (options: EditorOptions): Layer.Layer<never> =>
  Layer.merge(
    Layer.succeed(NeovimConfig, {
      ...settingsFromEnvironment(process.env),
      ...(options.nvim !== undefined && options.nvim !== "" ? { address: options.nvim } : {}),
      executeLuaEnabled: options.allowLua,
      luaAuditFile: join(options.dataDir, luaAuditFileName),
    }),
    layerRing(),
  )
