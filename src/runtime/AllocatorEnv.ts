/**
 * glibc malloc's settings for a daemon, given in its environment by the shim when it starts one,
 * and recommended for a unit or client config that runs `serve` itself (docs/operations.md). glibc
 * reads them once, as the process starts: a daemon cannot set them for itself.
 *
 * Why: glibc raises its mmap threshold to the size of any memory-mapped block freed (up to 32 MiB),
 * and its trim threshold to twice that. A daemon frees such blocks from its first second on (the
 * bundle it compiles, 2.4 MB, and its code cache; the search index's arrays each time they grow);
 * blocks up to that size then come from the heap, and up to twice it of free heap stays resident.
 * Fixed at 256 KiB and 2 MiB (docs/benchmarks.md, "glibc's heap"): a 1,000-entity daemon idles at
 * 104 MiB instead of 118–119 (glibc's heap 7 MiB instead of 17–18), and the 10k graph workload
 * peaks 26–50 MiB lower, for 2–17 % more of its time (memory given back is faulted in again). A
 * trim threshold of 128 KiB saved a little more and cost 15 % (the heap's top trimmed and regrown
 * on every free). Other C libraries ignore the variables.
 */
export const allocatorEnv: Readonly<Record<string, string>> = {
  MALLOC_MMAP_THRESHOLD_: "262144",
  MALLOC_TRIM_THRESHOLD_: "2097152",
}

/** `env` with the allocator settings added, unless it gives them itself. */
export const withAllocatorEnv = (env: NodeJS.ProcessEnv): NodeJS.ProcessEnv => ({ ...allocatorEnv, ...env })
