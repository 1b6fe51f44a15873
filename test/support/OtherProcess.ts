/**
 * Another OS process writing to the same SQLite file through the real service layer
 * (test/support/CoordinationWriter.ts run under tsx): the concurrent writer of the cross-process tests.
 */
import { Effect } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

const WRITER = path.join(path.dirname(new URL(import.meta.url).pathname), "CoordinationWriter.ts")

/** Run the writer with its arguments (see CoordinationWriter.ts); the channel_seqs it got, in order. */
export const runCoordinationWriter = (args: ReadonlyArray<string>) =>
  new Promise<Array<number>>((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", WRITER, ...args], { stdio: ["ignore", "pipe", "pipe"] })
    let out = ""
    let err = ""
    child.stdout.on("data", (d) => (out += d))
    child.stderr.on("data", (d) => (err += d))
    child.on("exit", (code) => code === 0 ? resolve(JSON.parse(out.trim())) : reject(new Error(`writer exited ${code}: ${err}`)))
  })

/** Another process posts `n` times (bodies `0:<i>`) as `bearer` to `channel`, at once (no barrier to wait at). */
export const otherProcessPosts = (db: string, bearer: string, channel: string, n: number) =>
  Effect.promise(() => {
    const barrier = fs.mkdtempSync(path.join(os.tmpdir(), "sophia-writer-"))
    fs.writeFileSync(path.join(barrier, "go"), "")
    return runCoordinationWriter([db, bearer, channel, String(n), barrier, "0"])
  })
