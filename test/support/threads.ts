/**
 * Each thread's scheduling policy as Linux's scheduler sees it (`/proc/PID/task/TID/stat`, field
 * 41: 0 the default, 3 `SCHED_BATCH`), for the tests of src/runtime/ThreadPolicy.ts.
 */
import { readdirSync, readFileSync } from "node:fs"

/** The policy of thread `tid` of process `pid` (this one by default). */
export const policyOf = (tid: number, pid: number | "self" = "self"): number => {
  const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "latin1")
  // Fields after the command name (which may hold spaces) start at field 3, the state.
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[41 - 3])
}

/** The threads of process `pid` under `policy`. */
export const threadsUnder = (pid: number, policy: number): Array<number> => {
  const found: Array<number> = []
  for (const tid of readdirSync(`/proc/${pid}/task`).map(Number)) {
    try {
      if (policyOf(tid, pid) === policy) found.push(tid)
    } catch {} // a thread that ended meanwhile
  }
  return found
}
