/**
 * Seed 002's `active_nvim.txt`, kept by the built daemon from UDP focus datagrams: one JSON line
 * `{"session_id","file","line","col"}` of the latest focus of any session, in the data directory
 * (or where `--active-nvim-file` says), mode 0600, replaced whole (a temporary file renamed over
 * it: a reader holding the old file keeps the old line, and no temporary file stays behind).
 */
import { createSocket } from "node:dgram"
import { existsSync, linkSync, readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join } from "node:path"
import { afterAll, assert, describe, it } from "vitest"
import { effectiveConfig } from "../../src/cli/ConfigCommand.ts"
import { cleanup, startDaemon, tempDir } from "../transports/harness.ts"

afterAll(cleanup)

const sendFocus = async (udpPort: number, focus: Record<string, unknown>) => {
  const socket = createSocket("udp4")
  await new Promise<void>((resolve, reject) =>
    socket.send(JSON.stringify(focus), udpPort, "127.0.0.1", (error) => (error ? reject(error) : resolve())),
  )
  socket.close()
}

/** Sends `focus` until `path` holds its line (UDP may drop a datagram); returns the line. */
const focusUntilWritten = async (udpPort: number, path: string, focus: Record<string, unknown>, expected: string) => {
  let text = ""
  for (let attempt = 0; attempt < 100 && text !== expected; attempt++) {
    if (attempt % 10 === 0) await sendFocus(udpPort, focus)
    await new Promise((resolve) => setTimeout(resolve, 50))
    text = existsSync(path) ? readFileSync(path, "utf8") : ""
  }
  return text
}

describe("active_nvim.txt", () => {
  it("is kept at the latest focus in the data directory, 0600, replaced whole", async () => {
    const daemon = await startDaemon({ built: true })
    const path = join(daemon.dataDir, "active_nvim.txt")
    assert.include(daemon.output(), `active editor:    ${path}`)
    // Seed 002's Lua script names the session session_id.
    const first = { session_id: "nvim-1", file: "/src/app/main.rs", line: 12, col: 4 }
    const firstLine = `${JSON.stringify(first)}\n`
    assert.strictEqual(await focusUntilWritten(daemon.udpPort, path, first, firstLine), firstLine)
    assert.strictEqual(statSync(path).mode & 0o777, 0o600)

    const held = join(daemon.dataDir, "held-by-a-reader")
    linkSync(path, held)
    const second = { session: "nvim-2", file: "/src/app/lib.rs", line: 40, col: 1 }
    const secondLine = `${JSON.stringify({ session_id: "nvim-2", file: "/src/app/lib.rs", line: 40, col: 1 })}\n`
    assert.strictEqual(await focusUntilWritten(daemon.udpPort, path, second, secondLine), secondLine)
    assert.strictEqual(readFileSync(held, "utf8"), firstLine, "the old file was replaced, not rewritten in place")
    assert.strictEqual(statSync(path).mode & 0o777, 0o600)
    assert.deepStrictEqual(
      readdirSync(daemon.dataDir).filter((name) => name.endsWith(".tmp")),
      [],
    )
  })

  it("goes where --active-nvim-file says, its folder made", async () => {
    const path = join(tempDir(), "scripts", "active.txt")
    const daemon = await startDaemon({ built: true, args: ["--active-nvim-file", path] })
    const focus = { session_id: "nvim-3", file: "/etc/hosts", line: 1, col: 1 }
    const line = `${JSON.stringify(focus)}\n`
    assert.strictEqual(await focusUntilWritten(daemon.udpPort, path, focus, line), line)
    assert.isFalse(existsSync(join(daemon.dataDir, "active_nvim.txt")))
    assert.strictEqual(statSync(dirname(path)).isDirectory(), true)
  })
})

describe("where active_nvim.txt goes", () => {
  it("--active-nvim-file, else MNEMOS_ACTIVE_NVIM_FILE, else the data directory; mnemos config says which", () => {
    const entry = (flags: { activeNvimFile?: string }, env: Record<string, string>) =>
      effectiveConfig({ dataDir: "/data", ...flags }, env).values.find((value) => value.key === "editor.activeNvimFile")
    assert.deepInclude(entry({}, {}), { value: "/data/active_nvim.txt", source: "default" })
    assert.deepInclude(entry({}, { MNEMOS_ACTIVE_NVIM_FILE: "~/active.txt", HOME: "/home/u" }), {
      value: "/home/u/active.txt",
      from: "MNEMOS_ACTIVE_NVIM_FILE",
    })
    assert.deepInclude(entry({ activeNvimFile: "/x/a.txt" }, { MNEMOS_ACTIVE_NVIM_FILE: "/y" }), {
      value: "/x/a.txt",
      from: "--active-nvim-file",
    })
  })
})
