/**
 * A quiet daemon gives back the heap it no longer uses (src/runtime/IdleHeap.ts): one full
 * collection on the first idle look after a busy spell, none while busy, none again until the
 * next busy spell; and the collection really frees what is garbage.
 */
import { assert, describe, it } from "vitest"
import {
  collectGarbage,
  collectsLastResort,
  lastResortHeapMax,
  makeIdleCollection,
} from "../../src/runtime/IdleHeap.ts"

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
