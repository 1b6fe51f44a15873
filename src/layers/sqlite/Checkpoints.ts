import { Effect } from "effect"
import { createRequire } from "node:module"
import type { Worker } from "node:worker_threads"

/**
 * `node:worker_threads`, loaded when the first checkpoint starts the worker: a short `sophia` command, which
 * never starts it, does not pay the module's load (~3 ms of its start).
 */
const workerThreads = () => createRequire(import.meta.url)("node:worker_threads") as typeof import("node:worker_threads")

/**
 * The checkpoint worker's script: beside this module in src/ and dist/, and beside the bundled CLI's chunks
 * (scripts/build.mjs copies it there).
 */
const CHECKPOINTER = new URL("./checkpointer.mjs", import.meta.url)

/** How the off-loop checkpoints are paced (defaults below); tests shrink them and observe the events. */
export interface CheckpointTuning {
  /** ask the worker for a PASSIVE checkpoint every this many commits */
  readonly every?: number
  /** when the worker reports at least this many frames in the WAL, reset it (see `catchUp`) */
  readonly resetFrames?: number
  /** when the worker has not answered for this many commits, the writer checkpoints itself */
  readonly behind?: number
  /** the worker's script (tests substitute failing ones) */
  readonly worker?: URL
  readonly observe?: (event: CheckpointEvent) => void
}

export type CheckpointEvent =
  | { readonly _tag: "Started" }
  | {
    readonly _tag: "Checkpointed"
    readonly by: "worker" | "writer"
    readonly reset: boolean
    readonly busy: number
    readonly log: number
    readonly checkpointed: number
  }
  | { readonly _tag: "FellBack"; readonly reason: string }
  | { readonly _tag: "Stopped" }

const noEvent = () => {}

/**
 * What the checkpoints need of the writer's better-sqlite3 handle: its pragmas. (Said structurally, so the
 * published declarations of the tuning types above never name the driver: an embedder type-checks without
 * its types.)
 */
interface WriterPragmas {
  readonly pragma: (source: string) => unknown
}

/**
 * WAL checkpoints off the event loop. SQLite's automatic checkpoint (every 1000 WAL pages) runs inside
 * the COMMIT that crosses the threshold, on the writer connection: it copies the pages into the database
 * file and fsyncs twice, on the main thread, stalling every fiber. Instead the writer runs with
 * `wal_autocheckpoint = 0` and a worker thread with its own connection (./checkpointer.mjs) checkpoints:
 *  - Pacing: a count of commits, kept synchronously after each one; every `every` commits (a few hundred
 *    WAL pages for a post) the worker is asked for a PASSIVE checkpoint, which never blocks a writer. A
 *    count rather than a timer: an idle store costs nothing, and a busy one is checkpointed at its pace.
 *    The worker is started on the first request, so a short CLI command never starts it.
 *  - Reset: a checkpoint concurrent with commits never catches up with the end of the WAL, and SQLite only
 *    rewinds the WAL to its start when a write transaction begins on a fully checkpointed WAL: under a
 *    steady write load the file would grow forever. So when the worker reports `resetFrames` frames in the
 *    WAL, the next writer to take the write permit first waits (asynchronously: the event loop and the
 *    readers go on) for one more worker checkpoint, which now reaches the end; its BEGIN then rewinds the WAL.
 *  - Fallbacks, so the WAL stays bounded whatever happens to the worker: if it cannot start, fails or exits,
 *    the writer goes back to SQLite's own automatic checkpoint; if it has not answered for `behind` commits
 *    (stuck), the writer checkpoints itself after the commit that crosses that line, as SQLite would.
 * Durability is unchanged: the same checkpoint (PASSIVE, synchronous = NORMAL) on another connection.
 * Other processes on the file are unaffected: their connections keep their own settings, and a
 * checkpoint that finds another one running returns `busy` and is simply retried at the next request.
 */
export const checkpointsOffLoop = (
  db: WriterPragmas,
  filename: string,
  timeout: number,
  tuning: CheckpointTuning,
  warn: (message: string) => void
) => {
  const every = tuning.every ?? 64
  const resetFrames = tuning.resetFrames ?? 2000
  const behind = tuning.behind ?? 1024
  const observe = tuning.observe ?? noEvent
  let state: "idle" | "running" | "gone" | "stopped" = "idle"
  let worker: Worker | undefined
  let commits = 0
  let asked = 0 // the commit count at the last request
  let answered = 0 // the commit count of the last request the worker answered
  let resetWanted = false
  let nextId = 1
  const waiting = new Map<number, () => void>()
  const wakeAll = () => {
    for (const wake of waiting.values()) wake()
    waiting.clear()
  }

  const fallBack = (reason: string) => {
    if (state === "gone" || state === "stopped") return
    state = "gone"
    resetWanted = false
    wakeAll()
    try {
      db.pragma("wal_autocheckpoint = 1000")
    } catch {
      // the connection is closing: nothing left to checkpoint for
    }
    warn(`SQLite checkpoints are back on the main thread: ${reason}`)
    observe({ _tag: "FellBack", reason })
  }

  const start = () => {
    try {
      worker = new (workerThreads().Worker)(tuning.worker ?? CHECKPOINTER, { workerData: { filename, timeout } })
    } catch (error) {
      return fallBack(`the checkpoint worker cannot start: ${String(error)}`)
    }
    // never what keeps the process alive (stopping it refs it again until it has exited)
    worker.unref()
    worker.on("message", (answer: { id: number; commits: number; error?: string; busy: number; log: number; checkpointed: number }) => {
      answered = Math.max(answered, answer.commits)
      if (answer.error !== undefined) {
        warn(`a SQLite checkpoint failed in the checkpoint worker: ${answer.error}`)
      } else {
        const reset = answer.id !== 0
        if (!reset && answer.log >= resetFrames) resetWanted = true
        observe({ _tag: "Checkpointed", by: "worker", reset, busy: answer.busy, log: answer.log, checkpointed: answer.checkpointed })
      }
      const wake = waiting.get(answer.id)
      waiting.delete(answer.id)
      wake?.()
    })
    worker.on("error", (error) => fallBack(`the checkpoint worker failed: ${String(error)}`))
    worker.on("exit", (code) => fallBack(`the checkpoint worker exited (${code})`))
    state = "running"
    observe({ _tag: "Started" })
  }

  const ask = (id: number) => {
    asked = commits
    worker!.postMessage({ id, commits })
  }

  /** After every commit on the writer, synchronously (no I/O unless the worker is stuck). */
  const committed = () => {
    commits++
    if (state === "gone" || state === "stopped") return
    if (commits - asked >= every) {
      if (state === "idle") {
        answered = commits // counted from the start, not from the store's opening
        start()
      }
      if (state === "running") ask(0)
    }
    if (commits - answered >= behind) {
      answered = commits
      try {
        const [row] = db.pragma("wal_checkpoint(PASSIVE)") as Array<{ busy: number; log: number; checkpointed: number }>
        observe({ _tag: "Checkpointed", by: "writer", reset: false, ...row! })
      } catch (error) {
        warn(`a SQLite checkpoint failed: ${String(error)}`)
      }
    }
  }

  /**
   * Run by the writer that just took the write permit: when the WAL wants a reset, one worker checkpoint
   * while no writer of this process appends (see above). Bounded: a worker that does not answer within
   * `RESET_WAIT_MS` is not waited for (the `behind` fallback takes over). A timer of the process, not the
   * fiber's `Clock`: a layer built under `TestClock` must not wait forever.
   */
  const RESET_WAIT_MS = 2000
  const catchUp: Effect.Effect<void> = Effect.suspend(() => {
    if (!resetWanted || state !== "running") return Effect.void
    resetWanted = false
    return Effect.async<void>((resume) => {
      const id = nextId++
      const timer = setTimeout(() => {
        waiting.delete(id)
        resume(Effect.void)
      }, RESET_WAIT_MS)
      waiting.set(id, () => {
        clearTimeout(timer)
        resume(Effect.void)
      })
      ask(id)
      return Effect.sync(() => {
        clearTimeout(timer)
        waiting.delete(id)
      })
    })
  })

  /** Stop the worker (its connection closed first) before the store's connections close; kill it if stuck. */
  const STOP_WAIT_MS = 5000
  const stop: Effect.Effect<void> = Effect.async<void>((resume) => {
    const running = state === "running" ? worker : undefined
    state = "stopped"
    wakeAll()
    if (running === undefined) return resume(Effect.void)
    running.ref()
    const timer = setTimeout(() => void running.terminate(), STOP_WAIT_MS)
    running.once("exit", () => {
      clearTimeout(timer)
      observe({ _tag: "Stopped" })
      resume(Effect.void)
    })
    running.postMessage("stop")
  })

  return { committed, catchUp, stop }
}

/** The writer's side of the off-loop checkpoints. */
export type Checkpoints = ReturnType<typeof checkpointsOffLoop>
