/**
 * Whether a daemon answers is told by its process, not by how fast a loaded machine schedules it:
 * a daemon whose process is alive but slow to answer /ping is still found (health, doctor and
 * `mcp status` ask this way), and one whose process is gone is not waited for.
 */
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ping, pingDaemon, pingTimeoutMs } from "../../src/transports/Daemon.ts"

/** Answers /ping as a daemon would, after `delayMs`. */
const slowDaemon = createServer((_req, res) => {
  setTimeout(() => {
    res.setHeader("content-type", "application/json")
    res.end(JSON.stringify({ status: "ok", service: "mnemos", version: "0", dataDir: "/data", pid: process.pid }))
  }, pingTimeoutMs + 1000)
})
let port = 0

beforeAll(async () => {
  await new Promise<void>((resolve) => slowDaemon.listen(0, "127.0.0.1", resolve))
  port = (slowDaemon.address() as AddressInfo).port
})
afterAll(async () => {
  slowDaemon.closeAllConnections()
  await new Promise((resolve) => slowDaemon.close(resolve))
})

describe("asking the daemon of daemon.json", () => {
  it("waits for a live but slow daemon, and not for a gone one", async () => {
    expect(await ping("127.0.0.1", port)).toBeUndefined()
    const info = { pid: process.pid, host: "127.0.0.1", port, startedAt: new Date().toISOString() }
    const answer = await pingDaemon(info)
    expect(answer?.dataDir).toBe("/data")
    // A pid no process has: the first ping's silence is the answer (a patient second ping would
    // have had the slow answer).
    expect(await pingDaemon({ ...info, pid: 2 ** 22 + 17 })).toBeUndefined()
  }, 30_000)
})
