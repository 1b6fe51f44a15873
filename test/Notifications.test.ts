/**
 * Notifications over the real store (SQLite here, Postgres in the `postgres` project): the outbox written in the
 * event's transaction for subscribed targets only, each event's content, the delivery schedule under TestClock
 * against a real local HTTP receiver (same `Sophia-Delivery` on every retry, one delivered; dead after 8, `Retry`
 * delivers), the signature and the formats, approve links (once, 15 minutes, one approval), silences noticed once,
 * and two workers on one store sending each notification once.
 */
import { SqlClient } from "@effect/sql"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Option, TestClock } from "effect"
import type { Caller } from "../src/domain/Auth.js"
import { SophiaTest } from "../src/layers/App.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { Approvals } from "../src/services/Approvals.js"
import { Auth } from "../src/services/Auth.js"
import { Notifications } from "../src/services/Notifications.js"
import { Portal } from "../src/services/Portal.js"
import { Waits } from "../src/services/Waits.js"
import { connect } from "./support/Fixtures.js"
import { type Receiver, startReceiver, verifySignature } from "./support/Receiver.js"

const BASE = "http://sophia.test:7337"

const call = (caller: Caller, name: string, args: unknown = {}) =>
  Effect.flatMap(Dispatcher, (d) => d.call(caller, name, args)).pipe(Effect.map((o) => o.body as any))

const receiver = (answer?: Receiver["answer"]) => Effect.acquireRelease(Effect.promise(() => startReceiver(answer)), (r) => Effect.promise(r.close))

const outbox = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql<{ id: string; target_id: string; event: string; status: string; attempts: number; content: string; next_at: string }>`
    SELECT id, target_id, event, status, attempts, content, next_at FROM notify_outbox ORDER BY created_at, id`).pipe(
    Effect.map((rows) => rows.map((r) => ({ ...r, attempts: Number(r.attempts), content: JSON.parse(r.content) }))),
    Effect.orDie
  )

const addTarget = (userId: string, input: Record<string, unknown>) =>
  Effect.flatMap(Notifications, (n) => n.addTarget(userId, input))
const deliver = Effect.flatMap(Notifications, (n) => n.deliverDue(BASE))

/** An assistant's plain write: refused at once with a pending approval (`ApprovalRequested`). */
const gatedCall = (caller: Caller, title = "t") =>
  Effect.map(call(caller, "sophia.add_document", { title, body: "b" }), (body) => {
    assert.strictEqual(body.error?.code, "approval_required", JSON.stringify(body))
    return body.error.approval_id as string
  })

describe("Notifications: the outbox", () => {
  it.effect("a gated call writes approval_requested for the subscribed targets only, in its own transaction; none configured, nothing", () =>
    Effect.gen(function*() {
      const { caller: agent } = yield* connect("scribe", "assistant")
      yield* gatedCall(agent, "before any target")
      assert.deepStrictEqual(yield* outbox, [])
      const hears = yield* addTarget(agent.userId, { url: "http://127.0.0.1:9/a", events: ["approval_requested"] })
      yield* addTarget(agent.userId, { url: "http://127.0.0.1:9/b", events: ["wait_ended", "orphan"] })
      const approvalId = yield* gatedCall(agent, "after")
      const rows = yield* outbox
      assert.lengthOf(rows, 1)
      assert.strictEqual(rows[0].target_id, hears.id)
      assert.strictEqual(rows[0].event, "approval_requested")
      assert.strictEqual(rows[0].status, "pending")
      // the row holds the event's facts; names, summary and the approve link are made when it is sent
      assert.deepStrictEqual(rows[0].content, { approval_id: approvalId, tool: "sophia.add_document", access: "write", connection_id: agent.connectionId })
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("a target is refused with a bad URL, an unknown event or format; listed without its secret; removed with its rows", () =>
    Effect.gen(function*() {
      const { caller } = yield* connect("owner-agent")
      const n = yield* Notifications
      for (const bad of [{ url: "ftp://x", events: ["orphan"] }, { url: "http://x", events: ["nope"] }, { url: "http://x", events: [] }, {
        url: "http://x",
        events: ["orphan"],
        format: "xml"
      }]) {
        const refused = yield* Effect.flip(n.addTarget(caller.userId, bad))
        assert.strictEqual(refused._tag, "ValidationError", JSON.stringify(bad))
      }
      const t = yield* n.addTarget(caller.userId, { url: "https://hooks.slack.com/services/x", events: ["orphan", "orphan"], format: "slack", secret: "s3cret" })
      assert.deepStrictEqual(t.events, ["orphan"])
      const listed = yield* n.listTargets(caller.userId)
      assert.deepStrictEqual(listed.map((x) => [x.id, x.format, x.signed]), [[t.id, "slack", true]])
      assert.notInclude(JSON.stringify(listed), "s3cret")
      yield* n.sendTest(caller.userId, t.id)
      assert.lengthOf(yield* outbox, 1)
      yield* n.removeTarget(caller.userId, t.id)
      assert.deepStrictEqual(yield* n.listTargets(caller.userId), [])
      assert.deepStrictEqual(yield* outbox, [])
      assert.strictEqual((yield* Effect.flip(n.removeTarget(caller.userId, t.id)))._tag, "NotFound")
      // another user's target is not found either
      const { caller: other } = yield* connect("stranger", "full", "someone-else")
      const theirs = yield* n.addTarget(other.userId, { url: "http://x.test/", events: ["orphan"] })
      assert.strictEqual((yield* Effect.flip(n.sendTest(caller.userId, theirs.id)))._tag, "NotFound")
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("approval_decided, wait_ended (unsatisfied, not satisfied), connection_revoked and orphan (a lease held) each write theirs", () =>
    Effect.gen(function*() {
      const { caller: a } = yield* connect("alice")
      const { caller: b } = yield* connect("bob")
      const { caller: scribe } = yield* connect("scribe", "assistant")
      const all = ["approval_decided", "wait_ended", "orphan", "connection_revoked"]
      yield* addTarget(a.userId, { url: "http://127.0.0.1:9/", events: all })
      // a wait satisfied writes nothing; one that times out writes wait_ended
      const satisfied = yield* call(a, "sophia.declare_wait", { on: "bob", predicate: { type: "post_exists", channel: "arc:s" }, reason: "r" })
      yield* call(b, "sophia.coordination_post", { channel: "arc:s", kind: "status", body: "here" })
      assert.isString(satisfied.wait_id)
      const lapsing = yield* call(a, "sophia.declare_wait", { on: "bob", predicate: { type: "post_exists", channel: "arc:t" }, reason: "r", timeout_s: 5 })
      yield* TestClock.adjust("6 seconds")
      yield* Effect.flatMap(Waits, (w) => w.sweep())
      // an approval decided
      const approvalId = yield* gatedCall(scribe)
      yield* Effect.flatMap(Approvals, (x) => x.decide(approvalId, "denied", "portal"))
      // bob holds a lease, then is revoked: connection_revoked and orphan
      yield* call(b, "sophia.lease_acquire", { resources: ["path:src/**"], reason: "refactor" })
      yield* Effect.flatMap(Auth, (auth) => auth.revoke(b.connectionId))
      const rows = yield* outbox
      // (written at one TestClock instant: in no particular order)
      assert.sameMembers(rows.map((r) => r.event), ["wait_ended", "approval_decided", "connection_revoked", "orphan"])
      const [ended, decided, revoked, orphan] = ["wait_ended", "approval_decided", "connection_revoked", "orphan"].map((e) => rows.find((r) => r.event === e)!)
      assert.strictEqual(ended.content.wait_id, lapsing.wait_id)
      assert.strictEqual(ended.content.resolution, "unsatisfied")
      assert.strictEqual(decided.content.status, "denied")
      assert.strictEqual(revoked.content.connection_id, b.connectionId)
      assert.strictEqual(orphan.content.reason, "revoked")
      assert.deepStrictEqual(orphan.content.leases.map((l: any) => l.resources), [["path:src/**"]])
      // what each says, as listed (names joined now)
      const listed = yield* Effect.flatMap(Notifications, (n) => n.notifications(a.userId))
      const said = new Map(listed.recent.map((n) => [n.event, n.summary]))
      assert.match(said.get("orphan")!, /^bob is revoked holding 1 lease; another agent may take them over$/)
      assert.match(said.get("wait_ended")!, /^alice's wait on arc:t ended unsatisfied$/)
      assert.match(said.get("approval_decided")!, /for scribe was denied \(portal\)$/)
      assert.strictEqual(said.get("connection_revoked"), "bob was revoked: its bearer opens nothing any more")
      // a connection revoked holding nothing: connection_revoked alone
      const { caller: c } = yield* connect("carol")
      yield* Effect.flatMap(Auth, (auth) => auth.revoke(c.connectionId))
      assert.deepStrictEqual((yield* outbox).filter((r) => r.content.connection_id === c.connectionId).map((r) => r.event), ["connection_revoked"])
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("a connection gone silent is noticed once per silence; holding a lease it is an orphan notification", () =>
    Effect.gen(function*() {
      const auth = yield* Auth
      const { bearer: alice, caller: a } = yield* connect("alice")
      const { bearer: bob, caller: b } = yield* connect("bob")
      // a call is seen when its bearer is checked
      const seen = (bearer: string) => Effect.orDie(auth.authenticate(bearer))
      yield* addTarget(a.userId, { url: "http://127.0.0.1:9/", events: ["orphan"] })
      yield* call(b, "sophia.lease_acquire", { resources: ["slot:deploy"], reason: "deploying", ttl_s: 86400 })
      assert.strictEqual(yield* auth.noticeSilence(), 0)
      yield* TestClock.adjust("901 seconds")
      yield* seen(alice) // alice calls: not silent
      assert.strictEqual(yield* auth.noticeSilence(), 1)
      assert.strictEqual(yield* auth.noticeSilence(), 0, "once per silence")
      const rows = yield* outbox
      assert.deepStrictEqual(rows.map((r) => [r.event, r.content.connection_id, r.content.reason]), [["orphan", b.connectionId, "silent"]])
      // bob calls again, then falls silent again: a new silence
      yield* seen(bob)
      assert.strictEqual(yield* auth.noticeSilence(), 0)
      yield* TestClock.adjust("901 seconds")
      yield* seen(alice)
      assert.strictEqual(yield* auth.noticeSilence(), 1)
      assert.lengthOf(yield* outbox, 2)
    }).pipe(Effect.provide(SophiaTest)))
})

describe("Notifications: delivery", () => {
  it.scoped("a receiver failing 3 times gets the same Sophia-Delivery on the 4th; exactly one is delivered; the signature verifies", () =>
    Effect.gen(function*() {
      const r = yield* receiver((n) => (n < 3 ? 503 : 200))
      const { caller: scribe } = yield* connect("scribe", "assistant")
      yield* addTarget(scribe.userId, { url: r.url, events: ["approval_requested"], secret: "whsec_test" })
      const approvalId = yield* gatedCall(scribe)
      assert.strictEqual(yield* deliver, 0)
      assert.lengthOf(r.received, 1)
      // nothing before the backoff (1 s ±20 %), the next attempt after it; then 2 s, 4 s
      for (const [early, late] of [[700, 600], [1500, 1000], [3100, 2000]] as const) {
        yield* TestClock.adjust(early)
        const before = r.received.length
        yield* deliver
        assert.strictEqual(r.received.length, before, "not before its backoff")
        yield* TestClock.adjust(late)
        yield* deliver
        assert.strictEqual(r.received.length, before + 1)
      }
      assert.lengthOf(r.received, 4)
      const ids = new Set(r.received.map((x) => x.headers["sophia-delivery"]))
      assert.strictEqual(ids.size, 1)
      const [row] = yield* outbox
      assert.strictEqual(row.id, [...ids][0])
      assert.strictEqual(row.status, "delivered")
      assert.strictEqual(row.attempts, 4)
      yield* TestClock.adjust("1 hour")
      yield* deliver
      assert.lengthOf(r.received, 4, "a delivered notification is never sent again")
      const last = r.received[3]
      assert.strictEqual(last.headers["sophia-event"], "approval_requested")
      assert.isTrue(yield* Effect.promise(() => verifySignature("whsec_test", last.headers["sophia-signature"] as string, last.body)))
      assert.isFalse(yield* Effect.promise(() => verifySignature("wrong", last.headers["sophia-signature"] as string, last.body)))
      const body = JSON.parse(last.body)
      assert.deepStrictEqual(Object.keys(body).sort(), ["at", "data", "event", "id", "links", "summary"])
      assert.strictEqual(body.id, row.id)
      assert.strictEqual(body.data.approval_id, approvalId)
      assert.strictEqual(body.data.agent_name, "scribe")
      assert.match(body.summary, /^scribe asks to run sophia\.add_document \(write\); approval apr-/)
      assert.match(body.links.approve, new RegExp(`^${BASE}/portal/approve/${approvalId}\\?token=spa_`))
      assert.strictEqual(body.links.portal, `${BASE}/portal/approvals?approval=${approvalId}`)
      // each attempt carries a fresh approve link (valid 15 minutes from its send)
      const links = r.received.map((x) => JSON.parse(x.body).links.approve)
      assert.strictEqual(new Set(links).size, 4)
    }).pipe(Effect.provide(SophiaTest)))

  it.scoped("after 8 failed attempts it is dead (listed); Retry delivers it", () =>
    Effect.gen(function*() {
      const r = yield* receiver(() => 500)
      const { caller } = yield* connect("owner-agent")
      const n = yield* Notifications
      const t = yield* addTarget(caller.userId, { url: r.url, events: ["orphan"] })
      const { notification_id } = yield* n.sendTest(caller.userId, t.id)
      for (let i = 0; i < 12; i++) {
        yield* deliver
        yield* TestClock.adjust("3 minutes")
      }
      assert.lengthOf(r.received, 8)
      const listed = yield* n.notifications(caller.userId)
      assert.deepStrictEqual(listed.dead.map((d) => [d.id, d.status, d.attempts, d.last_error]), [[notification_id, "dead", 8, "HTTP 500"]])
      r.answer = () => 200
      yield* n.retry(caller.userId, notification_id)
      yield* deliver
      assert.lengthOf(r.received, 9)
      assert.strictEqual(r.received[8].headers["sophia-delivery"], notification_id)
      const after = yield* n.notifications(caller.userId)
      assert.deepStrictEqual(after.dead, [])
      assert.strictEqual(after.recent[0].status, "delivered")
      // only a dead one can be retried
      assert.strictEqual((yield* Effect.flip(n.retry(caller.userId, notification_id)))._tag, "NotFound")
    }).pipe(Effect.provide(SophiaTest)))

  it.scoped("slack is { text } with the links; ntfy is plain text with Title, Click and a view action", () =>
    Effect.gen(function*() {
      const r = yield* receiver()
      const { caller: scribe } = yield* connect("scribe", "assistant")
      yield* addTarget(scribe.userId, { url: r.url + "/slack", events: ["approval_requested"], format: "slack" })
      yield* addTarget(scribe.userId, { url: r.url + "/ntfy", events: ["approval_requested"], format: "ntfy" })
      const approvalId = yield* gatedCall(scribe)
      yield* deliver
      assert.lengthOf(r.received, 2)
      const slack = r.received.find((x) => x.path.endsWith("/slack"))!
      const ntfy = r.received.find((x) => x.path.endsWith("/ntfy"))!
      const text = JSON.parse(slack.body).text as string
      assert.deepStrictEqual(Object.keys(JSON.parse(slack.body)), ["text"])
      assert.match(text, /^\*Sophia: Approval requested\*\nscribe asks to run sophia\.add_document/)
      assert.match(text, new RegExp(`<${BASE}/portal/approve/${approvalId}\\?token=spa_[^|]+\\|Open to approve or deny>`))
      assert.strictEqual(ntfy.headers["title"], "Sophia: Approval requested")
      assert.match(ntfy.headers["click"] as string, new RegExp(`^${BASE}/portal/approve/${approvalId}\\?token=spa_`))
      assert.match(ntfy.headers["actions"] as string, /^view, Approve or deny, http/)
      assert.match(ntfy.headers["content-type"] as string, /^text\/plain/)
      assert.match(ntfy.body, /^scribe asks to run sophia\.add_document/)
      // each target has its own approve link (one-time each)
      assert.notStrictEqual(ntfy.headers["click"], /<([^|]+)\|/.exec(text)![1])
    }).pipe(Effect.provide(SophiaTest)))

  it.live("two workers on one store: each of 200 notifications is delivered once", () =>
    Effect.gen(function*() {
      const r = yield* receiver()
      const { caller } = yield* connect("owner-agent")
      const n = yield* Notifications
      const t = yield* addTarget(caller.userId, { url: r.url, events: ["orphan"] })
      const ids = yield* Effect.forEach(Array.from({ length: 200 }), () => Effect.map(n.sendTest(caller.userId, t.id), (x) => x.notification_id))
      yield* Effect.all([deliver, deliver, deliver], { concurrency: "unbounded" })
      assert.lengthOf(r.received, 200)
      assert.deepStrictEqual(new Set(r.received.map((x) => x.headers["sophia-delivery"])), new Set(ids))
      const rows = yield* outbox
      assert.isTrue(rows.every((row) => row.status === "delivered" && row.attempts === 1))
    }).pipe(Effect.scoped, Effect.provide(SophiaTest)))
})

describe("Notifications: approve links", () => {
  it.effect("an approve link opens a session limited to its approval, once; used twice, after 15 minutes, or for another approval, refused", () =>
    Effect.gen(function*() {
      const portal = yield* Portal
      const { caller } = yield* connect("owner-agent")
      const link = yield* portal.mintApproveLink(caller.userId, "apr-1")
      // not a login to the whole portal
      assert.strictEqual((yield* Effect.flip(portal.redeem(link.token)))._tag, "PortalLoginRefused")
      assert.strictEqual((yield* Effect.flip(portal.redeemApproveLink(link.token, "apr-2"))).reason, "unknown")
      const opened = yield* portal.redeemApproveLink(link.token, "apr-1")
      const session = Option.getOrThrow(yield* portal.session(opened.session_token))
      assert.strictEqual(session.approval_id, "apr-1")
      assert.isAtMost(opened.max_age_s, 15 * 60)
      const twice = yield* Effect.flip(portal.redeemApproveLink(link.token, "apr-1"))
      assert.strictEqual(twice.reason, "used")
      assert.match(twice.message, /already used/)
      // a fresh link, 15 minutes later: expired
      const late = yield* portal.mintApproveLink(caller.userId, "apr-1")
      yield* TestClock.adjust("14 minutes")
      yield* TestClock.adjust("60001 millis")
      const expired = yield* Effect.either(portal.redeemApproveLink(late.token, "apr-1"))
      assert.isTrue(Either.isLeft(expired) && expired.left.reason === "expired")
      // and the session it opened has ended with it
      assert.isTrue(Option.isNone(yield* portal.session(opened.session_token)))
    }).pipe(Effect.provide(SophiaTest)))
})
