/**
 * Who may run a snippet, and when (services/sandbox/Admission.ts), on its own: the per-connection cap, exact
 * under concurrency and freed however a run ends; the fair queue's order across users and connections; the
 * deadline of a queued run. Deterministic (TestClock; no child process): the end-to-end proofs with real
 * isolates and a real store are in SandboxFairness.test.ts and SandboxRevocation.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Scope, TestClock } from "effect"
import type { RunOwner } from "../src/services/sandbox/Admission.js"
import { makeAdmission, RUNS_PER_CONNECTION_SETTING } from "../src/services/sandbox/Admission.js"

const owner = (userId: string, connectionId: string): RunOwner => ({ userId, connectionId })

/** Let the woken fibers run (a place handed out wakes its waiter a few scheduler turns later). */
const settle = Effect.repeatN(Effect.yieldNow(), 50)

/** Take a place for `who` in a scope of its own, and report the order places are handed out in. */
const taker = (admission: ReturnType<typeof makeAdmission>, order: Array<string>) =>
  (who: RunOwner, label: string, deadline = Number.MAX_SAFE_INTEGER) =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const turn = yield* Effect.forkDaemon(
        Scope.extend(admission.slot(who, deadline), scope).pipe(Effect.tap((t) => Effect.sync(() => t !== "late" && order.push(label))))
      )
      return { turn, release: Scope.close(scope, Exit.void) }
    })

describe("Admission: the per-connection cap", () => {
  it.effect("is exact when many calls of one connection arrive at once: the cap holds, the rest are refused", () =>
    Effect.gen(function*() {
      const admission = makeAdmission({ width: 4, perConnection: 2 })
      const c = owner("u", "c1")
      const release = yield* Deferred.make<void>()
      const outcomes = yield* Effect.all(
        Array.from({ length: 20 }, () =>
          Effect.fork(Effect.scoped(Effect.zipRight(admission.hold(c, 30_000), Deferred.await(release))).pipe(Effect.either))),
        { concurrency: "unbounded" }
      )
      // the refused ones are over at once; the held ones wait for the release
      const done: Array<Exit.Exit<any, never>> = []
      for (let spins = 0; spins < 1000 && done.length < 18; spins++) {
        yield* Effect.yieldNow()
        done.length = 0
        for (const f of outcomes) {
          const poll = yield* Fiber.poll(f)
          if (poll._tag === "Some") done.push(poll.value)
        }
      }
      yield* Effect.yieldNow()
      assert.strictEqual(done.length, 18)
      for (const exit of done) {
        assert.isTrue(Exit.isSuccess(exit))
        const either = (exit as Exit.Success<any, never>).value
        assert.strictEqual(either._tag, "Left")
        assert.strictEqual(either.left._tag, "RateLimited")
        assert.strictEqual(either.left.limit, 2)
        assert.strictEqual(either.left.setting, RUNS_PER_CONNECTION_SETTING)
        assert.strictEqual(either.left.what, "concurrent execute_code runs")
        // the earliest held run must have ended by 30 s: retry then
        assert.strictEqual(either.left.retry_after_s, 30)
      }
      assert.strictEqual(admission.snapshot().heldByConnection.get("c1"), 2)
      // another connection is not counted with it
      yield* Effect.scoped(admission.hold(owner("u", "c2"), 1_000))
      yield* Deferred.succeed(release, undefined)
      for (const f of outcomes) yield* Fiber.await(f)
      assert.isUndefined(admission.snapshot().heldByConnection.get("c1"))
    }))

  it.effect("is freed however the held run ends: success, failure, interruption", () =>
    Effect.gen(function*() {
      const admission = makeAdmission({ width: 4, perConnection: 1 })
      const c = owner("u", "c1")
      yield* Effect.scoped(admission.hold(c, 5_000))
      yield* Effect.scoped(Effect.zipRight(admission.hold(c, 5_000), Effect.fail("refused"))).pipe(Effect.flip)
      const gate = yield* Deferred.make<void>()
      const held = yield* Effect.fork(Effect.scoped(Effect.zipRight(admission.hold(c, 5_000), Deferred.await(gate))))
      yield* Effect.yieldNow()
      const refused = yield* Effect.flip(Effect.scoped(admission.hold(c, 5_000)))
      assert.strictEqual(refused._tag, "RateLimited")
      yield* Fiber.interrupt(held)
      // free again
      yield* Effect.scoped(admission.hold(c, 5_000))
      assert.strictEqual(admission.snapshot().heldByConnection.size, 0)
    }))

  it.effect("retry_after_s counts down to the earliest end among the connection's runs (at least 1)", () =>
    Effect.gen(function*() {
      const admission = makeAdmission({ width: 4, perConnection: 2 })
      const c = owner("u", "c1")
      const scope = yield* Scope.make()
      yield* Scope.extend(admission.hold(c, 12_000), scope)
      yield* Scope.extend(admission.hold(c, 4_500), scope)
      assert.strictEqual((yield* Effect.flip(Effect.scoped(admission.hold(c, 9_999)))).retry_after_s, 5)
      yield* TestClock.adjust("4 seconds")
      assert.strictEqual((yield* Effect.flip(Effect.scoped(admission.hold(c, 9_999)))).retry_after_s, 1)
      yield* TestClock.adjust("10 seconds")
      assert.strictEqual((yield* Effect.flip(Effect.scoped(admission.hold(c, 9_999)))).retry_after_s, 1)
      yield* Scope.close(scope, Exit.void)
    }))
})

describe("Admission: the fair queue", () => {
  it.effect("one user never takes the last place: another user's run gets it while the first user's runs queue", () =>
    Effect.gen(function*() {
      const admission = makeAdmission({ width: 3, perConnection: 2 })
      const order: Array<string> = []
      const take = taker(admission, order)
      const a = [owner("A", "a1"), owner("A", "a2"), owner("A", "a3")]
      const runs = []
      for (const [i, who] of a.entries()) {
        runs.push(yield* take(who, `A${i + 1}.1`))
        runs.push(yield* take(who, `A${i + 1}.2`))
      }
      yield* settle
      assert.deepStrictEqual(order, ["A1.1", "A1.2"])
      assert.deepStrictEqual({ running: admission.snapshot().running, queued: admission.snapshot().queued }, { running: 2, queued: 4 })
      const b = yield* take(owner("B", "b1"), "B1.1")
      yield* Fiber.join(b.turn)
      assert.deepStrictEqual(order, ["A1.1", "A1.2", "B1.1"])
      // when one of A's runs ends, A's next place goes to the connection that has none (a2, then a3), not a1
      yield* runs[0].release
      yield* settle
      yield* runs[1].release
      yield* settle
      assert.deepStrictEqual(order.slice(3), ["A2.1", "A3.1"])
      yield* b.release
      for (const r of runs) yield* r.release
    }))

  it.effect("a free place goes to the user running the fewest, then to its connection running the fewest", () =>
    Effect.gen(function*() {
      const admission = makeAdmission({ width: 4, perConnection: 10 })
      const order: Array<string> = []
      const take = taker(admission, order)
      // A fills three places (its share: width - 1); B one
      const held = [
        yield* take(owner("A", "a1"), "a1#1"),
        yield* take(owner("A", "a1"), "a1#2"),
        yield* take(owner("A", "a1"), "a1#3"),
        yield* take(owner("B", "b1"), "b1#1")
      ]
      yield* settle
      assert.strictEqual(admission.snapshot().running, 4)
      // queued in this order: A's flood first, then B's and C's
      const queued = []
      for (let i = 4; i <= 7; i++) queued.push(yield* take(owner("A", "a1"), `a1#${i}`))
      queued.push(yield* take(owner("A", "a2"), "a2#1"))
      queued.push(yield* take(owner("B", "b2"), "b2#1"))
      queued.push(yield* take(owner("C", "c1"), "c1#1"))
      yield* settle
      assert.strictEqual(admission.snapshot().queued, 7)
      // A's runs end one by one: C (running none) goes first; then A and B run one each, and A, queued
      // first, goes before B — to its connection running none (a2), not to a1 which still runs one; then B
      for (const h of held.slice(0, 3)) {
        yield* h.release
        yield* settle
      }
      assert.deepStrictEqual(order.slice(4), ["c1#1", "a2#1", "b2#1"])
      // B's last run ends: only A waits
      yield* held[3].release
      yield* settle
      assert.deepStrictEqual(order.slice(7), ["a1#4"])
      for (const q of queued) yield* q.release
      assert.deepStrictEqual({ running: admission.snapshot().running, queued: admission.snapshot().queued }, { running: 0, queued: 0 })
    }))

  it.effect("a run whose deadline passes while it waits is late, holds nothing, and leaves the queue", () =>
    Effect.gen(function*() {
      const admission = makeAdmission({ width: 1, perConnection: 2 })
      const order: Array<string> = []
      const take = taker(admission, order)
      const first = yield* take(owner("A", "a1"), "first")
      yield* settle
      const late = yield* take(owner("B", "b1"), "late", 500)
      const next = yield* take(owner("C", "c1"), "next")
      yield* TestClock.adjust("600 millis")
      assert.strictEqual(yield* Fiber.join(late.turn), "late")
      yield* late.release
      assert.strictEqual(admission.snapshot().queued, 1)
      yield* first.release
      assert.strictEqual(yield* Fiber.join(next.turn), "waited")
      assert.deepStrictEqual(order, ["first", "next"])
      yield* next.release
      assert.strictEqual(admission.snapshot().running, 0)
    }))

  it.effect("a waiter interrupted in the queue leaves it; one interrupted as its place arrived passes the place on", () =>
    Effect.gen(function*() {
      const admission = makeAdmission({ width: 1, perConnection: 2 })
      const order: Array<string> = []
      const take = taker(admission, order)
      const first = yield* take(owner("A", "a1"), "first")
      yield* settle
      const gone = yield* take(owner("B", "b1"), "gone")
      const granted = yield* take(owner("C", "c1"), "granted")
      const then = yield* take(owner("D", "d1"), "then")
      yield* settle
      // gone is interrupted while it waits: it leaves the queue
      yield* Fiber.interrupt(gone.turn)
      yield* gone.release
      assert.strictEqual(admission.snapshot().queued, 2)
      // granted gets the place and is interrupted at once: the place passes on to `then`
      yield* first.release
      yield* Fiber.interrupt(granted.turn)
      yield* granted.release
      assert.strictEqual(yield* Fiber.join(then.turn), "waited")
      assert.strictEqual(admission.snapshot().running, 1)
      yield* then.release
      assert.deepStrictEqual({ running: admission.snapshot().running, queued: admission.snapshot().queued }, { running: 0, queued: 0 })
    }))
})
