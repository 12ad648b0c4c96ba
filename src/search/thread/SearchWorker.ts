/**
 * The search thread's entry: serves the index core to the main thread's indexer (SearchThread.ts
 * has the protocol). Started by `openSearchThread` with the thread's configuration as its data.
 * It does not take the CPU from the main thread when it wakes (ThreadPolicy.ts).
 */
import { workerData } from "node:worker_threads"
import { runThisThreadInBatch } from "../../runtime/ThreadPolicy.ts"
import { serveParent, type ThreadConfig } from "./SearchThread.ts"

runThisThreadInBatch()
serveParent(workerData as ThreadConfig)
