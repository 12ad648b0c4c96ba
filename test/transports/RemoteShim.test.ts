/**
 * A remote agent: `mnemos mcp --host H --port P --no-start` on another machine, with the daemon's
 * token in its own data directory, reaches a daemon bound beyond loopback. (Simulated on one
 * machine: the daemon listens on this machine's non-loopback address, the shim has its own data
 * directory holding only a copy of the token.)
 *
 * Known to fail (reported): the shim accepts only a daemon whose /ping names the shim's own data
 * directory path, which a remote daemon never does, so it waits forever. Proposed fix in
 * transports/Shim.ts `locateDaemon`: when the daemon is given explicitly (`--no-start`, or a
 * `--host` that is not loopback), accept any mnemos daemon answering at host:port.
 */
import { copyFileSync } from "node:fs"
import { networkInterfaces } from "node:os"
import { join } from "node:path"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { afterAll, describe, expect, it } from "vitest"
import { callTool, cleanup, cliArgs, repoRoot, startDaemon, tempDir } from "./harness.ts"

afterAll(cleanup)

const externalIpv4 = Object.values(networkInterfaces())
  .flat()
  .find((address) => address !== undefined && address.family === "IPv4" && !address.internal)?.address

describe.skipIf(externalIpv4 === undefined)("mnemos mcp against a remote daemon", () => {
  it("connects with the token copied into its own data directory", async () => {
    const remote = await startDaemon({ host: externalIpv4! })
    const localDir = tempDir()
    copyFileSync(join(remote.dataDir, "token"), join(localDir, "token"))
    const client = new Client({ name: "remote-agent", version: "1.0.0" })
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: cliArgs(
        "mcp",
        "--data-dir",
        localDir,
        "--host",
        externalIpv4!,
        "--port",
        String(remote.port),
        "--no-start",
      ),
      cwd: repoRoot,
      stderr: "pipe",
    })
    try {
      await client.connect(transport, { timeout: 8_000 })
      const result = await callTool(client, "create_entities", {
        entities: [{ name: "from-afar", entityType: "t", observations: [] }],
      })
      expect(result.isError, result.text).toBe(false)
    } finally {
      await client.close().catch(() => undefined)
    }
  })
})
