/**
 * A data directory stays private on disk: started on a directory made 0755 by hand, with a file
 * in it others can read, the daemon tightens what is there (and says so on stderr), and every
 * file and folder it creates afterwards — stores, logs, indexes, the token — is 0600 / 0700.
 * `doctor` lists what others can read before a start and says the next start tightens it.
 */
import { chmodSync, lstatSync, mkdirSync, readdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { callTool, cleanup, connectClient, runCli, startDaemon, tempDir } from "../transports/harness.ts"

afterAll(cleanup)

/** Every file and folder under `dir` (itself included) that others may read or write, with its mode. */
const readableByOthers = (dir: string): Array<string> => {
  const found: Array<string> = []
  const walk = (path: string) => {
    const stats = lstatSync(path)
    if (stats.isSymbolicLink()) return
    if ((stats.mode & 0o077) !== 0) found.push(`${path} 0${(stats.mode & 0o777).toString(8)}`)
    if (stats.isDirectory()) for (const name of readdirSync(path)) walk(join(path, name))
  }
  walk(dir)
  return found
}

describe.skipIf(process.platform === "win32")("a data directory on disk", () => {
  it("a 0755 directory is tightened at start; everything the daemon writes is 0600 / 0700", async () => {
    const dataDir = join(tempDir(), "memory")
    mkdirSync(join(dataDir, "notes"), { recursive: true })
    chmodSync(dataDir, 0o755)
    chmodSync(join(dataDir, "notes"), 0o755)
    writeFileSync(join(dataDir, "notes", "readme.txt"), "left by hand\n")
    chmodSync(join(dataDir, "notes", "readme.txt"), 0o644)
    expect(readableByOthers(dataDir)).toHaveLength(3)

    const doctor = await runCli(["doctor", "--data-dir", dataDir])
    expect(doctor.output).toContain("readable by other users")
    expect(doctor.output).toContain("3 file(s) and folder(s)")

    const daemon = await startDaemon({ dataDir })
    expect(daemon.output()).toMatch(/made .*memory private: 1 file\(s\) and 2 folder\(s\)/)
    const client = await connectClient("ws", daemon.url)
    const created = await callTool(client, "create_entities", {
      entities: [{ name: "secret plan", entityType: "plan", observations: ["ship on friday"] }],
    })
    expect(created.isError, created.text).toBe(false)
    expect((await callTool(client, "add_task", { title: "ship it" })).isError).toBe(false)
    expect((await callTool(client, "search_nodes", { query: "plan" })).isError).toBe(false)
    await client.close()
    await daemon.stop()
    expect(readableByOthers(dataDir)).toEqual([])
    // The daemon made stores, logs and its token while it ran: all of them are in the walk above.
    expect(readdirSync(dataDir)).toEqual(expect.arrayContaining(["stores", "token", "notes"]))
  })
})
