/**
 * `npm run bench [filter]`: runs every `bench/*.bench.ts` in turn, each in its own process (so one area's
 * heap and database do not skew the next). Each prints its own markdown table; numbers are reported as
 * ratios against a raw baseline measured in the same run, because these machines are shared and noisy.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

const dir = path.dirname(new URL(import.meta.url).pathname)
const filter = process.argv[2]
const files = fs.readdirSync(dir).filter((f) => f.endsWith(".bench.ts") && (!filter || f.includes(filter))).sort()
console.log(`# Sophia benchmarks — ${new Date().toISOString()} — ${os.cpus()[0]?.model ?? "cpu"} ×${os.cpus().length}, node ${process.version}\n`)
let failed = 0
for (const file of files) {
  const r = spawnSync(process.execPath, ["--no-node-snapshot", "--import", "tsx", path.join(dir, file)], { stdio: "inherit" })
  if (r.status !== 0) failed++
}
process.exit(failed > 0 ? 1 : 0)
