/**
 * Telemetry through the daemon: `POST /terminal/telemetry` and UDP focus datagrams become the
 * MCP resources `memory://terminal/recent` and `memory://editor/active`, subscribed sessions on
 * any transport are told when they change (and unsubscribed ones are not), `/api/stats` counts
 * every outcome, and the shell hook in `scripts/` reports real bash commands.
 */
import { spawn, spawnSync } from "node:child_process"
import { createSocket } from "node:dgram"
import { join } from "node:path"
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  apiGet,
  authHeaders,
  cleanup,
  connectClient,
  type DaemonProcess,
  getJson,
  type NetworkTransport,
  networkTransports,
  repoRoot,
  sleep,
  startDaemon,
  waitFor,
} from "./harness.ts"

let daemon: DaemonProcess
beforeAll(async () => {
  daemon = await startDaemon()
})
afterAll(cleanup)

interface Stats {
  telemetry: {
    terminal: { accepted: number; invalid: number; kept: number }
    udp: {
      port: number
      received: number
      accepted: number
      droppedNonLoopback: number
      droppedOversized: number
      invalid: number
    }
  }
}
const stats = async () => (await apiGet<Stats>(daemon, "/api/stats")).telemetry

const postCommand = (body: unknown) =>
  getJson(`${daemon.url}/terminal/telemetry`, {
    method: "POST",
    headers: { "content-type": "application/json", ...authHeaders(daemon.dataDir) },
    body: JSON.stringify(body),
  })

const readJson = async (client: Client, uri: string) => {
  const read = await client.readResource({ uri })
  expect(read.contents[0]!.mimeType).toBe("application/json")
  return JSON.parse((read.contents[0] as { text: string }).text)
}

/** A client per network transport, each recording the resource updates it is sent. */
const watchers = async (subscribeTo: string | undefined) =>
  Promise.all(
    networkTransports.map(async (kind: NetworkTransport) => {
      const client = await connectClient(kind, daemon.url)
      const updated: Array<string> = []
      client.setNotificationHandler(ResourceUpdatedNotificationSchema, (notification) => {
        updated.push(notification.params.uri)
      })
      if (subscribeTo !== undefined) await client.subscribeResource({ uri: subscribeTo })
      return { kind, client, updated }
    }),
  )

const sendDatagram = (payload: string | Buffer) =>
  new Promise<void>((resolve, reject) => {
    const socket = createSocket("udp4")
    socket.send(payload, daemon.udpPort, "127.0.0.1", (error) => {
      socket.close()
      if (error) reject(error)
      else resolve()
    })
  })

describe("POST /terminal/telemetry → memory://terminal/recent", () => {
  it("keeps the command, tells subscribed sessions on every transport, and not the others", async () => {
    const subscribed = await watchers("memory://terminal/recent")
    const bystanders = await watchers(undefined)
    const before = await stats()
    const posted = await postCommand({
      command: "npm test",
      exit_code: 1,
      cwd: "/work/project",
      output_tail: "FAIL test/a.test.ts\n1 failed",
      session: "bash-42",
    })
    expect(posted.status).toBe(202)
    expect(posted.body).toEqual({ accepted: true, seq: before.terminal.accepted + 1 })
    for (const watcher of subscribed)
      await waitFor(`the update over ${watcher.kind}`, () =>
        watcher.updated.includes("memory://terminal/recent") ? true : undefined,
      )
    await sleep(200)
    for (const watcher of bystanders) expect(watcher.updated, watcher.kind).toEqual([])

    const recent = await readJson(subscribed[0]!.client, "memory://terminal/recent")
    expect(recent.capacity).toBe(200)
    expect(recent.entries.at(-1)).toMatchObject({
      seq: before.terminal.accepted + 1,
      command: "npm test",
      exit_code: 1,
      cwd: "/work/project",
      output_tail: "FAIL test/a.test.ts\n1 failed",
      session: "bash-42",
    })
    expect(Number.isNaN(Date.parse(recent.entries.at(-1).at))).toBe(false)
    await subscribed[1]!.client.unsubscribeResource({ uri: "memory://terminal/recent" })
    const seen = subscribed[1]!.updated.length
    await postCommand({ command: "ls", exit_code: 0, cwd: "/" })
    await waitFor("the update to a still-subscribed session", () =>
      subscribed[0]!.updated.length >= 2 ? true : undefined,
    )
    await sleep(200)
    expect(subscribed[1]!.updated).toHaveLength(seen)
  })

  it("refuses what does not decode (400, naming the field), other methods (405), and counts refusals", async () => {
    const before = await stats()
    const missing = await postCommand({ command: "ls", cwd: "/" })
    expect(missing.status).toBe(400)
    expect(JSON.stringify(missing.body)).toContain("exit_code")
    expect((await postCommand({ command: "ls", exit_code: "0", cwd: "/" })).status).toBe(400)
    const notJson = await getJson(`${daemon.url}/terminal/telemetry`, {
      method: "POST",
      headers: authHeaders(daemon.dataDir),
      body: "ls -l",
    })
    expect(notJson.status).toBe(400)
    expect((await getJson(`${daemon.url}/terminal/telemetry`, { headers: authHeaders(daemon.dataDir) })).status).toBe(
      405,
    )
    const after = await stats()
    expect(after.terminal.invalid - before.terminal.invalid).toBe(2) // the non-JSON body never reached the decoder
    expect(after.terminal.accepted).toBe(before.terminal.accepted)
  })

  it("the ring keeps the last 200 commands", async () => {
    for (let index = 0; index < 210; index++) await postCommand({ command: `step ${index}`, exit_code: 0, cwd: "/" })
    const client = await connectClient("ws", daemon.url)
    const recent = await readJson(client, "memory://terminal/recent")
    expect(recent.entries).toHaveLength(200)
    expect(recent.entries.at(-1).command).toBe("step 209")
    expect(recent.entries[0].command).toBe("step 10")
    expect((await stats()).terminal.kept).toBe(200)
  })
})

describe("UDP focus datagrams → memory://editor/active", () => {
  it("the latest focus is the resource; subscribed sessions are told; bad datagrams are counted", async () => {
    const subscribed = await watchers("memory://editor/active")
    const before = await stats()
    expect(before.udp.port).toBe(daemon.udpPort)
    await sendDatagram(JSON.stringify({ file: "/work/src/a.ts", line: 12, col: 3, session: "nvim-1" }))
    await sendDatagram("not json")
    await sendDatagram(JSON.stringify({ file: "/work/src/a.ts", line: "12", col: 3, session: "nvim-1" }))
    await sendDatagram(Buffer.alloc(8 * 1024 + 1, 0x20))
    await sendDatagram(JSON.stringify({ file: "/work/src/b.ts", line: 40, col: 1, session: "nvim-2" }))
    for (const watcher of subscribed)
      await waitFor(`the update over ${watcher.kind}`, () =>
        watcher.updated.includes("memory://editor/active") ? true : undefined,
      )
    const after = await waitFor("all five datagrams", async () => {
      const current = await stats()
      return current.udp.received - before.udp.received === 5 ? current : undefined
    })
    expect({
      accepted: after.udp.accepted - before.udp.accepted,
      invalid: after.udp.invalid - before.udp.invalid,
      droppedOversized: after.udp.droppedOversized - before.udp.droppedOversized,
      droppedNonLoopback: after.udp.droppedNonLoopback - before.udp.droppedNonLoopback,
    }).toEqual({ accepted: 2, invalid: 2, droppedOversized: 1, droppedNonLoopback: 0 })
    const active = await readJson(subscribed[2]!.client, "memory://editor/active")
    expect(active.active).toMatchObject({ file: "/work/src/b.ts", line: 40, col: 1, session: "nvim-2" })
    expect(active.sessions.map((entry: { session: string }) => entry.session)).toEqual(["nvim-2", "nvim-1"])
  })
})

const hasBash = spawnSync("bash", ["--version"]).status === 0 && spawnSync("curl", ["--version"]).status === 0

describe.skipIf(!hasBash)("the bash hook (scripts/mnemos-telemetry.sh)", () => {
  it("reports each command line with its exit code and cwd; mnemos_run adds the output tail", async () => {
    const lines = [
      "cd /tmp",
      "echo hello",
      "false",
      "",
      'echo "a \\"quoted\\" \\\\ word"',
      'mnemos_run sh -c "echo first; echo second; exit 3"',
      "exit",
    ]
    const { MNEMOS_TOKEN: _, ...withoutToken } = process.env
    const shell = spawn("bash", ["--rcfile", join(repoRoot, "scripts", "mnemos-telemetry.sh"), "-i"], {
      cwd: repoRoot,
      // The hook reads the token from the data directory, as it does for a user.
      env: {
        ...withoutToken,
        MNEMOS_URL: daemon.url,
        MNEMOS_DATA_DIR: daemon.dataDir,
        HISTFILE: "/dev/null",
        PS1: "$ ",
      },
      stdio: ["pipe", "ignore", "ignore"],
    })
    shell.stdin.end(`${lines.join("\n")}\n`)
    await new Promise((resolve) => shell.once("exit", resolve))
    const client = await connectClient("ws", daemon.url)
    const mine = await waitFor("five commands from the bash session", async () => {
      const recent = await readJson(client, "memory://terminal/recent")
      const fromBash = recent.entries.filter((entry: { session?: string }) => entry.session === `bash-${shell.pid}`)
      return fromBash.length >= 5 ? fromBash : undefined
    })
    await sleep(300) // a sixth report, if the hook sent one, would have arrived by now
    const reports = (await readJson(client, "memory://terminal/recent")).entries
      .filter((entry: { session?: string }) => entry.session === `bash-${shell.pid}`)
      .map(({ command, exit_code, cwd, output_tail }: Record<string, unknown>) => ({
        command,
        exit_code,
        cwd,
        output_tail,
      }))
    // Each report is posted in the background, so they may arrive in any order.
    const byCommand = (a: { command: string }, b: { command: string }) => a.command.localeCompare(b.command)
    expect(reports.sort(byCommand)).toEqual(
      [
        { command: "cd /tmp", exit_code: 0, cwd: "/tmp", output_tail: undefined },
        { command: "echo hello", exit_code: 0, cwd: "/tmp", output_tail: undefined },
        { command: "false", exit_code: 1, cwd: "/tmp", output_tail: undefined },
        { command: 'echo "a \\"quoted\\" \\\\ word"', exit_code: 0, cwd: "/tmp", output_tail: undefined },
        {
          command: 'mnemos_run sh -c "echo first; echo second; exit 3"',
          exit_code: 3,
          cwd: "/tmp",
          output_tail: "first\nsecond",
        },
      ].sort(byCommand),
    )
    expect(mine.length).toBeGreaterThanOrEqual(5)
  })
})

const hasNeovim = spawnSync("nvim", ["--version"]).status === 0

describe.skipIf(!hasNeovim)("the Neovim snippet (scripts/nvim/mnemos-focus.lua)", () => {
  it("sends the cursor's file, line and col, and the editor's RPC address", async () => {
    const file = join(repoRoot, "package.json")
    const nvim = spawn(
      "nvim",
      [
        "--headless",
        "-u",
        "NONE",
        "-c",
        `let g:mnemos_udp_port = ${daemon.udpPort}`,
        "-c",
        `luafile ${join(repoRoot, "scripts", "nvim", "mnemos-focus.lua")}`,
        "-c",
        `edit ${file}`,
        "-c",
        "call cursor(3, 5)",
        "-c",
        "sleep 500m",
        "-c",
        "qa!",
      ],
      { stdio: "ignore" },
    )
    await new Promise((resolve) => nvim.once("exit", resolve))
    const client = await connectClient("ws", daemon.url)
    const active = await waitFor("the focus from Neovim", async () => {
      const current = await readJson(client, "memory://editor/active")
      return current.active?.session === `nvim-${nvim.pid}` ? current.active : undefined
    })
    expect(active).toMatchObject({ file, line: 3, col: 5, session: `nvim-${nvim.pid}` })
    expect(typeof active.server).toBe("string")
  })
})
