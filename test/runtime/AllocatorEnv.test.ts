/**
 * When `serve` re-executes itself with glibc's allocator settings (AllocatorEnv.ts): only where
 * they can take effect and nothing set them already; then with its own arguments and the settings
 * added to its environment. test/shipped runs the built product's `serve --stdio` and reads the
 * environment of the pid its client started.
 */
import { assert, describe, it } from "vitest"
import {
  allocatorEnv,
  helperThreadsFor,
  type Reexecutable,
  runsOnGlibc,
  withAllocatorSettings,
  withHelperThreads,
} from "../../src/runtime/AllocatorEnv.ts"

/** What `withAllocatorSettings` did with a process like `overrides`: the execve it made, if any. */
const reexecutionOf = (overrides: Partial<Reexecutable>) => {
  const calls: Array<{ file: string; args: Array<string>; env: NodeJS.ProcessEnv }> = []
  withAllocatorSettings({
    platform: "linux",
    env: { PATH: "/usr/bin" },
    execPath: "/opt/node/bin/node",
    execArgv: ["--import", "probe.mjs"],
    argv: ["/opt/node/bin/node", "/opt/mnemos/dist/cli.js", "serve", "--stdio"],
    execve: ((file, args, env) => {
      calls.push({ file, args, env })
    }) as Reexecutable["execve"],
    runsOnGlibc: () => true,
    cores: 8,
    ...overrides,
  })
  return calls
}

describe("serve's re-execution with glibc's allocator settings", () => {
  it("keeps the pid's Node, its flags and its arguments, and adds the settings to the environment", () => {
    const [call, ...more] = reexecutionOf({})
    assert.deepStrictEqual(more, [])
    assert.strictEqual(call!.file, "/opt/node/bin/node")
    assert.deepStrictEqual(call!.args, [
      "/opt/node/bin/node",
      "--import",
      "probe.mjs",
      "/opt/mnemos/dist/cli.js",
      "serve",
      "--stdio",
    ])
    assert.deepStrictEqual(call!.env, { PATH: "/usr/bin", ...allocatorEnv })
  })

  it("gives V8 one helper thread fewer than the cores, where that is fewer than Node's four, unless the user set it", () => {
    const argsOn = (overrides: Partial<Reexecutable>) => reexecutionOf(overrides)[0]!.args
    assert.deepStrictEqual(argsOn({ cores: 2 }), [
      "/opt/node/bin/node",
      "--import",
      "probe.mjs",
      "--v8-pool-size=1",
      "/opt/mnemos/dist/cli.js",
      "serve",
      "--stdio",
    ])
    assert.include(argsOn({ cores: 4 }), "--v8-pool-size=3")
    assert.isFalse(argsOn({ cores: 5 }).some((arg) => arg.startsWith("--v8-pool-size")))
    assert.deepStrictEqual(
      [1, 2, 3, 4, 5, 16].map((cores) => helperThreadsFor(cores)),
      [1, 1, 2, 3, undefined, undefined],
    )
    // The user's own, in the flags or in NODE_OPTIONS, is kept and not doubled.
    assert.deepStrictEqual(argsOn({ cores: 2, execArgv: ["--v8-pool-size=3"] }).slice(1, 2), ["--v8-pool-size=3"])
    assert.lengthOf(
      argsOn({ cores: 2, execArgv: ["--v8-pool-size=3"] }).filter((arg) => arg.startsWith("--v8-pool-size")),
      1,
    )
    assert.deepStrictEqual(withHelperThreads([], "--max-old-space-size=512 --v8-pool-size=2", 2), [])
    assert.deepStrictEqual(withHelperThreads([], "--max-old-space-size=512", 2), ["--v8-pool-size=1"])
  })

  it("leaves the process alone where the settings are given or cannot matter", () => {
    const left = {
      "a threshold the user set": { env: { MALLOC_TRIM_THRESHOLD_: "131072" } },
      "the other one": { env: { MALLOC_MMAP_THRESHOLD_: "65536" } },
      "the arenas": { env: { MALLOC_ARENA_MAX: "4" } },
      "a glibc tunable for them": { env: { GLIBC_TUNABLES: "glibc.malloc.trim_threshold=131072" } },
      "a glibc tunable for the arenas": { env: { GLIBC_TUNABLES: "glibc.malloc.arena_max=2" } },
      "Node without execve (20)": { execve: undefined },
      "another C library (musl)": { runsOnGlibc: () => false },
      macOS: { platform: "darwin" as const },
    }
    for (const [what, overrides] of Object.entries(left))
      assert.deepStrictEqual(reexecutionOf(overrides), [], `re-executed with ${what}`)
    // A tunable of something else leaves the thresholds to be set.
    assert.lengthOf(reexecutionOf({ env: { GLIBC_TUNABLES: "glibc.pthread.rseq=0" } }), 1)
  })

  it("tells glibc from its mapped library as process.report's header does", () => {
    const report = process.report as NodeJS.ProcessReport & { excludeNetwork?: boolean }
    report.excludeNetwork = true
    const header = (report.getReport() as { header?: { glibcVersionRuntime?: string } }).header
    assert.strictEqual(runsOnGlibc(), header?.glibcVersionRuntime !== undefined)
  })
})
