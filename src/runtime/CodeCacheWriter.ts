/**
 * The launcher's writer of the user's code cache (src/cli/Launcher.ts), left where the idle
 * collection finds it. A process that has none for its runtime writes one, and it must be written
 * before the idle collection runs: on Node 22 and 24 that collection is V8's last-resort one
 * (IdleHeap.ts), which drops the bytecode of every function not running, and a cache written after
 * it held the bundle's top level and little else. Written at exit after a first idle spell, the
 * cache made the next start on Node 24 take 330 ms to a first answer against 190 with one written
 * before (docs/benchmarks.md, "A code cache written before the first idle collection").
 */
const codeCacheWriterKey = Symbol.for("mnemos.writeCodeCache")

type Holder = { [codeCacheWriterKey]?: () => void }

/** Leaves `write` for `writePendingCodeCache`. */
export const leaveCodeCacheWriter = (write: () => void): void => {
  ;(globalThis as Holder)[codeCacheWriterKey] = write
}

/** Writes the code cache the launcher left, once; nothing when none was left (or on a worker thread). */
export const writePendingCodeCache = (): void => {
  const holder = globalThis as Holder
  const write = holder[codeCacheWriterKey]
  if (write === undefined) return
  delete holder[codeCacheWriterKey]
  write()
}
