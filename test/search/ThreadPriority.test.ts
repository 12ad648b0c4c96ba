/**
 * The search thread yields the CPU to the daemon's main thread (src/runtime/ThreadPriority.ts): on
 * Linux it runs `backgroundNiceIncrement` nicer than the thread that started it, and only it — the
 * main thread, and libuv's pool that the stores' LMDB commits run on, keep their priority. Read
 * from /proc, as the scheduler sees it.
 */
import { readdirSync, readFileSync } from "node:fs"
import { Effect } from "effect"
import { afterAll, assert, describe, it } from "vitest"
import * as Router from "../../src/actors/Router.ts"
import { type GraphCommand, graphStore } from "../../src/graph/GraphStore.ts"
import { backgroundNiceIncrement, yieldToMainThread } from "../../src/runtime/ThreadPriority.ts"
import { openSearchEngine, removeTempDirs, tempDir } from "./harness.ts"

afterAll(removeTempDirs)

/** The nice value of each thread of this process, by thread id (`/proc/self/task/<tid>/stat`, field 19). */
const niceByThread = (): Map<number, number> => {
  const nice = new Map<number, number>()
  for (const tid of readdirSync("/proc/self/task")) {
    try {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, "latin1")
      // Fields after the command name (which may hold spaces) start at field 3, the state.
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      nice.set(Number(tid), Number(fields[19 - 3]))
    } catch {} // a thread that ended meanwhile
  }
  return nice
}

const threadsAt = (nice: Map<number, number>, value: number) => [...nice].filter(([, at]) => at === value).length

describe.runIf(process.platform === "linux")("the search thread's priority", () => {
  it("is lowered for the search thread alone", async () => {
    const before = niceByThread()
    const base = before.get(process.pid)!
    const lowered = Math.min(19, base + backgroundNiceIncrement)
    const engine = await openSearchEngine(tempDir())
    try {
      await engine.run(
        Effect.gen(function* () {
          const command: GraphCommand = {
            _tag: "CreateEntities",
            project: "p",
            entities: [{ name: "ledger", entityType: "service", observations: ["writes the ledger"] }],
          }
          yield* (yield* Router.Router).store(graphStore).send(command)
        }),
      )
      // Its document starts the search thread.
      const indexer = await engine.indexer()
      const deadline = Date.now() + 20_000
      while ((await engine.run(indexer.health)).thread !== "worker" && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 20))
      assert.strictEqual((await engine.run(indexer.health)).thread, "worker")
      const after = niceByThread()
      assert.strictEqual(after.get(process.pid), base, "the main thread's priority")
      assert.strictEqual(threadsAt(after, lowered) - threadsAt(before, lowered), 1, "threads lowered")
    } finally {
      await engine.close()
    }
  })

  it("is left alone where a thread's nice value is not its own", () => {
    const base = niceByThread().get(process.pid)
    yieldToMainThread("darwin")
    assert.strictEqual(niceByThread().get(process.pid), base)
  })
})
