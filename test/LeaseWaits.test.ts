/**
 * `lease_free` waits over the real store (SQLite here, Postgres in the `postgres` project): satisfied when the
 * resource could be granted (on a release, an expiry, a revoked holder), at once when it already could; edges
 * to the holders in the wait graph, so a cycle through a lease is refused `wait_cycle` — a wait that would close
 * one, and a grant that would (test/postgres/GrantCycles.test.ts races the two across daemons).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import type { Caller } from "../src/domain/Auth.js"
import { SophiaTest } from "../src/layers/App.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { Auth } from "../src/services/Auth.js"
import { Leases } from "../src/services/Leases.js"
import { connect } from "./support/Fixtures.js"

const call = (caller: Caller, name: string, args: unknown = {}) =>
  Effect.flatMap(Dispatcher, (d) => d.call(caller, name, args)).pipe(Effect.map((o) => o.body as any))
const ok = (caller: Caller, name: string, args: unknown = {}) =>
  Effect.map(call(caller, name, args), (body) => {
    assert.isUndefined(body.error, `${name} refused: ${JSON.stringify(body.error)}`)
    return body
  })
const acquire = (caller: Caller, args: Record<string, unknown>) => ok(caller, "sophia.lease_acquire", { reason: "work", ...args })
const waitFree = (caller: Caller, resource: string, extra: Record<string, unknown> = {}) =>
  ok(caller, "sophia.declare_wait", { predicate: { type: "lease_free", resource }, reason: "need it", ...extra })
/** The caller's next envelope: the resolutions it carries (delivered once). */
const resolvedFor = (caller: Caller) => Effect.map(ok(caller, "sophia.orient"), (o) => (o._wait_resolved ?? []) as Array<any>)

describe("lease_free waits", () => {
  it.effect("open while the lease is held (edges to the holder, addressed to it), satisfied by the release", () =>
    Effect.gen(function*() {
      const { caller: a } = yield* connect("alice")
      const { caller: b } = yield* connect("bob")
      const held = yield* acquire(a, { resources: ["path:src/**"] })
      const wait = yield* waitFree(b, "path:src/a.ts")
      assert.isUndefined(wait.resolution)
      const graph = yield* ok(b, "sophia.wait_graph")
      assert.deepStrictEqual(graph.edges.map((e: any) => [e.wait_id, e.waiter.agent_name, e.on.agent_name]), [[wait.wait_id, "bob", "alice"]])
      assert.deepStrictEqual(graph.orphaned.waits, [])
      const orient = yield* ok(b, "sophia.orient")
      assert.strictEqual(orient._blocking[0].on.connection_id, a.connectionId)
      assert.deepStrictEqual(orient._blocking[0].predicate, { type: "lease_free", resource: "path:src/a.ts", project: "default" })
      // the holder sees who waits on it
      const inbox = yield* ok(a, "sophia.coordination_inbox", { channel: "waits", peek: true })
      assert.strictEqual(inbox.posts.at(-1).to_connection_id, a.connectionId)

      yield* ok(a, "sophia.lease_release", { lease_id: held.lease_id })
      const resolved = yield* resolvedFor(b)
      assert.lengthOf(resolved, 1)
      assert.strictEqual(resolved[0].wait_id, wait.wait_id)
      assert.strictEqual(resolved[0].resolution, "satisfied")
      assert.strictEqual(resolved[0].resolved_by, a.connectionId)
      assert.include(resolved[0].how, held.lease_id)
      assert.deepStrictEqual((yield* ok(b, "sophia.wait_graph")).edges, [])
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("satisfied at once when nothing stands in the way; shared holders are waited for, each of them", () =>
    Effect.gen(function*() {
      const { caller: a } = yield* connect("a")
      const { caller: b } = yield* connect("b")
      const { caller: c } = yield* connect("c")
      assert.strictEqual((yield* waitFree(c, "slot:build")).resolution, "satisfied")
      yield* acquire(c, { resources: ["path:own.ts"] })
      assert.strictEqual((yield* waitFree(c, "path:own.ts")).resolution, "satisfied", "its own lease is not in its way")
      const la = yield* acquire(a, { resources: ["path:docs/**"], mode: "shared" })
      const lb = yield* acquire(b, { resources: ["path:docs/**"], mode: "shared" })
      const wait = yield* waitFree(c, "path:docs/guide.md")
      const edges = (yield* ok(c, "sophia.wait_graph")).edges.filter((e: any) => e.wait_id === wait.wait_id)
      assert.sameMembers(edges.map((e: any) => e.on.agent_name), ["a", "b"])
      yield* ok(a, "sophia.lease_release", { lease_id: la.lease_id })
      assert.deepStrictEqual(yield* resolvedFor(c), [])
      yield* ok(b, "sophia.lease_release", { lease_id: lb.lease_id })
      assert.deepStrictEqual((yield* resolvedFor(c)).map((r) => [r.wait_id, r.resolution]), [[wait.wait_id, "satisfied"]])
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("a cycle through a lease is refused wait_cycle, from either side", () =>
    Effect.gen(function*() {
      const { caller: a } = yield* connect("a")
      const { caller: b } = yield* connect("b")
      yield* acquire(a, { resources: ["slot:deploy"] })
      yield* waitFree(b, "slot:deploy")
      // a waiting on b would close a → b → a (b waits on a's lease)
      const refused = yield* call(a, "sophia.declare_wait", {
        on: "b",
        predicate: { type: "post_exists", channel: "arc:x" },
        reason: "r"
      })
      assert.strictEqual(refused.error?.code, "wait_cycle", JSON.stringify(refused))
      assert.deepStrictEqual(refused.error.cycle.map((c: any) => c.agent_name), ["a", "b", "a"])

      const { caller: c } = yield* connect("c")
      const { caller: d } = yield* connect("d")
      yield* ok(c, "sophia.declare_wait", { on: "d", predicate: { type: "post_exists", channel: "arc:y" }, reason: "r" })
      yield* acquire(c, { resources: ["path:lib/**"] })
      const back = yield* call(d, "sophia.declare_wait", { predicate: { type: "lease_free", resource: "path:lib/z.ts" }, reason: "r" })
      assert.strictEqual(back.error?.code, "wait_cycle", JSON.stringify(back))
      // and the refused waits left nothing
      assert.lengthOf((yield* ok(d, "sophia.wait_graph")).edges, 2)
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("a grant that would close a cycle through a lease_free wait is refused wait_cycle, whole; granted once the holder stops waiting", () =>
    Effect.gen(function*() {
      const { caller: z } = yield* connect("z")
      const { caller: w } = yield* connect("w")
      const { caller: x } = yield* connect("x")
      yield* acquire(z, { resources: ["path:lib/**"], mode: "shared" })
      yield* acquire(w, { resources: ["path:app/**"] })
      // w waits for lib (z holds it shared); x waits for app (w holds it): x → w, w → z, no cycle yet
      yield* waitFree(w, "path:lib/a.ts")
      const xWaits = yield* waitFree(x, "path:app/x.ts")
      // x taking lib shared would make w wait on x while x waits on w
      const refused = yield* call(x, "sophia.lease_acquire", { resources: ["path:lib/**", "slot:other"], mode: "shared", reason: "r" })
      assert.strictEqual(refused.error?.code, "wait_cycle", JSON.stringify(refused))
      assert.deepStrictEqual(refused.error.cycle.map((c: any) => c.agent_name), ["x", "w", "x"])
      assert.deepStrictEqual(refused.error.resources, ["path:lib/**", "slot:other"])
      assert.include(refused.error.message, "granting path:lib/**")
      assert.include(refused.error.hint, "cancel_wait")
      // nothing was written: no lease of x, the graph as it was
      assert.deepStrictEqual((yield* ok(x, "sophia.leases", { mine: true })).leases, [])
      const graph = yield* ok(x, "sophia.wait_graph")
      assert.deepStrictEqual(graph.cycles, [])
      assert.sameMembers(graph.edges.map((e: any) => `${e.waiter.agent_name}>${e.on.agent_name}`), ["w>z", "x>w"])
      // a lease nobody waits for is granted to x meanwhile; after x cancels its wait, lib is granted too
      yield* acquire(x, { resources: ["path:docs/**"] })
      yield* ok(x, "sophia.cancel_wait", { wait_id: xWaits.wait_id })
      yield* acquire(x, { resources: ["path:lib/**"], mode: "shared" })
      assert.sameMembers((yield* ok(x, "sophia.wait_graph")).edges.map((e: any) => `${e.waiter.agent_name}>${e.on.agent_name}`), ["w>z", "w>x"])
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("a revoked holder frees the wait (its lease is orphaned), and so does an expiry ended by the sweep (TestClock)", () =>
    Effect.gen(function*() {
      const auth = yield* Auth
      const leases = yield* Leases
      const { caller: gone } = yield* connect("gone")
      const { caller: a } = yield* connect("a")
      const { caller: b } = yield* connect("b")
      yield* acquire(gone, { resources: ["path:x/**"] })
      const w1 = yield* waitFree(b, "path:x/1.ts")
      yield* auth.revoke("gone")
      assert.deepStrictEqual((yield* resolvedFor(b)).map((r) => [r.wait_id, r.resolution]), [[w1.wait_id, "satisfied"]])

      yield* acquire(a, { resources: ["slot:ci"], ttl_s: 60 })
      const w2 = yield* waitFree(b, "slot:ci", { timeout_s: 600 })
      yield* TestClock.adjust("61 seconds")
      assert.strictEqual(yield* leases.sweep(), 1)
      const resolved = yield* resolvedFor(b)
      assert.deepStrictEqual(resolved.map((r) => [r.wait_id, r.resolution]), [[w2.wait_id, "satisfied"]])
      assert.include(resolved[0].how, "expired")
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("bad predicates are refused; a post predicate still needs on", () =>
    Effect.gen(function*() {
      const { caller: a } = yield* connect("a")
      const bad = yield* call(a, "sophia.declare_wait", { predicate: { type: "lease_free", resource: "path:../x" }, reason: "r" })
      assert.strictEqual(bad.error?.code, "validation_error")
      const noOn = yield* call(a, "sophia.declare_wait", { predicate: { type: "seq_reached", channel: "c", seq: 3 }, reason: "r" })
      assert.strictEqual(noOn.error?.code, "validation_error")
      assert.include(noOn.error.detail, "on")
    }).pipe(Effect.provide(SophiaTest)))
})
