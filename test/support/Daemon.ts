/**
 * Real `sophia serve` processes for the reliability suites: started on a free port over a SQLite file,
 * killed with any signal (SIGKILL included), restarted on the same file.
 */
import { spawn } from "node:child_process"
import { SOPHIA } from "./Cli.js"

export interface Daemon {
  readonly pid: number
  /** e.g. http://127.0.0.1:40123 */
  readonly baseUrl: string
  /** the owner's bearer, printed on the first start of an empty database only */
  readonly ownerBearer: string | undefined
  readonly stdout: () => string
  readonly stderr: () => string
  /** send a signal; resolves with the exit code (null when killed by a signal) */
  readonly kill: (signal?: NodeJS.Signals) => Promise<number | null>
  readonly exited: Promise<number | null>
}

/** Start `sophia serve --port 0 --db <db>`; resolves once it printed its MCP endpoint. */
export const startDaemon = (db: string, env: Record<string, string> = {}, startTimeoutMs = 120_000) =>
  new Promise<Daemon>((resolve, reject) => {
    const child = spawn(process.execPath, [SOPHIA, "serve", "--port", "0", "--db", db], {
      env: { ...process.env, SOPHIA_DATABASE_URL: "", ...env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let out = ""
    let err = ""
    let ready = false
    const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)))
    const timer = setTimeout(() => {
      if (!ready) {
        child.kill("SIGKILL")
        reject(new Error(`sophia serve did not start within ${startTimeoutMs} ms: ${err}`))
      }
    }, startTimeoutMs)
    child.stdout.on("data", (d) => {
      out += d
      const m = /MCP endpoint (http:\/\/\S+)\/mcp/.exec(out)
      if (m && !ready) {
        ready = true
        clearTimeout(timer)
        resolve({
          pid: child.pid!,
          baseUrl: m[1],
          ownerBearer: /(sph_[A-Za-z0-9_-]{43,})/.exec(out)?.[1],
          stdout: () => out,
          stderr: () => err,
          kill: (signal = "SIGTERM") => {
            if (child.exitCode === null && child.signalCode === null) child.kill(signal)
            return exited
          },
          exited
        })
      }
    })
    child.stderr.on("data", (d) => (err += d))
    child.once("exit", (code, signal) => {
      clearTimeout(timer)
      if (!ready) reject(new Error(`sophia serve exited (${code ?? signal}) before it was ready: ${err}`))
    })
  })
