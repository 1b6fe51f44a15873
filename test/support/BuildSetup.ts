/**
 * Vitest global setup: the CLI tests run the compiled `sophia` (bin/sophia.js → dist/), so build dist/
 * first whenever src/ changed since the last build (a no-op otherwise).
 */
import { spawnSync } from "node:child_process"
import * as path from "node:path"

export default function setup() {
  const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "../..")
  const r = spawnSync(process.execPath, [path.join(root, "scripts/build.mjs"), "--if-stale"], { cwd: root, stdio: "inherit" })
  if (r.status !== 0) throw new Error("the build failed (node scripts/build.mjs)")
}
