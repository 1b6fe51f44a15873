import type { SerializedError } from "vitest"
import type { TestModule, TestRunEndReason } from "vitest/node"
import { DefaultReporter } from "vitest/reporters"

/**
 * Vitest's default reporter, then one plain closing line, `N passed, N failed`, that CI and people can
 * read without parsing (it must be the last line, so it is printed after the default summary).
 */
export default class SummaryReporter extends DefaultReporter {
  override async onTestRunEnd(
    modules: ReadonlyArray<TestModule>,
    unhandledErrors: ReadonlyArray<SerializedError>,
    reason: TestRunEndReason
  ) {
    await super.onTestRunEnd(modules, unhandledErrors, reason)
    let passed = 0
    let failed = 0
    let skipped = 0
    for (const module of modules) {
      for (const test of module.children.allTests()) {
        const state = test.result().state
        if (state === "passed") passed++
        else if (state === "failed") failed++
        else skipped++
      }
      // a file that failed to load has no tests but is a failure
      if (module.state() === "failed" && module.children.size === 0) failed++
    }
    failed += unhandledErrors.length
    process.stdout.write(`\n${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ""}\n`)
  }
}
