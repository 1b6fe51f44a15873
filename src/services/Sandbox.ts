/**
 * `sophia.execute_code`'s engine: snippets run in isolated-vm isolates inside a pool of child processes.
 * This module is the service and its layers; its parts, one job each, are in ./sandbox/: the pool of
 * children (Pool.ts), one run on a child (Run.ts) and its inner calls (HostCalls.ts), compiling a snippet
 * and mapping its stack back (Compile.ts), a run's limits and outcomes (Outcome.ts); the child process
 * itself is src/sandbox/ (child.mjs and the daemon's handle on it, Child.ts).
 */
import type { Scope } from "effect"
import { Clock, Config, Context, Deferred, Duration, Effect, Layer, Schedule } from "effect"
import { Unauthenticated } from "../domain/Errors.js"
import type { ConnectionRevoked } from "../domain/Events.js"
import type { ExecuteCodeInput } from "../domain/Sandbox.js"
import { SANDBOX_DEFAULT_TIMEOUT_MS, SANDBOX_RUNS_PER_CONNECTION, SandboxTimeout } from "../domain/Sandbox.js"
import type { RunOwner } from "./sandbox/Admission.js"
import { makeAdmission } from "./sandbox/Admission.js"
import { makeCompiler } from "./sandbox/Compile.js"
import { makePool } from "./sandbox/Pool.js"
import type { Watched } from "./sandbox/Revocations.js"
import { makeRevocations } from "./sandbox/Revocations.js"
import { runOn } from "./sandbox/Run.js"
import type { SandboxHost, SandboxPoolOptions, SandboxService } from "./sandbox/Types.js"
import { ACCEPT_TIMEOUT_MS } from "./sandbox/Types.js"
import { spanned } from "./Spans.js"

export type { HostOutcome, SandboxHost, SandboxPoolOptions, SandboxRunError, SandboxService } from "./sandbox/Types.js"

/** `sophia.execute_code`'s engine: a pool of child processes hosting isolated-vm isolates. */
export class Sandbox extends Context.Tag("sophia/Sandbox")<Sandbox, SandboxService>() {}

/** The runs of a host that names no owner (an embedder's own snippets) queue as this one connection. */
const ANONYMOUS: RunOwner = { userId: "", connectionId: "" }

/**
 * A pool of warm child processes, each running one snippet at a time in a fresh isolate. Children are
 * killed when the layer's scope closes, after a fault (crash, memory limit, unanswered abort), after
 * `runsPerChild` runs, or under a run whose connection is revoked. Who runs when: sandbox/Admission.ts
 * (a cap per connection, a fair queue across users and connections); revocation: sandbox/Revocations.ts.
 */
export const make = (options: SandboxPoolOptions): Effect.Effect<SandboxService, never, Scope.Scope> =>
  Effect.gen(function*() {
    const pool = yield* makePool(options)
    const admission = makeAdmission({ width: options.max, perConnection: options.runsPerConnection ?? SANDBOX_RUNS_PER_CONNECTION })
    const revocations = makeRevocations()
    const compile = makeCompiler()
    const acceptTimeoutMs = options.acceptTimeoutMs ?? ACCEPT_TIMEOUT_MS
    let runSeq = 0

    /**
     * The run from its arrival: the connection's cap, the snippet compiled, a place in the fair queue until
     * the deadline (`timeout_ms` from arrival), then the snippet on a child with the time that is left.
     */
    const admitted = (input: ExecuteCodeInput, host: SandboxHost, arrived: number, watched: Watched | undefined) =>
      Effect.scoped(Effect.gen(function*() {
        const timeoutMs = input.timeout_ms ?? SANDBOX_DEFAULT_TIMEOUT_MS
        const deadline = arrived + timeoutMs
        if (host.owner !== undefined) yield* admission.hold(host.owner, deadline + options.abortGraceMs)
        const compiled = yield* compile(input.code)
        const queued = yield* Clock.currentTimeMillis
        const turn = yield* admission.slot(host.owner ?? ANONYMOUS, deadline)
        const granted = yield* Clock.currentTimeMillis
        const waitedMs = turn === "waited" || turn === "late" ? granted - queued : undefined
        // (a place that came just at the deadline is as late: the snippet would have no time at all)
        if (turn === "late" || (turn === "waited" && granted >= deadline)) {
          return yield* new SandboxTimeout({ timeout_ms: timeoutMs, sophia_calls: 0, logs: [], waited_ms: waitedMs, started: false })
        }
        const onChild = Effect.flatMap(Clock.currentTimeMillis, (now) => {
          const times = { timeoutMs: Math.max(1, deadline - now), acceptTimeoutMs, abortGraceMs: options.abortGraceMs }
          return pool.withChild((child) => runOn(child, ++runSeq, compiled, host, times, watched))
        })
        return yield* onChild.pipe(
          // a child that died before the snippet made any call (killed from outside, or dead before the run
          // reached it) had no effect anywhere: run it once more on a fresh child, in what is left of the time
          // (after a pause, so the exit of any other child killed at the same moment is seen first)
          Effect.retry({
            times: 2,
            schedule: Schedule.spaced(Duration.millis(100)),
            while: (e) => e._tag === "SandboxError" && e.process_died === true && (e.sophia_calls ?? 0) === 0
          }),
          Effect.timeoutFail({
            // a backstop on the run: every phase of it is bounded (spawn, acceptance, the deadline, the abort)
            duration: Duration.millis(acceptTimeoutMs + timeoutMs + options.abortGraceMs + 1000),
            onTimeout: () => new SandboxTimeout({ timeout_ms: timeoutMs, sophia_calls: 0, logs: [] })
          }),
          // the refusal names the call's own timeout_ms, and the part of it spent waiting
          Effect.mapError((e) =>
            e._tag === "SandboxTimeout"
              ? new SandboxTimeout({ timeout_ms: timeoutMs, sophia_calls: e.sophia_calls, logs: e.logs, waited_ms: waitedMs })
              : e
          )
        )
      }))

    const run = spanned(
      "Sandbox.run",
      Effect.fnUntraced(function*(input: ExecuteCodeInput, host: SandboxHost) {
        const started = yield* Clock.currentTimeNanos
        const arrived = yield* Clock.currentTimeMillis
        const out = yield* (host.owner === undefined
          ? admitted(input, host, arrived, undefined)
          // the connection revoked (before or during the run): the run ends at once, its child killed
          : Effect.scoped(Effect.flatMap(revocations.watch(host.owner.connectionId), (watched) =>
            Effect.raceFirst(
              admitted(input, host, arrived, watched),
              Effect.zipRight(Deferred.await(watched.revoked), Effect.fail(new Unauthenticated()))
            ))))
        const finished = yield* Clock.currentTimeNanos
        return {
          result: out.result,
          sophia_calls: out.calls,
          execution_time_ms: Math.round(Number(finished - started) / 100_000) / 10,
          logs: out.logs
        }
      })
    )

    const onConnectionRevoked = spanned(
      "Sandbox.onConnectionRevoked",
      (event: ConnectionRevoked) => revocations.revoke(event.connection_id)
    )

    return {
      run,
      pids: pool.pids,
      warmUp: pool.refill,
      onConnectionRevoked,
      load: Effect.sync(() => {
        const { queued, running } = admission.snapshot()
        return { running, queued }
      })
    } satisfies SandboxService
  })

const poolOptions = Config.all({
  warm: Config.integer("SOPHIA_SANDBOX_POOL_SIZE").pipe(Config.withDefault(2)),
  max: Config.integer("SOPHIA_SANDBOX_MAX_CHILDREN").pipe(Config.withDefault(4)),
  runsPerChild: Config.integer("SOPHIA_SANDBOX_RUNS_PER_CHILD").pipe(Config.withDefault(200)),
  abortGraceMs: Config.integer("SOPHIA_SANDBOX_ABORT_GRACE_MS").pipe(Config.withDefault(1000)),
  acceptTimeoutMs: Config.integer("SOPHIA_SANDBOX_ACCEPT_TIMEOUT_MS").pipe(Config.withDefault(ACCEPT_TIMEOUT_MS)),
  runsPerConnection: Config.integer("SOPHIA_SANDBOX_RUNS_PER_CONNECTION").pipe(
    Config.withDefault(SANDBOX_RUNS_PER_CONNECTION),
    Config.validate({ message: "must be at least 1", validation: (n) => n >= 1 })
  )
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
