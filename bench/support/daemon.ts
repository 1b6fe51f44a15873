/**
 * The daemon as people run it, for the HTTP benchmarks: `node bin/sophia.js serve` on the compiled dist/
 * (plain node, no TypeScript loader), over a fresh SQLite file holding `agents` full connections minted up
 * front through the compiled library. Its per-call log lines (info, pretty) go to a file, as a daemon's
 * stderr would go to a journal.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as readline from "node:readline"

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..", "..")

export interface Daemon {
  readonly child: ChildProcess
  readonly url: string
  readonly bearers: ReadonlyArray<string>
  readonly dir: string
}

/** dist/ is what the bin runs: rebuild it when src/ is newer (as `npm start` does). */
export const ensureBuilt = () => {
  const r = spawnSync(process.execPath, [path.join(root, "scripts", "build.mjs"), "--if-stale"], { stdio: "inherit" })
  if (r.status !== 0) throw new Error("build failed")
}

/** Mint `agents` full connections in a fresh database through the compiled library, in a child process. */
const mint = (db: string, agents: number): Array<string> => {
  const script = `
    import { Effect } from "effect"
    import { Auth, SophiaLive } from ${JSON.stringify(path.join(root, "dist", "index.js"))}
    const program = Effect.gen(function*() {
      const auth = yield* Auth
      const out = []
      for (let i = 0; i < ${agents}; i++) out.push((yield* auth.createConnection({ name: "agent-" + i, profile: "full" })).bearer)
      return out
    })
    const bearers = await Effect.runPromise(program.pipe(Effect.provide(SophiaLive(${JSON.stringify(db)})), Effect.scoped))
    process.stdout.write(JSON.stringify(bearers))
  `
  const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], { cwd: root, encoding: "utf8" })
  if (r.status !== 0) throw new Error(`minting connections failed: ${r.stderr}`)
  return JSON.parse(r.stdout)
}

export const startDaemon = async (agents: number, extraArgs: ReadonlyArray<string> = []): Promise<Daemon> => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sophia-daemon-"))
  const db = path.join(dir, "sophia.db")
  const bearers = mint(db, agents)
  const log = fs.openSync(path.join(dir, "daemon.log"), "a")
  const child = spawn(
    process.execPath,
    [
      ...(process.env.DAEMON_NODE_ARGS ?? "").split(" ").filter(Boolean),
      // DAEMON_FROM_SOURCE=1 runs src/main.ts through tsx instead; =dist runs the unbundled, unminified
      // dist/main.js (readable names and lines in a --cpu-prof profile, without tsx's loader in it)
      ...(process.env.DAEMON_FROM_SOURCE === "1"
        ? ["--import", "tsx", path.join(root, "src", "main.ts")]
        : process.env.DAEMON_FROM_SOURCE === "dist"
        ? [path.join(root, "dist", "main.js")]
        : [path.join(root, "bin", "sophia.js")]),
      "serve", "--port", "0", "--db", db, ...extraArgs
    ],
    { stdio: ["ignore", "pipe", log], env: { ...process.env, SOPHIA_SWEEP_INTERVAL_MS: "5000" } }
  )
  const lines = readline.createInterface({ input: child.stdout! })
  const url = await new Promise<string>((resolve, reject) => {
    lines.on("line", (line) => {
      const m = /MCP endpoint (http:\/\/\S+)/.exec(line)
      if (m) resolve(m[1])
    })
    child.once("exit", (code) => reject(new Error(`sophia serve exited with ${code}; see ${dir}/daemon.log`)))
  })
  return { child, url, bearers, dir }
}
