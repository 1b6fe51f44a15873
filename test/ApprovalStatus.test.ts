import { SqlClient } from "@effect/sql"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Option, TestClock } from "effect"
import type { Caller } from "../src/domain/Auth.js"
import { SophiaLive, SophiaTest } from "../src/layers/App.js"
import type { CallOptions } from "../src/mcp/Dispatch.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { Approvals } from "../src/services/Approvals.js"
import { Wakeups } from "../src/services/Wakeups.js"
import { connectAllowingElicitation } from "./support/Allowance.js"
import { sophia, tempDb } from "./support/Cli.js"
import { connect } from "./support/Fixtures.js"

const call = (caller: Caller, name: string, args: unknown, options?: CallOptions) =>
  Effect.flatMap(Dispatcher, (d) => d.call(caller, name, args, options)).pipe(Effect.map((o) => o.body as any))
const count = (table: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.map(sql<{ n: number }>`SELECT COUNT(*) AS n FROM ${sql(table)}`, (rows) => Number(rows[0].n))).pipe(Effect.orDie)
const untilParked = (n: number) =>
  Effect.gen(function*() {
    const wakeups = yield* Wakeups
    for (let i = 0; i < 10_000 && wakeups.parkedCount() < n; i++) yield* Effect.yieldNow()
    assert.strictEqual(wakeups.parkedCount(), n, "approval_status parked")
  })

describe("Approvals without silent blocking (default configuration)", () => {
  it.live("a gated call is refused at once with approval_id and a hint naming sophia.approval_status", () =>
    Effect.gen(function*() {
      const { caller: helper } = yield* connect("helper", "assistant")
      const { caller: full } = yield* connect("worker", "full")
      const started = Date.now()
      const write = yield* call(helper, "sophia.add_document", { title: "t", body: "b" })
      const elevated = yield* call(full, "sophia.create_entity", { name: "e", kind: "k" })
      assert.isBelow(Date.now() - started, 2_000, "no wait for a decision")
      assert.strictEqual(write.error.code, "approval_required")
      assert.strictEqual(elevated.error.code, "owner_approval_required")
      for (const refused of [write, elevated]) {
        assert.match(refused.error.approval_id, /^apr-/)
        assert.include(refused.error.hint, "sophia.approval_status")
        assert.include(refused.error.hint, refused.error.approval_id)
      }
      const status = yield* call(helper, "sophia.approval_status", { approval_id: write.error.approval_id })
      assert.strictEqual(status.status, "pending")
      assert.strictEqual(status.tool, "sophia.add_document")
      assert.isUndefined(status.decided_at)
      assert.strictEqual(yield* count("documents"), 0)
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("elicitation still asks when the client supports it, on a connection the owner allowed it", () =>
    Effect.gen(function*() {
      let asked = 0
      const { caller: helper } = yield* connectAllowingElicitation("helper")
      const body = yield* call(helper, "sophia.add_document", { title: "t", body: "b" }, {
        elicit: () => Effect.sync(() => (asked++, "accept" as const))
      })
      assert.isUndefined(body.error)
      assert.strictEqual(asked, 1)
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("approval_status long-polls and is woken by the owner's decision (the CLI path), without the clock moving", () =>
    Effect.gen(function*() {
      const approvals = yield* Approvals
      const { caller } = yield* connect("worker", "full")
      const args = { name: "alpha", kind: "project" }
      const refused = yield* call(caller, "sophia.create_entity", args)
      const id = refused.error.approval_id
      const waiting = yield* Effect.fork(call(caller, "sophia.approval_status", { approval_id: id, wait_s: 60 }))
      yield* untilParked(1)
      assert.isTrue(Option.isNone(yield* Fiber.poll(waiting)))
      // the method `sophia approvals approve` runs
      yield* approvals.decide(id, "approved")
      const status = yield* Fiber.join(waiting)
      assert.strictEqual(status.status, "approved")
      assert.isString(status.decided_at)
      assert.include(status.hint, "approval_id")
      assert.strictEqual(yield* TestClock.currentTimeMillis, 0, "woken by ApprovalDecided, not by time")
      assert.strictEqual((yield* Wakeups).parkedCount(), 0)

      // the retry storm: every concurrent retry gets the one result, the call ran once
      const results = yield* Effect.all(
        Array.from({ length: 25 }, () => call(caller, "sophia.create_entity", { ...args, approval_id: id })),
        { concurrency: "unbounded" }
      )
      for (const r of results) assert.isUndefined(r.error, JSON.stringify(r.error))
      assert.strictEqual(new Set(results.map((r) => r.entity_id)).size, 1)
      assert.strictEqual(yield* count("entities"), 1)
      assert.strictEqual((yield* call(caller, "sophia.approval_status", { approval_id: id })).status, "executed")
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("approval_status ends at wait_s while pending (never later), and denied is reported", () =>
    Effect.gen(function*() {
      const approvals = yield* Approvals
      const { caller } = yield* connect("helper", "assistant")
      const refused = yield* call(caller, "sophia.add_document", { title: "t", body: "b" })
      const id = refused.error.approval_id
      const waiting = yield* Effect.fork(call(caller, "sophia.approval_status", { approval_id: id, wait_s: 10 }))
      yield* untilParked(1)
      yield* TestClock.adjust("9 seconds")
      assert.isTrue(Option.isNone(yield* Fiber.poll(waiting)), "not before wait_s")
      yield* TestClock.adjust("1 second")
      assert.strictEqual((yield* Fiber.join(waiting)).status, "pending")
      yield* approvals.decide(id, "denied")
      assert.strictEqual((yield* call(caller, "sophia.approval_status", { approval_id: id, wait_s: 10 })).status, "denied")
      const retry = yield* call(caller, "sophia.add_document", { title: "t", body: "b", approval_id: id })
      assert.strictEqual(retry.error.code, "approval_denied")
      // another user's approval is not found; wait_s is bounded
      const { caller: stranger } = yield* connect("stranger", "full", "other-user")
      assert.strictEqual((yield* call(stranger, "sophia.approval_status", { approval_id: id })).error.code, "not_found")
      assert.strictEqual((yield* call(caller, "sophia.approval_status", { approval_id: id, wait_s: 61 })).error.code, "validation_error")
    }).pipe(Effect.provide(SophiaTest)))
})

// a decision made by the real CLI in another process publishes no event in this one: the wait re-reads
describe("approval_status and the `sophia approvals` CLI (another process)", () => {
  const db = tempDb()
  it.live("a waiting approval_status sees the CLI's approval; the retry then runs once", () =>
    Effect.gen(function*() {
      const { caller } = yield* connect("worker", "full")
      const args = { name: "gamma", kind: "team" }
      const refused = yield* call(caller, "sophia.create_entity", args)
      const id = refused.error.approval_id
      const waiting = yield* Effect.fork(call(caller, "sophia.approval_status", { approval_id: id, wait_s: 60 }))
      const approved = sophia(["approvals", "approve", id, "--db", db])
      assert.strictEqual(approved.status, 0, approved.stderr)
      const status = yield* Fiber.join(waiting)
      assert.strictEqual(status.status, "approved")
      const ran = yield* call(caller, "sophia.create_entity", { ...args, approval_id: id })
      assert.match(ran.entity_id, /^ent-/)
    }).pipe(Effect.provide(SophiaLive(db))), 120_000)
})
