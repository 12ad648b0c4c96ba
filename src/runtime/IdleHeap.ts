/**
 * Gives back the heap an idle daemon no longer uses. V8 shrinks a heap only as part of a garbage
 * collection, and its memory reducer (which collects to shrink) is armed by collections too; a
 * daemon that has gone quiet allocates nothing, so none comes, and the garbage of its last
 * requests stays resident: about 10 MiB of the main thread's at 1,000 entities
 * (docs/benchmarks.md, footprint). Every `idleCheckMs` each thread that holds a large heap (the
 * main thread, the search thread) looks at how long its event loop was busy since its last look;
 * the first look that finds it idle after a busy one runs one full collection of that thread's
 * heap. A look costs nothing measurable; the collection, once per quiet spell, about 30 ms of a
 * 1,000-entity daemon's main thread on Node 20, and 130 ms on Node 22 and 24, where it also gives
 * the emptied pages back (`collectsLastResort`).
 *
 * The collection is V8's `gc` function, which Node offers only with `--expose-gc`: the flag is set
 * just long enough to create a context that has it, then set back, so V8's flags (which stamp its
 * code cache, src/cli/CodeCache.ts) are as at start.
 */
import { performance } from "node:perf_hooks"
import { getHeapStatistics, setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { writePendingCodeCache } from "./CodeCacheWriter.ts"

/** How often each thread looks at its event loop. */
export const idleCheckMs = 2_000
/**
 * A thread is idle when its event loop was busy less than this share of the time between two looks:
 * 20 ms in 2 s. An idle thread's loop still shows a little work, more on a loaded machine, where a
 * callback's wall time stretches: up to 8 ms in 200 ms (Node 24, both cores saturated).
 */
export const idleShare = 0.01

/** V8's `gc()`: a full, synchronous collection, or the one its options ask for. */
type Collect = (options?: {
  readonly type: "major"
  readonly execution: "sync"
  readonly flavor: "last-resort"
}) => unknown

let collect: Collect | undefined

/**
 * Whether V8 `v8Version` (`process.versions.v8`) takes `gc`'s options. From V8 12 (Node 22 on),
 * `flavor: "last-resort"` collects as V8 does when memory runs out: every page compacted, the young
 * generation shrunk, and the emptied pages given back — after dropping 34 MiB of a 67 MiB heap, 34
 * MiB stayed committed on Node 22 and 24 against 67 and 106 with the plain form, for about 2.5× its
 * time (docs/benchmarks.md, footprint). Node 20's V8 (11.3) ignores the options and then collects
 * nothing, so there the plain form runs, which its memory reducer follows up.
 */
export const collectsLastResort = (v8Version: string): boolean => Number(v8Version.split(".")[0]) >= 12

const lastResort = collectsLastResort(process.versions.v8)

/**
 * The largest heap (committed bytes) collected the last-resort way. It takes several full passes:
 * 130 ms of a 1,000-entity daemon's main thread on Node 22 (4 passes of 27–38 ms, against about 30
 * ms for the plain form), and proportionally more on a larger heap, which the search thread's at
 * 100,000 entities is; a heap above this gets the plain form, so no thread stops for long.
 */
export const lastResortHeapMax = 64 * 1024 * 1024

/** A full garbage collection of this thread's heap, V8's own (`gc`), which gives back what it can. */
export const collectGarbage = (): void => {
  // The code cache a first run of this runtime writes, before the collection drops its bytecode.
  writePendingCodeCache()
  if (collect === undefined) {
    setFlagsFromString("--expose-gc")
    try {
      collect = runInNewContext("gc") as Collect
    } finally {
      setFlagsFromString("--no-expose-gc")
    }
  }
  if (lastResort && getHeapStatistics().total_heap_size <= lastResortHeapMax)
    collect({ type: "major", execution: "sync", flavor: "last-resort" })
  else collect()
}

/** Decides, look by look, when to collect: on the first idle look after a busy one. */
export const makeIdleCollection = (periodMs: number, share = idleShare) => {
  let collected = true // nothing to give back before the first busy spell
  return {
    /** The time (ms) the thread was busy since the last look; true when this look should collect. */
    look: (busyMs: number): boolean => {
      if (busyMs >= periodMs * share) {
        collected = false
        return false
      }
      if (collected) return false
      collected = true
      return true
    },
  }
}

/**
 * Starts the looks on this thread; the returned function stops them. A look reads the time this
 * thread's event loop spent busy (`eventLoopUtilization`), not the process's CPU: a collection on
 * one thread would make the other's next look busy, and the one after collect, each thread's
 * collection setting off the other's for as long as the daemon idles. The thread's own collection
 * is left out of its next look for the same reason.
 */
export const startIdleCollection = (
  periodMs = idleCheckMs,
  collect: () => void = collectGarbage,
  share = idleShare,
): (() => void) => {
  const decide = makeIdleCollection(periodMs, share)
  let last = performance.eventLoopUtilization()
  const timer = setInterval(() => {
    const busyMs = performance.eventLoopUtilization(last).active
    last = performance.eventLoopUtilization()
    if (!decide.look(busyMs)) return
    collect()
    last = performance.eventLoopUtilization()
  }, periodMs)
  timer.unref()
  return () => clearInterval(timer)
}
