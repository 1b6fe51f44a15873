import { Effect } from "effect"
import { PayloadTooLarge } from "../../domain/Errors.js"
import type { InnerRefusal } from "../../domain/Sandbox.js"
import {
  SANDBOX_HEAP_MB,
  SANDBOX_MAX_LOG_LINE_CHARS,
  SANDBOX_MAX_LOG_LINES,
  SANDBOX_MAX_RESULT_BYTES,
  SandboxError,
  SandboxMemoryLimit,
  SandboxTimeout
} from "../../domain/Sandbox.js"
import type { Child, Done } from "../../sandbox/Child.js"
import type { Compiled } from "./Compile.js"
import { mapStack } from "./Compile.js"
import type { SandboxRunError } from "./Types.js"

/** What a run gave back when the snippet returned. */
export interface RunResult {
  readonly result: unknown
  readonly calls: number
  readonly logs: Array<string>
}

/** what V8 prints when a heap runs out for good (the child aborts) */
const OOM_MARKERS = /is_heap_oom = 1|out of memory|CALL_AND_RETRY_LAST|Last few GCs/i

/**
 * The logs a child reported, held to the limits whatever the child sent (one line and one character more
 * than each: room for the child's own marks of a cut, the "output dropped" line and the "…").
 */
export const boundedLogs = (logs: ReadonlyArray<unknown>): Array<string> =>
  logs.filter((l): l is string => typeof l === "string").slice(0, SANDBOX_MAX_LOG_LINES + 1).map((l) =>
    l.length > SANDBOX_MAX_LOG_LINE_CHARS + 1 ? l.slice(0, SANDBOX_MAX_LOG_LINE_CHARS + 1) : l
  )

/** The child died during the run: out of memory if V8 said so on its way out, else a crash. */
export const crashed = (child: Child, m: { code: number | null; signal: string | null }, calls: number) => {
  child.faulted = true
  return OOM_MARKERS.test(child.stderr)
    ? new SandboxMemoryLimit({ limit_mb: SANDBOX_HEAP_MB, sophia_calls: calls })
    : new SandboxError({
      detail: `the sandbox process died (${m.signal ?? `exit ${m.code}`}) while running the snippet; it was replaced`,
      sophia_calls: calls,
      process_died: true
    })
}

/**
 * What the child's `done` means: the snippet's value (within the result limit), its own limits hit in the
 * isolate (memory, the isolate's timeout), an inner call's refusal it let escape, or its error with the
 * stack mapped back to the agent's lines.
 */
export const outcomeOf = (
  done: Done,
  run: { readonly child: Child; readonly compiled: Compiled; readonly calls: number; readonly timeoutMs: number; readonly refused: ReadonlyMap<number, InnerRefusal> }
): Effect.Effect<RunResult, SandboxRunError> => {
  const { calls, compiled } = run
  const logs = boundedLogs(done.logs ?? [])
  if (!done.ok) {
    if (done.kind === "memory") {
      run.child.faulted = true
      return Effect.fail(new SandboxMemoryLimit({ limit_mb: SANDBOX_HEAP_MB, sophia_calls: calls }))
    }
    if (done.kind === "timeout") return Effect.fail(new SandboxTimeout({ timeout_ms: run.timeoutMs, sophia_calls: calls, logs }))
    return Effect.fail(
      new SandboxError({
        detail: done.error?.message ?? "the snippet failed",
        error_name: done.error?.name ?? "Error",
        agent_stack: mapStack(done.error?.stack ?? "", compiled.mappings),
        sophia_calls: calls,
        logs
      })
    )
  }
  const out = typeof done.out === "string" ? done.out : ""
  if (out.startsWith("1")) {
    const json = out.slice(1)
    if (Buffer.byteLength(json) > SANDBOX_MAX_RESULT_BYTES) {
      return Effect.fail(
        new PayloadTooLarge({ what: "the returned value", limit: SANDBOX_MAX_RESULT_BYTES, actual: Buffer.byteLength(json), unit: "bytes" })
      )
    }
    return Effect.succeed({ result: JSON.parse(json) as unknown, calls, logs })
  }
  let thrown: { refusal_call?: unknown; name?: unknown; message?: unknown; stack?: unknown } = {}
  try {
    thrown = JSON.parse(out.slice(1))
  } catch {
    // reported below as an unreadable failure
  }
  // a pass-through only for a refusal this run really received (the isolate cannot forge one)
  const inner = typeof thrown.refusal_call === "number" ? run.refused.get(thrown.refusal_call) : undefined
  if (inner) return Effect.fail(inner)
  return Effect.fail(
    new SandboxError({
      detail: typeof thrown.message === "string" ? thrown.message : "the snippet failed and its error could not be read",
      error_name: typeof thrown.name === "string" ? thrown.name : "Error",
      agent_stack: mapStack(typeof thrown.stack === "string" ? thrown.stack : "", compiled.mappings),
      sophia_calls: calls,
      logs
    })
  )
}
