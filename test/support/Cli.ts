import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

export const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), "../..")
export const SOPHIA = path.join(ROOT, "bin/sophia.js")

export const tempDb = () => path.join(fs.mkdtempSync(path.join(os.tmpdir(), "sophia-")), "sophia.db")

/** Run the real `sophia` CLI as a child process. */
export const sophia = (args: ReadonlyArray<string>, env: Record<string, string> = {}) => {
  const r = spawnSync(process.execPath, [SOPHIA, ...args], { encoding: "utf8", env: { ...process.env, ...env }, timeout: 60_000 })
  return { status: r.status, stdout: r.stdout, stderr: r.stderr }
}

/** Start `sophia serve` on a free port; resolves once it printed its MCP endpoint. */
export const startServe = (db: string, extra: ReadonlyArray<string> = []) =>
  new Promise<{ url: string; stdout: () => string; stop: (signal?: NodeJS.Signals) => Promise<number | null> }>((resolve, reject) => {
    const child = spawn(process.execPath, [SOPHIA, "serve", "--port", "0", "--db", db, ...extra], {
      env: { ...process.env, SOPHIA_DATABASE_URL: "" },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let out = ""
    let err = ""
    const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)))
    child.stdout.on("data", (d) => {
      out += d
      const m = /MCP endpoint (http:\/\/\S+)/.exec(out)
      if (m) {
        resolve({
          url: m[1],
          stdout: () => out,
          stop: (signal = "SIGTERM") => (child.kill(signal), exited)
        })
      }
    })
    child.stderr.on("data", (d) => (err += d))
    child.once("exit", (code) => reject(new Error(`serve exited ${code}: ${err}`)))
    setTimeout(() => reject(new Error(`serve did not start: ${err}`)), 30_000).unref()
  })
