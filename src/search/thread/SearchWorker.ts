/**
 * The search thread's entry: serves the index core to the main thread's indexer (SearchThread.ts
 * has the protocol). Started by `openSearchThread` with the thread's configuration as its data.
 * It runs at a lower priority than the main thread (ThreadPriority.ts).
 */
import { workerData } from "node:worker_threads"
import { yieldToMainThread } from "../../runtime/ThreadPriority.ts"
import { serveParent, type ThreadConfig } from "./SearchThread.ts"

yieldToMainThread()
serveParent(workerData as ThreadConfig)
