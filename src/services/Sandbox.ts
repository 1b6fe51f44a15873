/**
 * `sophia.execute_code`'s engine: snippets run in isolated-vm isolates inside a pool of child processes.
 * This module is the service and its layers; its parts, one job each, are in ./sandbox/: the pool of
 * children (Pool.ts), one run on a child (Run.ts) and its inner calls (HostCalls.ts), compiling a snippet
 * and mapping its stack back (Compile.ts), a run's limits and outcomes (Outcome.ts); the child process
 * itself is src/sandbox/ (child.mjs and the daemon's handle on it, Child.ts).
 */
import type { Scope } from "effect"
import { Clock, Config, Context, Duration, Effect, Layer, Schedule } from "effect"
import type { ExecuteCodeInput } from "../domain/Sandbox.js"
import { SANDBOX_DEFAULT_TIMEOUT_MS, SandboxTimeout } from "../domain/Sandbox.js"
import { makeCompiler } from "./sandbox/Compile.js"
import { makePool } from "./sandbox/Pool.js"
import { runOn } from "./sandbox/Run.js"
import type { SandboxHost, SandboxPoolOptions, SandboxService } from "./sandbox/Types.js"
import { ACCEPT_TIMEOUT_MS } from "./sandbox/Types.js"
import { spanned } from "./Spans.js"

export type { HostOutcome, SandboxHost, SandboxPoolOptions, SandboxRunError, SandboxService } from "./sandbox/Types.js"

/** `sophia.execute_code`'s engine: a pool of child processes hosting isolated-vm isolates. */
export class Sandbox extends Context.Tag("sophia/Sandbox")<Sandbox, SandboxService>() {}

/**
 * A pool of warm child processes, each running one snippet at a time in a fresh isolate. Children are
 * killed when the layer's scope closes, after a fault (crash, memory limit, unanswered abort) or after
 * `runsPerChild` runs.
 */
export const make = (options: SandboxPoolOptions): Effect.Effect<SandboxService, never, Scope.Scope> =>
  Effect.gen(function*() {
    const pool = yield* makePool(options)
    const compile = makeCompiler()
    const acceptTimeoutMs = options.acceptTimeoutMs ?? ACCEPT_TIMEOUT_MS
    let runSeq = 0

    const run = spanned(
      "Sandbox.run",
      Effect.fnUntraced(function*(input: ExecuteCodeInput, host: SandboxHost) {
        const started = yield* Clock.currentTimeNanos
        const timeoutMs = input.timeout_ms ?? SANDBOX_DEFAULT_TIMEOUT_MS
        const compiled = yield* compile(input.code)
        const times = { timeoutMs, acceptTimeoutMs, abortGraceMs: options.abortGraceMs }
        const out = yield* pool.withChild((child) => runOn(child, ++runSeq, compiled, host, times)).pipe(
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
    )

    return { run, pids: pool.pids, warmUp: pool.refill } satisfies SandboxService
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
