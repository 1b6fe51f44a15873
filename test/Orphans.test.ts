import { assert, describe, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import type { Caller } from "../src/domain/Auth.js"
import { SophiaTest } from "../src/layers/App.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { Auth } from "../src/services/Auth.js"
import { Ledger } from "../src/services/Ledger.js"
import { connect } from "./support/Fixtures.js"

const call = (caller: Caller, name: string, args: unknown = {}) =>
  Effect.flatMap(Dispatcher, (d) => d.call(caller, name, args)).pipe(Effect.map((o) => o.body as any))
const ok = (caller: Caller, name: string, args: unknown = {}) =>
  Effect.map(call(caller, name, args), (body) => {
    assert.isUndefined(body.error, `${name} refused: ${JSON.stringify(body.error)}`)
    return body
  })

/** `worker` opens and claims `work_id`; returns the head. */
const claimedBy = (worker: Caller, workId: string) =>
  Effect.map(
    ok(worker, "sophia.ledger_append", {
      work_id: workId,
      expected_head: null,
      events: [{ type: "opened", title: `item ${workId}` }, { type: "claimed" }]
    }),
    (r) => r.head as string
  )
const claim = (caller: Caller, workId: string, head: string) =>
  call(caller, "sophia.ledger_append", { work_id: workId, expected_head: head, events: [{ type: "claimed" }] })

describe("Orphans: the claims half, from the ledger", () => {
  it.effect("a revoked claimant's item is orphaned (wait_graph and orient); another connection may take it over, recorded", () =>
    Effect.gen(function*() {
      const auth = yield* Auth
      const { caller: worker } = yield* connect("worker")
      const { caller: lead } = yield* connect("lead")
      yield* claimedBy(worker, "w1")
      yield* claimedBy(lead, "w2")
      assert.deepStrictEqual((yield* ok(lead, "sophia.wait_graph")).orphaned.work, [])
      yield* auth.revoke("worker")
      const graph = yield* ok(lead, "sophia.wait_graph")
      assert.strictEqual(graph.orphaned.work.length, 1)
      const orphan = graph.orphaned.work[0]
      assert.strictEqual(orphan.work_id, "w1")
      assert.strictEqual(orphan.connection_id, worker.connectionId)
      assert.strictEqual(orphan.reason, "revoked")
      assert.isString(orphan.since)
      assert.notProperty(graph.orphaned, "not_computed")
      const orient = yield* ok(lead, "sophia.orient")
      assert.deepStrictEqual(orient.orphaned.work.map((w: any) => [w.work_id, w.reason]), [["w1", "revoked"]])

      const head = (yield* ok(lead, "sophia.ledger_status", { work_id: "w1" })).settled.head
      const taken = yield* ok(lead, "sophia.ledger_append", { work_id: "w1", expected_head: head, events: [{ type: "claimed" }] })
      assert.notStrictEqual(taken.head, head)
      const status = yield* ok(lead, "sophia.ledger_status", { work_id: "w1" })
      assert.strictEqual(status.settled.claimant, lead.connectionId)
      const takeover = status.settled.fields.claim_takeover
      assert.strictEqual(takeover.evidence, "observed")
      assert.deepInclude(takeover.value, { previous_claimant: worker.connectionId, reason: "revoked", by: lead.connectionId })
      const log = yield* ok(lead, "sophia.ledger_log", { work_id: "w1" })
      const types = log.events.map((e: any) => `${e.type}${e.data.field ? ":" + e.data.field : ""}`)
      // newest first: the claim, right after the server's observation of the takeover
      assert.deepStrictEqual(types.slice(0, 2), ["claimed", "observed:claim_takeover"])
      assert.deepStrictEqual((yield* ok(lead, "sophia.wait_graph")).orphaned.work, [])
      // the chain still verifies (the takeover is part of the fold)
      const verified = yield* Effect.flatMap(Ledger, (l) => l.verify({ userId: lead.userId }))
      assert.isTrue(verified.ok, JSON.stringify(verified))
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("a silent claimant's item is orphaned after SOPHIA_SILENT_AFTER_S (TestClock); before that a takeover is refused", () =>
    Effect.gen(function*() {
      const { caller: worker } = yield* connect("worker")
      const { caller: lead } = yield* connect("lead")
      const head = yield* claimedBy(worker, "w9")
      // a live claimant: invalid_transition, nothing recorded
      yield* TestClock.adjust("14 minutes")
      const refused = yield* claim(lead, "w9", head)
      assert.strictEqual(refused.error.code, "invalid_transition")
      assert.deepStrictEqual((yield* ok(lead, "sophia.wait_graph")).orphaned.work, [])
      assert.strictEqual((yield* ok(lead, "sophia.ledger_status", { work_id: "w9" })).settled.head, head)
      // 15 minutes without a call or a beacon: silent
      yield* TestClock.adjust("2 minutes")
      const graph = yield* ok(lead, "sophia.wait_graph")
      assert.deepStrictEqual(graph.orphaned.work.map((w: any) => [w.work_id, w.connection_id, w.reason]), [
        ["w9", worker.connectionId, "silent"]
      ])
      const taken = yield* claim(lead, "w9", head)
      assert.isUndefined(taken.error, JSON.stringify(taken.error))
      const status = yield* ok(lead, "sophia.ledger_status", { work_id: "w9" })
      assert.strictEqual(status.settled.claimant, lead.connectionId)
      assert.strictEqual(status.settled.fields.claim_takeover.value.reason, "silent")
      // the new claimant holds it now and is live (its beacon): the old one cannot claim it back
      yield* ok(lead, "sophia.beacon", {})
      const back = yield* claim(worker, "w9", taken.head)
      assert.strictEqual(back.error.code, "invalid_transition")
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("a beacon keeps a claimant live", () =>
    Effect.gen(function*() {
      const { caller: worker } = yield* connect("worker")
      const { caller: lead } = yield* connect("lead")
      const head = yield* claimedBy(worker, "w5")
      yield* TestClock.adjust("14 minutes")
      yield* ok(worker, "sophia.beacon", { status: "still here" })
      yield* TestClock.adjust("14 minutes")
      assert.deepStrictEqual((yield* ok(lead, "sophia.wait_graph")).orphaned.work, [])
      assert.strictEqual((yield* claim(lead, "w5", head)).error.code, "invalid_transition")
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("waits on a silent connection carry connection_id, reason and since", () =>
    Effect.gen(function*() {
      const { caller: a } = yield* connect("alice")
      const { caller: b } = yield* connect("bob")
      yield* ok(a, "sophia.declare_wait", { on: "bob", predicate: { type: "post_exists", channel: "arc:z" }, reason: "r" })
      yield* TestClock.adjust("16 minutes")
      const graph = yield* ok(a, "sophia.wait_graph")
      assert.strictEqual(graph.orphaned.waits.length, 1)
      assert.deepInclude(graph.orphaned.waits[0], { connection_id: b.connectionId, reason: "silent" })
      assert.isString(graph.orphaned.waits[0].since)
      assert.strictEqual((yield* ok(a, "sophia.orient")).orphaned.waits, 1)
    }).pipe(Effect.provide(SophiaTest)))
})
