import { Schema } from "effect"

/**
 * `sophia.execute_code`: an agent's TypeScript snippet run in an isolate, composing many tool calls in
 * one round trip. Limits are docs/architecture.md's "Limits" (heap 8 MB, 10 s default / 30 s max, 50 sophia calls).
 */

/** The tool's canonical name; a snippet may call every tool but this one (execute_code cannot be nested). */
export const EXECUTE_CODE_TOOL = "sophia.execute_code" as const

export const SANDBOX_HEAP_MB = 8
export const SANDBOX_DEFAULT_TIMEOUT_MS = 10_000
export const SANDBOX_MAX_TIMEOUT_MS = 30_000
export const SANDBOX_CALL_CAP = 50
/** snippet source, in characters */
export const SANDBOX_MAX_CODE_CHARS = 64 * 1024
/** the JSON of the returned value, and of one inner call's arguments */
export const SANDBOX_MAX_RESULT_BYTES = 512 * 1024
export const SANDBOX_MAX_ARGS_BYTES = 256 * 1024
/** console output kept per run: lines, and characters per line */
export const SANDBOX_MAX_LOG_LINES = 100
export const SANDBOX_MAX_LOG_LINE_CHARS = 1000

export const ExecuteCodeInput = Schema.Struct({
  code: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(SANDBOX_MAX_CODE_CHARS)).annotations({
    description: "TypeScript: the body of an async function"
  }),
  timeout_ms: Schema.optional(
    Schema.Int.pipe(Schema.between(1, SANDBOX_MAX_TIMEOUT_MS)).annotations({
      description: "deadline from arrival"
    })
  )
})
export type ExecuteCodeInput = typeof ExecuteCodeInput.Type

export const ExecuteCodeOutput = Schema.Struct({
  result: Schema.Unknown,
  sophia_calls: Schema.Int,
  execution_time_ms: Schema.Number,
  logs: Schema.Array(Schema.String)
})
export type ExecuteCodeOutput = typeof ExecuteCodeOutput.Type

/** Concurrent runs one connection may hold (queued or running) unless SOPHIA_SANDBOX_RUNS_PER_CONNECTION says. */
export const SANDBOX_RUNS_PER_CONNECTION = 2

/** The envelope fields every tool body carries; stripped from inner results (the outer reply carries them). */
export const ENVELOPE_KEYS: ReadonlyArray<string> = ["_inbox_unread", "_blocking", "_wait_resolved"]

/**
 * `timeout_ms` is a deadline from the call's arrival: the wait for a free sandbox (other runs holding every
 * child) counts; a child being started for the run does not. A call whose deadline passed while it waited is
 * refused without starting (`started: false`).
 */
export class SandboxTimeout extends Schema.TaggedError<SandboxTimeout>()("SandboxTimeout", {
  timeout_ms: Schema.Number,
  sophia_calls: Schema.Int,
  logs: Schema.Array(Schema.String),
  /** how long the call waited for a free sandbox, when it waited */
  waited_ms: Schema.optional(Schema.Number),
  /** false: the deadline passed while the call waited; the snippet never ran */
  started: Schema.optional(Schema.Boolean)
}) {
  override get message() {
    if (this.started === false) {
      return `no sandbox was free within ${this.timeout_ms} ms: the call waited for a free sandbox (other runs held them all) and the snippet never started; nothing was done — repeat the call, or give it a longer timeout_ms`
    }
    const waited = this.waited_ms !== undefined && this.waited_ms > 0 ? `; ${this.waited_ms} ms of it waiting for a free sandbox` : ""
    return `the snippet did not finish within ${this.timeout_ms} ms (wall clock, host calls included${waited}); its isolate was disposed`
  }
}

export class SandboxMemoryLimit extends Schema.TaggedError<SandboxMemoryLimit>()("SandboxMemoryLimit", {
  limit_mb: Schema.Number,
  sophia_calls: Schema.Int
}) {
  override get message() {
    return `the snippet exceeded the isolate's ${this.limit_mb} MB heap; it was stopped`
  }
}

export class SandboxCallCap extends Schema.TaggedError<SandboxCallCap>()("SandboxCallCap", {
  limit: Schema.Int
}) {
  override get message() {
    return `a snippet may make at most ${this.limit} sophia calls; call ${this.limit + 1} was refused and the run stopped`
  }
}

export class SandboxError extends Schema.TaggedError<SandboxError>()("SandboxError", {
  /** the agent's error message, or what went wrong with the run */
  detail: Schema.String,
  /** the error's name (TypeError, SyntaxError, …) when the snippet threw */
  error_name: Schema.optional(Schema.String),
  /** the agent's stack frames, mapped to its own snippet lines (`snippet.ts:LINE:COL`) */
  agent_stack: Schema.optional(Schema.String),
  sophia_calls: Schema.optional(Schema.Int),
  logs: Schema.optional(Schema.Array(Schema.String)),
  /** the hosting process died under the run (killed from outside, crashed) */
  process_died: Schema.optional(Schema.Boolean)
}) {
  override get message() {
    return this.detail
  }
}

/**
 * An inner call's refusal that the snippet did not catch: it becomes `execute_code`'s own refusal with
 * the same code and details (the refusal table passes `code` through instead of mapping the tag).
 */
export class InnerRefusal extends Schema.TaggedError<InnerRefusal>()("InnerRefusal", {
  code: Schema.String,
  reason: Schema.String,
  /** the inner tool's canonical name */
  tool: Schema.String,
  details: Schema.Record({ key: Schema.String, value: Schema.Unknown })
}) {
  override get message() {
    return `${this.tool}: ${this.reason}`
  }
}

export type SandboxRefusal = SandboxTimeout | SandboxMemoryLimit | SandboxCallCap | SandboxError | InnerRefusal
