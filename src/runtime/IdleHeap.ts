/**
 * Gives back the heap an idle daemon no longer uses. V8 shrinks a heap only as part of a garbage
 * collection, and its memory reducer (which collects to shrink) is armed by collections too; a
 * daemon that has gone quiet allocates nothing, so none comes, and the garbage of its last
 * requests stays resident: about 10 MiB of the main thread's at 1,000 entities
 * (docs/benchmarks.md, footprint). Every `idleCheckMs` this looks at the CPU the whole process
 * spent since the last look; the first look that finds it idle after a busy one runs one full
 * collection of this thread's heap (each thread that holds a large heap runs its own: the main
 * thread, the search thread). A look costs nothing measurable; the collection, tens of ms at
 * 1,000 entities, once per quiet spell.
 *
 * The collection is V8's `gc` function, which Node offers only with `--expose-gc`: the flag is set
 * just long enough to create a context that has it, then set back, so V8's flags (which stamp its
 * code cache, src/cli/CodeCache.ts) are as at start.
 */
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"

/** How often the process's CPU is looked at. */
export const idleCheckMs = 5_000
/** The process is idle when it spent less CPU than this share of the time between two looks. */
export const idleCpuShare = 0.01

/** V8's `gc()`: a full, synchronous collection (its options form, `{ type: "major" }`, collected nothing on Node 20). */
type Collect = () => unknown

let collect: Collect | undefined

/** A full garbage collection of this thread's heap, V8's own (`gc`). */
export const collectGarbage = (): void => {
  if (collect === undefined) {
    setFlagsFromString("--expose-gc")
    try {
      collect = runInNewContext("gc") as Collect
    } finally {
      setFlagsFromString("--no-expose-gc")
    }
  }
  collect()
}

/** Decides, look by look, when to collect: on the first idle look after a busy one. */
export const makeIdleCollection = (periodMs: number, share = idleCpuShare) => {
  let collected = true // nothing to give back before the first busy spell
  return {
    /** The CPU (ms) the process spent since the last look; true when this look should collect. */
    look: (cpuMs: number): boolean => {
      if (cpuMs >= periodMs * share) {
        collected = false
        return false
      }
      if (collected) return false
      collected = true
      return true
    },
  }
}

/** Starts the looks on this thread; the returned function stops them. */
export const startIdleCollection = (periodMs = idleCheckMs): (() => void) => {
  const decide = makeIdleCollection(periodMs)
  let last = process.cpuUsage()
  const timer = setInterval(() => {
    const now = process.cpuUsage()
    const cpuMs = (now.user - last.user + now.system - last.system) / 1000
    last = now
    if (decide.look(cpuMs)) collectGarbage()
  }, periodMs)
  timer.unref()
  return () => clearInterval(timer)
}
