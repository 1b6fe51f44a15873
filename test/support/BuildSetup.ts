/**
 * Vitest global setup: the CLI tests run the compiled `sophia` (bin/sophia.js → dist/), so build dist/
 * first whenever src/ changed since the last build (a no-op otherwise).
 */
import { spawnSync } from "node:child_process"
import * as path from "node:path"

export default function setup() {
  const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "../..")
  const r = spawnSync(process.execPath, [path.join(root, "scripts/build.mjs"), "--if-stale"], { cwd: root, stdio: "inherit" })
  // TEMPORARY while several engineers edit one tree (issue 26): a build broken by someone else's half-done
  // file must not stop every other test run; the CLI tests then run the last dist/. Restored before landing.
  if (r.status !== 0) process.stderr.write("\nBuildSetup: the build failed (node scripts/build.mjs); running against the last dist/\n\n")
}
