/**
 * What the search index alone holds once a persisted index is loaded (issue 28): `node --expose-gc
 * --import tsx bench/footprintIndexHeap.ts <data dir>/search/lmdb [snapshot file]`. Loads every
 * persisted group and vector into a `SearchIndex` as the search thread's load does (without the
 * model; its documents stay in search's LMDB, read on demand), then prints the heap and array buffers it added after full GCs; with a file, writes a V8
 * heap snapshot there (open it in Chrome's DevTools, or aggregate it by node type and name).
 */
import { writeHeapSnapshot } from "node:v8"
import { SearchIndex } from "../src/search/index/SearchIndex.ts"
import { openLmdbPersistence } from "../src/search/persistence/SearchPersistence.ts"

const gc = (globalThis as { gc?: () => void }).gc
if (gc === undefined) throw new Error("run with node --expose-gc")
const path = process.argv[2]
if (path === undefined) throw new Error("usage: footprintIndexHeap.ts <search lmdb dir> [snapshot file]")
const mib = (bytes: number) => (bytes / 1024 / 1024).toFixed(1)
gc()
const before = process.memoryUsage()
const persistence = openLmdbPersistence(path)
const index = new SearchIndex(undefined, persistence)
const started = performance.now()
for (const group of persistence.groups()) {
  index.loadGroup(group.store, group.group, group.documents)
  for (const document of group.documents) {
    const stored = persistence.vector(document.id)
    if (stored !== undefined) index.setVector(document.id, stored.hash, stored.vector)
  }
}
const loadMs = performance.now() - started
gc()
gc()
const after = process.memoryUsage()
console.log(
  `${index.size} documents loaded in ${loadMs.toFixed(0)} ms: heap +${mib(after.heapUsed - before.heapUsed)} MiB, array buffers +${mib(after.arrayBuffers - before.arrayBuffers)} MiB, RSS ${mib(after.rss)} MiB`,
)
if (process.argv[3] !== undefined) console.log(`heap snapshot: ${writeHeapSnapshot(process.argv[3])}`)
await persistence.close()
// Kept alive until here, so the snapshot holds it.
console.log(`(${index.stats().documents} documents still held)`)
