/**
 * The diagnostic commands while a real daemon (`mnemos serve`, a child process) owns the data
 * directory: health and doctor ask it (`/api/stats`) instead of opening the stores, `mcp status`
 * sees it answer, and the commands that need the directory to themselves (repair, the archive)
 * say who has it. A store that refuses (its log corrupt) shows in the daemon's report.
 */
import { afterAll, assert, describe, it } from "vitest"
import { doctorCommand, type Finding } from "../../src/cli/DoctorCommand.ts"
import { healthCommand } from "../../src/cli/HealthCommand.ts"
import { statusCommand } from "../../src/cli/McpInstallCommands.ts"
import { repairCommand } from "../../src/cli/RepairCommand.ts"
import { exportCommand } from "../../src/cli/TransferCommands.ts"
import { apiGet, authHeaders, callTool, cleanup, connectClient, startDaemon, waitFor } from "../transports/harness.ts"
import { corruptGraphLog, removeTempDirs, runCommand, tempDir } from "./support.ts"

afterAll(async () => {
  await cleanup()
  removeTempDirs()
})

describe("with a daemon running", () => {
  it("health and doctor ask the daemon; status sees it; repair and export --all are refused", async () => {
    const daemon = await startDaemon()
    const dir = daemon.dataDir

    const health = await runCommand(healthCommand, ["--data-dir", dir, "--json"])
    assert.isTrue(health.ok, `${health.stderr} ${health.error?.message}`)
    const report = JSON.parse(health.stdout) as { source: string; stores: Array<{ name: string; state: string }> }
    assert.include(report.source, `daemon pid ${daemon.pid}`)
    assert.isTrue(report.stores.some((store) => store.name === "graph" && store.state === "running"))

    const doctor = await runCommand(doctorCommand, ["--data-dir", dir, "--port", String(daemon.port), "--json"])
    const findings = (JSON.parse(doctor.stdout) as { findings: Array<Finding> }).findings
    assert.isTrue(doctor.ok, JSON.stringify(findings, null, 2))
    assert.include(
      findings.find((finding) => finding.check === "daemon")!.detail,
      `answers on 127.0.0.1:${daemon.port}`,
    )
    assert.include(findings.find((finding) => finding.check === "lock")!.detail, `in use by pid ${daemon.pid}`)
    assert.strictEqual(findings.find((finding) => finding.check === "store graph")!.level, "ok")

    const status = await runCommand(statusCommand, ["--data-dir", dir, "--json"], {
      machine: {
        environment: { platform: "linux", home: tempDir(), projectDir: tempDir() },
        interactive: false,
        now: () => new Date(),
        launch: (dataDir) => ({ command: "node", args: ["cli.js", "mcp", "--data-dir", dataDir] }),
      },
    })
    assert.isTrue(status.ok, status.stderr)
    assert.deepStrictEqual(JSON.parse(status.stdout).daemon, {
      answers: true,
      host: "127.0.0.1",
      port: daemon.port,
      pid: daemon.pid,
      dataDir: dir,
    })

    const repair = await runCommand(repairCommand, ["--data-dir", dir])
    assert.isFalse(repair.ok)
    assert.include(repair.error?.message ?? "", `in use by mnemos process ${daemon.pid}`)

    const archive = await runCommand(exportCommand, [`${tempDir()}/all.jsonl`, "--all", "--data-dir", dir])
    assert.isFalse(archive.ok)
    assert.include(archive.error?.message ?? "", `in use by mnemos process ${daemon.pid}`)

    await daemon.stop()
  }, 120_000)

  it("health says how often a store let go of its file's pages once it idled after a large read", async () => {
    const daemon = await startDaemon()
    const client = await connectClient("ws", daemon.url, { headers: authHeaders(daemon.dataDir) })
    for (let call = 0; call < 30; call++) {
      const entities = Array.from({ length: 100 }, (_, index) => ({
        name: `entity-${call}-${index}`,
        entityType: "thing",
        observations: ["an observation"],
      }))
      assert.isFalse((await callTool(client, "create_entities", { entities })).isError)
    }
    // Two reads of 3,000 entities walk more entries than a release waits for (StoreActor.ts).
    for (let read = 0; read < 2; read++) assert.isFalse((await callTool(client, "read_graph", {})).isError)
    // Asked every 50 ms: `/api/stats` reads the graph's counters, a few entries, which leave the
    // store quiet (StoreActor.ts).
    await waitFor("the graph store to let go of its pages", async () => {
      const stats = await apiGet<{ stores: ReadonlyArray<{ name: string; mappedPagesReleased: number }> }>(
        daemon,
        "/api/stats",
      )
      return (stats.stores.find((store) => store.name === "graph")?.mappedPagesReleased ?? 0) > 0 || undefined
    })
    const health = await runCommand(healthCommand, ["--data-dir", daemon.dataDir])
    assert.isTrue(health.ok, `${health.stderr} ${health.error?.message}`)
    assert.match(health.stdout, /graph\s+running\s.*file pages let go [1-9]\d* time\(s\) once idle/)
    // A store that read little keeps its pages, and says nothing of it.
    assert.notMatch(health.stdout, /adrs\s+running\s.*file pages let go/)
    await client.close()
    await daemon.stop()
  }, 120_000)

  it("health asked while the daemon's graph store refuses its corrupt log: the daemon reports it instead of failing to report", async () => {
    const dir = tempDir("mnemos-data-")
    await corruptGraphLog(dir)
    const daemon = await startDaemon({ dataDir: dir })
    const health = await runCommand(healthCommand, ["--data-dir", dir])
    assert.isFalse(health.ok, "a store that is not serving makes health fail")
    assert.include(health.stdout, `daemon pid ${daemon.pid}`)
    assert.match(health.stdout, /graph\s+corrupt/)
    assert.match(health.stdout, /conversations\s+running/)
    assert.include(health.error?.message ?? "", 'store "graph" is corrupt')
    await daemon.stop()
  }, 120_000)
})
