/**
 * A daemon holds its main thread's young generation at the size it has (YoungGeneration.ts),
 * and keeps holding it (within one doubling) after it starts worker threads: on Node 20 and 22 a worker's start undoes
 * the V8 flag that holds it, so every worker the daemon starts sets it again (V8Flags.ts). Each case
 * runs in a new process, whose V8 flags are its own.
 */
import { execFileSync } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { assert, describe, it } from "vitest"

const repoRoot = join(import.meta.dirname, "..", "..")
const moduleUrl = (...path: Array<string>) => JSON.stringify(pathToFileURL(join(repoRoot, "src", ...path)).href)

/**
 * Runs `script` in a new process (whose V8 flags are its own) and parses what it prints. A file, not
 * `--input-type=module -e`: workers inherit the flag, and the WAL writer's code is CommonJS. With
 * `gc()`: Node 24's V8 lets a young generation take pages beyond its size while the old generation
 * is being marked (held at 8 MiB, up to 22 MiB was seen between two full collections) and hands
 * them back at the next full collection, so the size a heap keeps is read after one.
 */
const runProbe = <A>(script: string): A => {
  const dir = mkdtempSync(join(tmpdir(), "mnemos-young-test-"))
  try {
    writeFileSync(join(dir, "probe.mjs"), script)
    const output = execFileSync(process.execPath, ["--expose-gc", "--import", "tsx", join(dir, "probe.mjs")], {
      cwd: repoRoot,
      encoding: "utf8",
    })
    return JSON.parse(output) as A
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

/**
 * The main thread's young generation (MiB) when held, and what it keeps after a worker started and
 * 3 million objects were made.
 */
const youngGenerationAcrossAWorker = (worker: "wal writer" | "any worker" | "a starting worker" | "none held") => {
  const script = `
    import { getHeapSpaceStatistics } from "node:v8"
    import { openSync, closeSync, rmSync, mkdtempSync } from "node:fs"
    import { tmpdir } from "node:os"
    import { join } from "node:path"
    import { Worker } from "node:worker_threads"
    const { holdYoungGeneration } = await import(${moduleUrl("runtime", "YoungGeneration.ts")})
    const { keepV8FlagsAcross } = await import(${moduleUrl("runtime", "V8Flags.ts")})
    const { queueWrite, fileToken, terminateWriterThread } = await import(${moduleUrl("stores", "wal", "WalWriter.ts")})
    const young = () => getHeapSpaceStatistics().find((space) => space.space_name === "new_space").space_size / 1048576
    const youngKept = () => {
      gc({ type: "major", execution: "sync" })
      return young()
    }
    const kept = []
    const churn = (count) => {
      for (let index = 0; index < count; index++) {
        kept.push({ index, text: "x" + index })
        if (kept.length > 200000) kept.length = 0
      }
    }
    churn(20000)
    const worker = ${JSON.stringify(worker)}
    if (worker !== "none held") holdYoungGeneration(true)
    const held = young()
    if (worker === "wal writer") {
      const dir = mkdtempSync(join(tmpdir(), "mnemos-young-"))
      const fd = openSync(join(dir, "log"), "w")
      await queueWrite(fileToken(), fd, 0, new Uint8Array(16))
      closeSync(fd)
      rmSync(dir, { recursive: true })
    } else if (worker === "a starting worker") {
      // This thread allocates, a turn at a time, while the worker starts (its start undoes the flag).
      const started = keepV8FlagsAcross(new Worker("setTimeout(() => {}, 2000)", { eval: true }))
      let online = false
      started.once("online", () => (online = true))
      while (!online) {
        churn(5000)
        await new Promise((resolve) => setImmediate(resolve))
      }
      started.unref()
    } else {
      const started = keepV8FlagsAcross(new Worker("setTimeout(() => {}, 2000)", { eval: true }))
      await new Promise((resolve) => started.once("online", resolve))
      started.unref()
    }
    await new Promise((resolve) => setTimeout(resolve, 300))
    churn(3_000_000)
    console.log(JSON.stringify({ held, after: youngKept() }))
    await terminateWriterThread()
    process.exit(0)`
  return runProbe<{ held: number; after: number }>(script)
}

describe("the main thread's young generation, held", () => {
  it("grows under this allocation when nothing holds it (what the other cases would show)", () => {
    const { held, after } = youngGenerationAcrossAWorker("none held")
    assert.isAbove(after, held)
  })

  // The flag is undone on the worker's own thread before it reports itself online; it is set again
  // every millisecond until then: a scavenge in between may still double the young generation once,
  // never more. Unheld, it grows to 32 MiB.
  it.each(["wal writer", "any worker", "a starting worker"] as const)(
    "stays held after the %s thread starts",
    (worker) => {
      const { held, after } = youngGenerationAcrossAWorker(worker)
      assert.isAtMost(after, 2 * held, `held at ${held} MiB, then ${after} MiB`)
    },
  )
})

/**
 * Under the hold, the young generation (MiB) of a worker started with a cap (the search thread's),
 * and of one started after it without, each after making 2 million objects. Each worker starts
 * making them once it is online, when the hold is set again (a worker's start undoes it on Node 20
 * and 22, `keepV8FlagsAcross`).
 */
const workersYoungGenerations = () =>
  runProbe<{ capped: number; uncapped: number }>(`
    import { Worker } from "node:worker_threads"
    const { holdYoungGeneration } = await import(${moduleUrl("runtime", "YoungGeneration.ts")})
    const { keepV8FlagsAcross, startWithYoungGenerationAtCap } = await import(${moduleUrl("runtime", "V8Flags.ts")})
    holdYoungGeneration(true)
    const code = \`
      const { getHeapSpaceStatistics } = require("node:v8")
      const { parentPort } = require("node:worker_threads")
      parentPort.once("message", () => {
        const kept = []
        for (let index = 0; index < 2000000; index++) {
          kept.push({ index, text: "x" + index })
          if (kept.length > 100000) kept.length = 0
        }
        // Read after a full collection, as the main thread's is (runProbe): on Node 24 a held young
        // generation borrows pages while the old generation is being marked (10.25 MiB was read
        // here once for a cap of 8) and gives them back at the next full collection.
        gc({ type: "major", execution: "sync" })
        parentPort.postMessage(getHeapSpaceStatistics().find((space) => space.space_name === "new_space").space_size / 1048576)
      })\`
    const youngOf = async (start) => {
      const worker = start()
      worker.once("online", () => worker.postMessage("go"))
      const young = await new Promise((resolve) => worker.once("message", resolve))
      await worker.terminate()
      return young
    }
    const capped = await youngOf(() =>
      startWithYoungGenerationAtCap(8, () =>
        keepV8FlagsAcross(new Worker(code, { eval: true, resourceLimits: { maxYoungGenerationSizeMb: 8 } })),
      ),
    )
    const uncapped = await youngOf(() => keepV8FlagsAcross(new Worker(code, { eval: true })))
    console.log(JSON.stringify({ capped, uncapped }))`)

describe("a worker's young generation under the hold", () => {
  it("is its cap when it has one; the next worker without one keeps V8's initial size", () => {
    const { capped, uncapped } = workersYoungGenerations()
    // Held from V8's initial size, the capped worker's would be 2 MiB (4 on Node 22).
    assert.strictEqual(capped, 8, "the capped worker's young generation (its cap: 8 MiB)")
    assert.isBelow(uncapped, capped, `the flag was set back after the capped worker started: ${uncapped} MiB`)
  })
})
