/**
 * Per-connection caps and coalesced wake-ups (issue 28; docs/architecture.md, Limits): each cap refused at its
 * limit with `rate_limited` (`what`, `limit`, `retry_after_s`, `setting`, `hint`) and freed when the held work
 * ends; a post wakes each affected connection's polls once — the reads made on wake-ups do not grow with the
 * number of polls one connection has parked. Real app, real SQLite (and Postgres in the postgres project's
 * copy of the long-poll tests, test/postgres/PollRevocation.test.ts).
 */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Fiber, Layer, Option } from "effect"
import type { Caller } from "../src/domain/Auth.js"
import { SophiaTest } from "../src/layers/App.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { Approvals } from "../src/services/Approvals.js"
import { Coordination } from "../src/services/Coordination.js"
import { Wakeups } from "../src/services/Wakeups.js"
import { connect } from "./support/Fixtures.js"

const call = (caller: Caller, name: string, args: unknown) =>
  Effect.flatMap(Dispatcher, (d) => d.call(caller, name, args)).pipe(Effect.map((o) => o.body as any))
const say = (caller: Caller, channel: string, body: string) =>
  Effect.flatMap(Coordination, (c) => c.post(caller, { channel, kind: "status", body }))
const stats = Effect.map(Wakeups, (w) => w.stats())
/** Until `n` polls are parked and done with their first read (waiting for a wake-up). */
const untilParked = (n: number) =>
  Effect.gen(function*() {
    const wakeups = yield* Wakeups
    const ready = () => wakeups.parkedCount() === n && wakeups.stats().waiting === n
    for (let i = 0; i < 4_000 && !ready(); i++) yield* Effect.sleep("2 millis")
    assert.strictEqual(wakeups.parkedCount(), n, "parked")
    assert.strictEqual(wakeups.stats().waiting, n, "waiting")
  })
/** Let woken polls run and settle. */
const settle = Effect.gen(function*() {
  for (let i = 0; i < 20; i++) yield* Effect.sleep("5 millis")
})
const withConfig = (entries: ReadonlyArray<readonly [string, string]>) =>
  SophiaTest.pipe(Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(entries)))))
const ended = <A, E>(fibers: ReadonlyArray<Fiber.Fiber<A, E>>) =>
  Effect.map(Effect.forEach(fibers, Fiber.poll), (polls) => polls.filter(Option.isSome).length)

describe("caps on what one connection holds", () => {
  it.live("8 parked long polls per connection: the 9th is refused rate_limited, another connection is not, a place frees when a poll ends", () =>
    Effect.gen(function*() {
      const { caller: a } = yield* connect("a")
      const { caller: b } = yield* connect("b")
      const polls = yield* Effect.forEach(
        Array.from({ length: 8 }, (_, i) => i),
        (i) => Effect.fork(call(b, "sophia.coordination_inbox", { channel: `ch${i}`, cursor: "p0", wait_s: 30 }))
      )
      yield* untilParked(8)
      const refused = yield* call(b, "sophia.coordination_inbox", { wait_s: 30 })
      assert.strictEqual(refused.error?.code, "rate_limited", JSON.stringify(refused))
      assert.strictEqual(refused.error.limit, 8)
      assert.strictEqual(refused.error.setting, "SOPHIA_LONG_POLLS_PER_CONNECTION")
      assert.isAtLeast(refused.error.retry_after_s, 1)
      assert.isAtMost(refused.error.retry_after_s, 30)
      assert.include(refused.error.what, "long polls")
      assert.isString(refused.error.hint)
      // a read without wait_s is never capped; another connection has its own places
      assert.isUndefined((yield* call(b, "sophia.coordination_inbox", {})).error)
      const other = yield* Effect.fork(call(a, "sophia.coordination_inbox", { wait_s: 30 }))
      yield* untilParked(9)
      // a post ends b's poll on ch3: its place is free again
      yield* say(a, "ch3", "for the poll on ch3")
      const answered = yield* Fiber.join(polls[3])
      assert.deepStrictEqual(answered.posts.map((p: any) => p.body), ["for the poll on ch3"])
      const again = yield* Effect.fork(call(b, "sophia.coordination_inbox", { wait_s: 30 }))
      yield* untilParked(9)
      // an abandoned poll frees its place too
      yield* Fiber.interrupt(polls[0])
      const third = yield* Effect.fork(call(b, "sophia.coordination_inbox", { channel: "z", cursor: "p0", wait_s: 30 }))
      yield* untilParked(9)
      yield* Fiber.interruptAll([...polls, other, again, third])
      assert.strictEqual((yield* Wakeups).parkedCount(), 0)
    }).pipe(Effect.provide(SophiaTest)))

  it.live("lease_acquire with wait_s counts in the same long-poll cap: 4 inbox + 4 lease polls parked, the 9th of either is refused; a grant frees a place", () =>
    Effect.gen(function*() {
      const { caller: a } = yield* connect("a")
      const { caller: b } = yield* connect("b")
      const held = yield* call(a, "sophia.lease_acquire", { resources: ["slot:s0", "slot:s1", "slot:s2", "slot:s3"], reason: "held" })
      assert.isString(held.lease_id, JSON.stringify(held))
      const inbox = yield* Effect.forEach(
        Array.from({ length: 4 }, (_, i) => i),
        (i) => Effect.fork(call(b, "sophia.coordination_inbox", { channel: `ch${i}`, cursor: "p0", wait_s: 30 }))
      )
      const leases = yield* Effect.forEach(
        Array.from({ length: 4 }, (_, i) => i),
        (i) => Effect.fork(call(b, "sophia.lease_acquire", { resources: [`slot:s${i}`], reason: "next", wait_s: 30 }))
      )
      yield* untilParked(8)
      for (const ninth of [
        yield* call(b, "sophia.lease_acquire", { resources: ["slot:s0"], reason: "one too many", wait_s: 30 }),
        yield* call(b, "sophia.coordination_inbox", { wait_s: 30 })
      ]) {
        assert.strictEqual(ninth.error?.code, "rate_limited", JSON.stringify(ninth))
        assert.strictEqual(ninth.error.limit, 8)
        assert.strictEqual(ninth.error.setting, "SOPHIA_LONG_POLLS_PER_CONNECTION")
        assert.isAtLeast(ninth.error.retry_after_s, 1)
        assert.isAtMost(ninth.error.retry_after_s, 30)
        assert.include(ninth.error.what, "lease_acquire")
        assert.isString(ninth.error.hint)
      }
      // without wait_s it answers as always (refused by the holder, not by the cap)
      assert.strictEqual((yield* call(b, "sophia.lease_acquire", { resources: ["slot:s0"], reason: "now" })).error?.code, "lease_conflict")
      // the holder releases: the four lease polls are granted, their places free again
      assert.strictEqual((yield* call(a, "sophia.lease_release", { lease_id: held.lease_id })).status, "released")
      for (const l of leases) assert.isString((yield* Fiber.join(l)).lease_id)
      const again = yield* Effect.fork(call(b, "sophia.lease_acquire", { resources: ["slot:s0"], reason: "behind b", wait_s: 30 }))
      yield* untilParked(5)
      yield* Fiber.interruptAll([...inbox, again])
      assert.strictEqual((yield* Wakeups).parkedCount(), 0)
    }).pipe(Effect.provide(SophiaTest)))

  it.live("8 parked approval waits per connection; they end at the decision and free their places", () =>
    Effect.gen(function*() {
      const approvals = yield* Approvals
      const { caller: helper } = yield* connect("helper", "assistant")
      const refused = yield* call(helper, "sophia.add_document", { title: "t", body: "b" })
      const id = refused.error.approval_id
      const waits = yield* Effect.forEach(
        Array.from({ length: 8 }),
        () => Effect.fork(call(helper, "sophia.approval_status", { approval_id: id, wait_s: 30 }))
      )
      yield* untilParked(8)
      const ninth = yield* call(helper, "sophia.approval_status", { approval_id: id, wait_s: 30 })
      assert.strictEqual(ninth.error?.code, "rate_limited", JSON.stringify(ninth))
      assert.strictEqual(ninth.error.setting, "SOPHIA_APPROVAL_POLLS_PER_CONNECTION")
      assert.strictEqual(ninth.error.limit, 8)
      // without wait_s it answers as always
      assert.strictEqual((yield* call(helper, "sophia.approval_status", { approval_id: id })).status, "pending")
      const before = (yield* stats).wokenReads
      yield* approvals.decide(id, "approved")
      for (const w of waits) assert.strictEqual((yield* Fiber.join(w)).status, "approved")
      // one read on the wake-up for the eight waits of one connection on one approval
      assert.strictEqual((yield* stats).wokenReads - before, 1)
      assert.strictEqual((yield* Wakeups).parkedCount(), 0)
    }).pipe(Effect.provide(SophiaTest)))

  it.live("50 pending approvals per connection: the 51st is refused with a hint to wait for decisions; a decision frees a place", () =>
    Effect.gen(function*() {
      const approvals = yield* Approvals
      const { caller: helper } = yield* connect("helper", "assistant")
      const { caller: other } = yield* connect("other", "assistant")
      const ids: Array<string> = []
      for (let i = 0; i < 50; i++) {
        const r = yield* call(helper, "sophia.add_document", { title: `t${i}`, body: "b" })
        assert.strictEqual(r.error?.code, "approval_required", JSON.stringify(r))
        ids.push(r.error.approval_id)
      }
      const refused = yield* call(helper, "sophia.add_document", { title: "one too many", body: "b" })
      assert.strictEqual(refused.error?.code, "rate_limited", JSON.stringify(refused))
      assert.strictEqual(refused.error.what, "pending approvals")
      assert.strictEqual(refused.error.limit, 50)
      assert.strictEqual(refused.error.setting, "SOPHIA_PENDING_APPROVALS_PER_CONNECTION")
      assert.include(refused.error.hint, "decide")
      assert.isUndefined(refused.error.approval_id, "nothing was created")
      // the same call again binds to its open approval: not a new one, not refused
      const same = yield* call(helper, "sophia.add_document", { title: "t7", body: "b" })
      assert.strictEqual(same.error?.approval_id, ids[7])
      // another connection has its own 50
      assert.strictEqual((yield* call(other, "sophia.add_document", { title: "x", body: "b" })).error?.code, "approval_required")
      // the owner decides one: a place is free
      yield* approvals.decide(ids[0], "denied")
      const next = yield* call(helper, "sophia.add_document", { title: "one too many", body: "b" })
      assert.strictEqual(next.error?.code, "approval_required", JSON.stringify(next))
      assert.strictEqual((yield* call(helper, "sophia.add_document", { title: "and one more", body: "b" })).error?.code, "rate_limited")
    }).pipe(Effect.provide(SophiaTest)))
})

describe("wake-ups coalesced: reads per post do not grow with one connection's parked polls", () => {
  const many = withConfig([["SOPHIA_LONG_POLLS_PER_CONNECTION", "1000"]])

  it.live("200 unread polls of one connection: one read on the post, one poll gets the post, the others stay parked", () =>
    Effect.gen(function*() {
      const { caller: a } = yield* connect("a")
      const { caller: b } = yield* connect("b")
      for (const n of [1, 200]) {
        const polls = yield* Effect.forEach(Array.from({ length: n }), () => Effect.fork(call(b, "sophia.coordination_inbox", { wait_s: 30 })))
        yield* untilParked(n)
        const before = (yield* stats).wokenReads
        yield* say(a, "c", `post for ${n}`)
        for (let i = 0; i < 400 && (yield* ended(polls)) < 1; i++) yield* Effect.sleep("5 millis")
        yield* settle
        assert.strictEqual((yield* stats).wokenReads - before, 1, `${n} parked: one read on the wake-up`)
        assert.strictEqual(yield* ended(polls), 1, `${n} parked: one poll returned the post`)
        const done = (yield* Effect.forEach(polls, Fiber.poll)).flatMap((o) => (Option.isSome(o) ? [o.value] : []))
        const body = yield* done[0]
        assert.deepStrictEqual(body.posts.map((p: any) => p.body), [`post for ${n}`])
        assert.strictEqual((yield* Wakeups).parkedCount(), n - 1)
        yield* Fiber.interruptAll(polls)
      }
    }).pipe(Effect.provide(many)))

  it.live("100 peek polls of one connection: one read on the post, and every one of them returns it", () =>
    Effect.gen(function*() {
      const { caller: a } = yield* connect("a")
      const { caller: b } = yield* connect("b")
      const polls = yield* Effect.forEach(Array.from({ length: 100 }), () =>
        Effect.fork(call(b, "sophia.coordination_inbox", { peek: true, wait_s: 30 })))
      yield* untilParked(100)
      const before = (yield* stats).wokenReads
      yield* say(a, "c", "seen by all")
      for (const p of polls) assert.deepStrictEqual((yield* Fiber.join(p)).posts.map((x: any) => x.body), ["seen by all"])
      assert.strictEqual((yield* stats).wokenReads - before, 1)
    }).pipe(Effect.provide(many)))

  it.live("polls of several connections: one read per affected connection; a post they would not return reads nothing", () =>
    Effect.gen(function*() {
      const { caller: a } = yield* connect("a")
      const readers = yield* Effect.forEach(Array.from({ length: 10 }, (_, i) => i), (i) => connect(`r${i}`))
      const polls = yield* Effect.forEach(readers, ({ caller }) =>
        Effect.forEach(Array.from({ length: 5 }), () => Effect.fork(call(caller, "sophia.coordination_inbox", { channel: "c", unread_only: true, wait_s: 30 }))))
      yield* untilParked(50)
      let before = (yield* stats).wokenReads
      yield* say(a, "elsewhere", "no poll reads this channel")
      yield* settle
      assert.strictEqual((yield* stats).wokenReads - before, 0)
      before = (yield* stats).wokenReads
      yield* say(a, "c", "for everyone")
      for (let i = 0; i < 400 && (yield* ended(polls.flat())) < 10; i++) yield* Effect.sleep("5 millis")
      yield* settle
      assert.strictEqual((yield* stats).wokenReads - before, 10)
      assert.strictEqual(yield* ended(polls.flat()), 10, "one poll of each connection")
      yield* Fiber.interruptAll(polls.flat())
    }).pipe(Effect.provide(many)))

  it.live("a read that returned a full page leaves more behind: the next poll of the group reads at once", () =>
    Effect.gen(function*() {
      const { caller: a } = yield* connect("a")
      const { caller: b } = yield* connect("b")
      const polls = yield* Effect.forEach(Array.from({ length: 3 }), () => Effect.fork(call(b, "sophia.coordination_inbox", { limit: 2, wait_s: 30 })))
      yield* untilParked(3)
      yield* Effect.flatMap(Coordination, (c) =>
        Effect.forEach(["one", "two", "three"], (body) => c.post(a, { channel: "c", kind: "status", body }), { discard: true }))
      const bodies = new Set<string>()
      for (let i = 0; i < 400 && bodies.size < 3; i++) {
        yield* Effect.sleep("5 millis")
        for (const p of polls) {
          const o = yield* Fiber.poll(p)
          if (Option.isSome(o)) for (const x of (yield* o.value).posts) bodies.add(x.body)
        }
      }
      assert.deepStrictEqual([...bodies].sort(), ["one", "three", "two"])
      yield* Fiber.interruptAll(polls)
    }).pipe(Effect.provide(many)))
})
