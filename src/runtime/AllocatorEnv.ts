import { readFileSync } from "node:fs"
import { availableParallelism } from "node:os"

/**
 * glibc malloc's settings for a daemon, given in its environment by the shim when it starts one;
 * a `serve` started any other way (`serve --stdio` by a client, `npm start`, a unit) re-executes
 * itself with them as it starts, where Node can (`withAllocatorSettings`). glibc reads them once,
 * as the process starts: a running process cannot set them for itself.
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
 *
 * And one arena: glibc gives each thread that allocates its own arena (up to eight a core), each
 * with its free memory kept apart; the daemon's main thread, search thread, LMDB and WAL writers,
 * libuv's pool and V8's helpers each had one, the search thread's alone holding 11–14 MiB. In one
 * arena (`MALLOC_ARENA_MAX=1`) the 10k graph workload peaked 18–25 MiB lower on Node 20, 22 and
 * 24, at the same time and CPU a call (small allocations stay in each thread's cache, which takes
 * no lock); docs/benchmarks.md, "One malloc arena".
 */
export const allocatorEnv: Readonly<Record<string, string>> = {
  MALLOC_MMAP_THRESHOLD_: "262144",
  MALLOC_TRIM_THRESHOLD_: "2097152",
  MALLOC_ARENA_MAX: "1",
}

/** `env` with the allocator settings added, unless it gives them itself. */
export const withAllocatorEnv = (env: NodeJS.ProcessEnv): NodeJS.ProcessEnv => ({ ...allocatorEnv, ...env })

/** Whether `env` already says how glibc's malloc is set (the user's choice wins: any one of the settings). */
const givesAllocatorSettings = (env: NodeJS.ProcessEnv): boolean =>
  Object.keys(allocatorEnv).some((name) => env[name] !== undefined) ||
  /glibc\.malloc\.(mmap_threshold|trim_threshold|arena_max)/.test(env.GLIBC_TUNABLES ?? "")

/**
 * V8's helper threads for a daemon on a machine of `cores` cores: one fewer than the cores, where
 * that is fewer than Node's four (`--v8-pool-size`, four whatever the machine); undefined leaves
 * Node's default. The helpers run the garbage collector's parallel and concurrent work and compile
 * optimized code; on two cores, four of them waking together took the cores from the main thread
 * and the client a call waits on. With one, sequential `create_entities` had a p99 of 8.4–9.2 ms
 * against 10.2–10.9 and its slowest call 17–22 ms against 29, and the 10k graph workload took
 * 4–9 % less time (docs/benchmarks.md, "V8's helper threads on two cores").
 */
export const helperThreadsFor = (cores: number): number | undefined => (cores <= 4 ? Math.max(1, cores - 1) : undefined)

/**
 * `execArgv` with `--v8-pool-size` for this machine (`helperThreadsFor`) added, unless it or
 * `nodeOptions` (NODE_OPTIONS) gives one itself. A Node option, not a V8 flag: V8's code cache
 * is not refused for it.
 */
export const withHelperThreads = (
  execArgv: ReadonlyArray<string>,
  nodeOptions: string | undefined,
  cores: number = availableParallelism(),
): Array<string> => {
  const threads = helperThreadsFor(cores)
  const given = [...execArgv, ...(nodeOptions ?? "").split(/\s+/)].some((arg) => arg.startsWith("--v8-pool-size"))
  return threads === undefined || given ? [...execArgv] : [...execArgv, `--v8-pool-size=${threads}`]
}

/** The parts of `process` the re-execution reads, so that tests can pass their own. */
export interface Reexecutable {
  readonly platform: NodeJS.Platform
  readonly env: NodeJS.ProcessEnv
  readonly execPath: string
  readonly execArgv: ReadonlyArray<string>
  readonly argv: ReadonlyArray<string>
  readonly execve?: ((file: string, args: Array<string>, env: NodeJS.ProcessEnv) => never) | undefined
  readonly runsOnGlibc: () => boolean
  /** The cores this process may run on (`os.availableParallelism`). */
  readonly cores: number
}

/**
 * Whether this process runs on glibc: its shared library, `libc.so.6`, is mapped. Read from
 * /proc/self/maps (0.2 ms) rather than `process.report`'s header (2–3 ms to build the whole
 * report, in front of every daemon's start); where /proc cannot be read, the report says.
 */
export const runsOnGlibc = (): boolean => {
  try {
    return /\/libc\.so\.6$/m.test(readFileSync("/proc/self/maps", "latin1"))
  } catch {
    const report = process.report as NodeJS.ProcessReport & { excludeNetwork?: boolean }
    // The report's network section (Node 20.13 and later can leave it out) would look up every interface.
    report.excludeNetwork = true
    const header = (report.getReport() as { header?: { glibcVersionRuntime?: string } }).header
    return header?.glibcVersionRuntime !== undefined
  }
}

/**
 * Replaces this process (same pid, same stdio, same arguments) by one with `allocatorEnv` in its
 * environment and V8's helper threads for the machine (`withHelperThreads`), when that can matter
 * and Node can: on Linux with glibc, with `process.execve`
 * (Node 22.15 and later, 23.11 and later), when the environment sets none of them
 * already. Call it first thing, before any thread or stream is started: it does not return when it
 * re-executes. Costs one start of Node, 25–30 ms to a first answer; in exchange the 10k graph
 * workload peaked 26–43 MiB lower on Node 22 (docs/benchmarks.md, "glibc's thresholds for every daemon"). On Node
 * 20 (no `execve`) a `serve` not started by the shim keeps glibc's defaults unless its environment
 * gives them (docs/operations.md).
 */
export const withAllocatorSettings = (
  self: Reexecutable = {
    platform: process.platform,
    env: process.env,
    execPath: process.execPath,
    execArgv: process.execArgv,
    argv: process.argv,
    execve: (process as { execve?: Reexecutable["execve"] }).execve?.bind(process),
    runsOnGlibc,
    cores: availableParallelism(),
  },
): void => {
  if (self.platform !== "linux" || self.execve === undefined || givesAllocatorSettings(self.env)) return
  if (!self.runsOnGlibc()) return
  self.execve(
    self.execPath,
    [self.execPath, ...withHelperThreads(self.execArgv, self.env.NODE_OPTIONS, self.cores), ...self.argv.slice(1)],
    withAllocatorEnv(self.env),
  )
}
