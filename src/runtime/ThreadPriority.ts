/**
 * Background threads yield the CPU to the daemon's main thread. The search thread (indexing every
 * write, ~0.9 ms of CPU a `create_entities` of 10) and the embedder's worker run at a nice value
 * `backgroundNiceIncrement` above the thread that calls this, so that where cores are short (two,
 * as on the machine of docs/benchmarks.md: main thread, search thread, V8's helpers and the
 * clients) the main thread's answers and V8's collector helpers, which the main thread waits for,
 * come first. The background work is not lost but put off: under a steady write load the search
 * thread catches up in larger batches, which cost it less a document (docs/benchmarks.md,
 * "Background threads yield"); with a core to spare nothing changes.
 *
 * Only on Linux, where the nice value is a thread's own (sched(7)) and `setpriority` on the
 * calling thread (`os.setPriority(0, …)`, libuv's `uv_os_setpriority`) changes only it; on macOS
 * and Windows the same call would lower the whole process, so elsewhere nothing is done. Raising a
 * nice value needs no privilege; where it is refused anyway (a seccomp profile) the thread keeps
 * its priority. Threads the background thread starts later inherit its value (the ONNX runtime's
 * pool in the embedder's worker), which is what they should do; libuv's pool is started by the main
 * thread's first file operation, long before.
 */
import { getPriority, setPriority } from "node:os"

/** How much nicer than its creator a background thread runs (CFS weight 1024 → 110 at +10). */
export const backgroundNiceIncrement = 10

/** Nice values stop at 19. */
const niceMax = 19

/** Lowers the calling thread's priority by `backgroundNiceIncrement` (Linux only; see above). */
export const yieldToMainThread = (platform: NodeJS.Platform = process.platform): void => {
  if (platform !== "linux") return
  try {
    setPriority(0, Math.min(niceMax, getPriority(0) + backgroundNiceIncrement))
  } catch {}
}
