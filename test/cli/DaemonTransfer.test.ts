/**
 * The conversations backup while a real daemon (`mnemos serve`, a child process) owns the data
 * directory: `mnemos export` and `mnemos import` (CLI child processes) go through the daemon's
 * routes, and what they do is visible to the daemon's own readers at once. A bad line, an id
 * already stored under `--policy reject`, change nothing; the file written is the one an offline
 * export gives once the daemon is stopped. And the client never puts a cut-short download in
 * place of the target.
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { join } from "node:path"
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { Effect, Exit } from "effect"
import { monotonicFactory } from "ulid"
import { afterAll, assert, beforeAll, describe, it } from "vitest"
import { exportThroughDaemon } from "../../src/cli/DaemonTransfer.ts"
import { exportHeaderLine } from "../../src/conversations/ConversationTransfer.ts"
import {
  authHeaders,
  callTool,
  cleanup,
  connectClient,
  type DaemonProcess,
  getJson,
  runCli,
  startDaemon,
  tempDir,
} from "../transports/harness.ts"

afterAll(cleanup)

/** Ids in increasing order (a session's history is in id order within a millisecond). */
const ulid = monotonicFactory()

interface StoredMessage {
  readonly message_id: string
  readonly session_id: string
  readonly content: string
  readonly role: string
}
interface Line {
  readonly project: string
  readonly created_by: string
  readonly message: StoredMessage & Record<string, unknown>
}

/** The record lines of an export, parsed (the header checked). */
const recordsOf = (file: string): Array<Line> => {
  const lines = readFileSync(file, "utf8").split("\n")
  assert.strictEqual(lines[0], exportHeaderLine)
  assert.strictEqual(lines[lines.length - 1], "", "every line ends in \\n")
  return lines.slice(1, -1).map((line) => JSON.parse(line) as Line)
}

const backup = (records: ReadonlyArray<Line | string>): string =>
  `${[exportHeaderLine, ...records.map((record) => (typeof record === "string" ? record : JSON.stringify(record)))].join("\n")}\n`

describe("the conversations backup through a running daemon", () => {
  let daemon: DaemonProcess
  let client: Client
  let files: string

  const history = async (session: string): Promise<Array<StoredMessage>> => {
    const result = await callTool(client, "read_messages", { session_id: session })
    if (result.isError) return []
    return (JSON.parse(result.text) as { history: Array<StoredMessage> }).history
  }
  const mnemos = (...args: Array<string>) => runCli([...args, "--data-dir", daemon.dataDir], 60_000)

  beforeAll(async () => {
    daemon = await startDaemon()
    files = tempDir("mnemos-files-")
    client = await connectClient("streamable-http", daemon.url)
    for (let index = 0; index < 5; index++) {
      const written = await callTool(client, "write_message", {
        session_id: `session-${index % 2}`,
        role: index % 2 === 0 ? "user" : "assistant",
        content: `message ${index} ünïcödé ✓`,
        metadata_json: JSON.stringify({ tags: ["t"], importance: 60 + index }),
      })
      assert.isFalse(written.isError, written.text)
    }
  }, 120_000)

  it("exports through the daemon: every message, or one session's", async () => {
    const file = join(files, "all.jsonl")
    const run = await mnemos("export", "--out", file)
    assert.strictEqual(run.code, 0, run.output)
    assert.include(run.output, `exported 5 conversation message(s) to ${file}`)
    assert.deepStrictEqual(
      recordsOf(file).map((line) => line.message.content),
      [0, 1, 2, 3, 4].map((index) => `message ${index} ünïcödé ✓`),
    )

    const one = join(files, "session-1.jsonl")
    const session = await mnemos("export", "--out", one, "--session", "session-1")
    assert.strictEqual(session.code, 0, session.output)
    assert.deepStrictEqual(
      recordsOf(one).map((line) => line.message.content),
      ["message 1 ünïcödé ✓", "message 3 ünïcödé ✓"],
    )
    assert.deepStrictEqual(readdirSync(join(daemon.dataDir, "tmp")), [], "the daemon's spool is empty again")
  }, 120_000)

  it("imports through the daemon: readable by the daemon's clients at once", async () => {
    const source = join(files, "source.jsonl")
    assert.strictEqual((await mnemos("export", "--out", source, "--session", "session-0")).code, 0)
    const copies = recordsOf(source).map((line) => ({
      ...line,
      message: { ...line.message, message_id: ulid(), session_id: "imported" },
    }))
    const file = join(files, "new.jsonl")
    writeFileSync(file, backup(copies))

    const run = await mnemos("import", file, "--policy", "reject")
    assert.strictEqual(run.code, 0, run.output)
    assert.include(run.output, `imported 3 conversation message(s) from ${file} (policy reject)`)
    assert.deepStrictEqual(
      (await history("imported")).map((message) => [message.message_id, message.content]),
      copies.map((line) => [line.message.message_id, line.message.content]),
    )
    assert.strictEqual((await history("session-0")).length, 3, "the originals are still there")
    assert.deepStrictEqual(readdirSync(join(daemon.dataDir, "tmp")), [], "the spooled upload is gone")
  }, 120_000)

  it("a bad line imports nothing and the command names it", async () => {
    const good = (content: string) => ({
      project: "default",
      created_by: "test",
      message: {
        ...recordsOf(join(files, "all.jsonl"))[0]!.message,
        message_id: ulid(),
        session_id: "half",
        content,
      },
    })
    const bad = { ...good("bad"), message: { ...good("bad").message, role: "robot" } }
    const file = join(files, "bad.jsonl")
    writeFileSync(file, backup([good("first"), bad, good("third")]))
    const run = await mnemos("import", file)
    assert.notStrictEqual(run.code, 0, run.output)
    assert.include(run.output, `${file}: line 3: `)
    assert.include(run.output, "role")
    assert.include(run.output, "(nothing was imported)")
    assert.deepStrictEqual(await history("half"), [], "not even the valid line before it")
  }, 120_000)

  it("--policy reject refuses an id already stored; --policy overwrite replaces it", async () => {
    const before = await history("session-1")
    const file = join(files, "changed.jsonl")
    const exported = recordsOf(join(files, "session-1.jsonl"))
    writeFileSync(
      file,
      backup(exported.map((line) => ({ ...line, message: { ...line.message, content: `${line.message.content}!` } }))),
    )

    const rejected = await mnemos("import", file, "--policy", "reject")
    assert.notStrictEqual(rejected.code, 0, rejected.output)
    assert.include(rejected.output, `${file}: line 2: message ${exported[0]!.message.message_id} already exists`)
    assert.include(rejected.output, "(nothing was imported)")
    assert.deepStrictEqual(await history("session-1"), before, "nothing changed")

    const overwritten = await mnemos("import", file, "--policy", "overwrite")
    assert.strictEqual(overwritten.code, 0, overwritten.output)
    assert.include(overwritten.output, "imported 2 conversation message(s)")
    assert.deepStrictEqual(
      (await history("session-1")).map((message) => [message.message_id, message.content]),
      before.map((message) => [message.message_id, `${message.content}!`]),
    )
  }, 120_000)

  it("moves several MiB each way, in chunks, into another project", async () => {
    const template = recordsOf(join(files, "all.jsonl"))[0]!
    const bulk = Array.from({ length: 3_000 }, (_, index) => ({
      ...template,
      message: {
        ...template.message,
        message_id: ulid(),
        session_id: "bulk",
        content: `${index} ${"x".repeat(1_500)}`,
      },
    }))
    const file = join(files, "bulk.jsonl")
    writeFileSync(file, backup(bulk))
    const imported = await mnemos("import", file, "--project", "elsewhere")
    assert.strictEqual(imported.code, 0, imported.output)
    assert.include(imported.output, "imported 3000 conversation message(s)")

    const out = join(files, "bulk-out.jsonl")
    const exported = await mnemos("export", "--out", out, "--project", "elsewhere")
    assert.strictEqual(exported.code, 0, exported.output)
    const lines = recordsOf(out)
    assert.deepStrictEqual(
      lines.map((line) => [line.project, line.message.message_id, line.message.content]),
      bulk.map((line) => ["elsewhere", line.message.message_id, line.message.content]),
    )
    assert.deepStrictEqual(await history("bulk"), [], "nothing went into the project the file names")
  }, 120_000)

  it("refuses what needs the data directory to itself, and callers without the token", async () => {
    for (const args of [
      ["export", "--out", join(files, "archive.jsonl"), "--all"],
      ["export", "--out", join(files, "memory.jsonl"), "--format", "official-jsonl"],
      ["import", join(files, "all.jsonl"), "--format", "official-jsonl"],
    ]) {
      const run = await mnemos(...args)
      assert.notStrictEqual(run.code, 0, run.output)
      assert.include(run.output, `in use by mnemos process ${daemon.pid}`)
      assert.include(run.output, "stop the daemon first")
    }
    assert.isFalse(existsSync(join(files, "archive.jsonl")))

    const anonymous = await getJson(`${daemon.url}/api/conversations/export`)
    assert.strictEqual(anonymous.status, 401)
    const upload = await getJson(`${daemon.url}/api/conversations/import?policy=reject`, {
      method: "POST",
      body: backup([]),
    })
    assert.strictEqual(upload.status, 401)
    const badPolicy = await getJson(`${daemon.url}/api/conversations/import?policy=merge`, {
      method: "POST",
      headers: authHeaders(daemon.dataDir),
      body: backup([]),
    })
    assert.strictEqual(badPolicy.status, 400)
  }, 120_000)

  it("the export through the daemon is the file an offline export gives after it stops", async () => {
    const live = join(files, "live.jsonl")
    assert.strictEqual((await mnemos("export", "--out", live)).code, 0)
    assert.strictEqual(recordsOf(live).length, 3_008)
    const stopped = await daemon.stop()
    assert.strictEqual(stopped.code, 0, daemon.output())
    const offline = join(files, "offline.jsonl")
    const run = await mnemos("export", "--out", offline)
    assert.strictEqual(run.code, 0, run.output)
    assert.strictEqual(readFileSync(live, "utf8"), readFileSync(offline, "utf8"))
  }, 120_000)
})

describe("a download cut short", () => {
  /** A fake daemon that announces `records` records and `bytes` bytes, sends `body` and hangs up. */
  const fakeDaemon = async (records: number, bytes: number, body: string) => {
    const server = createServer((_req, res) => {
      res.writeHead(200, { "content-length": bytes, "x-mnemos-records": String(records) })
      res.write(body, () => res.destroy())
    })
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    return { server, port: (server.address() as AddressInfo).port }
  }
  const line = JSON.stringify({ project: "default", created_by: "t", message: { content: "x" } })

  for (const [name, records, bytesAnnounced, body] of [
    ["fewer bytes than announced", 3, 10_000, `${exportHeaderLine}\n${line}\n`],
    [
      "fewer records than announced",
      3,
      Buffer.byteLength(`${exportHeaderLine}\n${line}\n`),
      `${exportHeaderLine}\n${line}\n`,
    ],
  ] as const)
    it(`is never put in place of the target: ${name}`, async () => {
      const { server, port } = await fakeDaemon(records, bytesAnnounced, body)
      const dir = tempDir("mnemos-cut-")
      const target = join(dir, "backup.jsonl")
      writeFileSync(target, "the old backup\n")
      const exit = await Effect.runPromiseExit(
        exportThroughDaemon({ dataDir: dir, host: "127.0.0.1", port, pid: 0 }, target, {}),
      )
      server.close()
      assert.isTrue(Exit.isFailure(exit))
      assert.include(JSON.stringify(exit), "was not changed")
      assert.strictEqual(readFileSync(target, "utf8"), "the old backup\n")
      assert.deepStrictEqual(readdirSync(dir), ["backup.jsonl"], "no temporary file left behind")
    })
})
