/**
 * `mnemos doctor` on a healthy data directory (no problem; exit 0) and on a broken one: unsafe
 * permissions, a readable token, a config.json that does not decode, a stale lock and daemon
 * record, a corrupt store log, a port taken by another program — each reported with the command
 * that fixes it, and the command fails. Also `mnemos config` and its sources.
 */
import { chmodSync, mkdirSync, writeFileSync } from "node:fs"
import { createServer, type Server } from "node:net"
import { hostname } from "node:os"
import { join } from "node:path"
import { afterAll, assert, describe, it } from "vitest"
import { compactCommand } from "../../src/cli/CompactCommand.ts"
import { configCommand, effectiveConfig } from "../../src/cli/ConfigCommand.ts"
import { doctorCommand, type Finding } from "../../src/cli/DoctorCommand.ts"
import type { SearchDocument } from "../../src/search/index/SearchDocument.ts"
import { openLmdbPersistence } from "../../src/search/persistence/SearchPersistence.ts"
import { corruptGraphLog, openTestEngine, removeTempDirs, runCommand, tempDir } from "./support.ts"

afterAll(removeTempDirs)

const listen = (port = 0) =>
  new Promise<Server>((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(port, "127.0.0.1", () => resolve(server))
  })

/** A port that was free a moment ago. */
const freePort = async () => {
  const server = await listen()
  const port = (server.address() as { port: number }).port
  await new Promise((resolve) => server.close(resolve))
  return port
}

const doctor = async (dir: string, port: number) => {
  const run = await runCommand(doctorCommand, ["--data-dir", dir, "--port", String(port), "--json"])
  return { run, findings: (JSON.parse(run.stdout) as { findings: Array<Finding> }).findings }
}

/** A data directory with a graph and conversations, shut down cleanly. */
const healthyDir = async () => {
  const dir = tempDir("mnemos-data-")
  const engine = await openTestEngine(dir)
  await engine.ok("create_entities", { entities: [{ name: "a", entityType: "t", observations: ["o"] }] })
  await engine.ok("write_message", { session_id: "s", role: "user", content: "hello" })
  await engine.close()
  return dir
}

describe("mnemos doctor", () => {
  it("a healthy data directory: no problem, exit 0", async () => {
    const dir = await healthyDir()
    const { run, findings } = await doctor(dir, await freePort())
    assert.isTrue(run.ok, JSON.stringify(findings, null, 2))
    const failed = findings.filter((finding) => finding.level === "fail")
    assert.deepStrictEqual(failed, [])
    const checks = new Set(findings.map((finding) => finding.check))
    for (const check of [
      "data directory",
      "config",
      "lock",
      "daemon",
      "ports",
      "model files",
      "disk space",
      "store graph",
      "store conversations",
      "index lag",
      "search file",
    ])
      assert.isTrue(checks.has(check), `checked ${check}: ${[...checks].join(", ")}`)
  })

  it("a search file much larger than its data is reported with the command that shrinks it, which does", async () => {
    const dir = await healthyDir()
    // 80 MiB of documents written then deleted: LMDB keeps the freed pages in the file.
    const persistence = openLmdbPersistence(join(dir, "search", "lmdb"))
    const text = "w".repeat(20_000)
    const document = (id: string): SearchDocument => ({
      id,
      store: "notes",
      project: "p",
      kind: "note",
      title: id,
      text,
      at: 1,
      fields: {},
    })
    for (let i = 0; i < 4000; i++) persistence.putDocument("g", document(`d${i}`))
    await persistence.close()
    const again = openLmdbPersistence(join(dir, "search", "lmdb"))
    for (let i = 0; i < 4000; i++) again.removeDocument("notes", "g", `d${i}`)
    await again.close()
    const swollen = (await doctor(dir, await freePort())).findings.find((finding) => finding.check === "search file")
    assert.strictEqual(swollen?.level, "warn", JSON.stringify(swollen))
    assert.include(swollen!.fix, `mnemos compact --data-dir ${dir}`)
    const compacted = await runCommand(compactCommand, ["--data-dir", dir])
    assert.isTrue(compacted.ok, compacted.stdout)
    const after = (await doctor(dir, await freePort())).findings.find((finding) => finding.check === "search file")
    assert.strictEqual(after?.level, "ok", JSON.stringify(after))
  })

  it("a data directory that does not exist yet is fine", async () => {
    const { run, findings } = await doctor(join(tempDir(), "not-yet"), await freePort())
    assert.isTrue(run.ok, JSON.stringify(findings))
    assert.include(findings[0]!.detail, "does not exist yet")
  })

  it("a broken data directory: every problem with its fix, exit 1", async () => {
    const dir = await healthyDir()
    // A corrupt graph log (the log as a crash would have left it, one byte flipped mid-log).
    await corruptGraphLog(dir)
    // The rest of the damage.
    writeFileSync(join(dir, "token"), "secret-token", { mode: 0o644 })
    chmodSync(join(dir, "token"), 0o644)
    writeFileSync(join(dir, "config.json"), JSON.stringify({ privacy: { patterns: [{ name: "bad", regex: "(" }] } }))
    writeFileSync(
      join(dir, "mnemos.lock"),
      JSON.stringify({
        pid: 2 ** 22 + 17,
        host: hostname(),
        startedAt: "2026-01-01T00:00:00Z",
        command: "mnemos serve",
      }),
    )
    writeFileSync(
      join(dir, "daemon.json"),
      JSON.stringify({ pid: 2 ** 22 + 17, host: "127.0.0.1", port: 1, startedAt: "2026-01-01T00:00:00Z" }),
    )
    chmodSync(dir, 0o777)
    const taken = await listen()
    const port = (taken.address() as { port: number }).port
    try {
      const { run, findings } = await doctor(dir, port)
      assert.isFalse(run.ok)
      assert.strictEqual(run.error?.tag, "DoctorFailed")
      const find = (check: string, level: Finding["level"]) => {
        const found = findings.find((finding) => finding.check === check && finding.level === level)
        assert.isDefined(found, `${level} ${check} in ${JSON.stringify(findings, null, 2)}`)
        return found!
      }
      assert.include(find("path safety", "fail").fix, `chmod 700 ${dir}`)
      assert.include(find("permissions", "fail").fix, `chmod 600 ${join(dir, "token")}`)
      assert.include(find("config", "fail").detail, 'pattern "bad"')
      assert.include(find("lock", "warn").detail, "not running here")
      assert.include(find("daemon", "warn").detail, "does not answer")
      assert.include(find("ports", "fail").fix, `--port ${port + 2}`)
      const store = find("store graph", "fail")
      assert.include(store.detail, "corrupt log")
      assert.strictEqual(store.fix, `mnemos repair --data-dir ${dir}`)
      assert.strictEqual(find("store conversations", "ok").level, "ok")
      // The plain output prints each fix under its problem.
      const text = await runCommand(doctorCommand, ["--data-dir", dir, "--port", String(port)])
      assert.include(text.stdout, `✗ store graph: corrupt log`)
      assert.include(text.stdout, `    fix: mnemos repair --data-dir ${dir}`)
      assert.match(text.stdout, /\d+ problem\(s\), \d+ warning\(s\)/)
    } finally {
      taken.close()
      chmodSync(dir, 0o700)
    }
  })
})

describe("mnemos config", () => {
  it("shows each value with where it came from: flag, environment, config file, default", async () => {
    const dir = tempDir("mnemos-data-")
    writeFileSync(
      join(dir, "config.json"),
      JSON.stringify({ privacy: { patterns: [{ name: "acme-id", regex: "ACME-[0-9]{4}" }] } }),
    )
    const fromEnv = effectiveConfig({ port: 9000 }, { MNEMOS_DATA_DIR: dir })
    const byKey = Object.fromEntries(fromEnv.values.map((value) => [value.key, value]))
    assert.deepStrictEqual(
      [byKey.dataDir!.source, byKey.dataDir!.from, byKey.dataDir!.value],
      ["environment", "MNEMOS_DATA_DIR", dir],
    )
    assert.deepStrictEqual([byKey["daemon.port"]!.source, byKey["daemon.port"]!.value], ["flag", 9000])
    assert.deepStrictEqual([byKey["daemon.udpPort"]!.source, byKey["daemon.udpPort"]!.value], ["default", 9001])
    assert.deepStrictEqual([byKey["daemon.host"]!.source, byKey["daemon.host"]!.value], ["default", "127.0.0.1"])
    assert.strictEqual(byKey["privacy.patterns"]!.source, "config file")
    assert.deepStrictEqual(byKey["privacy.patterns"]!.value, ["acme-id: /ACME-[0-9]{4}/"])
    assert.strictEqual(byKey["privacy.disable"]!.source, "default")
    assert.strictEqual(effectiveConfig({}, { XDG_DATA_HOME: "/xdg" }).values[0]!.value, "/xdg/mnemos")
    assert.strictEqual(effectiveConfig({ dataDir: dir }, {}).values[0]!.source, "flag")
    assert.strictEqual(effectiveConfig({}, { HOME: "/home/x" }).values[0]!.source, "default")

    const run = await runCommand(configCommand, ["--data-dir", dir, "--udp-port", "7000"])
    assert.isTrue(run.ok, run.stderr)
    assert.match(run.stdout, /dataDir\s+.*\(flag: --data-dir\)/)
    assert.match(run.stdout, /daemon\.udpPort\s+7000\s+\(flag: --udp-port\)/)
    assert.match(run.stdout, /privacy\.patterns\s+acme-id.*\(config file: .*config\.json\)/)
  })

  it("a config.json that does not decode is shown and fails", async () => {
    const dir = tempDir("mnemos-data-")
    mkdirSync(dir, { recursive: true })
    writeFileSync(join(dir, "config.json"), '{"privacy": {"disable": ["nope"]}}')
    const run = await runCommand(configCommand, ["--data-dir", dir])
    assert.isFalse(run.ok)
    assert.include(run.error?.message ?? "", "unknown kind(s) nope")
    assert.include(run.stdout, "dataDir")
  })
})
