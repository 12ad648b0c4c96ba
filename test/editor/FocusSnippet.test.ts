/**
 * The Neovim focus snippet (scripts/nvim/mnemos-focus.lua) in a real headless Neovim: entering a
 * buffer and moving the cursor send datagrams the daemon's telemetry accepts, carrying the file,
 * the 1-based cursor, a session id and the instance's RPC address; cursor moves are coalesced.
 */
import { createSocket, type Socket } from "node:dgram"
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { Effect, Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { EditorFocusFromJson } from "../../src/transports/Telemetry.ts"
import { type HeadlessNeovim, lacks, nvimRequests, removeTempDirs, startNeovim, tempDir } from "./harness.ts"

const snippet = join(import.meta.dirname, "..", "..", "scripts", "nvim", "mnemos-focus.lua")

let nvim: HeadlessNeovim
let listener: Socket
const received: Array<string> = []

const waitForDatagram = async (matches: (focus: Record<string, unknown>) => boolean) => {
  const deadline = Date.now() + 10_000
  while (Date.now() < deadline) {
    const found = received.map((text) => JSON.parse(text) as Record<string, unknown>).find(matches)
    if (found !== undefined) return found
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  throw new Error(`no matching datagram; received:\n${received.join("\n")}`)
}

describe.skipIf(lacks("nvim"))("the Neovim focus snippet", () => {
  beforeAll(async () => {
    listener = createSocket("udp4")
    listener.on("message", (message) => received.push(message.toString("utf8")))
    await new Promise<void>((resolve) => listener.bind(0, "127.0.0.1", resolve))
    nvim = await startNeovim([
      "--cmd",
      `let g:mnemos_udp_port = ${listener.address().port} | let g:mnemos_focus_delay_ms = 20`,
      "-c",
      `luafile ${snippet}`,
    ])
  })
  afterAll(async () => {
    await nvim?.stop()
    listener?.close()
    removeTempDirs()
  })

  it("reports the file, cursor, session and server, in a datagram the telemetry accepts", async () => {
    const file = join(tempDir("mnemos-focus-"), "main.go")
    writeFileSync(file, 'package main\n\nfunc main() {\n\tprintln("hi")\n}\n')
    await Effect.runPromise(nvimRequests(nvim.address, [["nvim_command", [`edit ${file}`]]]))
    const entered = await waitForDatagram((focus) => focus.file === file)
    expect(entered).toMatchObject({ file, line: 1, col: 1, server: nvim.address })
    expect(entered.session).toMatch(/^nvim-\d+$/)

    received.length = 0
    await Effect.runPromise(
      nvimRequests(nvim.address, [
        ["nvim_win_set_cursor", [0, [2, 0]]],
        ["nvim_win_set_cursor", [0, [3, 0]]],
        ["nvim_win_set_cursor", [0, [4, 1]]],
      ]),
    )
    const moved = await waitForDatagram((focus) => focus.line === 4)
    expect(moved).toMatchObject({ file, line: 4, col: 2, server: nvim.address, session: entered.session })
    // Coalesced: the intermediate positions were not each sent.
    expect(received.length).toBeLessThan(3)

    const decoded = Schema.decodeUnknownSync(EditorFocusFromJson)(received.at(-1))
    expect(decoded).toMatchObject({ file, line: 4, col: 2 })
  })

  it("sends nothing for buffers that are not files", async () => {
    received.length = 0
    await Effect.runPromise(nvimRequests(nvim.address, [["nvim_command", ["enew"]]]))
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(received).toEqual([])
  })
})
