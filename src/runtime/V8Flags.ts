/**
 * The V8 flags this process changes as it runs (`v8.setFlagsFromString`), each with the value a new
 * process starts with, so they can be set back. V8 stamps its code cache with a hash of its flags
 * as they are when the cache is made, and a process refuses a cache stamped otherwise: the code
 * cache is written with the flags set back (src/cli/CodeCache.ts). Every flag changed at run time
 * goes through `setV8Flag`.
 */
import { setFlagsFromString } from "node:v8"
import type { Worker } from "node:worker_threads"

/**
 * Each flag changed since start, with its value at start (`--name=value` syntax). Kept on the
 * global object, not in this module: the built CLI's launcher (dist/cli.js, which writes the code
 * cache) and the bundle it runs are separate files, each with its own copy of this module. Flags
 * are process-wide; a worker thread that changed one would record it in its own global, so only
 * the main thread changes them.
 */
const atStartKey = Symbol.for("mnemos.v8FlagsAtStart")
const atStart = (): Map<string, string> => {
  const global = globalThis as { [atStartKey]?: Map<string, string> }
  global[atStartKey] ??= new Map()
  return global[atStartKey]
}

/** Each flag changed since start, with the value this process wants it at now. */
const nowKey = Symbol.for("mnemos.v8FlagsNow")
const now = (): Map<string, string> => {
  const global = globalThis as { [nowKey]?: Map<string, string> }
  global[nowKey] ??= new Map()
  return global[nowKey]
}

/** Sets `--name=value`; `valueAtStart` is what a new process has (V8's default). */
export const setV8Flag = (name: string, value: string, valueAtStart: string): void => {
  if (!atStart().has(name)) atStart().set(name, valueAtStart)
  now().set(name, value)
  setFlagsFromString(`--${name}=${value}`)
}

/**
 * Runs `run` with every flag changed at run time at its value at start (as a new process has them:
 * V8 stamps a code cache with its flags' hash), then sets them back to their values now.
 */
export const withFlagsAtStart = <A>(run: () => A): A => {
  for (const [name, value] of atStart()) setFlagsFromString(`--${name}=${value}`)
  try {
    return run()
  } finally {
    setFlagsAgain()
  }
}

/** Sets every flag changed at run time to the value this process wants it at now. */
const setFlagsAgain = (): void => {
  for (const [name, value] of now()) setFlagsFromString(`--${name}=${value}`)
}

/**
 * Sets the flags this process changed again once `worker` runs. On Node 20 and 22 a worker
 * thread's start undoes `--semi-space-growth-factor` set at run time (measured: the main thread's
 * young generation, held at 4 MiB, grew to 32 MiB after a worker started, and was held again when
 * the flag was set at the worker's `online` event); Node 24 keeps it. Every worker the process
 * starts goes through here.
 */
export const keepV8FlagsAcross = (worker: Worker): Worker => {
  // The worker's heap is made (and the flag undone) on its own thread some time before it is online,
  // a moment the main thread cannot see: set every millisecond meanwhile, a heap of this thread that
  // collects in that time could grow (the main thread's young generation went 8 -> 16 MiB on Node 22
  // as the search thread started, in 3 of 3 runs of the 10k graph workload).
  const meanwhile = now().size === 0 ? undefined : setInterval(setFlagsAgain, 1)
  const done = () => {
    if (meanwhile !== undefined) clearInterval(meanwhile)
    setFlagsAgain()
  }
  worker.once("online", done)
  worker.once("error", done)
  worker.once("exit", done)
  return worker
}

/**
 * Starts a worker whose heap's young generation starts at its cap, `youngGenerationMb` (the
 * `maxYoungGenerationSizeMb` it is given), rather than at V8's initial 1–2 MiB: with the daemon's
 * young generations held (YoungGeneration.ts) it would otherwise stay that small. V8 reads
 * `--min-semi-space-size` when it makes a heap, which for a worker happens on the worker's own
 * thread before it is online: the flag is set for that moment (V8 keeps it within the cap) and
 * set back when the worker is online. A worker started meanwhile starts with the same room.
 */
export const startWithYoungGenerationAtCap = (youngGenerationMb: number, start: () => Worker): Worker => {
  setV8Flag("min-semi-space-size", String(youngGenerationMb), "0")
  const worker = start()
  const setBack = () => setV8Flag("min-semi-space-size", "0", "0")
  worker.once("online", setBack)
  worker.once("error", setBack)
  return worker
}
