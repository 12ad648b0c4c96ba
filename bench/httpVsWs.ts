/**
 * Streamable HTTP against WebSocket, interleaved (issue 28, item 2): `writes` measures the daemon's
 * transports one after another, so on a shared machine the load's drift between the phases (and
 * the search thread catching up on an earlier phase's writes) moves its ratio. Here one daemon per
 * build and transport runs side by side, and blocks of sequential one-entity `create_entities`
 * alternate between them, in reversed order every other round; each daemon's CPU (all threads
 * and the main one) is summed over its blocks.
 *
 *   node --import tsx bench/httpVsWs.ts            this build (dist/cli.js; npm run build first)
 *   MNEMOS_BENCH_BASELINE_CLI=/other/dist/cli.js node --import tsx bench/httpVsWs.ts
 *                                                  and another build beside it
 *
 * `ROUNDS` (10) and `BLOCK` (150 calls) set the size; 200 warm-up calls per daemon come first.
 */
import { readFileSync } from "node:fs"
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { builtCliArgs, cleanup, type DaemonProcess, startDaemon } from "../test/transports/harness.ts"
import { connectNetwork } from "./transports.ts"

const roundsCount = Number(process.env.ROUNDS ?? 10)
const blockCalls = Number(process.env.BLOCK ?? 150)
const warmupCalls = 200

/** CPU ms of a /proc stat file (utime + stime, at 100 ticks a second). */
const cpuMsOf = (statPath: string): number => {
  const fields = readFileSync(statPath, "utf8").split(") ")[1]!.split(" ")
  return (Number(fields[11]) + Number(fields[12])) * 10
}

interface Variant {
  readonly build: string
  readonly kind: "ws" | "streamable-http"
  readonly daemon: DaemonProcess
  readonly client: Client
  readonly latenciesMs: Array<number>
  mainMs: number
  allMs: number
  calls: number
}

const builds: Array<[string, string]> = [
  ...(process.env.MNEMOS_BENCH_BASELINE_CLI !== undefined
    ? [["baseline", process.env.MNEMOS_BENCH_BASELINE_CLI] as [string, string]]
    : []),
  ["this build", builtCliArgs()[0]!],
]
const variants: Array<Variant> = []
for (const [build, file] of builds)
  for (const kind of ["ws", "streamable-http"] as const) {
    const daemon = await startDaemon({ cli: { node: process.execPath, file } })
    const client = await connectNetwork(kind, daemon.url)
    variants.push({ build, kind, daemon, client, latenciesMs: [], mainMs: 0, allMs: 0, calls: 0 })
  }

let entity = 0
const createOne = (variant: Variant) =>
  variant.client.callTool({
    name: "create_entities",
    arguments: { entities: [{ name: `e${entity++}`, entityType: "t", observations: ["o"] }] },
  })

try {
  for (const variant of variants) for (let call = 0; call < warmupCalls; call++) await createOne(variant)
  for (let round = 0; round < roundsCount; round++)
    for (const variant of round % 2 === 0 ? variants : [...variants].reverse()) {
      const pid = variant.daemon.pid
      const main = `/proc/${pid}/task/${pid}/stat`
      const all = `/proc/${pid}/stat`
      const [mainBefore, allBefore] = [cpuMsOf(main), cpuMsOf(all)]
      for (let call = 0; call < blockCalls; call++) {
        const startedAt = performance.now()
        await createOne(variant)
        variant.latenciesMs.push(performance.now() - startedAt)
      }
      variant.mainMs += cpuMsOf(main) - mainBefore
      variant.allMs += cpuMsOf(all) - allBefore
      variant.calls += blockCalls
    }
  const quantile = (values: Array<number>, q: number) =>
    [...values].sort((a, b) => a - b)[Math.floor(q * (values.length - 1))]!
  const usPerCall = (ms: number, calls: number) => Math.round((ms * 1000) / calls)
  for (const variant of variants) {
    const ws = variants.find((other) => other.build === variant.build && other.kind === "ws")!
    const ratio = (of: (v: Variant) => number) => (of(variant) / variant.calls / (of(ws) / ws.calls)).toFixed(2)
    console.log(
      [
        variant.build.padEnd(10),
        variant.kind.padEnd(15),
        `p50 ${quantile(variant.latenciesMs, 0.5).toFixed(2)} ms`,
        `p99 ${quantile(variant.latenciesMs, 0.99).toFixed(2)} ms`,
        `server CPU ${usPerCall(variant.allMs, variant.calls)} µs/call`,
        `main thread ${usPerCall(variant.mainMs, variant.calls)} µs/call`,
        `CPU / WebSocket's ${ratio((v) => v.allMs)}`,
        `main / WebSocket's ${ratio((v) => v.mainMs)}`,
      ].join("  "),
    )
  }
} finally {
  for (const variant of variants) await variant.client.close()
  await cleanup()
}
