import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type { Caller } from "../src/domain/Auth.js"
import { SophiaTest } from "../src/layers/App.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { Auth } from "../src/services/Auth.js"
import { connect } from "./support/Fixtures.js"

const call = (caller: Caller, tool: string, args: unknown = {}) =>
  Effect.flatMap(Dispatcher, (d) => d.call(caller, tool, args)).pipe(Effect.map((o) => o.body as any))

/** docs/architecture.md, "Observed events": the server appends observed events from what it witnessed itself. */
describe("the server's own observations on the ledger", () => {
  it.effect("a closeout on arc:<work_id>, a resolved wait on it and the claimant's revocation become observed evidence", () =>
    Effect.gen(function*() {
      const { caller: worker } = yield* connect("worker", "full")
      const { caller: lead } = yield* connect("lead", "full")
      const opened = yield* call(worker, "sophia.ledger_append", {
        work_id: "task-7",
        expected_head: null,
        events: [{ type: "opened", title: "Build it" }, { type: "claimed" }]
      })
      assert.isUndefined(opened.error)
      // the lead waits on the worker's closeout in the item's arc channel
      const wait = yield* call(lead, "sophia.declare_wait", {
        on: "worker",
        predicate: { type: "post_exists", channel: "arc:task-7", kind: "closeout" },
        reason: "waiting for the handoff"
      })
      const closeout = yield* call(worker, "sophia.coordination_post", {
        channel: "arc:task-7",
        kind: "closeout",
        body: "done",
        closeout: { review_requested: false }
      })
      assert.isUndefined(closeout.error)
      let status = yield* call(lead, "sophia.ledger_status", { work_id: "task-7" })
      const fields = status.settled.fields
      assert.strictEqual(fields.closeout.evidence, "observed")
      assert.strictEqual(fields.closeout.value.post_id, closeout.post_id)
      assert.strictEqual(fields.closeout.set_by, "server")
      assert.strictEqual(fields.wait.evidence, "observed")
      assert.strictEqual(fields.wait.value.wait_id, wait.wait_id)
      assert.strictEqual(fields.wait.value.resolution, "satisfied")
      // an agent cannot overwrite what the server observed with its own assertion
      const downgrade = yield* call(worker, "sophia.ledger_append", {
        work_id: "task-7",
        expected_head: status.settled.head,
        events: [{ type: "asserted", field: "closeout", value: "never happened" }]
      })
      assert.strictEqual(downgrade.error.code, "evidence_downgrade")
      // the claimant's connection is revoked
      yield* Effect.flatMap(Auth, (auth) => auth.revoke("worker"))
      status = yield* call(lead, "sophia.ledger_status", { work_id: "task-7" })
      assert.strictEqual(status.settled.fields.claimant_revoked.evidence, "observed")
      assert.strictEqual(status.settled.fields.claimant_revoked.value.connection_id, worker.connectionId)
      const log = yield* call(lead, "sophia.ledger_log", { work_id: "task-7" })
      const observed = log.events.filter((e: any) => e.type === "observed")
      assert.strictEqual(observed.length, 3)
      assert.isTrue(observed.every((e: any) => e.actor === "server" && e.evidence === "observed"))
      // and the chain still verifies
      const { Ledger } = yield* Effect.promise(() => import("../src/services/Ledger.js"))
      const report = yield* Effect.flatMap(Ledger, (l) => l.verify())
      assert.isTrue((report as any).ok, JSON.stringify(report))
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("posts and waits on channels that name no work item observe nothing and are not refused", () =>
    Effect.gen(function*() {
      const { caller: a } = yield* connect("a", "full")
      const r = yield* call(a, "sophia.coordination_post", {
        channel: "arc:no-such-item",
        kind: "closeout",
        body: "x",
        closeout: { review_requested: false }
      })
      assert.isUndefined(r.error)
      assert.strictEqual((yield* call(a, "sophia.ledger_status", { work_id: "no-such-item" })).error.code, "not_found")
    }).pipe(Effect.provide(SophiaTest)))
})

describe("the review field", () => {
  it.effect("only a verdict writes it: an agent's own assertion of `review` is refused and nothing is written", () =>
    Effect.gen(function*() {
      const { caller: w } = yield* connect("w", "full")
      const opened = yield* call(w, "sophia.ledger_append", {
        work_id: "t",
        expected_head: null,
        events: [{ type: "opened", title: "t" }]
      })
      const forged = yield* call(w, "sophia.ledger_append", {
        work_id: "t",
        expected_head: opened.head,
        events: [{ type: "asserted", field: "review", value: { verdict: "approved" } }]
      })
      assert.strictEqual(forged.error.code, "validation_error")
      const status = yield* call(w, "sophia.ledger_status", { work_id: "t" })
      assert.strictEqual(status.settled.head, opened.head)
      assert.isUndefined(status.settled.fields.review)
    }).pipe(Effect.provide(SophiaTest)))
})
