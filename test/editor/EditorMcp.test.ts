/**
 * The editor toolset through `mnemos serve`, end to end over MCP: `--nvim` and `$NVIM` reach a
 * headless Neovim, `nvim_execute_lua` stays off until `--nvim-allow-lua` and is then audited
 * into the data directory and the daemon log; in the daemon, a focus datagram carrying the
 * Neovim address (`server`) leads the tools to that instance, and the shell commands posted to
 * the terminal telemetry show in `get_recent_logs`.
 */
import { createSocket } from "node:dgram"
import { readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { luaAuditFileName } from "../../src/editor/EditorServices.ts"
import {
  authHeaders,
  callTool,
  cleanup,
  cliArgs,
  connectClient,
  getJson,
  repoRoot,
  startDaemon,
  tempDir,
} from "../transports/harness.ts"
import { type HeadlessNeovim, lacks, removeTempDirs, startNeovim } from "./harness.ts"

const editorToolNames = [
  "nvim_get_active_buffer",
  "nvim_get_cursor",
  "nvim_goto_line",
  "nvim_list_buffers",
  "nvim_get_visual_selection",
  "nvim_get_diagnostics",
  "nvim_set_diagnostics",
  "nvim_execute_lua",
  "read_file_skeleton",
  "get_active_worktree_context",
  "get_recent_logs",
  "clipboard_read",
  "clipboard_write",
  "toggle_clipboard_watch_mode",
]

let nvim: HeadlessNeovim
let file: string
const clients: Array<Client> = []

/** `mnemos serve --stdio` with extra arguments and environment. */
const startEmbedded = async (dataDir: string, args: ReadonlyArray<string>, env: Record<string, string> = {}) => {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: cliArgs("serve", "--stdio", "--data-dir", dataDir, ...args),
    cwd: repoRoot,
    env: { ...(process.env as Record<string, string>), NVIM: "", ...env },
    stderr: "pipe",
  })
  let stderr = ""
  transport.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString()
  })
  const client = new Client({ name: "editor-e2e", version: "1.0.0" })
  client.onclose = () => {
    if (stderr.includes("Error")) console.error(`mnemos serve --stdio ended:\n${stderr}`)
  }
  await client.connect(transport)
  clients.push(client)
  return client
}

describe.skipIf(lacks("nvim"))("the editor toolset through mnemos serve", () => {
  beforeAll(async () => {
    nvim = await startNeovim()
    file = join(tempDir("mnemos-editor-e2e-"), "notes.md")
    writeFileSync(file, "# Notes\n\nfirst\nsecond\n")
  })
  afterAll(async () => {
    await Promise.all(clients.map((client) => client.close().catch(() => undefined)))
    await cleanup()
    await nvim?.stop()
    removeTempDirs()
  })

  it("serve --stdio --nvim: the tools are listed and drive that Neovim; Lua stays off", async () => {
    const client = await startEmbedded(tempDir(), ["--nvim", nvim.address])
    const moved = await callTool(client, "nvim_goto_line", { file, line: 3, col: 2 })
    expect(moved.isError).toBe(false)
    expect(moved.structured).toMatchObject({ server: { address: nvim.address, source: "flag" }, line: 3, col: 2 })
    const cursor = await callTool(client, "nvim_get_cursor", {})
    expect(cursor.structured).toMatchObject({ name: file, line: 3, col: 2, lineText: "first" })
    const lua = await callTool(client, "nvim_execute_lua", { code: "return 1" })
    expect(lua.isError).toBe(true)
    expect(JSON.parse(lua.text)).toMatchObject({ status: "ERROR", error: { code: "VALIDATION_ERROR" } })
    expect(lua.text).toContain("--nvim-allow-lua")
    const { tools } = await client.listTools()
    expect(tools.map((tool) => tool.name)).toEqual(expect.arrayContaining(editorToolNames))
  })

  it("serve --stdio with $NVIM and --nvim-allow-lua: Lua runs, audited to the data directory and the daemon log", async () => {
    const dataDir = tempDir()
    const client = await startEmbedded(dataDir, ["--nvim-allow-lua"], { NVIM: nvim.address })
    const lua = await callTool(client, "nvim_execute_lua", { code: "return { line = vim.fn.line('.') }" })
    expect(lua.isError).toBe(false)
    expect(lua.structured).toMatchObject({ server: { source: "environment" }, result: { line: 3 } })
    const audit = readFileSync(join(dataDir, luaAuditFileName), "utf8").trim().split("\n")
    expect(audit.map((line) => (JSON.parse(line) as { event: string }).event)).toEqual(["run", "done"])
    expect(JSON.parse(audit[0]!)).toMatchObject({
      code: "return { line = vim.fn.line('.') }",
      client: "editor-e2e/1.0.0 via stdio",
    })
    const logs = await callTool(client, "get_recent_logs", { level: "warning" })
    const lines = (
      logs.structured!.daemon as { lines: Array<{ message: string; annotations?: Record<string, unknown> }> }
    ).lines
    expect(lines.some((line) => line.message === "nvim_execute_lua" && line.annotations?.event === "run")).toBe(true)
  })

  it("the daemon: the terminal telemetry shows in get_recent_logs", async () => {
    const daemon = await startDaemon({ env: { NVIM: "" } })
    const posted = await getJson(`${daemon.url}/terminal/telemetry`, {
      method: "POST",
      headers: { "content-type": "application/json", ...authHeaders(daemon.dataDir) },
      body: JSON.stringify({ command: "cargo build", exit_code: 101, cwd: "/src/app", output_tail: "error[E0308]" }),
    })
    expect(posted.status).toBeLessThan(300)
    const client = await connectClient("ws", daemon.url)
    const logs = await callTool(client, "get_recent_logs", {})
    expect((logs.structured!.terminal as { commands: Array<unknown> }).commands).toEqual([
      expect.objectContaining({ command: "cargo build", exitCode: 101, cwd: "/src/app", outputTail: "error[E0308]" }),
    ])
  })

  it("the daemon: the last focus datagram naming a Neovim server leads the tools there", async () => {
    const daemon = await startDaemon({ env: { NVIM: "" } })
    const client = await connectClient("ws", daemon.url)
    const before = await callTool(client, "nvim_get_cursor", {})
    expect(before.isError).toBe(true)
    expect(before.text).toContain("no Neovim instance is known")
    const datagram = JSON.stringify({ file, line: 3, col: 1, session: "nvim-e2e", server: nvim.address })
    const socket = createSocket("udp4")
    await new Promise<void>((resolve, reject) =>
      socket.send(datagram, daemon.udpPort, "127.0.0.1", (error) => (error ? reject(error) : resolve())),
    )
    socket.close()
    let cursor = await callTool(client, "nvim_get_cursor", {})
    for (let attempt = 0; attempt < 50 && cursor.isError; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 50))
      cursor = await callTool(client, "nvim_get_cursor", {})
    }
    expect(cursor.text).not.toContain("no Neovim instance is known")
    expect(cursor.structured).toMatchObject({ server: { address: nvim.address, source: "focus" }, name: file })
  })
})
