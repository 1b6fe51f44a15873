import type { Scope } from "effect"
import { Cause, Clock, Config, Context, Duration, Effect, Exit, FiberSet, Layer, Option, Queue, Ref, Schedule } from "effect"
import { transform } from "esbuild"
import type { ChildProcess } from "node:child_process"
import { fork } from "node:child_process"
import { fileURLToPath } from "node:url"
import { PayloadTooLarge } from "../domain/Errors.js"
import { nearest } from "../domain/Names.js"
import type { ExecuteCodeInput, ExecuteCodeOutput } from "../domain/Sandbox.js"
import {
  ENVELOPE_KEYS,
  EXECUTE_CODE_TOOL,
  InnerRefusal,
  SANDBOX_CALL_CAP,
  SANDBOX_DEFAULT_TIMEOUT_MS,
  SANDBOX_HEAP_MB,
  SANDBOX_MAX_ARGS_BYTES,
  SANDBOX_MAX_LOG_LINE_CHARS,
  SANDBOX_MAX_LOG_LINES,
  SANDBOX_MAX_RESULT_BYTES,
  SandboxCallCap,
  SandboxError,
  SandboxMemoryLimit,
  SandboxTimeout
} from "../domain/Sandbox.js"
import type { DecodedMappings } from "../sandbox/SourceMap.js"
import { decodeMappings, originalPosition } from "../sandbox/SourceMap.js"

/** What one inner call returned: the tool's body, or its refusal body (`{ error: { code, message, … } }`). */
export type HostOutcome =
  | { readonly ok: true; readonly body: Record<string, unknown> }
  | { readonly ok: false; readonly body: { readonly error: { readonly code: string; readonly message: string } } }

/** The caller's side of a run: every inner call goes through `invoke` (the dispatcher, as the caller). */
export interface SandboxHost {
  readonly invoke: (name: string, args: unknown) => Effect.Effect<HostOutcome>
  /** camelCase method → canonical tool name, by reflection over the registry */
  readonly methods: ReadonlyMap<string, string>
}

export type SandboxRunError = SandboxTimeout | SandboxMemoryLimit | SandboxCallCap | SandboxError | InnerRefusal | PayloadTooLarge

export interface SandboxPoolOptions {
  /** warm child processes kept ready */
  readonly warm: number
  /** child processes alive at most (= concurrent runs); further runs wait */
  readonly max: number
  /** recycle a child after this many runs */
  readonly runsPerChild: number
  /** spawn the warm children when the layer is built (else on the first run) */
  readonly prewarm: boolean
  /** how long a child may take to confirm an abort before it is SIGKILLed */
  readonly abortGraceMs: number
  /**
   * how long a child may take to accept a run it was sent (the snippet's deadline starts at acceptance)
   * before it is SIGKILLed as hung; default ACCEPT_TIMEOUT_MS
   */
  readonly acceptTimeoutMs?: number | undefined
  /** extra Node flags for the child processes (tests preload a module that makes a cold start slow) */
  readonly childExecArgv?: ReadonlyArray<string> | undefined
}

export interface SandboxService {
  /** Run a snippet; every inner call through `host`. Refusals in the error channel. */
  readonly run: (input: ExecuteCodeInput, host: SandboxHost) => Effect.Effect<ExecuteCodeOutput, SandboxRunError>
  /** pids of the live child processes (diagnostics, crash tests) */
  readonly pids: Effect.Effect<ReadonlyArray<number>>
  /** wait until `warm` children are ready (bench: cold start) */
  readonly warmUp: Effect.Effect<void>
}

/** `sophia.execute_code`'s engine: a pool of child processes hosting isolated-vm isolates. */
export class Sandbox extends Context.Tag("sophia/Sandbox")<Sandbox, SandboxService>() {}

const CHILD_SCRIPT = fileURLToPath(new URL("../sandbox/child.mjs", import.meta.url))
const SPAWN_TIMEOUT = Duration.seconds(20)
const ACCEPT_TIMEOUT_MS = 20_000
const STDERR_TAIL = 4096
/** what V8 prints when a heap runs out for good (the child aborts) */
const OOM_MARKERS = /is_heap_oom = 1|out of memory|CALL_AND_RETRY_LAST|Last few GCs/i
const COMPILE_CACHE_ENTRIES = 256
const WRAPPER = "async function __sophia_snippet__() {\n"
/** a method name longer than this is cut (it is only ever looked up, and named in a refusal) */
const MAX_METHOD_CHARS = 200

/** One host call as the snippet made it: its id in the run, the camelCase method, the arguments' JSON. */
interface HostCall {
  readonly call: number
  readonly method: string
  readonly args: string
}

/**
 * The calls of one batch, in order, at most `limit` of them. The text comes from the isolate (untrusted):
 * anything but an array of `[number, string, string]` entries is dropped, entry by entry.
 */
const callsOf = (batch: string, limit: number): Array<HostCall> => {
  let entries: unknown
  try {
    entries = JSON.parse(batch)
  } catch {
    return []
  }
  if (!Array.isArray(entries)) return []
  const out: Array<HostCall> = []
  for (const e of entries) {
    if (out.length >= limit) break
    if (!Array.isArray(e) || typeof e[0] !== "number" || typeof e[1] !== "string" || typeof e[2] !== "string") continue
    out.push({ call: e[0], method: e[1].slice(0, MAX_METHOD_CHARS), args: e[2] })
  }
  return out
}

type FromChild =
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

interface Child {
  readonly proc: ChildProcess
  readonly pid: number
  runs: number
  dead: boolean
  /** recycle instead of returning to the pool */
  faulted: boolean
  stderr: string
  sink: ((message: FromChild) => void) | undefined
}

interface Compiled {
  readonly js: string
  readonly mappings: DecodedMappings
}

const send = (child: Child, message: unknown) => {
  if (child.dead || !child.proc.connected) return
  try {
    child.proc.send(message as any, (error) => {
      if (error) child.faulted = true
    })
  } catch {
    child.faulted = true
  }
}

const kill = (child: Child) => {
  child.dead = true
  try {
    child.proc.kill("SIGKILL")
  } catch {
    // already gone
  }
}

/** TypeScript → JavaScript (types stripped) as the body of an async function, with a map back to the snippet's lines. */
const compile = (code: string): Effect.Effect<Compiled, SandboxError> =>
  Effect.tryPromise({
    try: () => transform(`${WRAPPER}${code}\n}`, { loader: "ts", sourcemap: "external", sourcefile: "snippet.ts" }),
    catch: (e) => {
      const errors = (e as { errors?: Array<{ text: string; location?: { line: number; column: number } | null }> }).errors ?? []
      const first = errors[0]
      const where = first?.location ? `snippet.ts:${first.location.line - 1}:${first.location.column + 1}: ` : ""
      return new SandboxError({
        detail: `the snippet does not compile: ${where}${first?.text ?? String(e)}`,
        error_name: "SyntaxError"
      })
    }
  }).pipe(
    Effect.map((out) => ({ js: out.code, mappings: decodeMappings((JSON.parse(out.map) as { mappings: string }).mappings) }))
  )

/** The agent's frames only, each `snippet.js:L:C` mapped to `snippet.ts:L:C` of the code it sent. */
const mapStack = (stack: string, mappings: DecodedMappings): string => {
  const lines = stack.split("\n")
  const head = lines[0] ?? ""
  const frames = lines.slice(1).flatMap((line) => {
    const m = /snippet\.js:(\d+):(\d+)/.exec(line)
    if (!m) return []
    const pos = originalPosition(mappings, Number(m[1]), Number(m[2]))
    if (!pos || pos.line < 1) return []
    return [line.replace(m[0], `snippet.ts:${pos.line}:${pos.column + 1}`).replace("__sophia_snippet__", "<snippet>")]
  })
  return [head, ...frames].join("\n")
}

const stripEnvelope = (body: Record<string, unknown>): Record<string, unknown> => {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(body)) if (!ENVELOPE_KEYS.includes(k)) out[k] = v
  return out
}

const boundedLogs = (logs: ReadonlyArray<unknown>): Array<string> =>
  logs.filter((l): l is string => typeof l === "string").slice(0, SANDBOX_MAX_LOG_LINES + 1).map((l) =>
    l.length > SANDBOX_MAX_LOG_LINE_CHARS + 1 ? l.slice(0, SANDBOX_MAX_LOG_LINE_CHARS + 1) : l
  )

/**
 * A pool of warm child processes, each running one snippet at a time in a fresh isolate. Children are
 * killed when the layer's scope closes, after a fault (crash, memory limit, unanswered abort) or after
 * `runsPerChild` runs.
 */
export const make = (options: SandboxPoolOptions): Effect.Effect<SandboxService, never, Scope.Scope> =>
  Effect.gen(function*() {
    const all = new Set<Child>()
    const idle: Array<Child> = []
    const permits = yield* Effect.makeSemaphore(Math.max(1, options.max))
    const scope = yield* Effect.scope
    const closed = yield* Ref.make(false)
    let runSeq = 0
    // compiled snippets by source (agents re-run the same snippet; esbuild is the costliest step of a warm run)
    const compiledCache = new Map<string, Compiled>()
    const compileCached = (code: string) =>
      Effect.suspend(() => {
        const hit = compiledCache.get(code)
        if (hit) {
          compiledCache.delete(code)
          compiledCache.set(code, hit)
          return Effect.succeed(hit)
        }
        return Effect.tap(compile(code), (c) =>
          Effect.sync(() => {
            compiledCache.set(code, c)
            if (compiledCache.size > COMPILE_CACHE_ENTRIES) compiledCache.delete(compiledCache.keys().next().value!)
          }))
      })

    yield* Effect.addFinalizer(() =>
      Ref.set(closed, true).pipe(Effect.zipRight(Effect.sync(() => {
        for (const child of all) kill(child)
        all.clear()
        idle.length = 0
      })))
    )

    const spawn: Effect.Effect<Child> = Effect.async<Child>((resume) => {
      const proc = fork(CHILD_SCRIPT, [String(SANDBOX_HEAP_MB), String(SANDBOX_MAX_LOG_LINES), String(SANDBOX_MAX_LOG_LINE_CHARS)], {
        execArgv: ["--no-node-snapshot", ...(options.childExecArgv ?? [])],
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
          all.add(child)
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
        all.delete(child)
        const at = idle.indexOf(child)
        if (at >= 0) idle.splice(at, 1)
        if (!started) {
          started = true
          resume(Effect.dieMessage(`the sandbox child exited before it was ready (${signal ?? code}): ${child.stderr.slice(-500)}`))
          return
        }
        child.sink?.({ t: "exit", code, signal })
      })
      return Effect.sync(() => {
        if (!started) kill(child)
      })
    }).pipe(
      Effect.timeoutFail({ duration: SPAWN_TIMEOUT, onTimeout: () => new Error("the sandbox child did not start in time") }),
      Effect.orDie,
      Effect.withSpan("Sandbox.spawn")
    )

    /** Top the idle pool up to `warm` (in the background of the layer's scope). */
    let refilling = false
    const refillOnce = Effect.gen(function*() {
      while (!(yield* Ref.get(closed)) && all.size < options.max && idle.length < options.warm) {
        const child = yield* spawn
        if (yield* Ref.get(closed)) return kill(child)
        idle.push(child)
      }
    }).pipe(
      Effect.catchAllCause((cause) => Effect.logWarning("sandbox pool refill failed", cause)),
      Effect.ensuring(Effect.sync(() => {
        refilling = false
      }))
    )
    const refill = Effect.suspend(() => {
      if (refilling) return Effect.void
      refilling = true
      return refillOnce
    })

    const acquire = Effect.suspend(() => {
      while (idle.length > 0) {
        const child = idle.shift()!
        if (!child.dead) return Effect.succeed(child)
      }
      return spawn
    })

    const release = (child: Child, exit: Exit.Exit<unknown, unknown>) =>
      Effect.gen(function*() {
        child.sink = undefined
        // interrupted mid-run (the backstop deadline, a closing scope): the child may still be busy
        if (Exit.isInterrupted(exit)) child.faulted = true
        child.runs++
        if (child.dead || child.faulted || child.runs >= options.runsPerChild || idle.length >= options.warm) {
          kill(child)
          all.delete(child)
        } else {
          idle.push(child)
        }
        if (!(yield* Ref.get(closed)) && idle.length < options.warm) yield* Effect.forkIn(refill, scope)
      })

    const withChild = <A, E>(use: (child: Child) => Effect.Effect<A, E>) =>
      permits.withPermits(1)(Effect.acquireUseRelease(acquire, use, release))

    /** Ask the child to dispose the run's isolate; SIGKILL it if it does not answer within the grace period. */
    const abort = (child: Child, run: number, inbox: Queue.Queue<FromChild>) =>
      Effect.gen(function*() {
        send(child, { t: "abort", run })
        const answer = yield* Queue.take(inbox).pipe(
          Effect.repeat({ until: (m) => (m.t === "aborted" && m.run === run) || m.t === "exit" }),
          Effect.timeout(Duration.millis(options.abortGraceMs)),
          Effect.option
        )
        if (Option.isNone(answer)) {
          // the watchdog: a child that stops answering is killed, the pool replaces it
          child.faulted = true
          kill(child)
          return [] as ReadonlyArray<string>
        }
        if (answer.value.t === "exit") child.faulted = true
        return answer.value.t === "aborted" ? answer.value.logs : []
      })

    const crashed = (child: Child, m: { code: number | null; signal: string | null }, calls: number) => {
      child.faulted = true
      return OOM_MARKERS.test(child.stderr)
        ? new SandboxMemoryLimit({ limit_mb: SANDBOX_HEAP_MB, sophia_calls: calls })
        : new SandboxError({
          detail: `the sandbox process died (${m.signal ?? `exit ${m.code}`}) while running the snippet; it was replaced`,
          sophia_calls: calls,
          process_died: true
        })
    }

    const acceptTimeoutMs = options.acceptTimeoutMs ?? ACCEPT_TIMEOUT_MS

    const runOn = (child: Child, compiled: Compiled, host: SandboxHost, timeoutMs: number) =>
      Effect.scoped(Effect.gen(function*() {
        const run = ++runSeq
        const inbox = yield* Queue.unbounded<FromChild>()
        child.sink = (m) => Queue.unsafeOffer(inbox, m)
        if (child.dead) child.sink({ t: "exit", code: null, signal: "before the run" })
        // Answers leave in batches: each is queued as it comes; the queue goes out in one message at once
        // when no other call of the run is in flight, else once the daemon has nothing more to do right now
        // (setImmediate: after the ready fibers have run, so the answers of calls that finish together travel
        // together, and one that takes long holds back no other). Nothing is sent once the run is over (this
        // finalizer runs after the in-flight calls below are interrupted).
        let outgoing: Array<string> = []
        let flushing: ReturnType<typeof setImmediate> | undefined
        let inFlight = 0
        let over = false
        const flush = () => {
          flushing = undefined
          if (over || outgoing.length === 0) return
          const batch = `[${outgoing.join(",")}]`
          outgoing = []
          send(child, { t: "results", run, batch })
        }
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => {
            over = true
            if (flushing !== undefined) clearImmediate(flushing)
            flushing = undefined
            outgoing = []
          })
        )
        const fibers = yield* FiberSet.make()
        const refused = new Map<number, InnerRefusal>()
        let calls = 0

        const handleCall = (m: HostCall) => {
          const reply = (ok: boolean, body: unknown) =>
            Effect.sync(() => {
              inFlight--
              if (over) return
              outgoing.push(`[${m.call},${ok ? 1 : 0},${JSON.stringify(body)}]`)
              if (inFlight === 0) {
                if (flushing !== undefined) clearImmediate(flushing)
                flush()
              } else {
                flushing ??= setImmediate(flush)
              }
            })
          const refuse = (tool: string, error: { code: string; message: string } & Record<string, unknown>) => {
            const { code, message, ...details } = error
            refused.set(m.call, new InnerRefusal({ code, reason: message, tool, details }))
            return reply(false, error)
          }
          return Effect.gen(function*() {
            const name = host.methods.get(m.method)
            if (name === undefined) {
              const suggestions = nearest(m.method, host.methods.keys())
              return yield* refuse(`sophia.${m.method}`, {
                code: "not_found",
                message: `no method sophia.${m.method}; did you mean ${suggestions.map((s) => `sophia.${s}`).join(", ")}?`,
                what: "method",
                id: m.method,
                suggestions
              })
            }
            // the one place the rule lives: a snippet's calls never reach execute_code
            if (name === EXECUTE_CODE_TOOL) {
              return yield* refuse(name, { code: "sandbox_error", message: `${EXECUTE_CODE_TOOL} cannot be nested` })
            }
            const argsBytes = Buffer.byteLength(m.args, "utf8")
            if (argsBytes > SANDBOX_MAX_ARGS_BYTES) {
              return yield* refuse(name, {
                code: "payload_too_large",
                message: `the arguments are ${argsBytes} bytes of JSON; the limit is ${SANDBOX_MAX_ARGS_BYTES}`,
                what: "arguments",
                limit: SANDBOX_MAX_ARGS_BYTES,
                actual: argsBytes,
                unit: "bytes"
              })
            }
            let args: unknown
            try {
              args = JSON.parse(m.args)
            } catch {
              return yield* refuse(name, { code: "validation_error", message: "arguments are not JSON", detail: "arguments are not JSON" })
            }
            const outcome = yield* host.invoke(name, args)
            if (outcome.ok) return yield* reply(true, stripEnvelope(outcome.body))
            return yield* refuse(name, outcome.body.error as { code: string; message: string } & Record<string, unknown>)
          })
        }

        send(child, { t: "run", run, js: compiled.js, methods: [...host.methods.keys()], timeoutMs })

        const loop = Effect.gen(function*() {
          while (true) {
            const m = yield* Queue.take(inbox)
            if (m.t === "exit") return yield* Effect.fail(crashed(child, m, calls))
            if (m.t === "calls" && m.run === run) {
              // (one past the cap at most: that one stops the run)
              const batch = callsOf(m.batch, SANDBOX_CALL_CAP + 1 - calls)
              // the whole batch is in flight before any of its calls can answer (one answering at once
              // does not flush alone while the others are still to start)
              inFlight += batch.length
              for (const c of batch) {
                calls++
                // enforced here, on the host side, call by call: the 51st call stops the run (even mid-batch;
                // the calls before it in the batch were started, in order, as if they had come one by one)
                if (calls > SANDBOX_CALL_CAP) return yield* Effect.fail(new SandboxCallCap({ limit: SANDBOX_CALL_CAP }))
                yield* FiberSet.run(fibers, handleCall(c))
              }
            }
            if (m.t === "done" && m.run === run) return m
          }
        })

        // The deadline starts when the child accepts the run (its isolate is ready and the snippet starts),
        // not when it was sent: queueing, spawning and a busy machine do not eat the snippet's time. A child
        // that does not accept in time is hung: it is killed (the pool replaces it).
        const first = yield* Queue.take(inbox).pipe(
          Effect.repeat({ until: (m) => ((m.t === "accepted" || m.t === "done") && m.run === run) || m.t === "exit" }),
          Effect.timeout(Duration.millis(acceptTimeoutMs)),
          Effect.option
        )
        if (Option.isNone(first)) {
          child.faulted = true
          kill(child)
          return yield* Effect.fail(
            new SandboxError({
              detail: `the sandbox process did not accept the run within ${acceptTimeoutMs} ms; it was killed and replaced`,
              sophia_calls: 0
            })
          )
        }
        const accepted = first.value
        const outcome = yield* (accepted.t === "exit"
          ? Effect.fail(crashed(child, accepted, calls))
          : accepted.t === "done"
          // the child could not start the run at all (its isolate failed to come up)
          ? Effect.succeed(accepted)
          : loop.pipe(
            Effect.timeoutFail({
              duration: Duration.millis(timeoutMs),
              onTimeout: () => new SandboxTimeout({ timeout_ms: timeoutMs, sophia_calls: calls, logs: [] })
            })
          )).pipe(Effect.exit)
        if (Exit.isFailure(outcome)) {
          // in-flight inner calls stop with the run (the FiberSet closes with this scope)
          yield* FiberSet.clear(fibers)
          const logs = child.dead ? [] : yield* abort(child, run, inbox)
          const error = Cause.failureOption(outcome.cause)
          if (Option.isSome(error) && error.value._tag === "SandboxTimeout") {
            return yield* Effect.fail(new SandboxTimeout({ timeout_ms: timeoutMs, sophia_calls: calls, logs: boundedLogs(logs) }))
          }
          return yield* Effect.failCause(outcome.cause)
        }
        const done = outcome.value
        yield* FiberSet.clear(fibers)
        const logs = boundedLogs(done.logs ?? [])
        if (!done.ok) {
          if (done.kind === "memory") {
            child.faulted = true
            return yield* Effect.fail(new SandboxMemoryLimit({ limit_mb: SANDBOX_HEAP_MB, sophia_calls: calls }))
          }
          if (done.kind === "timeout") return yield* Effect.fail(new SandboxTimeout({ timeout_ms: timeoutMs, sophia_calls: calls, logs }))
          return yield* Effect.fail(
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
            return yield* Effect.fail(
              new PayloadTooLarge({ what: "the returned value", limit: SANDBOX_MAX_RESULT_BYTES, actual: Buffer.byteLength(json), unit: "bytes" })
            )
          }
          return { result: JSON.parse(json) as unknown, calls, logs }
        }
        let thrown: { refusal_call?: unknown; name?: unknown; message?: unknown; stack?: unknown } = {}
        try {
          thrown = JSON.parse(out.slice(1))
        } catch {
          // reported below as an unreadable failure
        }
        // a pass-through only for a refusal this run really received (the isolate cannot forge one)
        const inner = typeof thrown.refusal_call === "number" ? refused.get(thrown.refusal_call) : undefined
        if (inner) return yield* Effect.fail(inner)
        return yield* Effect.fail(
          new SandboxError({
            detail: typeof thrown.message === "string" ? thrown.message : "the snippet failed and its error could not be read",
            error_name: typeof thrown.name === "string" ? thrown.name : "Error",
            agent_stack: mapStack(typeof thrown.stack === "string" ? thrown.stack : "", compiled.mappings),
            sophia_calls: calls,
            logs
          })
        )
      }))

    const run = Effect.fn("Sandbox.run")(function*(input: ExecuteCodeInput, host: SandboxHost) {
      const started = yield* Clock.currentTimeNanos
      const timeoutMs = input.timeout_ms ?? SANDBOX_DEFAULT_TIMEOUT_MS
      const compiled = yield* compileCached(input.code)
      const out = yield* withChild((child) => runOn(child, compiled, host, timeoutMs)).pipe(
        // a child that died before the snippet made any call (killed from outside, or dead before the run
        // reached it) had no effect anywhere: run it once more on a fresh child
        // (after a pause, so the exit of any other child killed at the same moment is seen first)
        Effect.retry({
          times: 2,
          schedule: Schedule.spaced(Duration.millis(100)),
          while: (e) => e._tag === "SandboxError" && e.process_died === true && (e.sophia_calls ?? 0) === 0
        }),
        Effect.timeoutFail({
          // a backstop on the whole call, waiting for a free child included: every phase of a run is
          // bounded (spawn, acceptance, the deadline, the abort), this bounds a queue of busy children
          duration: Duration.millis(acceptTimeoutMs + timeoutMs + options.abortGraceMs + 1000),
          onTimeout: () => new SandboxTimeout({ timeout_ms: timeoutMs, sophia_calls: 0, logs: [] })
        })
      )
      const finished = yield* Clock.currentTimeNanos
      return {
        result: out.result,
        sophia_calls: out.calls,
        execution_time_ms: Math.round(Number(finished - started) / 100_000) / 10,
        logs: out.logs
      }
    })

    const warmUp = refill

    if (options.prewarm) yield* Effect.forkIn(refill, scope)

    return {
      run,
      pids: Effect.sync(() => [...all].filter((c) => !c.dead).map((c) => c.pid)),
      warmUp
    } satisfies SandboxService
  })


const poolOptions = Config.all({
  warm: Config.integer("SOPHIA_SANDBOX_POOL_SIZE").pipe(Config.withDefault(2)),
  max: Config.integer("SOPHIA_SANDBOX_MAX_CHILDREN").pipe(Config.withDefault(4)),
  runsPerChild: Config.integer("SOPHIA_SANDBOX_RUNS_PER_CHILD").pipe(Config.withDefault(200)),
  abortGraceMs: Config.integer("SOPHIA_SANDBOX_ABORT_GRACE_MS").pipe(Config.withDefault(1000)),
  acceptTimeoutMs: Config.integer("SOPHIA_SANDBOX_ACCEPT_TIMEOUT_MS").pipe(Config.withDefault(ACCEPT_TIMEOUT_MS))
})

/**
 * The sandbox of the app: pool sizes from Config; no child process until the first run (an embedding app
 * or a test suite that never runs a snippet pays nothing), then `warm` children kept ready.
 */
export const SandboxLive: Layer.Layer<Sandbox> = Layer.scoped(
  Sandbox,
  Effect.flatMap(Effect.orDie(poolOptions), (o) => make({ ...o, prewarm: false }))
)

/** The daemon's start: spawn the warm children in the background, so the first snippet does not pay the cold start. */
export const SandboxWarmUp: Layer.Layer<never, never, Sandbox> = Layer.scopedDiscard(
  Effect.flatMap(Sandbox, (sandbox) => Effect.forkScoped(sandbox.warmUp))
)

/** Tests that want it explicit: real isolates in real child processes, one warm child, at most two at a time. */
export const SandboxTest: Layer.Layer<Sandbox> = Layer.scoped(
  Sandbox,
  make({ warm: 1, max: 2, runsPerChild: 200, prewarm: false, abortGraceMs: 1000, acceptTimeoutMs: ACCEPT_TIMEOUT_MS })
)
