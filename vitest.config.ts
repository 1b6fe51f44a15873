import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // the default reporter for people, plus the plain `N passed, N failed` line CI reads
    reporters: ["./test/support/SummaryReporter.ts"],
    // the CLI and package tests run the compiled dist/: build it when src/ changed
    globalSetup: ["./test/support/BuildSetup.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks"
  }
})
