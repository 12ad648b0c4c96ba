/**
 * The real kill -9 proof. A child process (test/support/killNineChild.ts) runs a concurrent write
 * storm against the KV store on the real disk and prints every acknowledged key; the parent
 * SIGKILLs it at a random moment, reopens the store in-process and checks that every key ever
 * acknowledged (in this round and all earlier ones: the data dir is shared, so each reopen also
 * recovers what earlier kills left behind) is present with its value.
 *
 * Set KILL9_SEED to replay a run; the seed and per-round counts are printed.
 */
import { spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { Effect, Layer } from "effect"
import { afterAll, assert, describe, it } from "vitest"
import { makeStore, type StoreHealth } from "../../src/actors/StoreActor.ts"
import * as EventBus from "../../src/stores/EventBus.ts"
import { layerNode } from "../../src/stores/wal/WalFs.ts"
import { kvStore, readAll } from "../support/KvStore.ts"
import { childStoreOptions, expectedValue } from "../support/killNineChild.ts"

const repoRoot = fileURLToPath(new URL("../..", import.meta.url))
const rounds = 20

/** mulberry32: a small seeded PRNG, so a failing run can be replayed with its seed. */
const prng = (seed: number) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

interface RoundResult {
  readonly acked: ReadonlyArray<string>
  readonly acksBeforeKill: number
  readonly signal: NodeJS.Signals | null
  readonly code: number | null
  readonly stderr: string
}

/** Runs one child, kills it `delayMs` after its first acknowledgement, and collects every ack it printed. */
const runChild = (dir: string, round: number, delayMs: number): Promise<RoundResult> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", "test/support/killNineChild.ts", dir, String(round)], {
      cwd: repoRoot,
      stdio: ["ignore", "pipe", "pipe"],
    })
    const acked: Array<string> = []
    let partial = ""
    let stderr = ""
    let acksBeforeKill = -1
    let killTimer: ReturnType<typeof setTimeout> | undefined
    const kill = () => {
      acksBeforeKill = acked.length
      child.kill("SIGKILL")
    }
    // A child that never acknowledges anything would hang the test: kill it after a generous wait.
    const startupGuard = setTimeout(kill, 20_000)
    child.stdout.setEncoding("utf8")
    child.stdout.on("data", (chunk: string) => {
      const lines = (partial + chunk).split("\n")
      partial = lines.pop()!
      for (const line of lines) if (line.length > 0) acked.push(line)
      if (killTimer === undefined && acked.length > 0) {
        clearTimeout(startupGuard)
        killTimer = setTimeout(kill, delayMs)
      }
    })
    child.stderr.setEncoding("utf8")
    child.stderr.on("data", (chunk: string) => {
      stderr += chunk
    })
    child.on("error", reject)
    // "close" fires after stdout is drained: every line the child wrote before dying is counted.
    child.on("close", (code, signal) => {
      clearTimeout(startupGuard)
      if (killTimer !== undefined) clearTimeout(killTimer)
      resolve({ acked, acksBeforeKill, signal, code, stderr })
    })
  })

const storeLayer = Layer.merge(EventBus.layer, layerNode)

/** Opens the store in this process (recovering it), reads everything, and closes it. */
const recover = (dir: string) =>
  Effect.runPromise(
    Effect.gen(function* () {
      const store = yield* makeStore(kvStore(), { ...childStoreOptions, dir })
      const all = yield* store.read(readAll)
      return { all, health: store.health() as StoreHealth }
    }).pipe(Effect.scoped, Effect.provide(storeLayer)),
  )

describe("kill -9 during a concurrent write storm", () => {
  const dir = mkdtempSync(join(tmpdir(), "mnemos-kill9-"))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  // 70–85 s alone on this machine; each round starts a child under tsx, which a loaded 2-core
  // machine (the full suite beside it) can slow past 120 s: the limit is not what the test checks.
  it(`every acknowledged write survives SIGKILL, over ${rounds} rounds on one data dir`, {
    timeout: 240_000,
  }, async () => {
    const seed = process.env.KILL9_SEED !== undefined ? Number(process.env.KILL9_SEED) : (Math.random() * 2 ** 32) >>> 0
    const random = prng(seed)
    console.log(`kill -9 test: seed ${seed} (KILL9_SEED=${seed} to replay), data dir ${dir}`)

    const everAcked = new Map<string, string>()
    let roundsKilledMidStorm = 0
    for (let round = 1; round <= rounds; round++) {
      const delayMs = 50 + Math.floor(random() * 351)
      const result = await runChild(dir, round, delayMs)
      assert.strictEqual(
        result.signal,
        "SIGKILL",
        `round ${round}: child ended by ${result.signal ?? `exit ${result.code}`}\n${result.stderr}`,
      )
      assert.isAbove(result.acksBeforeKill, 0, `round ${round}: no acknowledgement before the kill\n${result.stderr}`)
      assert.strictEqual(
        new Set(result.acked).size,
        result.acked.length,
        `round ${round}: a key was acknowledged twice`,
      )
      for (const key of result.acked) {
        assert.match(key, new RegExp(`^r${round}-w\\d+-\\d+$`), `round ${round}: unexpected ack line`)
        everAcked.set(key, expectedValue(key))
      }
      if (result.acksBeforeKill > 0) roundsKilledMidStorm++

      const { all, health } = await recover(dir)
      const missing = [...everAcked].filter(([key, value]) => all[key] !== value)
      const roundPrefix = `r${round}-`
      const presentThisRound = Object.keys(all).filter((key) => key.startsWith(roundPrefix)).length
      console.log(
        `round ${String(round).padStart(2)}: kill after ${String(delayMs).padStart(3)} ms, ` +
          `${String(result.acksBeforeKill).padStart(5)} acks before kill, ${String(result.acked.length).padStart(5)} acks seen, ` +
          `${String(presentThisRound).padStart(5)} keys of the round recovered, ${Object.keys(all).length} keys total` +
          (health.recovery?.tornTail !== undefined
            ? `, torn tail cut: ${health.recovery.tornTail.bytesCut} bytes`
            : "") +
          `, replayed ${health.recovery?.records ?? 0} records`,
      )
      assert.deepStrictEqual(
        missing.slice(0, 10).map(([key]) => [key, all[key]]),
        [],
        `round ${round}: ${missing.length} acknowledged writes lost or wrong after kill -9`,
      )
      assert.strictEqual(health.state, "running")
      // Unacknowledged writes may survive too (durable but killed before the ack), but nothing else.
      assert.isAtLeast(presentThisRound, result.acked.length)
      for (const [key, value] of Object.entries(all)) assert.strictEqual(value, expectedValue(key))
    }
    assert.isAtLeast(roundsKilledMidStorm, 1)
    assert.isAtLeast(everAcked.size, rounds)
  })
})
