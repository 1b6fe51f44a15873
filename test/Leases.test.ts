/**
 * Leases over the real store (SQLite here, Postgres in the `postgres` project): all or nothing, exclusive and
 * shared, slots and their capacity, expiry by the sweep (TestClock), renewals and releases, takeovers of
 * orphaned leases only, and what `leases` lists.
 */
import { SqlClient } from "@effect/sql"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Option, TestClock } from "effect"
import type { Caller } from "../src/domain/Auth.js"
import { SophiaTest } from "../src/layers/App.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { Auth } from "../src/services/Auth.js"
import { Leases } from "../src/services/Leases.js"
import { Wakeups } from "../src/services/Wakeups.js"
import { connect } from "./support/Fixtures.js"

const call = (caller: Caller, name: string, args: unknown = {}) =>
  Effect.flatMap(Dispatcher, (d) => d.call(caller, name, args)).pipe(Effect.map((o) => o.body as any))
const ok = (caller: Caller, name: string, args: unknown = {}) =>
  Effect.map(call(caller, name, args), (body) => {
    assert.isUndefined(body.error, `${name} refused: ${JSON.stringify(body.error)}`)
    return body
  })
const refused = (caller: Caller, name: string, args: unknown, code: string) =>
  Effect.map(call(caller, name, args), (body) => {
    assert.strictEqual(body.error?.code, code, JSON.stringify(body))
    return body.error
  })
const acquire = (caller: Caller, args: Record<string, unknown>) => ok(caller, "sophia.lease_acquire", { reason: "work", ...args })
const listed = (caller: Caller, args: Record<string, unknown> = {}) =>
  Effect.map(ok(caller, "sophia.leases", args), (r) => r.leases as Array<any>)

describe("Leases", () => {
  it.effect("an exclusive path lease refuses an overlapping one of another connection, naming the holder; apart and own are granted", () =>
    Effect.gen(function*() {
      const { caller: a } = yield* connect("alice")
      const { caller: b } = yield* connect("bob")
      const held = yield* acquire(a, { resources: ["path:src/**"], reason: "refactor src" })
      assert.match(held.lease_id, /^lease-/)
      assert.deepStrictEqual(held.resources, ["path:src/**"])
      assert.strictEqual(held.mode, "exclusive")
      assert.strictEqual(held.project, "default")
      assert.strictEqual(Date.parse(held.expires_at), 1800 * 1000)

      const error = yield* refused(b, "sophia.lease_acquire", { resources: ["path:src/lib/a.ts"], reason: "fix" }, "lease_conflict")
      assert.deepStrictEqual(error.holders, [{
        lease_id: held.lease_id,
        connection_id: a.connectionId,
        agent_name: "alice",
        resource: "path:src/**",
        mode: "exclusive",
        expires_at: held.expires_at,
        reason: "refactor src"
      }])
      assert.include(error.message, "alice")
      assert.include(error.hint, "lease_free")
      // a glob that only might overlap conflicts too; one that cannot is granted; another project is apart
      yield* refused(b, "sophia.lease_acquire", { resources: ["path:**/*.ts"], reason: "x" }, "lease_conflict")
      yield* acquire(b, { resources: ["path:docs/**"] })
      yield* acquire(b, { resources: ["path:src/**"], project: "other" })
      // the holder's own leases never stand in its way
      yield* acquire(a, { resources: ["path:src/a.ts"] })
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("the store finds the holds on the asked glob's chain — above, at and below its base, names whose bytes sort near it excluded — and every end takes a lease's holds with it", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const auth = yield* Auth
      const leases = yield* Leases
      const { caller: a } = yield* connect("a")
      const { caller: b } = yield* connect("b")
      const below = yield* acquire(a, { resources: ["path:src/lib/deep/a.ts"] })
      const atBase = yield* acquire(a, { resources: ["path:src/lib"] })
      const above = yield* acquire(a, { resources: ["path:src/*.md"] })
      // bases that sort right beside src/lib/ byte by byte, but are not below it
      yield* acquire(a, { resources: ["path:src/lib.ts", "path:src/lib-old/x.ts", "path:src/lib0/y.ts", "path:src/libs/z.ts"] })
      const holdersOf = (resources: ReadonlyArray<string>) =>
        Effect.map(refused(b, "sophia.lease_acquire", { resources, reason: "r" }, "lease_conflict"), (e) => e.holders.map((h: any) => h.lease_id))
      assert.sameMembers(yield* holdersOf(["path:src/lib/**"]), [below.lease_id, atBase.lease_id])
      assert.sameMembers(yield* holdersOf(["path:src/lib/deep"]), [below.lease_id, atBase.lease_id])
      assert.sameMembers(yield* holdersOf(["path:SRC/LIB/Deep/A.ts"]), [below.lease_id, atBase.lease_id])
      assert.includeMembers(yield* holdersOf(["path:**/a.ts"]), [below.lease_id, atBase.lease_id])
      assert.sameMembers(yield* holdersOf(["path:src/notes.md"]), [above.lease_id])
      yield* acquire(b, { resources: ["path:src/li/x.ts", "path:src/lib1/x.ts"] })

      const holds = Effect.map(sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM lease_holds WHERE user_id = ${a.userId}`, (r) => Number(r[0].n))
      const before = yield* holds
      // released by its holder, by the owner, expired by the sweep, taken over: each end takes its holds
      yield* ok(a, "sophia.lease_release", { lease_id: below.lease_id })
      assert.strictEqual(yield* holds, before - 1)
      yield* leases.releaseAsOwner(b, atBase.lease_id)
      assert.strictEqual(yield* holds, before - 2)
      const { caller: c } = yield* connect("c")
      yield* acquire(c, { resources: ["path:tmp/x", "slot:t"], ttl_s: 60 })
      const { caller: d } = yield* connect("d")
      const taken = yield* acquire(d, { resources: ["path:gone/**"] })
      const countAll = Effect.map(sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM lease_holds`, (r) => Number(r[0].n))
      const all = yield* countAll
      yield* TestClock.adjust("61 seconds")
      assert.strictEqual(yield* leases.sweep(), 1)
      assert.strictEqual(yield* countAll, all - 2)
      yield* auth.revoke("d")
      const over = yield* acquire(c, { resources: ["path:gone/x.ts"] })
      assert.deepStrictEqual(over.took_over, [taken.lease_id])
      const [row] = yield* sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM lease_holds WHERE lease_id = ${taken.lease_id}`
      assert.strictEqual(Number(row.n), 0)
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("shared holders coexist; an exclusive lease waits for all of them (refused naming each), then is granted", () =>
    Effect.gen(function*() {
      const { caller: a } = yield* connect("a")
      const { caller: b } = yield* connect("b")
      const { caller: c } = yield* connect("c")
      const la = yield* acquire(a, { resources: ["path:README.md"], mode: "shared" })
      const lb = yield* acquire(b, { resources: ["path:README.md"], mode: "shared" })
      const error = yield* refused(c, "sophia.lease_acquire", { resources: ["path:README.md"], reason: "edit" }, "lease_conflict")
      assert.sameMembers(error.holders.map((h: any) => h.lease_id), [la.lease_id, lb.lease_id])
      yield* ok(a, "sophia.lease_release", { lease_id: la.lease_id })
      yield* refused(c, "sophia.lease_acquire", { resources: ["path:README.md"], reason: "edit" }, "lease_conflict")
      yield* ok(b, "sophia.lease_release", { lease_id: lb.lease_id })
      const lc = yield* acquire(c, { resources: ["path:README.md"] })
      // and now a shared one is refused by the exclusive holder
      const again = yield* refused(a, "sophia.lease_acquire", { resources: ["path:README.md"], mode: "shared", reason: "r" }, "lease_conflict")
      assert.deepStrictEqual(again.holders.map((h: any) => h.lease_id), [lc.lease_id])
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("a lease over several resources is granted whole or not at all", () =>
    Effect.gen(function*() {
      const { caller: a } = yield* connect("a")
      const { caller: b } = yield* connect("b")
      yield* acquire(a, { resources: ["slot:build"] })
      const error = yield* refused(b, "sophia.lease_acquire", {
        resources: ["path:src/x.ts", "path:src/y.ts", "slot:build"],
        reason: "all three"
      }, "lease_conflict")
      assert.deepStrictEqual(error.holders.map((h: any) => h.resource), ["slot:build"])
      // nothing of it is held: another connection gets the two files
      assert.deepStrictEqual((yield* listed(b, { mine: true })), [])
      const { caller: c } = yield* connect("c")
      yield* acquire(c, { resources: ["path:src/x.ts", "path:src/y.ts"] })
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("a slot admits its capacity, fixed by its first lease", () =>
    Effect.gen(function*() {
      const callers = yield* Effect.forEach(["a", "b", "c"], (n) => Effect.map(connect(n), (x) => x.caller))
      yield* acquire(callers[0], { resources: ["slot:build"], capacity: 2, mode: "shared" })
      yield* acquire(callers[1], { resources: ["slot:build"], mode: "shared" })
      const error = yield* refused(callers[2], "sophia.lease_acquire", { resources: ["slot:build"], mode: "shared", reason: "r" }, "lease_conflict")
      assert.lengthOf(error.holders, 2)
      const fixed = yield* refused(callers[2], "sophia.lease_acquire", { resources: ["slot:build"], capacity: 3, reason: "r" }, "validation_error")
      assert.include(fixed.detail, "fixed by its first lease")
      // an exclusive lease on a slot wants it whole
      yield* acquire(callers[2], { resources: ["slot:deploy"], capacity: 3, mode: "shared" })
      yield* refused(callers[0], "sophia.lease_acquire", { resources: ["slot:deploy"], reason: "r" }, "lease_conflict")
      yield* refused(callers[0], "sophia.lease_acquire", { resources: ["path:x"], capacity: 2, reason: "r" }, "validation_error")
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("expiry: a lease past its ttl holds nothing, and the sweep ends it (TestClock)", () =>
    Effect.gen(function*() {
      const leases = yield* Leases
      const { caller: a } = yield* connect("a")
      const { caller: b } = yield* connect("b")
      const held = yield* acquire(a, { resources: ["path:app.ts"], ttl_s: 60 })
      yield* TestClock.adjust("59 seconds")
      yield* refused(b, "sophia.lease_acquire", { resources: ["path:app.ts"], reason: "r" }, "lease_conflict")
      assert.strictEqual(yield* leases.sweep(), 0)
      yield* TestClock.adjust("2 seconds")
      assert.lengthOf(yield* listed(a), 0)
      assert.strictEqual(yield* leases.sweep(), 1)
      assert.strictEqual(yield* leases.sweep(), 0)
      const gone = yield* refused(a, "sophia.lease_renew", { lease_id: held.lease_id }, "invalid_transition")
      assert.include(gone.detail, "expired")
      yield* acquire(b, { resources: ["path:app.ts"] })
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("renew extends from now; only the holder renews or releases; a released lease cannot be released again", () =>
    Effect.gen(function*() {
      const { caller: a } = yield* connect("a")
      const { caller: b } = yield* connect("b")
      const held = yield* acquire(a, { resources: ["path:a.ts"], ttl_s: 100 })
      yield* TestClock.adjust("50 seconds")
      const renewed = yield* ok(a, "sophia.lease_renew", { lease_id: held.lease_id })
      assert.strictEqual(Date.parse(renewed.expires_at), 150_000)
      const longer = yield* ok(a, "sophia.lease_renew", { lease_id: held.lease_id, ttl_s: 86400 })
      assert.strictEqual(Date.parse(longer.expires_at), 50_000 + 86_400_000)
      yield* refused(a, "sophia.lease_renew", { lease_id: held.lease_id, ttl_s: 86401 }, "validation_error")
      yield* refused(b, "sophia.lease_renew", { lease_id: held.lease_id }, "validation_error")
      yield* refused(b, "sophia.lease_release", { lease_id: held.lease_id }, "validation_error")
      yield* refused(b, "sophia.lease_release", { lease_id: "lease-nope" }, "not_found")
      assert.deepInclude(yield* ok(a, "sophia.lease_release", { lease_id: held.lease_id }), { lease_id: held.lease_id, status: "released" })
      yield* refused(a, "sophia.lease_release", { lease_id: held.lease_id }, "invalid_transition")
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("takeover only of orphaned leases: a live holder refuses, a revoked or silent one is taken over, recorded and listed", () =>
    Effect.gen(function*() {
      const auth = yield* Auth
      const { caller: gone } = yield* connect("gone")
      const { caller: quiet } = yield* connect("quiet")
      const { caller: lead } = yield* connect("lead")
      const g = yield* acquire(gone, { resources: ["path:lib/**"], ttl_s: 86400 })
      const q = yield* acquire(quiet, { resources: ["slot:ci"], ttl_s: 86400 })
      yield* refused(lead, "sophia.lease_acquire", { resources: ["path:lib/x.ts"], reason: "r" }, "lease_conflict")
      yield* auth.revoke("gone")
      const listedBefore = yield* listed(lead)
      assert.deepStrictEqual(listedBefore.find((l) => l.lease_id === g.lease_id)?.orphaned?.reason, "revoked")
      const taken = yield* acquire(lead, { resources: ["path:lib/x.ts"] })
      assert.deepStrictEqual(taken.took_over, [g.lease_id])
      const rows = yield* listed(lead)
      assert.isUndefined(rows.find((l) => l.lease_id === g.lease_id), "the orphaned lease ended")
      const mine = rows.find((l) => l.lease_id === taken.lease_id)
      assert.deepStrictEqual(mine.took_over.map((t: any) => [t.lease_id, t.connection_id, t.reason]), [[g.lease_id, gone.connectionId, "revoked"]])
      assert.isTrue(mine.mine)

      // silent: not before SOPHIA_SILENT_AFTER_S (900 s) without a call
      yield* TestClock.adjust("14 minutes")
      yield* refused(lead, "sophia.lease_acquire", { resources: ["slot:ci"], reason: "r" }, "lease_conflict")
      yield* TestClock.adjust("2 minutes")
      const ci = yield* acquire(lead, { resources: ["slot:ci"] })
      assert.deepStrictEqual(ci.took_over, [q.lease_id])
      const row = (yield* listed(lead, { mine: true })).find((l) => l.lease_id === ci.lease_id)
      assert.deepStrictEqual(row.took_over.map((t: any) => [t.lease_id, t.reason]), [[q.lease_id, "silent"]])
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("wait_s: a refused lease waits, granted on the holder's release, on its expiry; refused at the deadline", () =>
    Effect.gen(function*() {
      const wakeups = yield* Wakeups
      const { caller: a } = yield* connect("a")
      const { caller: b } = yield* connect("b")
      const held = yield* acquire(a, { resources: ["path:src/**"] })
      const waiting = yield* Effect.fork(call(b, "sophia.lease_acquire", { resources: ["path:src/x.ts"], reason: "r", wait_s: 30 }))
      // parked, and its first attempt refused (real time passes; the test clock does not)
      while (wakeups.parkedCount() === 0) yield* Effect.yieldNow()
      yield* Effect.promise(() => new Promise((r) => setTimeout(r, 100)))
      assert.isTrue(Option.isNone(yield* Fiber.poll(waiting)), "still waiting")
      yield* ok(a, "sophia.lease_release", { lease_id: held.lease_id })
      const granted = yield* Fiber.join(waiting)
      assert.isUndefined(granted.error, JSON.stringify(granted.error))
      assert.deepStrictEqual(granted.resources, ["path:src/x.ts"])
      assert.strictEqual(wakeups.parkedCount(), 0)

      // a holder's expiry ends the wait too, with no sweep and no event
      const short = yield* acquire(a, { resources: ["slot:build"], ttl_s: 5 })
      const behind = yield* Effect.fork(call(b, "sophia.lease_acquire", { resources: ["slot:build"], reason: "r", wait_s: 30 }))
      while (wakeups.parkedCount() === 0) yield* Effect.yieldNow()
      yield* TestClock.adjust("6 seconds")
      const after = yield* Fiber.join(behind)
      assert.isUndefined(after.error, JSON.stringify(after.error))
      assert.isAbove(Date.parse(after.expires_at), Date.parse(short.expires_at))

      // nothing frees it: the refusal at the deadline, not later
      const { caller: c } = yield* connect("c")
      const late = yield* Effect.fork(call(c, "sophia.lease_acquire", { resources: ["slot:build"], reason: "r", wait_s: 2 }))
      while (wakeups.parkedCount() === 0) yield* Effect.yieldNow()
      yield* TestClock.adjust("3 seconds")
      const refusedLate = yield* Fiber.join(late)
      assert.strictEqual(refusedLate.error?.code, "lease_conflict")
      assert.strictEqual(wakeups.parkedCount(), 0)
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("orient shows the caller's own leases, orphaned or not", () =>
    Effect.gen(function*() {
      const { caller: a } = yield* connect("a")
      const { caller: b } = yield* connect("b")
      assert.deepStrictEqual((yield* ok(a, "sophia.orient")).my_leases, [])
      const mine = yield* acquire(a, { resources: ["path:src/**", "slot:build"], work_id: "w7", reason: "the build" })
      yield* acquire(b, { resources: ["path:docs/**"] })
      const rows = (yield* ok(a, "sophia.orient")).my_leases
      assert.deepStrictEqual(rows.map((l: any) => [l.lease_id, l.resources, l.work_id, l.reason, l.mine]), [
        [mine.lease_id, ["path:src/**", "slot:build"], "w7", "the build", true]
      ])
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("leases lists by project, by an overlapping resource, and the caller's own; bad resources are refused", () =>
    Effect.gen(function*() {
      const { caller: a } = yield* connect("a")
      const { caller: b } = yield* connect("b")
      const l1 = yield* acquire(a, { resources: ["path:src/a.ts"], work_id: "w1" })
      yield* TestClock.adjust("1 second")
      const l2 = yield* acquire(b, { resources: ["path:docs/**"], mode: "shared" })
      yield* TestClock.adjust("1 second")
      const l3 = yield* acquire(b, { resources: ["slot:build"], project: "p2" })
      assert.deepStrictEqual((yield* listed(a)).map((l) => l.lease_id), [l1.lease_id, l2.lease_id, l3.lease_id])
      assert.deepStrictEqual((yield* listed(a, { project: "p2" })).map((l) => l.lease_id), [l3.lease_id])
      assert.deepStrictEqual((yield* listed(a, { resource: "path:docs/*.md" })).map((l) => l.lease_id), [l2.lease_id])
      assert.deepStrictEqual((yield* listed(a, { resource: "path:src" })).map((l) => l.lease_id), [l1.lease_id])
      assert.deepStrictEqual((yield* listed(b, { mine: true })).map((l) => l.lease_id), [l2.lease_id, l3.lease_id])
      const row = (yield* listed(b)).find((l) => l.lease_id === l1.lease_id)
      assert.deepInclude(row, { agent_name: "a", work_id: "w1", mine: false, mode: "exclusive", resources: ["path:src/a.ts"] })
      for (const bad of ["path:/etc", "path:../x", "file:x", "slot:"]) {
        yield* refused(a, "sophia.lease_acquire", { resources: [bad], reason: "r" }, "validation_error")
      }
    }).pipe(Effect.provide(SophiaTest)))
})
