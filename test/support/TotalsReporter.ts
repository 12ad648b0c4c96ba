/**
 * Writes the run's totals as the plain line CI reads ("N passed, N failed") to
 * test-results/totals.txt and prints it, so `.ci/run` can repeat it as its very last line
 * after the benchmarks. Unhandled errors and failed modules count as failures.
 */
import { mkdirSync, writeFileSync } from "node:fs"
import type { Reporter, TestModule } from "vitest/node"

export default class TotalsReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>) {
    let passed = 0
    let failed = unhandledErrors.length
    for (const module of testModules) {
      if (module.state() === "failed" && [...module.children.allTests()].length === 0) failed++
      for (const test of module.children.allTests()) {
        const state = test.result().state
        if (state === "passed") passed++
        else if (state === "failed") failed++
      }
    }
    const line = `${passed} passed, ${failed} failed`
    mkdirSync("test-results", { recursive: true })
    writeFileSync("test-results/totals.txt", `${line}\n`)
    process.stdout.write(`\n${line}\n`)
  }
}
