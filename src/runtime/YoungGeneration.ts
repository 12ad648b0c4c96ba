/**
 * The young generation of the daemon's heaps, held at the size it has. V8 doubles a heap's young
 * generation (two semi-spaces, from 1 MiB each up to 16 MiB on Node 20 and 22, 64 MiB on Node 24
 * with this machine's memory) whenever enough of what it allocated survives, which a stream of
 * writes always brings about, and hands the room back only when its memory reducer runs, after
 * seconds of allocating almost nothing. Held, the main thread's stays at the 8 MiB it has once the
 * daemon has loaded (32 MiB otherwise; 64 on Node 24): in the 10k graph workload the daemon's peak
 * was 18–21 MiB lower on Node 20 and about 50 MiB lower on Node 24, at the same CPU a write
 * (docs/benchmarks.md, "The young generation held for the daemon's life"). Node 24's V8 also
 * lends a young generation pages beyond its size while the old generation is being marked (held at
 * 8 MiB, up to 22 MiB was seen in a scratch probe) and takes them back at the next full collection.
 *
 * `serve` holds it from its start for the daemon's whole life (ServeRun.ts), wherever the search
 * index runs. V8's flags are process-wide and this one is read at each growth decision, so setting
 * it at run time takes effect from then on, on every thread's heap. It works only when set at run
 * time: V8 raises the flag to at least 2 when it checks its flags' implications, which it does at
 * start (so `--semi-space-growth-factor=1` on the command line does nothing) and, on Node 20 and
 * 22, when a worker thread starts — every worker sets it again (`keepV8FlagsAcross` in
 * V8Flags.ts). A worker with a capped young generation (the search thread's) starts at its cap
 * (`startWithYoungGenerationAtCap`), since held it would otherwise keep V8's initial 2 MiB.
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
