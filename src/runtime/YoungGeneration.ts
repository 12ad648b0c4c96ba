/**
 * The young generation of the daemon's heaps while the main thread holds a small memory's search
 * index (Indexer.ts). V8 doubles a heap's young generation (two semi-spaces, from 1 MiB up to
 * 16 MiB each) whenever enough of what it allocated survives, and hands the room back only when
 * its memory reducer runs, after seconds of allocating almost nothing — which a daemon's timers
 * rarely grant it. A small daemon that had loaded its index and answered a few searches kept 25–30
 * MiB more committed and resident for it than with the growth factor at 1 (docs/benchmarks.md,
 * footprint): the young generation then stays at its initial size, for somewhat more frequent
 * scavenges of a small heap.
 *
 * V8's flags are process-wide and this one is read at each growth decision, so setting it at run
 * time takes effect from then on, on every thread's heap (on Node 20 and 22 until a worker thread
 * starts, which undoes it: every worker sets it again, `keepV8FlagsAcross` in V8Flags.ts). It is
 * set back to V8's default when the index moves to a worker thread (a large memory: loads and bulk
 * indexing, where a larger young generation saves CPU; that thread caps its own, SearchThread.ts).
 */
import { setV8Flag } from "./V8Flags.ts"

/** V8's default growth factor of the young generation (`--semi-space-growth-factor`). */
export const youngGenerationGrowthFactorDefault = 2

/** Keeps every heap's young generation at the size it has (true), or lets it grow as V8 would (false). */
export const holdYoungGeneration = (hold: boolean): void =>
  setV8Flag(
    "semi-space-growth-factor",
    String(hold ? 1 : youngGenerationGrowthFactorDefault),
    String(youngGenerationGrowthFactorDefault),
  )
