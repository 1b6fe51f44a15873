import { Cause, Duration, Effect, Exit, Option, Queue } from "effect"
import { SANDBOX_CALL_CAP, SandboxCallCap, SandboxError, SandboxTimeout } from "../../domain/Sandbox.js"
import type { Child, FromChild } from "../../sandbox/Child.js"
import { kill, send } from "../../sandbox/Child.js"
import type { Compiled } from "./Compile.js"
import { callsOf, makeHostCalls } from "./HostCalls.js"
import type { RunResult } from "./Outcome.js"
import { boundedLogs, crashed, outcomeOf } from "./Outcome.js"
import { yieldWhenLong } from "./Priority.js"
import type { Watched } from "./Revocations.js"
import type { SandboxHost, SandboxRunError } from "./Types.js"

export interface RunTimes {
  /**
   * the snippet's time, from the child's acceptance: what is left of the call's `timeout_ms` after its
   * wait for a free place on the pool
   */
  readonly timeoutMs: number
  /** how long the child may take to accept the run */
  readonly acceptTimeoutMs: number
  /** how long the child may take to confirm an abort */
  readonly abortGraceMs: number
}

/** Ask the child to dispose the run's isolate; SIGKILL it if it does not answer within the grace period. */
const abort = (child: Child, run: number, inbox: Queue.Queue<FromChild>, graceMs: number) =>
  Effect.gen(function*() {
    send(child, { t: "abort", run })
    const answer = yield* Queue.take(inbox).pipe(
      Effect.repeat({ until: (m) => (m.t === "aborted" && m.run === run) || m.t === "exit" }),
      Effect.timeout(Duration.millis(graceMs)),
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

/**
 * One run (`run`, a number unique in the pool) of a compiled snippet on `child`, its inner calls through
 * `host`, each refused once `guard` says the connection is revoked.
 */
export const runOn = (
  child: Child,
  run: number,
  compiled: Compiled,
  host: SandboxHost,
  times: RunTimes,
  guard?: Pick<Watched, "calls" | "isRevoked">
): Effect.Effect<RunResult, SandboxRunError> =>
  Effect.scoped(Effect.gen(function*() {
    const { acceptTimeoutMs, timeoutMs } = times
    const inbox = yield* Queue.unbounded<FromChild>()
    child.sink = (m) => Queue.unsafeOffer(inbox, m)
    if (child.dead) child.sink({ t: "exit", code: null, signal: "before the run" })
    const hostCalls = yield* makeHostCalls(child, run, host, guard)
    let calls = 0

    send(child, { t: "run", run, js: compiled.js, methods: [...host.methods.keys()], timeoutMs })

    // the child's messages until its `done`: each batch of calls started, the cap enforced on the host side
    const loop = Effect.gen(function*() {
      while (true) {
        const m = yield* Queue.take(inbox)
        if (m.t === "exit") return yield* Effect.fail(crashed(child, m, calls))
        if (m.t === "calls" && m.run === run) {
          // (one past the cap at most: that one stops the run)
          const batch = callsOf(m.batch, SANDBOX_CALL_CAP + 1 - calls)
          // the whole batch is in flight before any of its calls can answer (one answering at once
          // does not flush alone while the others are still to start)
          hostCalls.inFlight(batch.length)
          for (const c of batch) {
            calls++
            // enforced here, on the host side, call by call: the 51st call stops the run (even mid-batch;
            // the calls before it in the batch were started, in order, as if they had come one by one)
            if (calls > SANDBOX_CALL_CAP) return yield* Effect.fail(new SandboxCallCap({ limit: SANDBOX_CALL_CAP }))
            yield* hostCalls.start(c)
          }
        }
        if (m.t === "done" && m.run === run) return m
      }
    })

    // The snippet's time runs from when the child accepts the run (its isolate is ready and the snippet
    // starts), not from when it was sent: spawning a child and a busy machine do not eat it (the wait for
    // a free place did, before: `times.timeoutMs` is what is left). A child that does not accept in time is
    // hung: it is killed (the pool replaces it).
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
    // a run still computing after a while yields the CPU to short ones (./Priority.ts; undone by the pool)
    yield* Effect.forkScoped(yieldWhenLong(child))
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
      // in-flight inner calls stop with the run
      yield* hostCalls.stop
      const logs = child.dead ? [] : yield* abort(child, run, inbox, times.abortGraceMs)
      const error = Cause.failureOption(outcome.cause)
      if (Option.isSome(error) && error.value._tag === "SandboxTimeout") {
        return yield* Effect.fail(new SandboxTimeout({ timeout_ms: timeoutMs, sophia_calls: calls, logs: boundedLogs(logs) }))
      }
      return yield* Effect.failCause(outcome.cause)
    }
    yield* hostCalls.stop
    return yield* outcomeOf(outcome.value, { child, compiled, calls, timeoutMs, refused: hostCalls.refused })
  }))
