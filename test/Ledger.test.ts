import { SqlClient } from "@effect/sql"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { Caller } from "../src/domain/Auth.js"
import { SophiaLive, SophiaTest } from "../src/layers/App.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { settle } from "../src/domain/LedgerCore.js"
import { eventHash, stateHash } from "../src/domain/LedgerHash.js"
import { replay } from "../src/domain/LedgerReplay.js"
import { Ledger } from "../src/services/Ledger.js"
import { connect } from "./support/Fixtures.js"

const SHA_A = "a".repeat(64)
const SHA_B = "b".repeat(64)

const open = (ledger: Ledger, caller: Caller, workId = "w1") =>
  ledger.append(caller, { work_id: workId, expected_head: null, events: [{ type: "opened", title: "the work" }] })

const countEvents = (userId: string, workId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM ledger_events WHERE user_id = ${userId} AND work_id = ${workId}`
    return Number(rows[0].n)
  }).pipe(Effect.orDie)

const headRow = (userId: string, workId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ head: string; seq: number; updated_at: string }>`SELECT head, seq, updated_at FROM ledger_work
      WHERE user_id = ${userId} AND work_id = ${workId}`
    return rows[0]
  }).pipe(Effect.orDie)

describe("Ledger", () => {
  it.effect("creates a work item, chains each event to its parent and settles asserted fields", () =>
    Effect.gen(function*() {
      const ledger = yield* Ledger
      const { caller } = yield* connect("worker")
      const created = yield* open(ledger, caller)
      assert.strictEqual(created.seq, 1)
      const next = yield* ledger.append(caller, {
        work_id: "w1",
        expected_head: created.head,
        events: [{ type: "claimed" }, { type: "asserted", field: "status", value: "in_progress" }, {
          type: "asserted",
          field: "progress",
          value: { done: 3, of: 7 }
        }]
      })
      assert.strictEqual(next.seq, 4)
      const events = yield* ledger.events(caller.userId, "w1")
      assert.deepStrictEqual(events.map((e) => e.seq), [1, 2, 3, 4])
      assert.isNull(events[0].parent)
      for (let i = 1; i < events.length; i++) assert.strictEqual(events[i].parent, events[i - 1].hash)
      for (const e of events) {
        const { hash, ...rest } = e
        assert.strictEqual(eventHash(rest), hash)
        assert.strictEqual(e.actor, caller.connectionId)
        assert.strictEqual(e.evidence, "asserted")
      }
      assert.strictEqual(next.head, events[3].hash)
      const status = yield* ledger.status(caller, "w1")
      assert.strictEqual(status.settled.head, next.head)
      assert.strictEqual(status.settled.claimant, caller.connectionId)
      assert.deepStrictEqual(status.settled.fields.status, {
        value: "in_progress",
        evidence: "asserted",
        set_by: caller.connectionId,
        at: events[2].at,
        seq: 3
      })
      assert.deepStrictEqual(status.settled.fields.progress.value, { done: 3, of: 7 })
      assert.strictEqual(status.observed.claimant?.connection_id, caller.connectionId)
      assert.strictEqual(status.observed.claimant?.agent_name, "worker")
      assert.isString(status.observed.observed_at)
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("refuses a moved head with head_moved {expected, actual} and writes nothing", () =>
    Effect.gen(function*() {
      const ledger = yield* Ledger
      const { caller } = yield* connect("worker")
      const created = yield* open(ledger, caller)
      const moved = yield* ledger.append(caller, {
        work_id: "w1",
        expected_head: created.head,
        events: [{ type: "asserted", field: "status", value: "a" }]
      })
      const stale = yield* Effect.flip(ledger.append(caller, {
        work_id: "w1",
        expected_head: created.head,
        events: [{ type: "asserted", field: "status", value: "b" }]
      }))
      assert.strictEqual(stale._tag, "HeadMoved")
      if (stale._tag === "HeadMoved") {
        assert.strictEqual(stale.expected, created.head)
        assert.strictEqual(stale.actual, moved.head)
      }
      // expected_head null on an existing item is a moved head too
      const recreate = yield* Effect.flip(open(ledger, caller))
      assert.strictEqual(recreate._tag, "HeadMoved")
      if (recreate._tag === "HeadMoved") {
        assert.isNull(recreate.expected)
        assert.strictEqual(recreate.actual, moved.head)
      }
      // a head on an item that does not exist
      const missing = yield* Effect.flip(ledger.append(caller, {
        work_id: "nope",
        expected_head: moved.head,
        events: [{ type: "claimed" }]
      }))
      assert.strictEqual(missing._tag, "HeadMoved")
      if (missing._tag === "HeadMoved") assert.isNull(missing.actual)
      assert.strictEqual(yield* countEvents(caller.userId, "w1"), 2)
      assert.strictEqual((yield* ledger.status(caller, "w1")).settled.fields.status.value, "a")
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("takes an append all or none", () =>
    Effect.gen(function*() {
      const ledger = yield* Ledger
      const { caller } = yield* connect("worker")
      const created = yield* open(ledger, caller)
      const err = yield* Effect.flip(ledger.append(caller, {
        work_id: "w1",
        expected_head: created.head,
        events: [{ type: "asserted", field: "status", value: "x" }, { type: "claimed" }, { type: "claimed" }]
      }))
      assert.strictEqual(err._tag, "InvalidTransition")
      assert.strictEqual(yield* countEvents(caller.userId, "w1"), 1)
      const status = yield* ledger.status(caller, "w1")
      assert.strictEqual(status.settled.head, created.head)
      assert.isUndefined(status.settled.fields.status)
      assert.isNull(status.settled.claimant)
      // a new item whose first event is not `opened` leaves no trace either
      const bad = yield* Effect.flip(ledger.append(caller, { work_id: "w2", expected_head: null, events: [{ type: "claimed" }] }))
      assert.strictEqual(bad._tag, "InvalidTransition")
      assert.isUndefined(yield* headRow(caller.userId, "w2"))
      assert.strictEqual(yield* countEvents(caller.userId, "w2"), 0)
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("refuses empty appends (service and tool) and never writes the head back", () =>
    Effect.gen(function*() {
      const ledger = yield* Ledger
      const dispatcher = yield* Dispatcher
      const { caller } = yield* connect("worker")
      const created = yield* open(ledger, caller)
      const before = yield* headRow(caller.userId, "w1")
      const err = yield* Effect.flip(ledger.append(caller, { work_id: "w1", expected_head: created.head, events: [] }))
      assert.strictEqual(err._tag, "ValidationError")
      const viaTool = yield* dispatcher.call(caller, "sophia.ledger_append", { work_id: "w1", expected_head: created.head, events: [] })
      assert.isFalse(viaTool.ok)
      assert.strictEqual((viaTool.body as any).error.code, "validation_error")
      const fresh = yield* Effect.flip(ledger.append(caller, { work_id: "w9", expected_head: null, events: [] }))
      assert.strictEqual(fresh._tag, "ValidationError")
      assert.deepStrictEqual(yield* headRow(caller.userId, "w1"), before)
      assert.isUndefined(yield* headRow(caller.userId, "w9"))
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("agents write only asserted; observed comes from the server; weaker never overwrites stronger", () =>
    Effect.gen(function*() {
      const ledger = yield* Ledger
      const dispatcher = yield* Dispatcher
      const { caller } = yield* connect("worker")
      const created = yield* open(ledger, caller)
      // an agent cannot smuggle a stronger evidence class or a server event type through the tool
      const smuggled = yield* dispatcher.call(caller, "sophia.ledger_append", {
        work_id: "w1",
        expected_head: created.head,
        events: [{ type: "asserted", field: "ci", value: "green", evidence: "verified" }]
      })
      assert.isTrue(smuggled.ok)
      let status = yield* ledger.status(caller, "w1")
      assert.strictEqual(status.settled.fields.ci.evidence, "asserted")
      const observedByAgent = yield* dispatcher.call(caller, "sophia.ledger_append", {
        work_id: "w1",
        expected_head: status.settled.head,
        events: [{ type: "observed", field: "ci", value: "green", source: "me" }]
      })
      assert.isFalse(observedByAgent.ok)
      assert.strictEqual((observedByAgent.body as any).error.code, "validation_error")
      // the server observes: asserted → observed is an upgrade
      const seen = yield* ledger.observe(caller.userId, "w1", "ci", "red", "wait:123 resolved")
      status = yield* ledger.status(caller, "w1")
      assert.strictEqual(status.settled.fields.ci.evidence, "observed")
      assert.strictEqual(status.settled.fields.ci.set_by, "server")
      // and an agent can no longer overwrite it with a self-report
      const down = yield* Effect.flip(ledger.append(caller, {
        work_id: "w1",
        expected_head: seen.head,
        events: [{ type: "asserted", field: "ci", value: "green" }]
      }))
      assert.strictEqual(down._tag, "EvidenceDowngrade")
      if (down._tag === "EvidenceDowngrade") {
        assert.deepStrictEqual({ field: down.field, current: down.current, attempted: down.attempted }, {
          field: "ci",
          current: "observed",
          attempted: "asserted"
        })
      }
      const viaTool = yield* dispatcher.call(caller, "sophia.ledger_append", {
        work_id: "w1",
        expected_head: seen.head,
        events: [{ type: "asserted", field: "ci", value: "green" }]
      })
      assert.strictEqual((viaTool.body as any).error.code, "evidence_downgrade")
      assert.strictEqual((viaTool.body as any).error.current, "observed")
      assert.strictEqual((viaTool.body as any).error.attempted, "asserted")
      // observed on top of observed is fine
      yield* ledger.observe(caller.userId, "w1", "ci", "green", "wait:124 resolved")
      assert.strictEqual((yield* ledger.status(caller, "w1")).settled.fields.ci.value, "green")
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("reviews: durable request ids, verified only from an approving verdict, no self-certification", () =>
    Effect.gen(function*() {
      const ledger = yield* Ledger
      const dispatcher = yield* Dispatcher
      const { caller: worker } = yield* connect("worker")
      const { caller: helper } = yield* connect("helper")
      const { caller: reviewer } = yield* connect("reviewer")
      const { caller: claimer } = yield* connect("claimer")
      let head = (yield* open(ledger, worker)).head
      head = (yield* ledger.append(worker, { work_id: "w1", expected_head: head, events: [{ type: "asserted", field: "status", value: "done" }] })).head
      head = (yield* ledger.append(claimer, { work_id: "w1", expected_head: head, events: [{ type: "claimed" }] })).head
      const req = yield* ledger.requestReview(helper, { work_id: "w1", expected_head: head, artifact: { uri: "git:abc", sha256: SHA_A } })
      head = req.head
      assert.match(req.request_id, /^rev_[0-9a-f-]{36}$/)
      const req2 = yield* ledger.requestReview(helper, { work_id: "w1", expected_head: head, artifact: { uri: "git:def", sha256: SHA_B } })
      assert.notStrictEqual(req2.request_id, req.request_id)
      head = req2.head
      // the asserter, the claimant and the requester cannot give the verdict
      for (const [who, reason] of [[worker, "asserted"], [claimer, "holds the claim"], [helper, "requested the review"]] as const) {
        const err = yield* Effect.flip(ledger.giveVerdict(who, {
          request_id: req.request_id,
          expected_head: head,
          verdict: "approved",
          artifact_sha256: SHA_A
        }))
        assert.strictEqual(err._tag, "SelfCertification", reason)
        const viaTool = yield* dispatcher.call(who, "sophia.review_verdict", {
          request_id: req.request_id,
          expected_head: head,
          verdict: "approved",
          artifact_sha256: SHA_A
        })
        assert.strictEqual((viaTool.body as any).error.code, "self_certification")
      }
      // the verdict must name the artifact the request named
      const wrong = yield* Effect.flip(ledger.giveVerdict(reviewer, {
        request_id: req.request_id,
        expected_head: head,
        verdict: "approved",
        artifact_sha256: SHA_B
      }))
      assert.strictEqual(wrong._tag, "ValidationError")
      const approved = yield* ledger.giveVerdict(reviewer, {
        request_id: req.request_id,
        expected_head: head,
        verdict: "approved",
        artifact_sha256: SHA_A,
        notes: "checked"
      })
      head = approved.head
      const status = yield* ledger.status(worker, "w1")
      assert.strictEqual(status.settled.fields.review.evidence, "verified")
      assert.strictEqual(status.settled.fields.review.set_by, reviewer.connectionId)
      assert.deepStrictEqual(status.settled.fields.review.value, {
        request_id: req.request_id,
        verdict: "approved",
        artifact: { uri: "git:abc", sha256: SHA_A }
      })
      assert.deepStrictEqual(status.observed.pending_reviews.map((r) => r.request_id), [req2.request_id])
      assert.deepStrictEqual(status.settled.reviews.map((r) => r.status), ["approved", "pending"])
      // a second verdict on a closed request; a verdict on an unknown request
      const again = yield* Effect.flip(ledger.giveVerdict(reviewer, {
        request_id: req.request_id,
        expected_head: head,
        verdict: "rejected",
        artifact_sha256: SHA_A
      }))
      assert.strictEqual(again._tag, "InvalidTransition")
      const unknown = yield* dispatcher.call(reviewer, "sophia.review_verdict", {
        request_id: "rev_nope",
        expected_head: head,
        verdict: "approved",
        artifact_sha256: SHA_A
      })
      assert.strictEqual((unknown.body as any).error.code, "invalid_transition")
      // a rejecting verdict closes its request but is not verified evidence
      head = (yield* ledger.giveVerdict(reviewer, {
        request_id: req2.request_id,
        expected_head: head,
        verdict: "changes_requested",
        artifact_sha256: SHA_B
      })).head
      const after = yield* ledger.status(worker, "w1")
      assert.deepStrictEqual(after.settled.reviews.map((r) => r.status), ["approved", "changes_requested"])
      assert.strictEqual(after.settled.fields.review.value && (after.settled.fields.review.value as any).request_id, req.request_id)
      const last = (yield* ledger.events(worker.userId, "w1")).at(-1)!
      assert.strictEqual(last.type, "review_verdict")
      assert.strictEqual(last.evidence, "asserted")
      // nobody can downgrade the verified review field: not the server, not an agent
      const serverDown = yield* Effect.flip(ledger.observe(worker.userId, "w1", "review", "looks fine", "test"))
      assert.strictEqual(serverDown._tag, "EvidenceDowngrade")
      const agentDown = yield* Effect.flip(ledger.append(reviewer, {
        work_id: "w1",
        expected_head: head,
        events: [{ type: "asserted", field: "review", value: "mine" }]
      }))
      assert.strictEqual(agentDown._tag, "ValidationError", "agents never write the review field")
      assert.isTrue((yield* ledger.verify()).ok)
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("a request addressed to a reviewer takes only that reviewer's verdict", () =>
    Effect.gen(function*() {
      const ledger = yield* Ledger
      const { caller: worker } = yield* connect("worker")
      const { caller: named } = yield* connect("named")
      const { caller: other } = yield* connect("other")
      const head = (yield* open(ledger, worker)).head
      const unknown = yield* Effect.flip(ledger.requestReview(worker, {
        work_id: "w1",
        expected_head: head,
        artifact: { uri: "u", sha256: SHA_A },
        reviewer: "ghost"
      }))
      assert.strictEqual(unknown._tag, "UnknownRecipient")
      const req = yield* ledger.requestReview(worker, {
        work_id: "w1",
        expected_head: head,
        artifact: { uri: "u", sha256: SHA_A },
        reviewer: "named"
      })
      const err = yield* Effect.flip(ledger.giveVerdict(other, {
        request_id: req.request_id,
        expected_head: req.head,
        verdict: "approved",
        artifact_sha256: SHA_A
      }))
      assert.strictEqual(err._tag, "InvalidTransition")
      yield* ledger.giveVerdict(named, { request_id: req.request_id, expected_head: req.head, verdict: "approved", artifact_sha256: SHA_A })
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("closing: only observations and the review lifecycle follow a close", () =>
    Effect.gen(function*() {
      const ledger = yield* Ledger
      const { caller } = yield* connect("worker")
      const { caller: reviewer } = yield* connect("reviewer")
      const created = yield* open(ledger, caller)
      const closed = yield* ledger.append(caller, {
        work_id: "w1",
        expected_head: created.head,
        events: [{ type: "closed", resolution: "done" }]
      })
      const err = yield* Effect.flip(ledger.append(caller, {
        work_id: "w1",
        expected_head: closed.head,
        events: [{ type: "asserted", field: "status", value: "reopened?" }]
      }))
      assert.strictEqual(err._tag, "InvalidTransition")
      const req = yield* ledger.requestReview(caller, { work_id: "w1", expected_head: closed.head, artifact: { uri: "u", sha256: SHA_A } })
      yield* ledger.giveVerdict(reviewer, { request_id: req.request_id, expected_head: req.head, verdict: "approved", artifact_sha256: SHA_A })
      const status = yield* ledger.status(caller, "w1")
      assert.strictEqual(status.settled.status, "closed")
      assert.strictEqual(status.settled.resolution, "done")
      assert.strictEqual(status.settled.fields.review.evidence, "verified")
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("isolates users: work ids, reads, reviews and verdicts are per user", () =>
    Effect.gen(function*() {
      const ledger = yield* Ledger
      const dispatcher = yield* Dispatcher
      const { caller: alice } = yield* connect("alice", "full", "owner")
      const { caller: bob } = yield* connect("bob", "full", "bob")
      const a = yield* open(ledger, alice)
      const req = yield* ledger.requestReview(alice, { work_id: "w1", expected_head: a.head, artifact: { uri: "u", sha256: SHA_A } })
      for (const tool of ["sophia.ledger_status", "sophia.ledger_log"]) {
        const r = yield* dispatcher.call(bob, tool, { work_id: "w1" })
        assert.strictEqual((r.body as any).error.code, "not_found", tool)
      }
      const diff = yield* dispatcher.call(bob, "sophia.ledger_diff", { work_id: "w1", from: a.head })
      assert.strictEqual((diff.body as any).error.code, "not_found")
      // bob cannot extend alice's head nor answer her review request
      const extend = yield* Effect.flip(ledger.append(bob, { work_id: "w1", expected_head: req.head, events: [{ type: "claimed" }] }))
      assert.strictEqual(extend._tag, "HeadMoved")
      const verdict = yield* Effect.flip(ledger.giveVerdict(bob, {
        request_id: req.request_id,
        expected_head: req.head,
        verdict: "approved",
        artifact_sha256: SHA_A
      }))
      assert.strictEqual(verdict._tag, "InvalidTransition")
      // the same work id is bob's own, independent item
      const b = yield* open(ledger, bob)
      assert.strictEqual(b.seq, 1)
      assert.notStrictEqual(b.head, a.head)
      assert.strictEqual((yield* ledger.status(alice, "w1")).settled.seq, 2)
      assert.strictEqual((yield* ledger.status(bob, "w1")).settled.seq, 1)
      assert.isTrue((yield* ledger.verify()).ok)
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("claimedByConnections: every open claimed item of the user, by claimant, as claimedBy gives each", () =>
    Effect.gen(function*() {
      const ledger = yield* Ledger
      const { caller: a } = yield* connect("a", "full", "owner")
      const { caller: b } = yield* connect("b", "full", "owner")
      const { caller: c } = yield* connect("c", "full", "owner")
      const { caller: other } = yield* connect("other", "full", "someone-else")
      const claim = (caller: Caller, workId: string, more: ReadonlyArray<any> = []) =>
        ledger.append(caller, { work_id: workId, expected_head: null, events: [{ type: "opened", title: workId }, { type: "claimed" }, ...more] })
      for (const id of ["a1", "a2", "a3"]) yield* claim(a, id)
      yield* claim(b, "b1")
      yield* claim(c, "c-closed", [{ type: "closed", resolution: "done" }])
      yield* claim(other, "o1")
      yield* open(ledger, a, "unclaimed")
      const byClaimant = yield* ledger.claimedByConnections(a.userId)
      assert.deepStrictEqual([...byClaimant.keys()].sort(), [a.connectionId, b.connectionId].sort())
      for (const caller of [a, b]) {
        assert.deepStrictEqual(byClaimant.get(caller.connectionId), yield* ledger.claimedBy(a.userId, caller.connectionId))
      }
      assert.deepStrictEqual(byClaimant.get(a.connectionId)!.map((w) => w.work_id).sort(), ["a1", "a2", "a3"])
      assert.deepStrictEqual(byClaimant.get(b.connectionId)!.map((w) => [w.work_id, w.status, w.seq]), [["b1", "open", 2]])
      assert.strictEqual((yield* ledger.claimedByConnections("nobody")).size, 0)
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("log pages newest first with hashes and takes the shared compact/fields projection", () =>
    Effect.gen(function*() {
      const ledger = yield* Ledger
      const dispatcher = yield* Dispatcher
      const { caller } = yield* connect("worker")
      let head = (yield* open(ledger, caller)).head
      for (let i = 0; i < 6; i++) {
        head = (yield* ledger.append(caller, { work_id: "w1", expected_head: head, events: [{ type: "asserted", field: "n", value: i }] })).head
      }
      const page1 = yield* ledger.log(caller, { work_id: "w1", limit: 3 })
      assert.deepStrictEqual(page1.events.map((e) => e.seq), [7, 6, 5])
      assert.strictEqual(page1.events[0].hash, head)
      const page2 = yield* ledger.log(caller, { work_id: "w1", limit: 3, before_seq: page1.next_before_seq! })
      assert.deepStrictEqual(page2.events.map((e) => e.seq), [4, 3, 2])
      const page3 = yield* ledger.log(caller, { work_id: "w1", limit: 3, before_seq: page2.next_before_seq! })
      assert.deepStrictEqual(page3.events.map((e) => e.seq), [1])
      assert.isNull(page3.next_before_seq)
      const compact = yield* dispatcher.call(caller, "sophia.ledger_log", { work_id: "w1", limit: 2, compact: true })
      assert.isTrue(compact.ok)
      assert.deepStrictEqual(Object.keys((compact.body as any).events[0]).sort(), ["data", "evidence", "hash", "seq", "type"])
      const fields = yield* dispatcher.call(caller, "sophia.ledger_log", { work_id: "w1", fields: ["seq", "hash"] })
      assert.deepStrictEqual(Object.keys((fields.body as any).events[0]).sort(), ["hash", "seq"])
      const unknown = yield* dispatcher.call(caller, "sophia.ledger_log", { work_id: "w1", fields: ["nope"] })
      assert.strictEqual((unknown.body as any).error.code, "unknown_fields")
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("diff reports field changes with evidence between two heads", () =>
    Effect.gen(function*() {
      const ledger = yield* Ledger
      const dispatcher = yield* Dispatcher
      const { caller } = yield* connect("worker")
      const created = yield* open(ledger, caller)
      const h1 = yield* ledger.append(caller, {
        work_id: "w1",
        expected_head: created.head,
        events: [{ type: "asserted", field: "status", value: "started" }, { type: "asserted", field: "branch", value: "b1" }]
      })
      const h2 = yield* ledger.append(caller, {
        work_id: "w1",
        expected_head: h1.head,
        events: [{ type: "asserted", field: "status", value: "review" }, { type: "claimed" }]
      })
      yield* ledger.observe(caller.userId, "w1", "ci", "green", "test")
      const d = yield* ledger.diff(caller, { work_id: "w1", from: h1.head })
      assert.strictEqual(d.from.seq, 3)
      assert.strictEqual(d.to.seq, 6)
      assert.strictEqual(d.events, 3)
      assert.deepStrictEqual(d.changes.map((c) => c.field), ["ci", "status"])
      const status = d.changes.find((c) => c.field === "status")!
      assert.strictEqual(status.before?.value, "started")
      assert.strictEqual(status.after?.value, "review")
      const ci = d.changes.find((c) => c.field === "ci")!
      assert.isNull(ci.before)
      assert.strictEqual(ci.after?.evidence, "observed")
      assert.deepStrictEqual(d.claimant, { before: null, after: caller.connectionId })
      const between = yield* ledger.diff(caller, { work_id: "w1", from: created.head, to: h2.head })
      assert.deepStrictEqual(between.changes.map((c) => c.field), ["branch", "status"])
      const backwards = yield* Effect.flip(ledger.diff(caller, { work_id: "w1", from: h2.head, to: created.head }))
      assert.strictEqual(backwards._tag, "ValidationError")
      const viaTool = yield* dispatcher.call(caller, "sophia.ledger_diff", { work_id: "w1", from: "c".repeat(64) })
      assert.strictEqual((viaTool.body as any).error.code, "not_found")
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("replays identically: the same events give the same state and state hash every time", () =>
    Effect.gen(function*() {
      const ledger = yield* Ledger
      const { caller } = yield* connect("worker")
      const { caller: reviewer } = yield* connect("reviewer")
      let head = (yield* open(ledger, caller)).head
      head = (yield* ledger.append(caller, {
        work_id: "w1",
        expected_head: head,
        events: [{ type: "claimed" }, { type: "asserted", field: "x", value: [1, { b: 2, a: 1.5e-7 }] }]
      })).head
      const req = yield* ledger.requestReview(caller, { work_id: "w1", expected_head: head, artifact: { uri: "u", sha256: SHA_A } })
      yield* ledger.giveVerdict(reviewer, { request_id: req.request_id, expected_head: req.head, verdict: "approved", artifact_sha256: SHA_A })
      const events = yield* ledger.events(caller.userId, "w1")
      const first = replay(events)
      const second = replay(events)
      assert.isNull(first.break)
      assert.strictEqual(stateHash(settle(first.state!)), stateHash(settle(second.state!)))
      const status = yield* ledger.status(caller, "w1")
      assert.strictEqual(status.settled.state_hash, stateHash(settle(first.state!)))
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("verify finds a tampered event, a tampered settled field and a moved head row", () =>
    Effect.gen(function*() {
      const ledger = yield* Ledger
      const sql = yield* SqlClient.SqlClient
      const { caller } = yield* connect("worker")
      let head = (yield* open(ledger, caller)).head
      for (let i = 0; i < 4; i++) {
        head = (yield* ledger.append(caller, { work_id: "w1", expected_head: head, events: [{ type: "asserted", field: "n", value: i }] })).head
      }
      yield* open(ledger, caller, "w0")
      const ok = yield* ledger.verify()
      assert.isTrue(ok.ok)
      assert.strictEqual(ok.work_items, 2)
      assert.strictEqual(ok.events, 6)
      yield* sql`UPDATE ledger_events SET data = ${JSON.stringify({ field: "n", value: 99 })} WHERE work_id = 'w1' AND seq = 3`
      const broken = yield* ledger.verify()
      assert.isFalse(broken.ok)
      assert.strictEqual(broken.first_break?.work_id, "w1")
      assert.strictEqual(broken.first_break?.seq, 3)
      assert.strictEqual(broken.first_break?.reason, "hash mismatch")
      yield* sql`UPDATE ledger_events SET data = ${JSON.stringify({ field: "n", value: 1 })} WHERE work_id = 'w1' AND seq = 3`
      assert.isTrue((yield* ledger.verify()).ok)
      yield* sql`UPDATE ledger_fields SET evidence = 'verified' WHERE work_id = 'w1' AND field = 'n'`
      const fieldBreak = yield* ledger.verify()
      assert.isFalse(fieldBreak.ok)
      assert.match(fieldBreak.first_break!.reason, /settled state/)
    }).pipe(Effect.provide(SophiaTest)))

  it("`sophia ledger verify` prints JSON and exits non-zero on a break", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sophia-ledger-cli-"))
    const db = path.join(dir, "s.db")
    try {
      await Effect.runPromise(Effect.gen(function*() {
        const ledger = yield* Ledger
        const { caller } = yield* connect("worker")
        const created = yield* open(ledger, caller)
        yield* ledger.append(caller, { work_id: "w1", expected_head: created.head, events: [{ type: "claimed" }] })
      }).pipe(Effect.provide(SophiaLive(db))))
      const run = () =>
        spawnSync(process.execPath, ["--import", "tsx", "src/main.ts", "ledger", "verify", "--db", db], { encoding: "utf8" })
      const good = run()
      assert.strictEqual(good.status, 0, good.stderr)
      assert.deepInclude(JSON.parse(good.stdout), { ok: true, work_items: 1, events: 2, first_break: null })
      const Sqlite = (await import("better-sqlite3")).default
      const raw = new Sqlite(db)
      raw.prepare(`UPDATE ledger_events SET actor = 'someone-else' WHERE seq = 2`).run()
      raw.close()
      const bad = run()
      assert.notStrictEqual(bad.status, 0)
      const report = JSON.parse(bad.stdout)
      assert.isFalse(report.ok)
      assert.strictEqual(report.first_break.seq, 2)
      assert.strictEqual(report.first_break.reason, "hash mismatch")
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }, 120_000)
})
