import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, TestClock } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { Caller } from "../src/domain/Auth.js"
import { SophiaLive, SophiaTest } from "../src/layers/App.js"
import { SweepLive } from "../src/layers/Sweep.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { Auth } from "../src/services/Auth.js"
import { Waits } from "../src/services/Waits.js"
import { connect } from "./support/Fixtures.js"

/** Call a tool through the one dispatch path and return its body (envelope included). */
const call = (caller: Caller, tool: string, args: unknown = {}) =>
  Effect.flatMap(Dispatcher, (d) => d.call(caller, tool, args)).pipe(Effect.map((o) => o.body as any))

const postTo = (caller: Caller, channel: string, kind = "status", body = "hello") =>
  call(caller, "sophia.coordination_post", { channel, kind, body })

const declare = (caller: Caller, args: Record<string, unknown>) => call(caller, "sophia.declare_wait", args)

const waitStatus = (id: string) =>
  Effect.flatMap(Effect.promise(() => import("@effect/sql")), ({ SqlClient }) =>
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql<{ status: string; resolved_at: string | null; resolved_by: string | null; how: string | null }>`
        SELECT status, resolved_at, resolved_by, how FROM waits WHERE id = ${id}`.pipe(Effect.map((r) => r[0]), Effect.orDie)))

const fleet = Effect.gen(function*() {
  const { caller: a } = yield* connect("alice", "full")
  const { caller: b } = yield* connect("bob", "full")
  const { caller: c } = yield* connect("carol", "full")
  return { a, b, c }
})

describe("Waits", () => {
  it.effect("bounds: a default when absent, clamped to the ceiling with a warning, any positive seconds", () =>
    Effect.gen(function*() {
      const { a, b } = yield* fleet
      const pred = { type: "post_exists", channel: "arc:x" }
      const byDefault = yield* declare(a, { on: "bob", predicate: pred, reason: "need the spec" })
      assert.strictEqual(byDefault.expires_at, new Date(600_000).toISOString())
      assert.isUndefined(byDefault.warning)
      const clamped = yield* declare(a, { on: b.connectionId, predicate: pred, reason: "long", timeout_s: 99_999 })
      assert.strictEqual(clamped.expires_at, new Date(3_600_000).toISOString())
      assert.include(clamped.warning, "clamped")
      const short = yield* declare(a, { on: b.connectionShort, predicate: pred, reason: "short", timeout_s: 0.25 })
      assert.strictEqual(short.expires_at, new Date(250).toISOString())
      for (const bad of [0, -5, "ten"]) {
        const refused = yield* declare(a, { on: "bob", predicate: pred, reason: "x", timeout_s: bad })
        assert.strictEqual(refused.error?.code, "validation_error", String(bad))
      }
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("a wait is a post the whole fleet sees; _blocking rides every response while it is open", () =>
    Effect.gen(function*() {
      const { a, b, c } = yield* fleet
      const receipt = yield* declare(a, {
        on: "bob",
        predicate: { type: "post_exists", channel: "arc:spec", kind: "answer" },
        reason: "need bob's answer"
      })
      assert.match(receipt.wait_id, /^wait-/)
      const inbox = yield* call(c, "sophia.coordination_inbox", { channel: "waits" })
      const post = inbox.posts.find((p: any) => p.post_id === receipt.post_id)
      assert.isDefined(post, "carol sees the wait post")
      assert.strictEqual(post.connection_id, a.connectionId)
      assert.strictEqual(post.to_connection_id, b.connectionId)
      assert.strictEqual(post.payload.wait.wait_id, receipt.wait_id)
      const orient = yield* call(a, "sophia.orient")
      assert.strictEqual(orient._blocking.length, 1)
      assert.deepStrictEqual(orient._blocking[0].on, {
        connection_id: b.connectionId,
        connection_short: b.connectionShort,
        agent_name: "bob"
      })
      assert.strictEqual(orient._blocking[0].wait_id, receipt.wait_id)
      assert.strictEqual(orient._blocking[0].expires_at, receipt.expires_at)
      // the name is joined live
      yield* Effect.flatMap(Auth, (auth) => auth.rename("bob", "robert"))
      assert.strictEqual((yield* call(a, "sophia.orient"))._blocking[0].on.agent_name, "robert")
      // others are not blocked
      assert.isUndefined((yield* call(b, "sophia.orient"))._blocking)
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("satisfied by a later post of the right author and kind, naming who and which post; delivered once", () =>
    Effect.gen(function*() {
      const { a, b, c } = yield* fleet
      const w = yield* declare(a, {
        on: "bob",
        predicate: { type: "post_exists", channel: "arc:spec", kind: "answer" },
        reason: "need bob's answer"
      })
      // wrong author, wrong kind: nothing resolves
      yield* postTo(c, "arc:spec", "answer")
      yield* postTo(b, "arc:spec", "question")
      yield* postTo(b, "arc:other", "answer")
      assert.strictEqual((yield* waitStatus(w.wait_id)).status, "open")
      const still = yield* call(a, "sophia.orient")
      assert.strictEqual(still._blocking.length, 1)
      assert.isUndefined(still._wait_resolved)
      // the right one
      const answer = yield* postTo(b, "arc:spec", "answer", "here it is")
      const status = yield* waitStatus(w.wait_id)
      assert.strictEqual(status.status, "satisfied", "resolved in the post's own transaction")
      assert.strictEqual(status.resolved_by, b.connectionId)
      const first = yield* call(a, "sophia.orient")
      assert.isUndefined(first._blocking)
      assert.strictEqual(first._wait_resolved.length, 1)
      const signal = first._wait_resolved[0]
      assert.strictEqual(signal.wait_id, w.wait_id)
      assert.strictEqual(signal.resolution, "satisfied")
      assert.strictEqual(signal.resolved_by, b.connectionId)
      assert.include(signal.how, answer.post_id)
      const second = yield* call(a, "sophia.orient")
      assert.isUndefined(second._wait_resolved, "delivered exactly once")
      // a call from inside execute_code never consumes a signal meant for the agent's own response
      const w2 = yield* declare(a, { on: "bob", predicate: { type: "post_exists", channel: "arc:spec2" }, reason: "r" })
      yield* postTo(b, "arc:spec2")
      const inner = yield* Effect.flatMap(Dispatcher, (d) => d.call(a, "sophia.orient", {}, { viaSandbox: true }))
      assert.isUndefined(inner.body._wait_resolved)
      assert.strictEqual(typeof inner.body._inbox_unread, "number")
      const outer = yield* call(a, "sophia.orient")
      assert.strictEqual(outer._wait_resolved[0].wait_id, w2.wait_id)
      // nobody else receives it
      assert.isUndefined((yield* call(b, "sophia.orient"))._wait_resolved)
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("seq_reached, and a predicate that already holds at declaration resolves at once", () =>
    Effect.gen(function*() {
      const { a, b } = yield* fleet
      yield* postTo(b, "branch:main")
      yield* postTo(b, "branch:main")
      const done = yield* declare(a, { on: "bob", predicate: { type: "seq_reached", channel: "branch:main", seq: 2 }, reason: "r" })
      assert.strictEqual(done.resolution, "satisfied")
      const pending = yield* declare(a, { on: "bob", predicate: { type: "seq_reached", channel: "branch:main", seq: 4 }, reason: "r" })
      assert.isUndefined(pending.resolution)
      yield* postTo(a, "branch:main")
      assert.strictEqual((yield* waitStatus(pending.wait_id)).status, "open")
      yield* postTo(b, "branch:main")
      const s = yield* waitStatus(pending.wait_id)
      assert.strictEqual(s.status, "satisfied")
      assert.strictEqual(s.resolved_by, b.connectionId, "the resolver is the author of the post that reached the seq")
      // post_exists with an explicit after_seq counts posts already there
      const earlier = yield* declare(a, {
        on: "bob",
        predicate: { type: "post_exists", channel: "branch:main", after_seq: 0 },
        reason: "r"
      })
      assert.strictEqual(earlier.resolution, "satisfied")
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("unverifiable when the awaited connection is revoked — then, not at the deadline", () =>
    Effect.gen(function*() {
      const { a } = yield* fleet
      const w = yield* declare(a, { on: "bob", predicate: { type: "post_exists", channel: "arc:z" }, reason: "r" })
      yield* Effect.flatMap(Auth, (auth) => auth.revoke("bob"))
      const s = yield* waitStatus(w.wait_id)
      assert.strictEqual(s.status, "unverifiable")
      assert.include(s.how, "revoked")
      const next = yield* call(a, "sophia.orient")
      assert.strictEqual(next._wait_resolved[0].resolution, "unverifiable")
      assert.isNull(next._wait_resolved[0].resolved_by)
      assert.isUndefined(next._blocking)
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("refuses a wait that would close a cycle, naming it; self-waits too", () =>
    Effect.gen(function*() {
      const { a, b, c } = yield* fleet
      const pred = { type: "post_exists", channel: "arc:c" }
      yield* declare(a, { on: "bob", predicate: pred, reason: "a→b" })
      yield* declare(b, { on: "carol", predicate: pred, reason: "b→c" })
      const refused = yield* declare(c, { on: "alice", predicate: pred, reason: "c→a" })
      assert.strictEqual(refused.error.code, "wait_cycle")
      assert.deepStrictEqual(
        refused.error.cycle.map((r: any) => r.agent_name),
        ["carol", "alice", "bob", "carol"]
      )
      const self = yield* declare(a, { on: "alice", predicate: pred, reason: "me" })
      assert.strictEqual(self.error.code, "wait_cycle")
      // nothing was written for the refused waits
      const graph = yield* call(a, "sophia.wait_graph")
      assert.strictEqual(graph.edges.length, 2)
      assert.deepStrictEqual(graph.cycles, [])
      const inbox = yield* call(c, "sophia.coordination_inbox", { channel: "waits", peek: true, unread_only: false })
      const authors = inbox.posts.map((p: any) => p.connection_id)
      assert.deepStrictEqual(authors.filter((x: string) => x === c.connectionId), [], "the refused wait wrote no post")
      assert.strictEqual(authors.length, 2)
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("wait_graph: edges with live names, and orphaned is complete (no not_computed half)", () =>
    Effect.gen(function*() {
      const { a, b } = yield* fleet
      yield* declare(a, { on: "bob", predicate: { type: "post_exists", channel: "arc:g" }, reason: "r" })
      yield* call(b, "sophia.beacon", {})
      const graph = yield* call(a, "sophia.wait_graph")
      assert.strictEqual(graph.edges.length, 1)
      assert.strictEqual(graph.edges[0].waiter.agent_name, "alice")
      assert.strictEqual(graph.edges[0].on.agent_name, "bob")
      // wave 2: the claims half comes from the ledger, so nothing is left "not computed"
      assert.notProperty(graph.orphaned, "not_computed")
      assert.deepStrictEqual(graph.orphaned.work, [])
      // bob stays silent past the threshold: orphaned
      yield* TestClock.adjust("16 minutes")
      const later = yield* call(a, "sophia.wait_graph")
      assert.deepStrictEqual(later.orphaned.waits.map((w: any) => w.why), ["silent"])
      const compact = yield* call(a, "sophia.wait_graph", { compact: true })
      assert.deepStrictEqual(Object.keys(compact.edges[0]).sort(), ["expires_at", "on", "wait_id", "waiter"])
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("cancel: only the waiter, only while open; a cancelled wait sends no signal", () =>
    Effect.gen(function*() {
      const { a, b } = yield* fleet
      const w = yield* declare(a, { on: "bob", predicate: { type: "post_exists", channel: "arc:k" }, reason: "r" })
      const notYours = yield* call(b, "sophia.cancel_wait", { wait_id: w.wait_id })
      assert.strictEqual(notYours.error.code, "validation_error")
      const ok = yield* call(a, "sophia.cancel_wait", { wait_id: w.wait_id })
      assert.strictEqual(ok.status, "cancelled")
      assert.isUndefined(ok._blocking)
      assert.isUndefined(ok._wait_resolved)
      const again = yield* call(a, "sophia.cancel_wait", { wait_id: w.wait_id })
      assert.strictEqual(again.error.code, "invalid_transition")
      const missing = yield* call(a, "sophia.cancel_wait", { wait_id: "wait-nope" })
      assert.strictEqual(missing.error.code, "not_found")
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("flags, countOpen, openCountsByWaiter: the caller's open and undelivered waits, the user's open ones in all and per waiter", () =>
    Effect.gen(function*() {
      const waits = yield* Waits
      const { a, b, c } = yield* fleet
      const { caller: mallory } = yield* connect("mallory", "full", "eve")
      assert.deepStrictEqual(yield* waits.flags(a), { open: false, undelivered: false })
      assert.strictEqual(yield* waits.countOpen(a.userId), 0)
      assert.deepStrictEqual([...(yield* waits.openCountsByWaiter(a.userId))], [])
      const w1 = yield* declare(a, { on: "bob", predicate: { type: "post_exists", channel: "arc:f1" }, reason: "r" })
      yield* declare(a, { on: "carol", predicate: { type: "post_exists", channel: "arc:f2" }, reason: "r" })
      yield* declare(c, { on: "bob", predicate: { type: "post_exists", channel: "arc:f3" }, reason: "r" })
      assert.deepStrictEqual(yield* waits.flags(a), { open: true, undelivered: false })
      assert.deepStrictEqual(yield* waits.flags(b), { open: false, undelivered: false })
      assert.strictEqual(yield* waits.countOpen(a.userId), 3)
      assert.deepStrictEqual(
        new Map(yield* waits.openCountsByWaiter(a.userId)),
        new Map([[a.connectionId, 2], [c.connectionId, 1]])
      )
      // another user's count is its own
      assert.strictEqual(yield* waits.countOpen(mallory.userId), 0)
      // bob answers a's first wait: resolved, not yet delivered; one open wait left
      yield* postTo(b, "arc:f1")
      assert.strictEqual((yield* waitStatus(w1.wait_id)).status, "satisfied")
      assert.deepStrictEqual(yield* waits.flags(a), { open: true, undelivered: true })
      assert.strictEqual(yield* waits.countOpen(a.userId), 2)
      assert.deepStrictEqual(
        new Map(yield* waits.openCountsByWaiter(a.userId)),
        new Map([[a.connectionId, 1], [c.connectionId, 1]])
      )
      // the flags only read: delivery is the response's (orient's envelope)
      assert.deepStrictEqual(yield* waits.flags(a), { open: true, undelivered: true })
      yield* call(a, "sophia.orient")
      assert.deepStrictEqual(yield* waits.flags(a), { open: true, undelivered: false })
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("cross-user isolation: no waiting on, seeing or satisfying another user's connections", () =>
    Effect.gen(function*() {
      const { a } = yield* fleet
      const { caller: mallory } = yield* connect("mallory", "full", "eve")
      const refused = yield* declare(mallory, { on: a.connectionId, predicate: { type: "post_exists", channel: "arc:x" }, reason: "r" })
      assert.strictEqual(refused.error.code, "unknown_recipient")
      const { caller: eve2 } = yield* connect("eve-2", "full", "eve")
      const w = yield* declare(mallory, { on: "eve-2", predicate: { type: "seq_reached", channel: "arc:x", seq: 1 }, reason: "r" })
      // alice's post in a channel of the same name does not satisfy eve's wait
      yield* postTo(a, "arc:x")
      assert.strictEqual((yield* waitStatus(w.wait_id)).status, "open")
      assert.deepStrictEqual((yield* call(a, "sophia.wait_graph")).edges, [])
      yield* postTo(eve2, "arc:x")
      assert.strictEqual((yield* waitStatus(w.wait_id)).status, "satisfied")
    }).pipe(Effect.provide(SophiaTest)))

  it.scoped("the sweep: unsatisfied no earlier than the deadline and no later than deadline + one interval", () =>
    Effect.gen(function*() {
      const { a } = yield* fleet
      const w = yield* declare(a, { on: "bob", predicate: { type: "post_exists", channel: "arc:s" }, reason: "r", timeout_s: 12 })
      // the sweep's statements take real time on a real server (Postgres): give it some, in real time
      const realPause = Effect.promise(() => new Promise((r) => setTimeout(r, 100)))
      const settle = Effect.zipRight(Effect.repeatN(Effect.yieldNow(), 20), Effect.repeatN(realPause, 4))
      yield* TestClock.adjust("11999 millis")
      yield* settle
      assert.strictEqual((yield* waitStatus(w.wait_id)).status, "open", "not before the deadline")
      yield* TestClock.adjust("5001 millis") // = deadline + one interval (5 s)
      yield* settle
      // (the clock no longer moves: waiting longer in real time cannot make a late resolution look timely)
      for (let i = 0; i < 50 && (yield* waitStatus(w.wait_id)).status === "open"; i++) yield* realPause
      const s = yield* waitStatus(w.wait_id)
      assert.strictEqual(s.status, "unsatisfied")
      const at = Date.parse(s.resolved_at!)
      assert.isAtLeast(at, 12_000)
      assert.isAtMost(at, 17_000)
      const next = yield* call(a, "sophia.orient")
      assert.strictEqual(next._wait_resolved[0].resolution, "unsatisfied")
      assert.isNull(next._wait_resolved[0].resolved_by)
    }).pipe(Effect.provide(SweepLive.pipe(Layer.provideMerge(SophiaTest)))))

  it.scoped("the sweep survives its own failures", () =>
    Effect.gen(function*() {
      const { a } = yield* fleet
      const w = yield* declare(a, { on: "bob", predicate: { type: "post_exists", channel: "arc:f" }, reason: "r", timeout_s: 1 })
      const { SqlClient } = yield* Effect.promise(() => import("@effect/sql"))
      const sql = yield* SqlClient.SqlClient
      // break the table the sweep writes to, let a tick fail, then repair it
      // the sweep's statements take real time on a real server (Postgres): give it some, in real time
      const realPause = Effect.promise(() => new Promise((r) => setTimeout(r, 100)))
      yield* sql`ALTER TABLE waits RENAME TO waits_away`.pipe(Effect.orDie)
      yield* TestClock.adjust("5 seconds")
      yield* Effect.zipRight(Effect.repeatN(Effect.yieldNow(), 20), Effect.repeatN(realPause, 4))
      yield* sql`ALTER TABLE waits_away RENAME TO waits`.pipe(Effect.orDie)
      yield* TestClock.adjust("5 seconds")
      yield* Effect.repeatN(Effect.yieldNow(), 20)
      for (let i = 0; i < 50 && (yield* waitStatus(w.wait_id)).status === "open"; i++) yield* realPause
      assert.strictEqual((yield* waitStatus(w.wait_id)).status, "unsatisfied")
    }).pipe(Effect.provide(SweepLive.pipe(Layer.provideMerge(SophiaTest)))))
})

describe("two daemons on one database", () => {
  it.live("racing sweeps resolve each wait exactly once", () =>
    Effect.gen(function*() {
      const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "sophia-waits-")), "shared.db")
      const daemonA = yield* Layer.build(SophiaLive(file))
      const daemonB = yield* Layer.build(SophiaLive(file))
      const n = 200
      const ids = yield* Effect.gen(function*() {
        const { caller: a } = yield* connect("alice", "full")
        yield* connect("bob", "full")
        const waits = yield* Waits
        const out: Array<string> = []
        for (let i = 0; i < n; i++) {
          const w = yield* waits.declare(a, {
            on: "bob",
            predicate: { type: "post_exists", channel: `arc:${i}` },
            reason: "r",
            timeout_s: 0.001
          })
          out.push(w.wait_id)
        }
        return out
      }).pipe(Effect.provide(daemonA))
      yield* Effect.sleep("20 millis")
      const sweepA = Effect.flatMap(Waits, (w) => w.sweep()).pipe(Effect.provide(daemonA))
      const sweepB = Effect.flatMap(Waits, (w) => w.sweep()).pipe(Effect.provide(daemonB))
      const fibers = yield* Effect.forEach([sweepA, sweepB, sweepA, sweepB], (e) => Effect.fork(e))
      const counts = yield* Effect.forEach(fibers, Fiber.join)
      assert.strictEqual(counts.reduce((x, y) => x + y, 0), n, "each wait resolved by exactly one sweep")
      const statuses = yield* Effect.forEach(ids, waitStatus).pipe(Effect.provide(daemonB))
      assert.isTrue(statuses.every((s) => s.status === "unsatisfied"))
    }).pipe(Effect.scoped))
})
