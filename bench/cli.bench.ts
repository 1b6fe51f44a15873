/**
 * The CLI and the daemon as installed: packs the built package, installs the tarball into a temporary
 * app (dependencies from the npm cache, native addons' binaries copied from this checkout), then
 * measures, in the same run:
 *  - `sophia connection list` on an existing database (median of 10) against bare `node -e 0`
 *    (target ≤ 5×), and the same command through tsx on the sources (what the package shipped before);
 *  - daemon start (spawn) to the first 200 on /healthz (median of 3);
 *  - the idle daemon's RSS (and its pre-spawned sandbox children's) 3 s after it is ready.
 */
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..")
const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
const fmt = (ms: number) => `${ms.toFixed(0)} ms`

const must = (r: ReturnType<typeof spawnSync>, what: string) => {
  if (r.status !== 0) throw new Error(`${what} failed: ${r.stderr}`)
  return r
}

const timeRun = (args: ReadonlyArray<string>, cwd: string) => {
  const t0 = performance.now()
  must(spawnSync(process.execPath, args, { cwd, encoding: "utf8", env: { ...process.env, SOPHIA_DATABASE_URL: "" } }), args.join(" "))
  return performance.now() - t0
}

const rssKb = (pid: number) => {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0)
  } catch {
    return 0
  }
}
const childrenOf = (pid: number) => {
  try {
    return fs.readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number)
  } catch {
    return []
  }
}

const startToHealthy = (bin: string, db: string, cwd: string) =>
  new Promise<{ ms: number; pid: number; stop: () => Promise<void> }>((resolve, reject) => {
    const t0 = performance.now()
    const child = spawn(process.execPath, [bin, "serve", "--port", "0", "--db", db], {
      cwd,
      env: { ...process.env, SOPHIA_DATABASE_URL: "" },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let out = ""
    const exited = new Promise<void>((r) => child.once("exit", () => r()))
    child.stdout.on("data", async (d) => {
      out += d
      const m = /MCP endpoint (http:\/\/\S+)\/mcp/.exec(out)
      if (!m || out.includes("\u0000seen")) return
      out += "\u0000seen"
      for (;;) {
        const ok = await fetch(`${m[1]}/healthz`).then((r) => r.ok, () => false)
        if (ok) break
        await new Promise((r) => setTimeout(r, 5))
      }
      resolve({ ms: performance.now() - t0, pid: child.pid!, stop: () => (child.kill("SIGTERM"), exited) })
    })
    child.once("exit", (code) => reject(new Error(`serve exited ${code}`)))
  })

const work = fs.mkdtempSync(path.join(os.tmpdir(), "sophia-cli-bench-"))
must(spawnSync(process.execPath, [path.join(ROOT, "scripts/build.mjs"), "--if-stale"], { cwd: ROOT, encoding: "utf8" }), "build")
const pack = must(spawnSync("npm", ["pack", "--ignore-scripts", "--json", "--pack-destination", work], { cwd: ROOT, encoding: "utf8" }), "pack")
const tarball = path.join(work, JSON.parse(pack.stdout as string)[0].filename)
const app = path.join(work, "app")
fs.mkdirSync(app)
fs.writeFileSync(path.join(app, "package.json"), JSON.stringify({ name: "bench-app", private: true, type: "module" }))
must(
  spawnSync("npm", ["install", tarball, "--prefer-offline", "--ignore-scripts", "--no-audit", "--no-fund"], { cwd: app, encoding: "utf8" }),
  "install"
)
for (const [pkg, dir] of [["better-sqlite3", "build"], ["isolated-vm", "out"]] as const) {
  fs.cpSync(path.join(ROOT, "node_modules", pkg, dir), path.join(app, "node_modules", pkg, dir), { recursive: true })
}
const bin = path.join(app, "node_modules/@sophia-mcp/server/bin/sophia.js")
const db = path.join(work, "sophia.db")
for (let i = 0; i < 5; i++) timeRun([bin, "connection", "create", "--name", `agent-${i}`, "--profile", "full", "--db", db], app)

const N = 10
const bare: Array<number> = []
const list: Array<number> = []
const version: Array<number> = []
// interleaved, so the machine's load moves both sides alike
for (let i = 0; i < N; i++) {
  bare.push(timeRun(["-e", "0"], app))
  list.push(timeRun([bin, "connection", "list", "--db", db], app))
  version.push(timeRun([bin, "--version"], app))
}
const tsx: Array<number> = []
for (let i = 0; i < 3; i++) tsx.push(timeRun(["--import", "tsx", path.join(ROOT, "src/main.ts"), "connection", "list", "--db", db], ROOT))

const starts: Array<number> = []
let idle = { rss: 0, children: 0, n: 0 }
for (let i = 0; i < 3; i++) {
  const daemon = await startToHealthy(bin, db, app)
  starts.push(daemon.ms)
  if (i === 2) {
    await new Promise((r) => setTimeout(r, 3000))
    const kids = childrenOf(daemon.pid)
    idle = { rss: rssKb(daemon.pid), children: kids.reduce((a, k) => a + rssKb(k), 0), n: kids.length }
  }
  await daemon.stop()
}

const b = median(bare)
console.log(`## CLI and daemon (installed from the tarball)\n`)
console.log(`| measure | value |`)
console.log(`|---|---|`)
console.log(`| bare \`node -e 0\` (median of ${N}) | ${fmt(b)} |`)
console.log(`| \`sophia --version\` (median of ${N}) | ${fmt(median(version))} (${(median(version) / b).toFixed(1)}×) |`)
console.log(`| \`sophia connection list\`, existing database (median of ${N}) | ${fmt(median(list))} |`)
console.log(`| **ratio connection list / node -e 0** (target ≤ 5×) | **${(median(list) / b).toFixed(1)}×** |`)
console.log(`| the same through tsx on the sources (before; median of 3) | ${fmt(median(tsx))} (${(median(tsx) / b).toFixed(1)}×) |`)
console.log(`| daemon start to first /healthz 200 (median of 3) | ${fmt(median(starts))} |`)
console.log(`| idle daemon RSS, 3 s after ready | ${(idle.rss / 1024).toFixed(0)} MiB (+ ${idle.n} sandbox children: ${(idle.children / 1024).toFixed(0)} MiB) |`)
console.log()
fs.rmSync(work, { recursive: true, force: true })
