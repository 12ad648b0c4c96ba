/**
 * How far V8 lets a heap grow past what its last full collection kept. After each full collection
 * V8 sets the next one's trigger at the surviving size times a factor it picks from the
 * collector's speed against the program's: up to 4 for a heap that collects fast, which a
 * daemon's heaps of tens of MiB do. Under a steady stream of writes the daemon's threads then held
 * two to three times their live data: in the 10k graph workload the search thread 47–54 MiB
 * committed for 14–16 MiB that a full collection kept, the main thread 85–95 for about 40
 * (docs/benchmarks.md, "The 10k graph workload's peak").
 *
 * `--heap-growing-percent` fixes the factor at 1 + percent / 100 for every heap of the process
 * (V8 reads it at each collection, so it takes effect when set at run time, on the threads started
 * before as after). V8 still leaves at least a few MiB of room above a small heap, and a heap that
 * needs more than the factor allows grows by collecting more often: the cost is CPU, measured in
 * docs/benchmarks.md.
 */
import { setV8Flag } from "./V8Flags.ts"

/** The daemon's heaps may grow to 1.5× what their last full collection kept. */
export const heapGrowingPercent = 50

/** Bounds every heap's growth between full collections at `heapGrowingPercent` (V8's default, 0, lets V8 pick). */
export const boundHeapGrowth = (): void => setV8Flag("heap-growing-percent", String(heapGrowingPercent), "0")
