/**
 * Hooks benchmark (`npm run bench hooks`): the round trip of `POST /hooks/claude-code` on the daemon as
 * people run it (`sophia serve` on the compiled dist/, a SQLite file) against a no-op HTTP handler (a bare
 * Node server that reads the body, parses it and answers `{}`: bench/support/noop-server.mjs), both in their
 * own process, over loopback, from one keep-alive client, sides alternating request by request. Inputs are
 * the fixtures Claude Code sends (test/fixtures/hooks/claude-code). Cases:
 *  - `PostToolUse` with nothing new — what nearly every hook call is (target ≤ 2× the no-op, p50 and p99);
 *  - `Stop` with nothing addressed to the agent;
 *  - `UserPromptSubmit` delivering one new post (another agent posted since the last hook): a write;
 *  - `SessionStart`: the brief.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as path from "node:path"
import * as readline from "node:readline"
import { ensureBuilt, startDaemon } from "./support/daemon.js"

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..")
const fixture = (event: string) =>
  fs.readFileSync(path.join(root, "test", "fixtures", "hooks", "claude-code", `${event}.json`), "utf8")
const SAMPLES = Number(process.env.HOOK_SAMPLES ?? 2000)
const WARMUP = 300

const agent = new http.Agent({ keepAlive: true, maxSockets: 4 })

/** One POST, timed to the last byte of the answer. */
const post = (url: string, body: string, headers: Record<string, string> = {}) =>
  new Promise<{ ms: number; status: number; text: string }>((resolve, reject) => {
    const started = performance.now()
    const req = http.request(url, {
      method: "POST",
      agent,
      headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body), ...headers }
    }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (c) => chunks.push(c))
      res.on("end", () => resolve({ ms: performance.now() - started, status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }))
    })
    req.on("error", reject)
    req.end(body)
  })

const pct = (xs: ReadonlyArray<number>, p: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor(p * s.length))]
}
const fmt = (ms: number) => ms < 1 ? `${(ms * 1000).toFixed(0)} µs` : `${ms.toFixed(2)} ms`

const startNoop = () =>
  new Promise<{ child: ChildProcess; url: string }>((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(root, "bench", "support", "noop-server.mjs")], { stdio: ["ignore", "pipe", "inherit"] })
    readline.createInterface({ input: child.stdout! }).once("line", (url) => resolve({ child, url }))
    child.once("exit", (code) => reject(new Error(`noop server exited with ${code}`)))
  })

const main = async () => {
  ensureBuilt()
  const daemon = await startDaemon(2)
  const noop = await startNoop()
  const base = new URL(daemon.url).origin
  const hookUrl = `${base}/hooks/claude-code`
  const [me, other] = daemon.bearers
  const auth = (bearer: string) => ({ authorization: `Bearer ${bearer}` })
  const checked = async (url: string, body: string, headers: Record<string, string>) => {
    const r = await post(url, body, headers)
    if (r.status !== 200) throw new Error(`${url}: ${r.status} ${r.text}`)
    return r
  }
  const postOf = async (i: number) =>
    checked(`${base}/api/tools/sophia.coordination_post`, JSON.stringify({ channel: "bench", kind: "status", body: `news ${i}` }), auth(other))

  /** `n` alternating pairs: the no-op, then the hook (`before` runs first, untimed). */
  const pairs = async (event: string, n: number, before?: (i: number) => Promise<unknown>, expect?: (text: string) => boolean) => {
    const body = fixture(event)
    const hook: Array<number> = []
    const base: Array<number> = []
    for (let i = 0; i < n; i++) {
      if (before) await before(i)
      base.push((await checked(noop.url, body, auth(me))).ms)
      const r = await checked(hookUrl, body, auth(me))
      if (expect && !expect(r.text)) throw new Error(`${event}: unexpected answer ${r.text}`)
      hook.push(r.ms)
    }
    return { hook, base }
  }

  // warm both servers (statements prepared, the JIT settled)
  await pairs("PostToolUse", WARMUP)
  const rows: Array<string> = []
  const row = (label: string, r: { hook: Array<number>; base: Array<number> }) => {
    const [h50, h99, b50, b99] = [pct(r.hook, 0.5), pct(r.hook, 0.99), pct(r.base, 0.5), pct(r.base, 0.99)]
    rows.push(`| ${label} | ${fmt(h50)} | ${fmt(h99)} | ${fmt(b50)} | ${fmt(b99)} | ${(h50 / b50).toFixed(2)}× | ${(h99 / b99).toFixed(2)}× |`)
  }
  row("`PostToolUse`, nothing new", await pairs("PostToolUse", SAMPLES, undefined, (t) => t === "{}"))
  row("`Stop`, nothing addressed", await pairs("Stop", SAMPLES / 4, undefined, (t) => t === "{}"))
  row("`UserPromptSubmit`, one new post delivered", await pairs("UserPromptSubmit", SAMPLES / 4, postOf, (t) => t.includes("new post")))
  row("`SessionStart` (the brief)", await pairs("SessionStart", SAMPLES / 4, undefined, (t) => t.includes("SessionStart")))

  console.log(`#### Hooks: \`POST /hooks/claude-code\` vs a no-op HTTP handler (loopback, keep-alive, alternating)\n`)
  console.log(`| case | hook p50 | hook p99 | no-op p50 | no-op p99 | p50 ratio | p99 ratio |\n|---|---|---|---|---|---|---|`)
  for (const r of rows) console.log(r)
  console.log(`\n(${SAMPLES} pairs for the first case, ${SAMPLES / 4} for the others, after ${WARMUP} warm-up pairs; target ≤ 2× for the first.)\n`)
  daemon.child.kill()
  noop.child.kill()
  agent.destroy()
}

main().then(() => process.exit(0), (e) => {
  console.error(e)
  process.exit(1)
})
