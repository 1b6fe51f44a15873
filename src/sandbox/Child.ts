/**
 * One sandbox child process as the daemon sees it: the script it runs (./child.mjs, whose header documents
 * the IPC protocol), the messages it sends, and how it is started, written to and killed. The pool
 * (services/sandbox/Pool.ts) keeps the children; a run (services/sandbox/Run.ts) talks to one.
 */
import { Duration, Effect } from "effect"
import type { ChildProcess } from "node:child_process"
import { fork } from "node:child_process"
import { fileURLToPath } from "node:url"
import { SANDBOX_HEAP_MB, SANDBOX_MAX_LOG_LINE_CHARS, SANDBOX_MAX_LOG_LINES } from "../domain/Sandbox.js"

/**
 * Beside this module in src/ and dist/; the build also copies it beside the bundled CLI's chunks (dist/cli/),
 * where this module's code runs from a chunk.
 */
const CHILD_SCRIPT = fileURLToPath(new URL("./child.mjs", import.meta.url))
const SPAWN_TIMEOUT = Duration.seconds(20)
const STDERR_TAIL = 4096

/** What a child sends (see child.mjs). */
export type FromChild =
  | { readonly t: "ready" }
  | { readonly t: "accepted"; readonly run: number }
  /** the calls of one microtask turn of the snippet: JSON text `[[id, method, argsJson], …]`, in call order */
  | { readonly t: "calls"; readonly run: number; readonly batch: string }
  | {
    readonly t: "done"
    readonly run: number
    readonly ok: boolean
    readonly out?: string | null
    readonly kind?: "memory" | "timeout" | "error"
    readonly error?: { readonly name: string; readonly message: string; readonly stack: string }
    readonly logs: ReadonlyArray<string>
  }
  | { readonly t: "aborted"; readonly run: number; readonly logs: ReadonlyArray<string> }
  | { readonly t: "pong"; readonly n: number }
  | { readonly t: "exit"; readonly code: number | null; readonly signal: string | null }

/** A child's `done` message. */
export type Done = Extract<FromChild, { readonly t: "done" }>

export interface Child {
  readonly proc: ChildProcess
  readonly pid: number
  runs: number
  dead: boolean
  /** recycle instead of returning to the pool */
  faulted: boolean
  /** the tail of what it wrote to stderr (V8's last words on a heap that ran out) */
  stderr: string
  /** where its messages go while a run has it (an `exit` is delivered as a message too) */
  sink: ((message: FromChild) => void) | undefined
}

export const send = (child: Child, message: unknown) => {
  if (child.dead || !child.proc.connected) return
  try {
    child.proc.send(message as any, (error) => {
      if (error) child.faulted = true
    })
  } catch {
    child.faulted = true
  }
}

export const kill = (child: Child) => {
  child.dead = true
  try {
    child.proc.kill("SIGKILL")
  } catch {
    // already gone
  }
}

export interface SpawnHooks {
  /** extra Node flags for the child */
  readonly execArgv: ReadonlyArray<string>
  /** called synchronously when the child is ready, before the spawning fiber resumes (so a pool never loses one) */
  readonly onReady: (child: Child) => void
  /** called synchronously when a ready child exits */
  readonly onExit: (child: Child) => void
}

/** Start a child and wait until it is ready; a child that exits or hangs before that is a defect. */
export const spawnChild = (hooks: SpawnHooks): Effect.Effect<Child> =>
  Effect.async<Child>((resume) => {
    const proc = fork(CHILD_SCRIPT, [String(SANDBOX_HEAP_MB), String(SANDBOX_MAX_LOG_LINES), String(SANDBOX_MAX_LOG_LINE_CHARS)], {
      execArgv: ["--no-node-snapshot", ...hooks.execArgv],
      env: {},
      stdio: ["ignore", "ignore", "pipe", "ipc"],
      serialization: "json"
    })
    const child: Child = { proc, pid: proc.pid ?? -1, runs: 0, dead: false, faulted: false, stderr: "", sink: undefined }
    let started = false
    proc.stderr?.on("data", (chunk: Buffer) => {
      child.stderr = (child.stderr + chunk.toString("utf8")).slice(-STDERR_TAIL)
    })
    proc.on("message", (message: FromChild) => {
      if (message === null || typeof message !== "object") return
      if (!started && message.t === "ready") {
        started = true
        hooks.onReady(child)
        resume(Effect.succeed(child))
        return
      }
      child.sink?.(message)
    })
    proc.on("error", () => {
      child.faulted = true
    })
    proc.on("exit", (code, signal) => {
      child.dead = true
      if (!started) {
        started = true
        resume(Effect.dieMessage(`the sandbox child exited before it was ready (${signal ?? code}): ${child.stderr.slice(-500)}`))
        return
      }
      hooks.onExit(child)
      child.sink?.({ t: "exit", code, signal })
    })
    return Effect.sync(() => {
      if (!started) kill(child)
    })
  }).pipe(
    Effect.timeoutFail({ duration: SPAWN_TIMEOUT, onTimeout: () => new Error("the sandbox child did not start in time") }),
    Effect.orDie
  )
