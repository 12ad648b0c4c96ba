/**
 * Background threads do not take the CPU from the main thread when they wake
 * (src/runtime/ThreadPolicy.ts): on Linux the threads given run under SCHED_BATCH, read from /proc
 * as the scheduler sees it, and only they — the main thread keeps its policy. Elsewhere nothing is
 * done. (test/shipped checks the built daemon: Node's own threads and the search thread batched.)
 */
import { Worker } from "node:worker_threads"
import { assert, describe, it } from "vitest"
import { ownThreadId, runInBatch, schedBatch, threadsBesideMain } from "../../src/runtime/ThreadPolicy.ts"
import { policyOf } from "../support/threads.ts"

/** A worker thread that reports its own thread id and then waits to be ended. */
const startWorker = async (): Promise<{ readonly tid: number; readonly end: () => Promise<number> }> => {
  const worker = new Worker(
    `const { parentPort } = require("node:worker_threads");
     const { readlinkSync } = require("node:fs");
     parentPort.postMessage(Number(readlinkSync("/proc/thread-self").split("/").pop()));
     setInterval(() => {}, 1000);`,
    { eval: true },
  )
  const tid = await new Promise<number>((resolve, reject) => {
    worker.once("message", resolve)
    worker.once("error", reject)
  })
  return { tid, end: () => worker.terminate() }
}

describe.runIf(process.platform === "linux")("background threads' policy", () => {
  it("puts the threads given under SCHED_BATCH, and no other", async () => {
    const workers = [await startWorker(), await startWorker(), await startWorker()]
    try {
      const [first, second, other] = workers.map((worker) => worker.tid) as [number, number, number]
      assert.includeMembers([...threadsBesideMain()], [first, second, other])
      assert.notInclude(threadsBesideMain(), process.pid)
      for (const tid of [first, second, other])
        assert.notStrictEqual(policyOf(tid), schedBatch, "a new thread starts with its creator's policy")
      const mainBefore = policyOf(process.pid)
      assert.sameMembers([...(await runInBatch([first, second]))], [first, second])
      assert.strictEqual(policyOf(first), schedBatch)
      assert.strictEqual(policyOf(second), schedBatch)
      assert.notStrictEqual(policyOf(other), schedBatch, "a thread not given")
      assert.strictEqual(policyOf(process.pid), mainBefore, "the main thread's policy")
    } finally {
      for (const worker of workers) await worker.end()
    }
  })

  it("knows the calling thread's id", () => {
    assert.strictEqual(ownThreadId(), process.pid)
  })

  it("leaves out what is no thread, and does nothing off Linux", async () => {
    assert.deepStrictEqual(await runInBatch([undefined, 0, -1, 1.5]), [])
    const worker = await startWorker()
    try {
      assert.deepStrictEqual(await runInBatch([worker.tid], "darwin"), [])
      assert.notStrictEqual(policyOf(worker.tid), schedBatch)
    } finally {
      await worker.end()
    }
  })
})
