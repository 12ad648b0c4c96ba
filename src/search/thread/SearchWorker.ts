/**
 * The search thread's entry: serves the index core to the main thread's indexer (SearchThread.ts
 * has the protocol). Started by `openSearchThread` with the thread's configuration as its data.
 */
import { workerData } from "node:worker_threads"
import { serveParent, type ThreadConfig } from "./SearchThread.ts"

serveParent(workerData as ThreadConfig)
