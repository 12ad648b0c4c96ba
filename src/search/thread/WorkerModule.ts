/**
 * Starts a worker thread on a module that sits beside the caller: the built `.js` file when the
 * caller runs from dist/ (bundled or not: every bundled file sits one directory below dist/, as
 * scripts/bundle.mjs explains), or the `.ts` source through tsx's loader when it runs from src/
 * (tests, `npm run bench`).
 */
import { createRequire } from "node:module"
import { fileURLToPath, pathToFileURL } from "node:url"
import { type ResourceLimits, Worker } from "node:worker_threads"
import { keepV8FlagsAcross, startWithYoungGenerationAtCap } from "../../runtime/V8Flags.ts"

/**
 * A worker running module `name` (no extension) of the directory of `callerUrl` (an `import.meta.url`),
 * with the V8 heap limits `resourceLimits` when given; a capped young generation starts at its cap
 * (`startWithYoungGenerationAtCap`).
 */
export const startModuleWorker = (
  callerUrl: string,
  name: string,
  workerData: unknown,
  resourceLimits?: ResourceLimits,
): Worker => {
  const youngGenerationMb = resourceLimits?.maxYoungGenerationSizeMb
  return youngGenerationMb === undefined
    ? startWorker(callerUrl, name, workerData, resourceLimits)
    : startWithYoungGenerationAtCap(youngGenerationMb, () => startWorker(callerUrl, name, workerData, resourceLimits))
}

const startWorker = (
  callerUrl: string,
  name: string,
  workerData: unknown,
  resourceLimits: ResourceLimits | undefined,
): Worker => {
  const options = { workerData, ...(resourceLimits !== undefined ? { resourceLimits } : {}) }
  // Built code (dist/<area>/*.js, or the bundled CLI, dist/bundle/cli.cjs) starts the built worker.
  if (!fileURLToPath(callerUrl).endsWith(".ts"))
    return keepV8FlagsAcross(new Worker(new URL(`./${name}.js`, callerUrl), options))
  const tsxApi = pathToFileURL(
    createRequire(callerUrl)
      .resolve("tsx/esm/api")
      .replace(/\.cjs$/, ".mjs"),
  ).href
  const target = new URL(`./${name}.ts`, callerUrl).href
  const code = `(async () => { const { register } = await import(${JSON.stringify(tsxApi)}); register(); await import(${JSON.stringify(target)}) })()`
  return keepV8FlagsAcross(new Worker(code, { eval: true, ...options }))
}
