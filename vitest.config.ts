import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 120_000,
    hookTimeout: 60_000,
    // Crash and kill tests spawn processes and fsync for real; two cores are all CI has.
    maxWorkers: 2,
    reporters: ["default", "./test/support/TotalsReporter.ts"],
  },
})
