/**
 * Runs a bundled CommonJS module with V8's code cache: compiled code is read from a cache file
 * instead of being compiled again, and can be written to one after a run, when it holds every
 * function the run compiled (Node's own compile cache, Node 22 and later, keeps only what compiling
 * the file produced: its top level, which saved nothing measurable before a first MCP answer).
 *
 * The file is a module function (scripts/moduleFunction.mjs): one expression whose value is the
 * function Node's loader would wrap the module in, so that its text goes to V8 as it was read.
 *
 * A cache is used only for the exact file and runtime it was made for: it starts with the SHA-256
 * of the file's bytes, the Node version and the CPU architecture (V8 itself checks only the
 * source's length, its own version and its flags). A cache that is missing, made for other bytes
 * or another runtime, or rejected by V8 costs only the compilation it would have saved: the file
 * is compiled from source as without one.
 */
import { closeSync, fstatSync, openSync, readSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname } from "node:path"
import { constants, Script } from "node:vm"
import { withFlagsAtStart } from "../runtime/V8Flags.ts"

/**
 * `node:crypto`, loaded when a cache is first checked rather than as the launcher loads: a `serve`
 * that re-executes itself (AllocatorEnv.ts) decides before it, and loading it took ~5 ms.
 */
const crypto = () => process.getBuiltinModule("node:crypto")

/** Bytes of the digest at the start of a cache. */
const digestBytes = 32

/** What `runWithCodeCache` did with the caches it was offered, and what the file exported. */
export interface CodeCacheRun {
  /** The cache made for this very file and runtime that was handed to V8, if any. */
  readonly offered: string | undefined
  /** V8 refused the offered cache (its flags differ) and compiled the source. */
  readonly rejected: boolean
  readonly exports: unknown
  /**
   * Writes a cache of the file to `cacheFile` (whole or not at all: a new file renamed over the
   * old); called after a run, it holds every function the run compiled, not only the file's top
   * level. With `onlyIfLargerThan`, a cache of at most that many bytes is not written.
   */
  readonly writeCache: (cacheFile: string, onlyIfLargerThan?: number) => void
}

/**
 * The file at `path` read into `buffer` (the bytes read, a view of it), or into a new buffer if it
 * does not fit.
 */
const readInto = (path: string, buffer: Buffer): Buffer => {
  const fd = openSync(path, "r")
  try {
    const size = fstatSync(fd).size
    const into = size <= buffer.length ? buffer : Buffer.allocUnsafeSlow(size)
    let read = 0
    for (let bytes = -1; read < size && bytes !== 0; read += bytes) bytes = readSync(fd, into, read, size - read, read)
    return into.subarray(0, read)
  } finally {
    closeSync(fd)
  }
}

/** The cached data in `cacheFile`, read into `buffer`, if it was made for the file and runtime of `digest`. */
const cachedDataOf = (cacheFile: string, digest: Buffer, buffer: Buffer): Buffer | undefined => {
  try {
    const cache = readInto(cacheFile, buffer)
    return cache.subarray(0, digestBytes).equals(digest) ? cache.subarray(digestBytes) : undefined
  } catch {
    return undefined
  }
}

/** The size of the file at `path`, 0 if there is none. */
export const fileSize = (path: string): number => {
  try {
    return statSync(path).size
  } catch {
    return 0
  }
}

/**
 * Runs the module function in `file` (scripts/moduleFunction.mjs) as Node would run the module,
 * with the first of `cacheFiles` made for it and this runtime. The file must be ASCII (esbuild's
 * `charset: "ascii"`): it is decoded as Latin-1, much faster than as UTF-8.
 */
export const runWithCodeCache = (file: string, cacheFiles: ReadonlyArray<string>): CodeCacheRun => {
  // One buffer for the file and then its cache: a start faults in its pages once (each new page
  // was ~11 µs on the machine of docs/benchmarks.md, and the two are 2.4 and 2.7 MB).
  const buffer = Buffer.allocUnsafeSlow(Math.max(fileSize(file), ...cacheFiles.map(fileSize)))
  const bytes = readInto(file, buffer)
  const digest = crypto().createHash("sha256").update(bytes).update(`\0${process.version}\0${process.arch}`).digest()
  const source = bytes.toString("latin1")
  let offered: string | undefined
  let cachedData: Buffer | undefined
  for (const cacheFile of cacheFiles) {
    cachedData = cachedDataOf(cacheFile, digest, buffer)
    if (cachedData === undefined) continue
    offered = cacheFile
    break
  }
  const script = new Script(source, {
    filename: file,
    cachedData,
    // import() of a package left outside the file resolves as in any module of its directory.
    importModuleDynamically: constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
  })
  const module = { exports: {} }
  script.runInThisContext()(module.exports, createRequire(file), module, file, dirname(file))
  return {
    offered,
    rejected: cachedData !== undefined && script.cachedDataRejected === true,
    exports: module.exports,
    writeCache: (cacheFile, onlyIfLargerThan = -1) => {
      // V8 stamps a cache with a hash of its flags as they are now, and refuses one stamped
      // differently: it is made with the flags the process changed as it ran as a new process has
      // them (V8Flags.ts), which are then set again: it may be written mid-run (Launcher.ts).
      const data = withFlagsAtStart(() => script.createCachedData())
      if (digest.length + data.length <= onlyIfLargerThan) return
      const partial = `${cacheFile}.${process.pid}.partial`
      try {
        writeFileSync(partial, Buffer.concat([digest, data]), { mode: 0o600 })
        renameSync(partial, cacheFile)
      } finally {
        rmSync(partial, { force: true })
      }
    },
  }
}
