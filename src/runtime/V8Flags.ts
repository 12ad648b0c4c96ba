/**
 * The V8 flags this process changes as it runs (`v8.setFlagsFromString`), each with the value a new
 * process starts with, so they can be set back. V8 stamps its code cache with a hash of its flags
 * as they are when the cache is made, and a process refuses a cache stamped otherwise: the code
 * cache is written with the flags set back (src/cli/CodeCache.ts). Every flag changed at run time
 * goes through `setV8Flag`.
 */
import { setFlagsFromString } from "node:v8"

/**
 * Each flag changed since start, with its value at start (`--name=value` syntax). Kept on the
 * global object, not in this module: the built CLI's launcher (dist/cli.js, which writes the code
 * cache) and the bundle it runs are separate files, each with its own copy of this module. Flags
 * are process-wide; a worker thread that changed one would record it in its own global, so only
 * the main thread changes them.
 */
const atStartKey = Symbol.for("mnemos.v8FlagsAtStart")
const atStart = (): Map<string, string> => {
  const global = globalThis as { [atStartKey]?: Map<string, string> }
  global[atStartKey] ??= new Map()
  return global[atStartKey]
}

/** Sets `--name=value`; `valueAtStart` is what a new process has (V8's default). */
export const setV8Flag = (name: string, value: string, valueAtStart: string): void => {
  if (!atStart().has(name)) atStart().set(name, valueAtStart)
  setFlagsFromString(`--${name}=${value}`)
}

/** Sets every flag changed at run time back to its value at start (for the code cache; the process is exiting). */
export const restoreV8Flags = (): void => {
  for (const [name, value] of atStart()) setFlagsFromString(`--${name}=${value}`)
  atStart().clear()
}
