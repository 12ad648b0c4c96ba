/**
 * Background threads do not take the CPU from the thread that answers when they wake.
 *
 * Where cores are short (two, as on the machine of docs/benchmarks.md: the daemon's main thread,
 * its search thread, V8's helpers, the WAL writer and the clients), Linux's scheduler lets a thread
 * that wakes take the CPU from the one running when it has run less lately — and a background
 * thread always has: every message to the search thread and every task V8 posts to its helpers
 * (a scavenge's parallel part, concurrent marking, an optimising compile) could stop the main
 * thread in the middle of a call. Under the 10k graph workload the main thread waited for a core
 * 0.7–0.9 s of its 1.4 s of `create_entities`.
 *
 * So the search thread, the embedder's worker (and the ONNX runtime's threads it starts after it
 * is set, which inherit it) and the threads there are when `serve` starts (those Node starts before any
 * JavaScript runs — V8's helpers, its delayed task scheduler, the signal watcher — and libuv's
 * pool, which the CLI has started by then; lmdb-js commits there, off any acknowledgement's path)
 * run under `SCHED_BATCH` (sched(7)): a batch thread is not given the CPU on wakeup over a running
 * thread, but it keeps its fair share of the CPU. That is not a nice value, which lowers the
 * share: at nice +10 the search thread fell behind the writes and the 10k peak rose ~22 MiB
 * (reverted in 8e57b87). The WAL writer keeps the default policy, as the main thread does: a
 * write's acknowledgement waits for it, and batched it pushed the sequential p99 up (14.7–17.1
 * against 13.4–14.0 ms).
 *
 * Linux only: there a policy is a thread's own and needs no privilege to be set to `SCHED_BATCH`
 * on one's own threads. Node has no call for it, so util-linux's `chrt` sets it (part of every
 * Debian system); where it is missing or refused (a seccomp profile) the threads keep their
 * policy, and elsewhere nothing is done.
 */
import { execFile } from "node:child_process"
import { readdirSync, readlinkSync } from "node:fs"

/** `SCHED_BATCH`'s number (sched(7)), as /proc/PID/task/TID/stat shows it (field 41). */
export const schedBatch = 3

/**
 * The threads of this process other than the main one. At `serve`'s first step, before the daemon
 * starts a thread of its own: Node's and libuv's pool.
 */
export const threadsBesideMain = (): ReadonlyArray<number> => {
  try {
    return readdirSync("/proc/self/task")
      .map(Number)
      .filter((tid) => tid !== process.pid)
  } catch {
    return []
  }
}

/** The calling thread's id (its task id under /proc), where Linux gives it. */
export const ownThreadId = (): number | undefined => {
  try {
    return Number(readlinkSync("/proc/thread-self").split("/").pop())
  } catch {
    return undefined
  }
}

/**
 * Puts `tids` (threads of this process) under `SCHED_BATCH`; resolves once each was tried, with
 * those that took it. Never rejects: a thread that kept its policy only runs as before. One
 * process is spawned however many threads (a shell that runs `chrt` for each): a spawn holds the
 * calling thread for its fork and exec, a few milliseconds each.
 */
export const runInBatch = (
  tids: ReadonlyArray<number | undefined>,
  platform: NodeJS.Platform = process.platform,
): Promise<ReadonlyArray<number>> => {
  const set = tids.filter((tid): tid is number => tid !== undefined && Number.isInteger(tid) && tid > 0)
  if (platform !== "linux" || set.length === 0) return Promise.resolve([])
  const script = 'for tid do chrt --batch --pid 0 "$tid" >/dev/null 2>&1 && echo "$tid"; done'
  return new Promise((resolve) => {
    try {
      execFile("sh", ["-c", script, "sh", ...set.map(String)], (_error, stdout) =>
        resolve(
          String(stdout ?? "")
            .split("\n")
            .filter((line) => line !== "")
            .map(Number),
        ),
      ).on("error", () => resolve([]))
    } catch {
      resolve([])
    }
  })
}

/** Puts the calling thread under `SCHED_BATCH` (a background worker, at its start). */
export const runThisThreadInBatch = (): void => void runInBatch([ownThreadId()])

/** How long after `serve` starts Node's own threads are put under `SCHED_BATCH` (after its first answers). */
export const nodeThreadsBatchDelayMs = 1_000

/**
 * Notes the threads there are now (`threadsBesideMain`: at `serve`'s first step, Node's own and
 * libuv's pool) and puts them under `SCHED_BATCH` `nodeThreadsBatchDelayMs` later, so the spawn
 * does not delay a daemon's first answer. The timer keeps no process alive.
 */
export const runNodeThreadsInBatchSoon = (): void => {
  const tids = threadsBesideMain()
  if (tids.length === 0 || process.platform !== "linux") return
  setTimeout(() => void runInBatch(tids), nodeThreadsBatchDelayMs).unref()
}
