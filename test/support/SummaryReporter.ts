import type { RunnerTask, RunnerTestFile } from "vitest"
import { DefaultReporter } from "vitest/reporters"

/**
 * Vitest's default reporter, then one plain closing line, `N passed, N failed`, that CI and people can
 * read without parsing (the last line, printed after the default summary).
 */
export default class SummaryReporter extends DefaultReporter {
  override onFinished(files: Array<RunnerTestFile> = [], errors: Array<unknown> = []) {
    super.onFinished(files, errors)
    let passed = 0
    let failed = 0
    let skipped = 0
    const visit = (task: RunnerTask) => {
      if (task.type === "suite") {
        task.tasks.forEach(visit)
        return
      }
      const state = task.result?.state
      if (state === "pass") passed++
      else if (state === "fail") failed++
      else skipped++
    }
    for (const file of files) {
      if (file.tasks.length === 0 && file.result?.state === "fail") failed++ // a file that failed to load
      file.tasks.forEach(visit)
    }
    failed += errors.length
    process.stdout.write(`\n${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ""}\n`)
  }
}
