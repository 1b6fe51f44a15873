import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Random, Ref, TestClock } from "effect"
import { makePermit } from "../src/layers/sqlite/Permit.js"

/** Wait until `n` fibers queue behind the holder (each `take` registers synchronously once it runs). */
const settle = Effect.repeatN(Effect.yieldNow(), 50)

describe("the write permit", () => {
  it.effect("waiters get the permit in arrival order", () =>
    Effect.gen(function*() {
      const permit = makePermit()
      yield* permit.take
      const order: Array<number> = []
      const fibers = []
      for (let i = 0; i < 5; i++) {
        fibers.push(yield* Effect.fork(Effect.zipRight(permit.take, Effect.sync(() => order.push(i))).pipe(
          Effect.zipRight(Effect.yieldNow()),
          Effect.zipRight(permit.release)
        )))
        yield* settle
      }
      assert.deepStrictEqual(order, [])
      yield* permit.release
      yield* Fiber.joinAll(fibers)
      assert.deepStrictEqual(order, [0, 1, 2, 3, 4])
      assert.isFalse(permit.held())
    }))

  it.effect("a newcomer never overtakes a queued waiter, even right after a release", () =>
    Effect.gen(function*() {
      const permit = makePermit()
      yield* permit.take
      const order: Array<string> = []
      const waiter = yield* Effect.fork(
        Effect.zipRight(permit.take, Effect.sync(() => order.push("waiter"))).pipe(Effect.zipRight(permit.release))
      )
      yield* settle
      // release and ask again in the same step: the queued waiter is served first
      yield* permit.release
      yield* permit.take
      order.push("newcomer")
      yield* permit.release
      yield* Fiber.join(waiter)
      assert.deepStrictEqual(order, ["waiter", "newcomer"])
    }))

  it.effect("an interrupted waiter leaves the queue: the permit goes to the next one", () =>
    Effect.gen(function*() {
      const permit = makePermit()
      yield* permit.take
      const got: Array<string> = []
      const first = yield* Effect.fork(Effect.zipRight(permit.take, Effect.sync(() => got.push("first"))))
      yield* settle
      const second = yield* Effect.fork(
        Effect.zipRight(permit.take, Effect.sync(() => got.push("second"))).pipe(Effect.zipRight(permit.release))
      )
      yield* settle
      yield* Fiber.interrupt(first)
      yield* permit.release
      yield* Fiber.join(second)
      assert.deepStrictEqual(got, ["second"])
      assert.isFalse(permit.held())
    }))

  it.effect("under random interruptions nobody holds the permit twice and it is never lost", () =>
    Effect.gen(function*() {
      const permit = makePermit()
      const inside = yield* Ref.make(0)
      const overlaps = yield* Ref.make(0)
      const done = yield* Ref.make(0)
      // each worker: take (interruptibly), hold across a few yields, release (registered uninterruptibly)
      const worker = Effect.uninterruptibleMask((restore) =>
        Effect.zipRight(
          restore(permit.take),
          Effect.gen(function*() {
            const now = yield* Ref.updateAndGet(inside, (n) => n + 1)
            if (now > 1) yield* Ref.update(overlaps, (n) => n + 1)
            yield* restore(Effect.repeatN(Effect.yieldNow(), 3)).pipe(Effect.exit)
            yield* Ref.update(inside, (n) => n - 1)
            yield* Ref.update(done, (n) => n + 1)
          }).pipe(Effect.ensuring(permit.release))
        )
      )
      const fibers = []
      for (let i = 0; i < 300; i++) fibers.push(yield* Effect.fork(worker))
      // interrupt a random third of them, at random moments, while the rest run
      for (const fiber of fibers) {
        if ((yield* Random.nextIntBetween(0, 3)) === 0) {
          yield* Effect.repeatN(Effect.yieldNow(), yield* Random.nextIntBetween(0, 4))
          yield* Fiber.interrupt(fiber)
        }
      }
      const exits = yield* Effect.forEach(fibers, Fiber.await)
      assert.strictEqual(yield* Ref.get(overlaps), 0)
      assert.isFalse(permit.held(), "the permit is free once everyone is done")
      assert.isAbove(exits.filter(Exit.isSuccess).length, 0)
      // and it still works
      const last = yield* Deferred.make<void>()
      yield* Effect.fork(Effect.zipRight(permit.take, Deferred.succeed(last, undefined)))
      yield* Deferred.await(last)
      yield* TestClock.adjust(0)
    }))
})
