/**
 * A lease race between OS processes (test/support/lease-racer.mjs): one process per bearer, every process's
 * call of a round released at the same moment (a file barrier once all are ready). Returns each round's
 * outcomes, one per process.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

const RACER = path.join(path.dirname(new URL(import.meta.url).pathname), "lease-racer.mjs")

export type RaceOutcome =
  | { readonly lease_id: string }
  | { readonly code: string; readonly holders: ReadonlyArray<{ readonly lease_id: string; readonly connection_id: string }> }

const waitFor = async (files: ReadonlyArray<string>, racers: ReadonlyArray<Promise<unknown>>) => {
  const deadline = Date.now() + 180_000
  let failed: unknown
  racers.forEach((r) => r.catch((e) => (failed = e)))
  while (!files.every((f) => fs.existsSync(f))) {
    if (failed !== undefined) throw failed
    if (Date.now() > deadline) throw new Error(`racers not ready: ${files.filter((f) => !fs.existsSync(f)).length} missing`)
    await new Promise((r) => setTimeout(r, 10))
  }
}

/** Race `rounds` of `lease_acquire` arguments between one process per bearer (`direct`: a SQLite file; `rest`: a daemon each). */
export const raceLeases = async (
  mode: "direct" | "rest",
  targetOf: (i: number) => string,
  bearers: ReadonlyArray<string>,
  rounds: ReadonlyArray<unknown>
): Promise<Array<Array<RaceOutcome>>> => {
  const barrier = fs.mkdtempSync(path.join(os.tmpdir(), "sophia-lease-race-"))
  const racers = bearers.map((bearer, i) =>
    new Promise<Array<RaceOutcome>>((resolve, reject) => {
      const child = spawn(process.execPath, [RACER, mode, targetOf(i), bearer, barrier, String(i), JSON.stringify(rounds)], {
        stdio: ["ignore", "pipe", "pipe"]
      })
      let out = ""
      let err = ""
      child.stdout.on("data", (d) => (out += d))
      child.stderr.on("data", (d) => (err += d))
      child.on("exit", (code) => (code === 0 ? resolve(JSON.parse(out.trim())) : reject(new Error(`racer ${i} exited ${code}: ${err}`))))
    })
  )
  for (let r = 0; r < rounds.length; r++) {
    await waitFor(bearers.map((_, i) => path.join(barrier, `ready-${i}-${r}`)), racers)
    fs.writeFileSync(path.join(barrier, `go-${r}`), "")
  }
  const results = await Promise.all(racers)
  fs.rmSync(barrier, { recursive: true, force: true })
  return rounds.map((_, r) => results.map((perProcess) => perProcess[r]))
}
