/**
 * The CLI and the daemon as installed: packs the built package, installs the tarball into a temporary
 * app (dependencies from the npm cache, native addons' binaries copied from this checkout), then
 * measures, in the same run:
 *  - every command against bare `node -e 0` (median of 5 each, interleaved with the baseline so the
 *    machine's load moves both alike; target ≤ 3× each; also the median of each run over the bare run just
 *    before it, which a drifting machine moves less): the owner's commands on an existing database,
 *    and the agents' (`hook`, `watch --once`, `guard check`) against a running daemon;
 *  - the code cache's share: `connection list` with SOPHIA_COMPILE_CACHE=0;
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

const timeRun = (args: ReadonlyArray<string>, cwd: string, extra: { env?: Record<string, string>; input?: string } = {}) => {
  const t0 = performance.now()
  const r = must(
    spawnSync(process.execPath, args, { cwd, encoding: "utf8", input: extra.input, env: { ...process.env, SOPHIA_DATABASE_URL: "", ...extra.env } }),
    args.join(" ")
  )
  return { ms: performance.now() - t0, stdout: String(r.stdout) }
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
  new Promise<{ ms: number; pid: number; url: string; stop: () => Promise<void> }>((resolve, reject) => {
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
      resolve({ ms: performance.now() - t0, pid: child.pid!, url: m[1]!, stop: () => (child.kill("SIGTERM"), exited) })
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
const N = 5
const mint = (name: string) => JSON.parse(timeRun([bin, "connection", "create", "--name", name, "--profile", "full", "--db", db], app).stdout)
for (let i = 0; i < 5; i++) mint(`agent-${i}`)
const doomed = Array.from({ length: N + 1 }, (_, i) => mint(`doomed-${i}`).connection_id as string)

// the agents' commands ask a running daemon
const daemon = await startToHealthy(bin, db, app)
const url = daemon.url
const reader = mint("reader")
const writer = mint("writer")
const agentEnv = { SOPHIA_URL: url, SOPHIA_BEARER: reader.bearer as string }
// a post the reader has not read, so `watch --once` returns at once (posted outside the timed run)
const postForReader = () =>
  must(
    spawnSync(process.execPath, ["-e", `fetch(process.argv[1], { method: "POST", headers: { authorization: "Bearer ${writer.bearer}",
      "content-type": "application/json" }, body: JSON.stringify({ channel: "bench", kind: "status", body: "for watch" }) })
      .then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))`, `${url}/api/tools/sophia.coordination_post`], { encoding: "utf8" }),
    "post"
  )
const repo = path.join(work, "repo")
fs.mkdirSync(repo)
must(spawnSync("git", ["init", "-q"], { cwd: repo }), "git init")
fs.writeFileSync(path.join(repo, "a.txt"), "a\n")
must(spawnSync("git", ["add", "a.txt"], { cwd: repo }), "git add")
const hookInput = JSON.stringify({
  session_id: "bench",
  transcript_path: "/tmp/bench.jsonl",
  cwd: repo,
  hook_event_name: "PostToolUse",
  tool_name: "Bash",
  tool_input: { command: "ls" },
  tool_response: { stdout: "" }
})

let run = 0
const commands: ReadonlyArray<readonly [string, () => ReturnType<typeof timeRun>]> = [
  ["--version", () => timeRun([bin, "--version"], app)],
  ["connection list", () => timeRun([bin, "connection", "list", "--db", db], app)],
  ["connection create", () => timeRun([bin, "connection", "create", "--name", `new-${run++}`, "--profile", "observer", "--db", db], app)],
  ["connection rename", () => timeRun([bin, "connection", "rename", "agent-0", `agent-0-${run++}`, "--db", db], app)],
  ["connection revoke", () => timeRun([bin, "connection", "revoke", doomed[run++ % doomed.length]!, "--db", db], app)],
  ["approvals list", () => timeRun([bin, "approvals", "list", "--db", db], app)],
  ["ledger verify", () => timeRun([bin, "ledger", "verify", "--db", db], app)],
  ["backup", () => timeRun([bin, "backup", "--out", path.join(work, `backup-${run++}.db`), "--db", db], app)],
  ["portal", () => timeRun([bin, "portal", "--db", db], app)],
  ["notify add", () =>
    timeRun([bin, "notify", "add", "--url", `http://127.0.0.1:9/hook-${run++}`, "--events", "approval_requested", "--db", db], app)],
  ["notify list", () => timeRun([bin, "notify", "list", "--db", db], app)],
  ["setup claude-code", () =>
    timeRun([bin, "setup", "claude-code", "--name", `setup-${run++}`, "--profile", "assistant", "--dir", path.join(work, `proj-${run}`), "--db", db], app)],
  ["setup codex", () =>
    timeRun([bin, "setup", "codex", "--name", `codex-${run++}`, "--profile", "assistant", "--dir", path.join(work, `proj-${run}`), "--db", db], app)],
  ["hook claude-code (PostToolUse)", () => timeRun([bin, "hook", "claude-code"], app, { env: agentEnv, input: hookInput })],
  ["hook codex (agent-turn-complete)", () =>
    timeRun([bin, "hook", "codex", JSON.stringify({ type: "agent-turn-complete", "turn-id": "1", cwd: repo })], app, { env: agentEnv })],
  ["watch --once (a post waiting)", () => (postForReader(), timeRun([bin, "watch", "--once"], app, { env: agentEnv }))],
  ["guard check", () => timeRun([bin, "guard", "check"], repo, { env: agentEnv })]
]
// the rename above renames agent-0 once; later runs find it by its new name
const renames = commands.findIndex(([name]) => name === "connection rename")
let current = "agent-0"
const timed = commands.map(([name, f], index) =>
  [name, index === renames ? () => {
    const next = `agent-0-${run++}`
    const r = timeRun([bin, "connection", "rename", current, next, "--db", db], app)
    current = next
    return r
  } : f] as const
)

// warm: the first run of each writes its code cache (as an installed CLI's first run does)
for (const [, f] of timed) f()
const bare: Array<number> = []
const times = new Map<string, Array<number>>(timed.map(([name]) => [name, []]))
// each run over the bare run just before it: the machine's drift moves both alike
const paired = new Map<string, Array<number>>(timed.map(([name]) => [name, []]))
for (let i = 0; i < N; i++) {
  for (const [name, f] of timed) {
    const baseline = timeRun(["-e", "0"], app).ms
    const ms = f().ms
    bare.push(baseline)
    times.get(name)!.push(ms)
    paired.get(name)!.push(ms / baseline)
  }
}
const uncached: Array<number> = []
for (let i = 0; i < N; i++) uncached.push(timeRun([bin, "connection", "list", "--db", db], app, { env: { SOPHIA_COMPILE_CACHE: "0" } }).ms)
await daemon.stop()

const starts: Array<number> = []
let idle = { rss: 0, children: 0, n: 0 }
for (let i = 0; i < 3; i++) {
  const d = await startToHealthy(bin, db, app)
  starts.push(d.ms)
  if (i === 2) {
    await new Promise((r) => setTimeout(r, 3000))
    const kids = childrenOf(d.pid)
    idle = { rss: rssKb(d.pid), children: kids.reduce((a, k) => a + rssKb(k), 0), n: kids.length }
  }
  await d.stop()
}

const b = median(bare)
console.log(`## CLI and daemon (installed from the tarball)\n`)
console.log(`| command | median of ${N} | × \`node -e 0\` (target ≤ 3×) | median of the ${N} paired ratios |`)
console.log(`|---|---|---|---|`)
console.log(`| bare \`node -e 0\` (median of ${bare.length}) | ${fmt(b)} | 1.0× | |`)
for (const [name, xs] of times) {
  console.log(`| \`sophia ${name}\` | ${fmt(median(xs))} | **${(median(xs) / b).toFixed(2)}×** | ${median(paired.get(name)!).toFixed(2)}× |`)
}
console.log(`| \`sophia connection list\` without the code cache (SOPHIA_COMPILE_CACHE=0) | ${fmt(median(uncached))} | ${(median(uncached) / b).toFixed(2)}× | |`)
console.log()
console.log(`| daemon | value |`)
console.log(`|---|---|`)
console.log(`| start to first /healthz 200 (median of 3) | ${fmt(median(starts))} |`)
console.log(`| idle RSS, 3 s after ready | ${(idle.rss / 1024).toFixed(0)} MiB (+ ${idle.n} sandbox children: ${(idle.children / 1024).toFixed(0)} MiB) |`)
console.log()
fs.rmSync(work, { recursive: true, force: true })
