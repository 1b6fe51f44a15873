import type { RunnerTask, RunnerTestFile } from "vitest"
import { DefaultReporter } from "vitest/reporters"

/**
 * Vitest's default reporter, then a line per project (`project postgres: N passed, N failed, N skipped`,
 * which .ci/run reads to prove the Postgres run happened) and one plain closing line, `N passed, N failed`,
 * that CI and people can read without parsing (the last line, printed after the default summary).
 */
export default class SummaryReporter extends DefaultReporter {
  override onFinished(files: Array<RunnerTestFile> = [], errors: Array<unknown> = []) {
    super.onFinished(files, errors)
    let passed = 0
    let failed = 0
    let skipped = 0
    const perProject = new Map<string, { passed: number; failed: number; skipped: number }>()
    let project = { passed: 0, failed: 0, skipped: 0 }
    const visit = (task: RunnerTask) => {
      if (task.type === "suite") {
        task.tasks.forEach(visit)
        return
      }
      const state = task.result?.state
      if (state === "pass") passed++, project.passed++
      else if (state === "fail") failed++, project.failed++
      else skipped++, project.skipped++
    }
    for (const file of files) {
      const name = file.projectName || "default"
      project = perProject.get(name) ?? { passed: 0, failed: 0, skipped: 0 }
      perProject.set(name, project)
      if (file.tasks.length === 0 && file.result?.state === "fail") failed++, project.failed++ // a file that failed to load
      file.tasks.forEach(visit)
    }
    failed += errors.length
    for (const [name, c] of [...perProject].sort(([a], [b]) => a.localeCompare(b))) {
      process.stdout.write(`\nproject ${name}: ${c.passed} passed, ${c.failed} failed, ${c.skipped} skipped`)
    }
    process.stdout.write(`\n${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ""}\n`)
  }
}
