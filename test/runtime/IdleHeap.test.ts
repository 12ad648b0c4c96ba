/**
 * A quiet daemon gives back the heap it no longer uses (src/runtime/IdleHeap.ts): one full
 * collection on the first idle look after a busy spell, none while busy, none again until the
 * next busy spell; and the collection really frees what is garbage.
 */
import { execFileSync } from "node:child_process"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { assert, describe, it } from "vitest"
import {
  collectGarbage,
  collectsLastResort,
  lastResortHeapMax,
  makeIdleCollection,
} from "../../src/runtime/IdleHeap.ts"

// Not test/support/mcpClient.ts's: what it loads would grow this process's heap past `lastResortHeapMax`.
const repoRoot = join(import.meta.dirname, "..", "..")
const idleHeapModule = pathToFileURL(join(repoRoot, "src", "runtime", "IdleHeap.ts")).href

describe("collecting a quiet daemon's heap", () => {
  it("collects once per quiet spell, on its first idle look after a busy one", () => {
    const decide = makeIdleCollection(10_000, 0.01)
    // CPU ms per look: starting quiet, busy, quiet for three looks, busy again, quiet.
    const looks = [0, 5, 800, 40, 2, 3, 150, 190, 1].map((cpuMs) => decide.look(cpuMs))
    assert.deepStrictEqual(looks, [false, false, false, true, false, false, false, false, true])
  })

  it("frees garbage the heap held", () => {
    let garbage: Array<Array<number>> | undefined = Array.from({ length: 200 }, () => Array(10_000).fill(1.5))
    const held = process.memoryUsage().heapUsed
    garbage = undefined
    collectGarbage()
    assert.isUndefined(garbage)
    assert.isBelow(process.memoryUsage().heapUsed, held - 8 * 1024 * 1024)
  })

  it("gives the emptied heap back on the runtimes whose V8 can, and frees garbage on the others", () => {
    assert.isFalse(collectsLastResort("11.3.244.8-node.33"), "Node 20: gc's options collect nothing")
    assert.isTrue(collectsLastResort("12.4.254.21-node.33"), "Node 22")
    assert.isTrue(collectsLastResort("13.6.233.17-node.37"), "Node 24")
    let garbage: Array<Array<number>> | undefined = Array.from({ length: 150 }, () => Array(10_000).fill(1.5))
    const held = process.memoryUsage()
    assert.isAtMost(held.heapTotal, lastResortHeapMax, "a heap the thorough form is for")
    garbage = undefined
    collectGarbage()
    const after = process.memoryUsage()
    assert.isUndefined(garbage)
    assert.isBelow(after.heapUsed, held.heapUsed - 8 * 1024 * 1024)
    // The committed heap follows what is live only where the collection compacts and gives pages back.
    if (collectsLastResort(process.versions.v8))
      assert.isBelow(after.heapTotal - after.heapUsed, 8 * 1024 * 1024, `${process.version}: room kept committed`)
  })
})

/**
 * `startIdleCollection` in a process of its own (so nothing else runs on its thread), looking every
 * 400 ms with the daemon's threshold (20 ms busy between two looks): the thread is busy for 300 ms
 * (in a callback of its event loop: Node 24 does not count what runs before the loop starts), then
 * idles 3 s while a collection that costs 100 ms of its time is counted; with `busyWorker`, a worker
 * thread (started, and spinning, before the looks begin, so its start-up is not this thread's work)
 * spins the whole time. Returns the collections made.
 */
const collectionsWhileIdle = (options: { readonly busyWorker: boolean }): number => {
  const script = `
    const { startIdleCollection } = await import(${JSON.stringify(idleHeapModule)})
    const { Worker } = await import("node:worker_threads")
    const { once } = await import("node:events")
    const { setTimeout: sleep } = await import("node:timers/promises")
    const spin = (ms) => { const end = performance.now() + ms; while (performance.now() < end); }
    let worker
    if (${options.busyWorker}) {
      worker = new Worker("require('node:worker_threads').parentPort.postMessage('spinning'); for (;;);", { eval: true, execArgv: [] })
      await once(worker, "message")
    }
    let collections = 0
    const stop = startIdleCollection(400, () => { collections++; spin(100) }, 0.05)
    await sleep(10)
    spin(300)
    await sleep(3000)
    stop()
    await worker?.terminate()
    console.log(collections)`
  return Number(
    execFileSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      cwd: repoRoot,
      encoding: "utf8",
    }).trim(),
  )
}

describe("each thread's looks", () => {
  it("collect once after a busy spell: the collection's own time does not make the thread look busy again", () => {
    assert.strictEqual(collectionsWhileIdle({ busyWorker: false }), 1)
  })

  it("read this thread's work only: another thread's does not keep it from collecting, or make it collect again", () => {
    assert.strictEqual(collectionsWhileIdle({ busyWorker: true }), 1)
  })
})
