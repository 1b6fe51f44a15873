/**
 * Revocation ends a connection's long polls and subscriptions (issue 28): a parked `coordination_inbox` poll,
 * a parked `approval_status` and a parked `lease_acquire` (issue 30) answer `unauthenticated` the moment the
 * revocation is heard, a subscription
 * hears nothing after it, and no post committed after `revoked_at` is ever returned — also when the revocation
 * was made by another process (the `sophia connection revoke` CLI on the same SQLite file), which this process
 * learns of by looking (`ForeignWrites`) or by the poll's own read. Real app, real SQLite.
 */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Fiber, Layer, Option } from "effect"
import type { Caller } from "../src/domain/Auth.js"
import { SophiaLive, SophiaTest } from "../src/layers/App.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { Auth } from "../src/services/Auth.js"
import { Coordination } from "../src/services/Coordination.js"
import { Wakeups } from "../src/services/Wakeups.js"
import { sophia, tempDb } from "./support/Cli.js"
import { connect } from "./support/Fixtures.js"

const call = (caller: Caller, name: string, args: unknown) =>
  Effect.flatMap(Dispatcher, (d) => d.call(caller, name, args)).pipe(Effect.map((o) => o.body as any))
const say = (caller: Caller, channel: string, body: string) =>
  Effect.flatMap(Coordination, (c) => c.post(caller, { channel, kind: "status", body }))
const parked = Effect.map(Wakeups, (w) => w.parkedCount())
const untilParked = (n: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < 2_000 && (yield* parked) !== n; i++) yield* Effect.sleep("5 millis")
    assert.strictEqual(yield* parked, n, "parked")
  })
/** The poll's outcome within `ms`, or a failure saying it did not end. */
const within = <A, E>(fiber: Fiber.Fiber<A, E>, ms: number) =>
  Fiber.join(fiber).pipe(Effect.timeoutFail({ duration: ms, onTimeout: () => new Error(`the poll did not end within ${ms} ms`) }))

/** Real time, whatever clock the test runs under. */
const realSleep = (ms: number) => Effect.promise(() => new Promise((r) => setTimeout(r, ms)))
/** The fiber's outcome within `ms` of real time (the test clock may never move). */
const withinReal = <A, E>(fiber: Fiber.Fiber<A, E>, ms: number) =>
  Effect.gen(function*() {
    for (let waited = 0; waited < ms; waited += 5) {
      const done = yield* Fiber.poll(fiber)
      if (Option.isSome(done)) return yield* done.value
      yield* realSleep(5)
    }
    return yield* Effect.die(new Error(`the poll did not end within ${ms} ms`))
  })
const untilParkedReal = (n: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < 2_000 && (yield* parked) !== n; i++) yield* realSleep(5)
    assert.strictEqual(yield* parked, n, "parked")
  })

/** The app on a SQLite file another process (the CLI) writes too; `recheckMs`: how often it looks for that. */
const onFile = (db: string, recheckMs: number) =>
  SophiaLive(db).pipe(Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["SOPHIA_RECHECK_MS", String(recheckMs)]])))))

describe("revocation in this process (the portal's Revoke, the daemon's own Auth.revoke)", () => {
  it.live("a parked inbox poll answers unauthenticated at once; a post after the revocation is never delivered", () =>
    Effect.gen(function*() {
      const auth = yield* Auth
      const { caller: a } = yield* connect("a")
      const { caller: b } = yield* connect("b")
      const poll = yield* Effect.fork(call(b, "sophia.coordination_inbox", { wait_s: 30 }))
      const conversation = yield* Effect.fork(call(b, "sophia.coordination_inbox", { channel: "c", cursor: "p0", wait_s: 30 }))
      yield* untilParked(2)
      yield* auth.revoke("b")
      yield* say(a, "c", "after the revocation")
      for (const f of [poll, conversation]) {
        const body = yield* within(f, 10_000)
        assert.strictEqual(body.error?.code, "unauthenticated", JSON.stringify(body))
        assert.isUndefined(body.posts)
      }
      assert.strictEqual(yield* parked, 0)
      // a poll that starts after the revocation was heard (it authenticated before) ends at once too
      assert.strictEqual((yield* call(b, "sophia.coordination_inbox", { wait_s: 30 })).error?.code, "unauthenticated")
    }).pipe(Effect.provide(SophiaTest)))

  it.live("a parked approval_status answers unauthenticated when its connection is revoked", () =>
    Effect.gen(function*() {
      const auth = yield* Auth
      const { caller: helper } = yield* connect("helper", "assistant")
      const refused = yield* call(helper, "sophia.add_document", { title: "t", body: "b" })
      assert.strictEqual(refused.error.code, "approval_required")
      const waiting = yield* Effect.fork(call(helper, "sophia.approval_status", { approval_id: refused.error.approval_id, wait_s: 30 }))
      yield* untilParked(1)
      yield* auth.revoke("helper")
      const body = yield* within(waiting, 10_000)
      assert.strictEqual(body.error?.code, "unauthenticated", JSON.stringify(body))
      assert.strictEqual(yield* parked, 0)
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("a parked lease_acquire (wait_s) answers unauthenticated when its connection is revoked, by the event: the test clock never moves", () =>
    Effect.gen(function*() {
      const auth = yield* Auth
      const { caller: a } = yield* connect("a")
      const { caller: b } = yield* connect("b")
      const held = yield* call(a, "sophia.lease_acquire", { resources: ["slot:deploy"], reason: "deploying" })
      assert.isString(held.lease_id, JSON.stringify(held))
      const waiting = yield* Effect.fork(call(b, "sophia.lease_acquire", { resources: ["slot:deploy"], reason: "next", wait_s: 30 }))
      yield* untilParkedReal(1)
      // refused once and parked: nothing but an event can end it now (no timer fires under the test clock)
      yield* realSleep(50)
      assert.isTrue(Option.isNone(yield* Fiber.poll(waiting)), "still waiting")
      yield* auth.revoke("b")
      const body = yield* withinReal(waiting, 10_000)
      assert.strictEqual(body.error?.code, "unauthenticated", JSON.stringify(body))
      assert.strictEqual(yield* parked, 0)
      // nothing was granted to it: a's lease is the only one
      const listed = yield* call(a, "sophia.leases", {})
      assert.deepStrictEqual(listed.leases.map((l: any) => l.lease_id), [held.lease_id])
      // a lease_acquire with wait_s that starts after the revocation was heard ends at once too
      assert.strictEqual((yield* call(b, "sophia.lease_acquire", { resources: ["slot:other"], reason: "r", wait_s: 30 })).error?.code, "unauthenticated")
    }).pipe(Effect.provide(SophiaTest)))

  it.live("a subscription hears nothing after its connection's revocation; another connection's still does", () =>
    Effect.gen(function*() {
      const auth = yield* Auth
      const coordination = yield* Coordination
      const { caller: a } = yield* connect("a")
      const { caller: b } = yield* connect("b")
      const { caller: c } = yield* connect("c")
      const heard = { b: 0, c: 0 }
      yield* Effect.scoped(Effect.gen(function*() {
        yield* coordination.watchUnread(b, undefined, () => heard.b++)
        yield* coordination.watchUnread(c, undefined, () => heard.c++)
        yield* say(a, "x", "before")
        for (let i = 0; i < 200 && heard.b < 1; i++) yield* Effect.sleep("5 millis")
        assert.deepStrictEqual(heard, { b: 1, c: 1 })
        yield* auth.revoke("b")
        yield* say(a, "x", "after")
        for (let i = 0; i < 200 && heard.c < 2; i++) yield* Effect.sleep("5 millis")
        yield* Effect.sleep("50 millis")
        assert.deepStrictEqual(heard, { b: 1, c: 2 })
      }))
    }).pipe(Effect.provide(SophiaTest)))
})

describe("revocation by another process: `sophia connection revoke` on the same SQLite file", () => {
  it.live("found within a few seconds without any post: the parked poll answers unauthenticated", () => {
    const db = tempDb()
    return Effect.gen(function*() {
      yield* connect("a")
      const { caller: b } = yield* connect("b")
      const poll = yield* Effect.fork(call(b, "sophia.coordination_inbox", { wait_s: 60 }))
      yield* untilParked(1)
      const revoked = sophia(["connection", "revoke", "b", "--db", db])
      assert.strictEqual(revoked.status, 0, revoked.stderr)
      const body = yield* within(poll, 15_000)
      assert.strictEqual(body.error?.code, "unauthenticated", JSON.stringify(body))
      assert.strictEqual(yield* parked, 0)
    }).pipe(Effect.provide(onFile(db, 1_000)))
  }, 60_000)

  it.live("a parked lease_acquire is found revoked too (its connection is held while it waits): unauthenticated, not its deadline", () => {
    const db = tempDb()
    return Effect.gen(function*() {
      const { caller: a } = yield* connect("a")
      const { caller: b } = yield* connect("b")
      assert.isString((yield* call(a, "sophia.lease_acquire", { resources: ["path:src/**"], reason: "refactor" })).lease_id)
      const waiting = yield* Effect.fork(call(b, "sophia.lease_acquire", { resources: ["path:src/a.ts"], reason: "fix", wait_s: 60 }))
      yield* untilParked(1)
      const revoked = sophia(["connection", "revoke", "b", "--db", db])
      assert.strictEqual(revoked.status, 0, revoked.stderr)
      const body = yield* within(waiting, 15_000)
      assert.strictEqual(body.error?.code, "unauthenticated", JSON.stringify(body))
      assert.strictEqual(yield* parked, 0)
    }).pipe(Effect.provide(onFile(db, 1_000)))
  }, 60_000)

  it.live("not yet found, a post after revoked_at wakes the poll, and its read refuses it: the post is never returned", () => {
    const db = tempDb()
    return Effect.gen(function*() {
      const { caller: a } = yield* connect("a")
      const { caller: b } = yield* connect("b")
      const poll = yield* Effect.fork(call(b, "sophia.coordination_inbox", { wait_s: 60 }))
      yield* untilParked(1)
      const revoked = sophia(["connection", "revoke", "b", "--db", db])
      assert.strictEqual(revoked.status, 0, revoked.stderr)
      const revokedAt = JSON.parse(revoked.stdout).revoked_at as string
      assert.isTrue(Option.isNone(yield* Fiber.poll(poll)), "this process has not looked yet")
      const post = yield* say(a, "c", "written after the revocation")
      assert.isTrue(post.created_at >= revokedAt)
      const body = yield* within(poll, 15_000)
      assert.strictEqual(body.error?.code, "unauthenticated", JSON.stringify(body))
      // the post stays unread for b: the refused read marked nothing
      assert.strictEqual(yield* Effect.flatMap(Coordination, (co) => co.unreadCount(b)), 1)
    }).pipe(Effect.provide(onFile(db, 600_000)))
  }, 60_000)
})
