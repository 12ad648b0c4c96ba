/**
 * Runs a CommonJS file with V8's code cache (Node 20 has none for ES modules): compiled code is
 * read from a cache file instead of being compiled again, and can be written to one after a run.
 *
 * A cache is used only for the exact file it was made from: it starts with the SHA-256 of the
 * file's bytes (V8 itself checks only the source's length, and its own version and flags). A cache
 * that is missing, made for other bytes or rejected by V8 costs only the compilation it would have
 * saved: the file is compiled from source as without one.
 */
import { createHash } from "node:crypto"
import { readFileSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname } from "node:path"
import { constants, Script } from "node:vm"

/** Bytes of the file's SHA-256 at the start of a cache. */
const digestBytes = 32

/** What `runWithCodeCache` did with the cache, and what the file exported. */
export interface CodeCacheRun {
  /** A cache made from this very file was found and handed to V8. */
  readonly offered: boolean
  /** V8 refused the offered cache (another V8 version or flags) and compiled the source. */
  readonly rejected: boolean
  readonly exports: unknown
  /**
   * Writes a cache of the file to `cacheFile`; called after a run, it holds every function the
   * run compiled, not only the file's top level.
   */
  readonly writeCache: (cacheFile: string) => void
}

/** The cached data in `cacheFile` if it was made from the file of `digest`. */
const cachedDataOf = (cacheFile: string, digest: Buffer): Buffer | undefined => {
  try {
    const cache = readFileSync(cacheFile)
    return cache.subarray(0, digestBytes).equals(digest) ? cache.subarray(digestBytes) : undefined
  } catch {
    return undefined
  }
}

/**
 * Runs the CommonJS `file` as Node would, with the code cache in `cacheFile`. The file must be
 * ASCII (esbuild's `charset: "ascii"`): it is decoded as Latin-1, much faster than as UTF-8.
 */
export const runWithCodeCache = (file: string, cacheFile: string): CodeCacheRun => {
  const source = readFileSync(file)
  const digest = createHash("sha256").update(source).digest()
  const cachedData = cachedDataOf(cacheFile, digest)
  // CommonJS's own wrapper, on the file's first line so that line numbers stay the file's.
  const script = new Script(
    `(function (exports, require, module, __filename, __dirname) {${source.toString("latin1")}\n})`,
    {
      filename: file,
      cachedData,
      // import() of a package left outside the file resolves as in any module of its directory.
      importModuleDynamically: constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
    },
  )
  const module = { exports: {} }
  script.runInThisContext()(module.exports, createRequire(file), module, file, dirname(file))
  return {
    offered: cachedData !== undefined,
    rejected: cachedData !== undefined && script.cachedDataRejected === true,
    exports: module.exports,
    writeCache: (cacheFile) => writeFileSync(cacheFile, Buffer.concat([digest, script.createCachedData()])),
  }
}
