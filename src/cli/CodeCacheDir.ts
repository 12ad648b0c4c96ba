/**
 * Where the built CLI keeps the code caches it writes for the runtimes the build's own cache was
 * not made for (Launcher.ts): a directory of the user's own, `$XDG_CACHE_HOME/mnemos/code-cache`
 * (`~/.cache/...` when the variable is unset or empty, as the XDG spec says), mode 0700. Not the
 * shared temporary directory: compiled code read from a cache is run as it is, so a cache another
 * user of the machine can write to would run their code as this user. A directory that cannot be
 * made, or that is not this user's alone, is not used: the CLI then compiles its code as without
 * a cache.
 */
import { lstatSync, mkdirSync } from "node:fs"
import { homedir } from "node:os"
import { isAbsolute, join } from "node:path"

/** The user's cache directory (XDG base directories: a relative path is invalid and ignored). */
const userCacheHome = (): string | undefined => {
  const xdg = process.env.XDG_CACHE_HOME
  if (xdg !== undefined && xdg !== "" && isAbsolute(xdg)) return xdg
  const home = homedir()
  return home === "" ? undefined : join(home, ".cache")
}

/** The code cache directory, made if missing; undefined when none safe can be had. */
export const codeCacheDir = (): string | undefined => {
  const base = userCacheHome()
  if (base === undefined) return undefined
  const dir = join(base, "mnemos", "code-cache")
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 })
    const stat = lstatSync(dir)
    const ownUid = process.getuid?.()
    const own = ownUid === undefined || stat.uid === ownUid
    return stat.isDirectory() && own && (stat.mode & 0o022) === 0 ? dir : undefined
  } catch {
    return undefined
  }
}
