import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Option, TestClock } from "effect"
import type { Caller } from "../src/domain/Auth.js"
import type { InboxInput, PostInput } from "../src/domain/Coordination.js"
import { SophiaTest } from "../src/layers/App.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { Auth } from "../src/services/Auth.js"
import { Coordination } from "../src/services/Coordination.js"
import { Wakeups } from "../src/services/Wakeups.js"
import { connect } from "./support/Fixtures.js"

const post = (caller: Caller, input: PostInput) => Effect.flatMap(Coordination, (c) => c.post(caller, input))
const say = (caller: Caller, channel: string, body: string) => post(caller, { channel, kind: "status", body })
const inbox = (caller: Caller, input: InboxInput = {}) => Effect.flatMap(Coordination, (c) => c.inbox(caller, input))
const call = (caller: Caller, name: string, args: unknown) =>
  Effect.flatMap(Dispatcher, (d) => d.call(caller, name, args)).pipe(Effect.map((o) => o.body as any))
const unread = (caller: Caller) => Effect.flatMap(Coordination, (c) => c.unreadCount(caller))
/** Mint a connection with its backlog (the whole history unread), as `connection create --backlog` does. */
const connectWithBacklog = (name: string) =>
  Effect.gen(function*() {
    const auth = yield* Auth
    const minted = yield* auth.createConnection({ name, profile: "full", backlog: true })
    return yield* Effect.orDie(auth.authenticate(minted.bearer))
  })
const parked = Effect.map(Wakeups, (w) => w.parkedCount())
/** Let forked fibers run until `n` long polls are parked. */
const untilParked = (n: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < 10_000 && (yield* parked) < n; i++) yield* Effect.yieldNow()
    assert.strictEqual(yield* parked, n, "the long poll parked")
  })

describe("Inbox: the conversation view", () => {
  it.effect("coordination_inbox({channel}) is the whole conversation: own and read posts, flagged mine/unread, in seq order", () =>
    Effect.gen(function*() {
      const { caller: lead } = yield* connect("lead")
      const { caller: worker } = yield* connect("worker")
      yield* post(lead, { channel: "arc:foo", kind: "brief", body: "do foo", to: "worker" })
      yield* say(worker, "arc:foo", "on it")
      yield* say(lead, "arc:foo", "thanks")
      // the worker reads the conversation: its own post is there, flagged mine, never unread
      const first = yield* inbox(worker, { channel: "arc:foo" })
      assert.deepStrictEqual(first.posts.map((p) => p.body), ["do foo", "on it", "thanks"])
      assert.deepStrictEqual(first.posts.map((p) => p.channel_seq), [1, 2, 3])
      assert.deepStrictEqual(first.posts.map((p) => p.mine), [false, true, false])
      assert.deepStrictEqual(first.posts.map((p) => p.unread), [true, false, true])
      assert.strictEqual(first.unread_count, 0, "the returned unread posts were marked read")
      // after its context was compacted it re-reads: the same conversation, now all read (not [])
      const again = yield* inbox(worker, { channel: "arc:foo" })
      assert.deepStrictEqual(again.posts.map((p) => p.body), ["do foo", "on it", "thanks"])
      assert.deepStrictEqual(again.posts.map((p) => p.unread), [false, false, false])
      // the coordinator can confirm that its targeted brief carries the recipient's canonical id
      const lead1 = yield* inbox(lead, { channel: "arc:foo", peek: true })
      assert.deepStrictEqual(lead1.posts.map((p) => p.mine), [true, false, true])
      assert.strictEqual(lead1.posts[0].to, "worker")
      assert.strictEqual(lead1.posts[0].to_connection_id, worker.connectionId)
      assert.deepStrictEqual(lead1.posts.map((p) => p.unread), [false, true, false])
      assert.strictEqual(lead1.unread_count, 1, "peek marks nothing")
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("limit = the newest posts, in seq order; before_seq pages back; cursor pages forward", () =>
    Effect.gen(function*() {
      const { caller: a } = yield* connect("a")
      const { caller: b } = yield* connect("b")
      for (let i = 1; i <= 5; i++) yield* say(i % 2 ? a : b, "c", `m${i}`)
      const newest = yield* inbox(b, { channel: "c", limit: 2, peek: true })
      assert.deepStrictEqual(newest.posts.map((p) => p.body), ["m4", "m5"])
      const older = yield* inbox(b, { channel: "c", limit: 2, before_seq: 4, peek: true })
      assert.deepStrictEqual(older.posts.map((p) => p.body), ["m2", "m3"])
      yield* say(a, "c", "m6")
      const forward = yield* inbox(b, { channel: "c", cursor: newest.cursor!, peek: true })
      assert.deepStrictEqual(forward.posts.map((p) => p.body), ["m6"])
      const refused = yield* call(b, "sophia.coordination_inbox", { before_seq: 3 })
      assert.strictEqual(refused.error.code, "validation_error")
      // the old channel filter is still there, asked for by name
      const unreadOnly = yield* inbox(b, { channel: "c", unread_only: true, peek: true })
      assert.deepStrictEqual(unreadOnly.posts.map((p) => p.body), ["m1", "m3", "m5", "m6"])
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("without channel the inbox is unchanged: unread posts of others, oldest first, marked read once", () =>
    Effect.gen(function*() {
      const { caller: a } = yield* connect("a")
      const { caller: b } = yield* connect("b")
      yield* say(a, "x", "one")
      yield* say(b, "x", "own")
      yield* say(a, "y", "two")
      const first = yield* inbox(b)
      assert.deepStrictEqual(first.posts.map((p) => p.body), ["one", "two"])
      assert.isTrue(first.posts.every((p) => p.unread && !p.mine))
      assert.deepStrictEqual((yield* inbox(b)).posts, [])
      // a conversation read consumes the unread view too (same read state)
      yield* say(a, "x", "three")
      yield* inbox(b, { channel: "x" })
      assert.deepStrictEqual((yield* inbox(b)).posts, [])
    }).pipe(Effect.provide(SophiaTest)))
})

describe("Inbox: wait_s long poll (TestClock)", () => {
  it.effect("wakes on another connection's post, without the clock moving; its own posts and heartbeats do not wake it", () =>
    Effect.gen(function*() {
      const { caller: a } = yield* connect("a")
      const { caller: b } = yield* connect("b")
      const poll = yield* Effect.fork(inbox(b, { wait_s: 30 }))
      yield* untilParked(1)
      yield* say(b, "c", "my own")
      yield* post(a, { channel: "beacon", kind: "heartbeat", body: "tick" })
      for (let i = 0; i < 200; i++) yield* Effect.yieldNow()
      assert.isTrue(Option.isNone(yield* Fiber.poll(poll)), "still waiting")
      yield* say(a, "c", "for you")
      const result = yield* Fiber.join(poll)
      assert.deepStrictEqual(result.posts.map((p) => p.body), ["for you"])
      assert.strictEqual(yield* TestClock.currentTimeMillis, 0, "woken by the post, not by time")
      assert.strictEqual(yield* parked, 0)
      assert.strictEqual(result.unread_count, 0, "computed at return: the returned post is read")
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("a channel long poll waits for a post after its cursor in that channel only", () =>
    Effect.gen(function*() {
      const { caller: a } = yield* connect("a")
      const { caller: b } = yield* connect("b")
      yield* say(a, "arc:q", "question")
      const seen = yield* inbox(b, { channel: "arc:q" })
      const poll = yield* Effect.fork(inbox(b, { channel: "arc:q", cursor: seen.cursor!, wait_s: 60 }))
      yield* untilParked(1)
      yield* say(a, "elsewhere", "not this channel")
      for (let i = 0; i < 200; i++) yield* Effect.yieldNow()
      assert.isTrue(Option.isNone(yield* Fiber.poll(poll)))
      yield* say(a, "arc:q", "answer")
      assert.deepStrictEqual((yield* Fiber.join(poll)).posts.map((p) => p.body), ["answer"])
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("times out on silence at wait_s, not before, and returns the (empty) page then", () =>
    Effect.gen(function*() {
      yield* connect("a")
      const { caller: b } = yield* connect("b")
      const poll = yield* Effect.fork(inbox(b, { wait_s: 5 }))
      yield* untilParked(1)
      yield* TestClock.adjust("4900 millis")
      assert.isTrue(Option.isNone(yield* Fiber.poll(poll)), "not before wait_s")
      yield* TestClock.adjust("100 millis")
      const result = yield* Fiber.join(poll)
      assert.deepStrictEqual(result.posts, [])
      assert.strictEqual(yield* parked, 0)
      // wait_s above 60 is refused
      const refused = yield* call(b, "sophia.coordination_inbox", { wait_s: 61 })
      assert.strictEqual(refused.error.code, "validation_error")
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("returns at once when there is something to return", () =>
    Effect.gen(function*() {
      const { caller: a } = yield* connect("a")
      const { caller: b } = yield* connect("b")
      yield* say(a, "c", "waiting already")
      const result = yield* inbox(b, { wait_s: 60 })
      assert.deepStrictEqual(result.posts.map((p) => p.body), ["waiting already"])
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("a long poll abandoned (interrupted) leaves nothing parked or running", () =>
    Effect.gen(function*() {
      const { caller: a } = yield* connect("a")
      const { caller: b } = yield* connect("b")
      const polls = yield* Effect.forEach([1, 2, 3], () => Effect.fork(inbox(b, { wait_s: 60 })))
      yield* untilParked(3)
      yield* Fiber.interruptAll(polls)
      assert.strictEqual(yield* parked, 0)
      for (const p of polls) assert.isTrue(Option.isSome(yield* Fiber.poll(p)))
      // the next post reaches nobody and the next read sees it
      yield* say(a, "c", "later")
      assert.deepStrictEqual((yield* inbox(b)).posts.map((p) => p.body), ["later"])
    }).pipe(Effect.provide(SophiaTest)))
})

describe("Inbox: wait_s in real time", () => {
  it.live("a parked long poll returns promptly after a post from another connection", () =>
    Effect.gen(function*() {
      const { caller: a } = yield* connect("a")
      const { caller: b } = yield* connect("b")
      const started = Date.now()
      const poll = yield* Effect.fork(call(b, "sophia.coordination_inbox", { wait_s: 20 }))
      while ((yield* parked) < 1) yield* Effect.sleep("5 millis")
      yield* Effect.sleep("200 millis")
      const posted = Date.now()
      yield* say(a, "c", "now")
      const body = yield* Fiber.join(poll)
      const woke = Date.now() - posted
      assert.deepStrictEqual(body.posts.map((p: any) => p.body), ["now"])
      assert.strictEqual(body._inbox_unread, 0, "the envelope is computed at return")
      // the contract is 100 ms; the bound here is generous for a loaded machine
      assert.isBelow(woke, 2_000, `woke ${woke} ms after the post`)
      assert.isBelow(Date.now() - started, 15_000)
    }).pipe(Effect.provide(SophiaTest)))
})

describe("Inbox: a new connection starts caught up", () => {
  /** A history: posts in two open channels, a heartbeat, and an arc archived by its closeout. */
  const history = (a: Caller) =>
    Effect.gen(function*() {
      yield* say(a, "x", "old one")
      yield* say(a, "y", "old two")
      yield* post(a, { channel: "beacon", kind: "heartbeat", body: "tick" })
      yield* say(a, "arc:done", "old work")
      yield* post(a, { channel: "arc:done", kind: "closeout", body: "closed", closeout: { review_requested: false } })
    })

  it.effect("its unread is 0 and its inbox empty; a post targeted at it counts and is delivered, as does any later post", () =>
    Effect.gen(function*() {
      const { caller: a } = yield* connect("a")
      const { caller: veteran } = yield* connect("veteran")
      yield* history(a)
      const { caller: fresh } = yield* connect("fresh")
      assert.strictEqual(yield* unread(fresh), 0)
      const call0 = yield* call(fresh, "sophia.orient", {})
      assert.strictEqual(call0._inbox_unread, 0)
      for (const view of [{}, { include_heartbeats: true }, { include_archived: true }, { kinds: ["status" as const] }]) {
        assert.deepStrictEqual((yield* inbox(fresh, { ...view, peek: true })).posts, [], JSON.stringify(view))
      }
      // the conversation still shows the history, read
      const conversation = yield* inbox(fresh, { channel: "x" })
      assert.deepStrictEqual(conversation.posts.map((p) => [p.body, p.unread]), [["old one", false]])
      assert.deepStrictEqual(conversation.channels.map((c) => c.unread), [0, 0, 0])
      assert.strictEqual(yield* unread(fresh), 0, "reading old posts counts nothing twice")
      // the history is as it was for a connection that existed before
      assert.strictEqual(yield* unread(veteran), 2)
      // a post targeted at it counts and is delivered; so does a later post to everyone
      yield* post(a, { channel: "x", kind: "question", body: "for you", to: "fresh" })
      yield* say(a, "y", "to all")
      assert.strictEqual(yield* unread(fresh), 2)
      const got = yield* call(fresh, "sophia.coordination_inbox", {})
      assert.deepStrictEqual(got.posts.map((p: any) => p.body), ["for you", "to all"])
      assert.strictEqual(got.posts[0].to_connection_id, fresh.connectionId)
      assert.strictEqual(got._inbox_unread, 0)
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("with backlog: true the whole history is unread, as before", () =>
    Effect.gen(function*() {
      const { caller: a } = yield* connect("a")
      yield* history(a)
      const old = yield* connectWithBacklog("archivist")
      assert.strictEqual(yield* unread(old), 2)
      assert.deepStrictEqual((yield* inbox(old)).posts.map((p) => p.body), ["old one", "old two"])
      const archived = yield* inbox(old, { include_archived: true, include_heartbeats: true, peek: true })
      assert.deepStrictEqual(archived.posts.map((p) => p.body), ["tick", "old work", "closed"])
      assert.strictEqual(yield* unread(old), 0)
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("an archived channel re-opened after it started: only the posts after its start are unread", () =>
    Effect.gen(function*() {
      const { caller: a } = yield* connect("a")
      yield* history(a)
      const { caller: fresh } = yield* connect("fresh")
      const reopened = yield* say(a, "arc:done", "one more thing")
      assert.isFalse(reopened.archived)
      assert.strictEqual(yield* unread(fresh), 1)
      const channel = (yield* inbox(fresh, { peek: true })).channels.find((c) => c.channel === "arc:done")
      assert.strictEqual(channel?.unread, 1)
      assert.deepStrictEqual((yield* inbox(fresh)).posts.map((p) => p.body), ["one more thing"])
      // archived again, and re-opened again: still exact
      yield* post(a, { channel: "arc:done", kind: "closeout", body: "closed again", closeout: { review_requested: false } })
      assert.strictEqual(yield* unread(fresh), 0)
      yield* say(a, "arc:done", "and again")
      assert.strictEqual(yield* unread(fresh), 2, "the second closeout and the new post")
      assert.deepStrictEqual((yield* inbox(fresh)).posts.map((p) => p.body), ["closed again", "and again"])
      assert.strictEqual(yield* unread(fresh), 0)
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("a connection of another user starts caught up on its own user's history only", () =>
    Effect.gen(function*() {
      const { caller: a } = yield* connect("a")
      yield* history(a)
      const { caller: other } = yield* connect("other", "full", "someone-else")
      assert.strictEqual(yield* unread(other), 0)
      const { caller: b } = yield* connect("b", "full", "someone-else")
      yield* say(b, "z", "for the other user")
      assert.strictEqual(yield* unread(other), 1)
      assert.strictEqual(yield* unread(a), 0)
    }).pipe(Effect.provide(SophiaTest)))
})

describe("Inbox: to_me reads the posts addressed to the caller", () => {
  it.effect("only posts targeted at the caller; only those are marked read; with a channel, that channel's", () =>
    Effect.gen(function*() {
      const { caller: lead } = yield* connect("lead")
      const { caller: worker } = yield* connect("worker")
      const { caller: other } = yield* connect("other")
      yield* post(lead, { channel: "arc:a", kind: "brief", body: "a for worker", to: "worker" })
      yield* say(lead, "arc:a", "a for all")
      yield* post(lead, { channel: "arc:b", kind: "question", body: "b for other", to: "other" })
      yield* post(lead, { channel: "arc:b", kind: "question", body: "b for worker", to: worker.connectionId })
      yield* post(worker, { channel: "arc:b", kind: "answer", body: "worker to itself", to: "worker" })
      const mine = yield* call(worker, "sophia.coordination_inbox", { to_me: true })
      assert.deepStrictEqual(mine.posts.map((p: any) => p.body), ["a for worker", "b for worker"])
      assert.isTrue(mine.posts.every((p: any) => p.to_connection_id === worker.connectionId))
      assert.strictEqual(mine.unread_count, 2, "the posts not addressed to it stay unread")
      assert.deepStrictEqual((yield* inbox(worker)).posts.map((p) => p.body), ["a for all", "b for other"])
      // with a channel: that channel's posts addressed to it, read ones included (the conversation view)
      const inB = yield* inbox(worker, { channel: "arc:b", to_me: true })
      assert.deepStrictEqual(inB.posts.map((p) => [p.body, p.unread, p.mine]), [["b for worker", false, false], ["worker to itself", false, true]])
      // nothing addressed to the lead
      assert.deepStrictEqual((yield* inbox(lead, { to_me: true })).posts, [])
      assert.deepStrictEqual((yield* inbox(other, { to_me: true, peek: true })).posts.map((p) => p.body), ["b for other"])
      assert.strictEqual(yield* unread(other), 5, "peek marks nothing")
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("a to_me long poll wakes for a post addressed to the caller, not for one to everyone", () =>
    Effect.gen(function*() {
      const { caller: a } = yield* connect("a")
      const { caller: b } = yield* connect("b")
      const poll = yield* Effect.fork(inbox(b, { to_me: true, wait_s: 30 }))
      yield* untilParked(1)
      yield* say(a, "c", "to everyone")
      for (let i = 0; i < 200; i++) yield* Effect.yieldNow()
      assert.isTrue(Option.isNone(yield* Fiber.poll(poll)), "still waiting")
      yield* post(a, { channel: "c", kind: "question", body: "to b", to: "b" })
      assert.deepStrictEqual((yield* Fiber.join(poll)).posts.map((p) => p.body), ["to b"])
      assert.strictEqual(yield* TestClock.currentTimeMillis, 0)
      assert.strictEqual(yield* unread(b), 1)
    }).pipe(Effect.provide(SophiaTest)))
})
