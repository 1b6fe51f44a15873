import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // the default reporter for people, plus the plain `N passed, N failed` line CI reads
    reporters: ["./test/support/SummaryReporter.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks"
  }
})
