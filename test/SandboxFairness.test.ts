/**
 * `execute_code` cannot be monopolised (issue 28): a per-connection cap on concurrent runs, a queue fair
 * across users and connections, and `timeout_ms` counted from the call's arrival. The real app over SQLite,
 * real connections from Auth, real isolated-vm children; a pool three children wide. Bounds are generous
 * (a loaded 2-core machine): the tests assert outcomes and order, not speed.
 */
import { assert, layer } from "@effect/vitest"
import { ConfigProvider, Effect, Fiber, Layer, Schema } from "effect"
import * as fs from "node:fs"
import type { Caller } from "../src/domain/Auth.js"
import { allToolSets, makeCore, type ServicesLive } from "../src/layers/App.js"
import { SqliteLive } from "../src/layers/Sql.js"
import type { CallOutcome } from "../src/mcp/Dispatch.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { APPEND_ONLY, defineTool, READ_ONLY, ToolRegistry } from "../src/mcp/Registry.js"
import { Sandbox } from "../src/services/Sandbox.js"
import { connect } from "./support/Fixtures.js"

const probe = { writes: 0 }
const probeTools = Effect.succeed([
  defineTool({
    name: "sophia.probe_write",
    group: "test",
    access: "coordinate",
    description: "test: counts its calls",
    annotations: APPEND_ONLY,
    input: Schema.Struct({}),
    output: Schema.Struct({ writes: Schema.Number }),
    handler: () => Effect.sync(() => ({ writes: ++probe.writes }))
  }),
  defineTool({
    name: "sophia.slow_read",
    group: "test",
    access: "read",
    description: "test: answers after ms",
    annotations: READ_ONLY,
    input: Schema.Struct({ ms: Schema.Number }),
    output: Schema.Struct({ ok: Schema.Boolean }),
    handler: ({ ms }) => Effect.as(Effect.sleep(ms), { ok: true })
  })
])

/** The pool: three children, all kept warm; two runs per connection (the default). */
const WIDTH = 3
const TestApp = makeCore(
  SqliteLive(":memory:"),
  ToolRegistry.fromToolSets<Layer.Layer.Success<typeof ServicesLive>>(...allToolSets, probeTools)
).pipe(
  Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(
    new Map([["SOPHIA_SANDBOX_MAX_CHILDREN", String(WIDTH)], ["SOPHIA_SANDBOX_POOL_SIZE", String(WIDTH)]])
  )))
)

const exec = (caller: Caller, code: string, timeout_ms?: number) =>
  Effect.flatMap(Dispatcher, (d) => d.call(caller, "sophia.execute_code", timeout_ms === undefined ? { code } : { code, timeout_ms }))

const ok = (outcome: CallOutcome): any => {
  assert.isTrue(outcome.ok, JSON.stringify(outcome.body))
  return outcome.body
}
const refused = (outcome: CallOutcome): any => {
  assert.isFalse(outcome.ok, JSON.stringify(outcome.body))
  return (outcome.body as any).error
}

let names = 0
const fresh = (user: string) => Effect.map(connect(`fair-${++names}`, "full", user), (c) => c.caller)

/** Poll until `check` holds (at most `seconds`). */
const until = <R>(check: Effect.Effect<boolean, never, R>, seconds = 30) =>
  Effect.gen(function*() {
    for (let i = 0; i < seconds * 50; i++) {
      if (yield* check) return
      yield* Effect.sleep(20)
    }
    assert.fail("condition not reached in time")
  })
const load = Effect.flatMap(Sandbox, (s) => s.load)
const loadIs = (running: number, queued: number) =>
  Effect.map(load, (l) => l.running === running && l.queued === queued)
const stillRunning = (fibers: ReadonlyArray<Fiber.RuntimeFiber<unknown>>) =>
  Effect.forEach(fibers, (f) => Effect.map(Fiber.poll(f), (p) => p._tag === "None"))

layer(TestApp, { timeout: 120_000, excludeTestServices: true })("execute_code: the per-connection cap", (it) => {
  it.effect("a connection's third concurrent run is refused rate_limited (retry_after_s, the setting); exact when calls arrive together", () =>
    Effect.gen(function*() {
      yield* Effect.flatMap(Sandbox, (s) => s.warmUp)
      const c = yield* fresh("cap-user")
      const held = yield* Effect.all([
        Effect.fork(exec(c, `await sophia.slowRead({ ms: 20000 }); return "held"`, 30_000)),
        Effect.fork(exec(c, `await sophia.slowRead({ ms: 20000 }); return "held"`, 30_000))
      ])
      yield* until(loadIs(2, 0))
      const third = refused(yield* exec(c, `return 1`))
      assert.strictEqual(third.code, "rate_limited")
      assert.strictEqual(third.what, "concurrent execute_code runs")
      assert.strictEqual(third.limit, 2)
      assert.strictEqual(third.setting, "SOPHIA_SANDBOX_RUNS_PER_CONNECTION")
      // the held runs end by their 30 s deadline at the latest
      assert.isAtLeast(third.retry_after_s, 1)
      assert.isAtMost(third.retry_after_s, 32)
      assert.isString(third.hint)
      assert.include(third.message, "SOPHIA_SANDBOX_RUNS_PER_CONNECTION")
      // the held ones are untouched by the refusal; one ends (interrupted: its client went away) and the
      // connection may run again at once
      yield* Fiber.interrupt(held[0])
      assert.strictEqual(ok(yield* exec(c, `return 2`)).result, 2)
      yield* Fiber.interrupt(held[1])
      yield* until(loadIs(0, 0))

      // eight calls of one connection at once: exactly two run, six are refused
      const d = yield* fresh("burst-user")
      const burst = yield* Effect.all(
        Array.from({ length: 8 }, () => exec(d, `await sophia.slowRead({ ms: 300 }); return "ran"`)),
        { concurrency: "unbounded" }
      )
      const codes = burst.map((o) => (o.ok ? "ok" : (o.body as any).error.code)).sort()
      assert.deepStrictEqual(codes, ["ok", "ok", ...Array(6).fill("rate_limited")])
    }))

  it.effect("freed however a run ends: success, refusal, timeout, interruption", () =>
    Effect.gen(function*() {
      const c = yield* fresh("ends-user")
      // two at a time each round: a leaked hold would refuse the second of the next pair
      const pair = (code: string, timeout_ms?: number) =>
        Effect.all([exec(c, code, timeout_ms), exec(c, code, timeout_ms)], { concurrency: 2 })
      for (const o of yield* pair(`return 1`)) ok(o)
      for (const o of yield* pair(`throw new Error("boom")`)) assert.strictEqual(refused(o).code, "sandbox_error")
      for (const o of yield* pair(`await sophia.orient({ goal: 42 as any }); return 1`)) assert.strictEqual(refused(o).code, "validation_error")
      for (const o of yield* pair(`while (true) {}`, 300)) assert.strictEqual(refused(o).code, "sandbox_timeout")
      const interrupted = yield* Effect.all([
        Effect.fork(exec(c, `while (true) {}`, 30_000)),
        Effect.fork(exec(c, `while (true) {}`, 30_000))
      ])
      yield* until(loadIs(2, 0))
      for (const f of interrupted) yield* Fiber.interrupt(f)
      for (const o of yield* pair(`await sophia.slowRead({ ms: 200 }); return "again"`)) assert.strictEqual(ok(o).result, "again")
      yield* until(loadIs(0, 0))
    }))
})

/** The niceness of each thread of a process (Linux /proc; field 19 of a thread's stat). */
const nicenessOf = (pid: number): Array<number> => {
  try {
    return fs.readdirSync(`/proc/${pid}/task`).map((tid) =>
      Number(fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8").split(") ")[1]!.split(" ")[16])
    )
  } catch {
    return []
  }
}
const linux = fs.existsSync("/proc/self/task")

layer(TestApp, { timeout: 120_000, excludeTestServices: true })("execute_code: a fair queue", (it) => {
  it.effect("another user's `return 1` is answered within its deadline while one user floods the pool with endless loops", () =>
    Effect.gen(function*() {
      yield* Effect.flatMap(Sandbox, (s) => s.warmUp)
      // user A: three connections, each at its cap of two endless loops: the pool's width and more
      const a = [yield* fresh("flooder"), yield* fresh("flooder"), yield* fresh("flooder")]
      const flood: Array<Fiber.RuntimeFiber<CallOutcome>> = []
      for (const conn of a) {
        for (let i = 0; i < 2; i++) flood.push(yield* Effect.fork(exec(conn, `while (true) {}`, 30_000)))
      }
      // A holds all it may (the pool's width less one); the rest of its loops queue
      yield* until(loadIs(WIDTH - 1, 6 - (WIDTH - 1)))
      const b = yield* fresh("bystander")
      const answer = ok(yield* exec(b, `return 1`, 10_000))
      assert.strictEqual(answer.result, 1)
      // answered while every one of A's loops was still going (none had reached its deadline)
      assert.deepStrictEqual(yield* stillRunning(flood), Array(6).fill(true))
      // again: the place B used is free for the next one
      assert.strictEqual(ok(yield* exec(b, `return 2`, 10_000)).result, 2)
      for (const f of flood) yield* Fiber.interrupt(f)
      yield* until(loadIs(0, 0))
    }))

  it.effect.skipIf(!linux)("a run still computing after 250 ms yields the CPU (its child lowered), a waiting one does not; both serve again at normal priority", () =>
    Effect.gen(function*() {
      const sandbox = yield* Sandbox
      yield* sandbox.warmUp
      const c = yield* fresh("nice-user")
      const d = yield* fresh("nice-user-2")
      const computing = yield* Effect.fork(exec(c, `const t = Date.now(); while (Date.now() - t < 1500) {}; return "computed"`))
      const waiting = yield* Effect.fork(exec(d, `await sophia.slowRead({ ms: 1500 }); return "waited"`))
      yield* until(loadIs(2, 0))
      yield* Effect.sleep(900)
      const during = (yield* sandbox.pids).map(nicenessOf)
      // one child (the computing run's) has its threads lowered; the others are untouched
      assert.strictEqual(during.filter((threads) => threads.some((n) => n > 0)).length, 1, JSON.stringify(during))
      assert.strictEqual(ok(yield* Fiber.join(computing)).result, "computed")
      assert.strictEqual(ok(yield* Fiber.join(waiting)).result, "waited")
      yield* until(loadIs(0, 0))
      // raised back (or, where the OS refuses that, recycled): no child serves lowered
      for (const pid of yield* sandbox.pids) assert.deepStrictEqual(nicenessOf(pid).filter((n) => n !== 0), [], `pid ${pid}`)
    }))

  it.effect("a run queued past its timeout_ms is refused sandbox_timeout without starting; one that started late has only what was left", () =>
    Effect.gen(function*() {
      yield* Effect.flatMap(Sandbox, (s) => s.warmUp)
      // every child busy: two users hold the three places for a while
      const x = yield* fresh("holder-x")
      const y = yield* fresh("holder-y")
      const holders = [
        yield* Effect.fork(exec(x, `await sophia.slowRead({ ms: 3000 }); return "x"`, 20_000)),
        yield* Effect.fork(exec(x, `await sophia.slowRead({ ms: 3000 }); return "x"`, 20_000)),
        yield* Effect.fork(exec(y, `await sophia.slowRead({ ms: 3000 }); return "y"`, 20_000))
      ]
      yield* until(loadIs(WIDTH, 0))
      const z = yield* fresh("late-z")
      const before = probe.writes
      const late = refused(yield* exec(z, `await sophia.probeWrite({}); return 1`, 500))
      assert.strictEqual(late.code, "sandbox_timeout")
      assert.strictEqual(late.timeout_ms, 500)
      assert.strictEqual(late.started, false)
      assert.strictEqual(late.sophia_calls, 0)
      assert.isAtLeast(late.waited_ms, 1)
      assert.include(late.message, "waited for a free sandbox")
      assert.include(late.message, "never started")
      // it never ran: its one call was not made, and it was refused while the holders still held the pool
      assert.strictEqual(probe.writes, before)
      assert.deepStrictEqual(yield* stillRunning(holders), [true, true, true])

      // a run that waits ~3 s for a place, then loops: refused at 4 s from its arrival, not 4 s after it started
      const started = Date.now()
      const waitedThenLooped = refused(yield* exec(z, `while (true) {}`, 4000))
      const elapsed = Date.now() - started
      assert.strictEqual(waitedThenLooped.code, "sandbox_timeout")
      assert.strictEqual(waitedThenLooped.timeout_ms, 4000)
      assert.isUndefined(waitedThenLooped.started)
      assert.isAtLeast(waitedThenLooped.waited_ms, 1000)
      assert.include(waitedThenLooped.message, "waiting for a free sandbox")
      assert.isAtLeast(elapsed, 3900)
      // counted from acceptance it would have ended after the holders' ~3 s plus its own 4 s
      assert.isBelow(elapsed, 6500)
      for (const h of holders) assert.isTrue(ok(yield* Fiber.join(h)).result.length === 1)
      yield* until(loadIs(0, 0))
    }))
})
