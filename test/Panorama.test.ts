import { assert, describe, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { encode } from "gpt-tokenizer/encoding/o200k_base"
import type { Caller } from "../src/domain/Auth.js"
import { SophiaTest } from "../src/layers/App.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { Auth } from "../src/services/Auth.js"
import { estimateTokens } from "../src/services/readmodel/PanoramaView.js"
import { connect } from "./support/Fixtures.js"

/** A tool call's whole reply body (the envelope included: what the agent's context pays for). */
const call = (caller: Caller, tool: string, args: unknown = {}) =>
  Effect.flatMap(Dispatcher, (d) => d.call(caller, tool, args)).pipe(Effect.map((o) => o.body as any))
const ok = (caller: Caller, tool: string, args: unknown = {}) =>
  Effect.tap(call(caller, tool, args), (body) => assert.isUndefined(body.error, `${tool}: ${JSON.stringify(body.error)}`))

const claim = (caller: Caller, workId: string, title = `work ${workId}`) =>
  ok(caller, "sophia.ledger_append", { work_id: workId, expected_head: null, events: [{ type: "opened", title }, { type: "claimed" }] })

const rowOf = (panorama: any, name: string) => panorama.connections.find((c: any) => c.name === name)

describe("sophia.panorama", () => {
  it.effect("lists live connections with claims, waits and leases, recent channels with their latest decision, orphans, your approvals", () =>
    Effect.gen(function*() {
      // at t = 0: an old conversation, and erin, who claims work and is never heard of again
      const { caller: alice } = yield* connect("alice", "full")
      const { caller: bob } = yield* connect("bob", "full")
      const { caller: carol } = yield* connect("carol", "assistant")
      const { caller: dave } = yield* connect("dave", "full")
      const { caller: erin } = yield* connect("erin", "full")
      yield* ok(bob, "sophia.coordination_post", { channel: "arc:old", kind: "decision", body: "the old decision" })
      yield* claim(erin, "w-erin")
      yield* ok(erin, "sophia.beacon", {})
      // two hours later, everyone but erin is heard from (a beacon is a heartbeat: no channel becomes recent by it)
      yield* TestClock.adjust("2 hours")
      for (const c of [alice, bob, carol, dave]) yield* ok(c, "sophia.beacon", {})

      yield* ok(alice, "sophia.coordination_post", { channel: "arc:plan", kind: "decision", body: "We ship  the\nAPI first." })
      yield* TestClock.adjust("1 minute")
      yield* ok(bob, "sophia.coordination_post", { channel: "arc:plan", kind: "status", body: "on it" })
      yield* ok(bob, "sophia.coordination_post", { channel: "arc:chat", kind: "question", body: "lunch?" })
      yield* ok(bob, "sophia.coordination_post", { channel: "arc:done", kind: "closeout", body: "all merged", closeout: { review_requested: false } })
      yield* claim(bob, "w-bob", "Write the API")
      yield* ok(bob, "sophia.lease_acquire", { resources: ["path:src/api/**", "slot:ci"], reason: "editing" })
      const bobWait = yield* ok(bob, "sophia.declare_wait", { on: "alice", predicate: { type: "post_exists", channel: "arc:review" }, reason: "review" })
      // dave claims and leases, then is revoked: orphaned (a wait on him ends with his revocation: not an orphan)
      yield* claim(dave, "w-dave")
      const daveLease = yield* ok(dave, "sophia.lease_acquire", { resources: ["path:docs/**"], reason: "docs" })
      yield* ok(alice, "sophia.declare_wait", { on: "dave", predicate: { type: "post_exists", channel: "arc:docs" }, reason: "docs" })
      yield* Effect.flatMap(Auth, (auth) => auth.revoke("dave"))
      // a wait on erin, silent: nobody will answer it
      const onErin = yield* ok(alice, "sophia.declare_wait", { on: "erin", predicate: { type: "post_exists", channel: "arc:erin" }, reason: "hers" })
      // carol (assistant) asks for a write: pending until the owner decides
      const refused = yield* call(carol, "sophia.add_document", { title: "t", body: "b" })
      assert.strictEqual(refused.error.code, "approval_required")

      const p = yield* ok(alice, "sophia.panorama", {})
      // live: not revoked (dave), not silent (erin: two hours without a call)
      assert.sameMembers(p.connections.map((c: any) => c.name), ["alice", "bob", "carol"])
      assert.strictEqual(p.silent, 1)
      assert.isTrue(rowOf(p, "alice").you)
      assert.isUndefined(rowOf(p, "bob").you)
      assert.deepInclude(rowOf(p, "bob"), {
        profile: "full",
        claims: ["w-bob"],
        open_waits: 1,
        leases: ["path:src/api/**", "slot:ci"]
      })
      assert.strictEqual(rowOf(p, "alice").open_waits, 1)
      assert.strictEqual(rowOf(p, "carol").profile, "assistant")
      for (const c of p.connections) assert.match(c.last_seen, /^\d+[sm] ago$/, "compact: an age")
      // recent channels (24 h by default): newest first, each with its latest decision or closeout; heartbeats' channel left out
      // (declare_wait posts to `waits`: a channel like any other)
      assert.sameMembers(p.channels.map((c: any) => c.channel), ["arc:done", "arc:chat", "arc:plan", "waits", "arc:old"])
      assert.strictEqual(p.channels.at(-1).channel, "arc:old")
      assert.strictEqual(p.channels.at(-1).last_post_at, "2h ago")
      const plan = p.channels.find((c: any) => c.channel === "arc:plan")
      assert.isUndefined(plan.archived)
      assert.deepInclude(plan.latest, { kind: "decision", channel_seq: 1, agent_name: "alice", body: "We ship the API first." })
      assert.isNull(p.channels.find((c: any) => c.channel === "arc:chat").latest)
      const done = p.channels.find((c: any) => c.channel === "arc:done")
      assert.deepInclude(done, { archived: true })
      assert.deepInclude(done.latest, { kind: "closeout", agent_name: "bob", body: "all merged" })
      // since_h narrows the window: the conversation of two hours ago is out
      const lastHour = yield* ok(alice, "sophia.panorama", { since_h: 1 })
      assert.sameMembers(lastHour.channels.map((c: any) => c.channel), ["arc:done", "arc:chat", "arc:plan", "waits"])
      // orphans: the revoked one's work and lease; the silent one's work and the wait on her
      assert.sameDeepMembers(p.orphans.work.map((w: any) => [w.work_id, w.agent_name, w.reason]), [
        ["w-dave", "dave", "revoked"],
        ["w-erin", "erin", "silent"]
      ])
      assert.deepStrictEqual(p.orphans.waits.map((w: any) => [w.wait_id, w.waiter, w.on, w.reason]), [
        [onErin.wait_id, "alice", "erin", "silent"]
      ])
      assert.deepStrictEqual(p.orphans.leases.map((l: any) => [l.lease_id, l.resources, l.agent_name, l.reason]), [
        [daveLease.lease_id, ["path:docs/**"], "dave", "revoked"]
      ])
      assert.notDeepInclude(p.orphans.waits.map((w: any) => w.wait_id), bobWait.wait_id)
      // approvals: the caller's own only
      assert.deepStrictEqual(p.my_pending_approvals, [])
      const mine = yield* ok(carol, "sophia.panorama", {})
      assert.deepStrictEqual(mine.my_pending_approvals.map((a: any) => [a.approval_id, a.tool]), [[refused.error.approval_id, "sophia.add_document"]])
      assert.isTrue(rowOf(mine, "carol").you)
      // nothing was cut
      assert.deepStrictEqual(p.more, {})
      // the whole view says the same, with whole times
      const whole = yield* ok(alice, "sophia.panorama", { compact: false })
      assert.deepStrictEqual(whole.channels.map((c: any) => c.channel), p.channels.map((c: any) => c.channel))
      assert.strictEqual(whole.channels.find((c: any) => c.channel === "arc:plan").last_seq, 2)
      assert.isTrue(whole.channels.find((c: any) => c.channel === "arc:done").archived)
      const times = whole.channels.map((c: any) => c.last_post_at)
      assert.deepStrictEqual(times, [...times].sort().reverse(), "most recently active first")
      assert.match(rowOf(whole, "bob").last_seen, /^1970-01-01T02:0\d:\d\d\.\d{3}Z$/)
      assert.strictEqual(rowOf(whole, "bob").connection_short, bob.connectionShort)
      assert.match(whole.channels.find((c: any) => c.channel === "arc:done").latest.created_at, /^1970-01-01T02:/)
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("refuses a window out of range or an argument it does not define", () =>
    Effect.gen(function*() {
      const { caller } = yield* connect("alice", "observer")
      for (const since_h of [0, -1, 721]) assert.strictEqual((yield* call(caller, "sophia.panorama", { since_h })).error.code, "validation_error")
      const unknown = yield* call(caller, "sophia.panorama", { since: 2 })
      assert.strictEqual(unknown.error.code, "validation_error")
      assert.include(unknown.error.message, "since")
      // an observer may call it (read access)
      assert.isArray((yield* ok(caller, "sophia.panorama", { since_h: 0.5 })).connections)
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("shows nothing of another user", () =>
    Effect.gen(function*() {
      const { caller: alice } = yield* connect("alice", "full")
      const { caller: bob } = yield* connect("bob", "full")
      const { caller: eve } = yield* connect("eve", "full", "other-user")
      const { caller: mallory } = yield* connect("mallory", "assistant", "other-user")
      // the other user's fleet is busy: a decision, a claim, a lease, a wait, an orphan, a pending approval
      yield* ok(eve, "sophia.coordination_post", { channel: "arc:secret", kind: "decision", body: "eve-decides" })
      yield* claim(eve, "w-secret")
      yield* ok(eve, "sophia.lease_acquire", { resources: ["path:secret/**"], reason: "secret" })
      yield* ok(eve, "sophia.declare_wait", { on: "mallory", predicate: { type: "post_exists", channel: "arc:x" }, reason: "secret" })
      yield* claim(mallory, "w-mallory")
      assert.strictEqual((yield* call(mallory, "sophia.add_document", { title: "t", body: "b" })).error.code, "approval_required")
      yield* Effect.flatMap(Auth, (auth) => auth.revoke("mallory", "other-user"))
      // and alice's own: one channel, one claim
      yield* ok(bob, "sophia.coordination_post", { channel: "arc:ours", kind: "decision", body: "ours" })
      yield* claim(bob, "w-ours")

      const p = yield* ok(alice, "sophia.panorama", { compact: false })
      assert.sameMembers(p.connections.map((c: any) => c.name), ["alice", "bob"])
      assert.deepStrictEqual(p.channels.map((c: any) => c.channel), ["arc:ours"])
      assert.deepStrictEqual(p.orphans, { work: [], waits: [], leases: [] })
      assert.deepStrictEqual(p.my_pending_approvals, [])
      const text = JSON.stringify(p)
      for (const foreign of ["eve", "mallory", "secret", eve.connectionShort, mallory.connectionShort]) assert.notInclude(text, foreign)
      // and the other way round
      const q = JSON.stringify(yield* ok(eve, "sophia.panorama", { compact: false }))
      for (const foreign of ["alice", "bob", "ours", alice.connectionShort, bob.connectionShort]) assert.notInclude(q, foreign)
    }).pipe(Effect.provide(SophiaTest)))

  /** 20 agents (each with claims, leases and, but the last, a wait: a chain, a ring would be a cycle) and 50 channels with a decision. */
  const fleet = (options: { readonly name: (i: number) => string; readonly body: string; readonly resource: (i: number) => string }) =>
    Effect.gen(function*() {
      const agents: Array<Caller> = []
      for (let i = 0; i < 20; i++) agents.push((yield* connect(options.name(i), "full")).caller)
      for (const [i, a] of agents.entries()) {
        yield* claim(a, `issue-${1000 + i}`, "A work item with a title of ordinary length")
        yield* ok(a, "sophia.lease_acquire", { resources: [options.resource(i)], reason: "editing" })
        if (i < agents.length - 1) {
          const next = agents[i + 1].connectionId
          yield* ok(a, "sophia.declare_wait", { on: next, predicate: { type: "post_exists", channel: `arc:handoff-${i}` }, reason: "handoff" })
        }
      }
      for (let c = 0; c < 50; c++) {
        const a = agents[c % agents.length]
        yield* ok(a, "sophia.coordination_post", { channel: `arc:feature-${c}`, kind: "decision", body: options.body })
        yield* ok(a, "sophia.coordination_post", { channel: `arc:feature-${c}`, kind: "status", body: "progress" })
        yield* TestClock.adjust("10 seconds")
      }
      // every agent heard from since (a beacon: its last_seen)
      for (const a of agents) yield* ok(a, "sophia.beacon", {})
      return agents
    })

  it.effect("compact stays within 1,500 tokens for 20 agents and 50 channels, counting what it cuts; compact: false has it all", () =>
    Effect.gen(function*() {
      const body = "We keep the public API stable and move the storage layer behind the new interface. ".repeat(4)
      const [me] = yield* fleet({ name: (i) => `agent-${String(i).padStart(2, "0")}`, body, resource: (i) => `path:packages/service-${i}/src/**` })

      const p = yield* ok(me, "sophia.panorama", {})
      const tokens = encode(JSON.stringify(p)).length
      assert.isAtMost(tokens, 1500, `compact panorama: ${tokens} tokens`)
      // every agent is there, the newest channels with their decision, the rest counted
      assert.lengthOf(p.connections, 20, "20 agents fit")
      assert.isUndefined(p.more.connections)
      assert.strictEqual(p.channels.length + p.more.channels, 51, "50 and the waits' channel")
      assert.isAtLeast(p.channels.length, 4, `${p.channels.length} channels shown`)
      assert.deepStrictEqual(p.channels.slice(0, 3).map((c: any) => c.channel), ["arc:feature-49", "arc:feature-48", "arc:feature-47"])
      assert.deepInclude(p.channels[0].latest, { kind: "decision", channel_seq: 1, agent_name: "agent-09" })
      assert.lengthOf(p.channels[0].latest.body, 80)
      assert.isTrue(p.channels[0].latest.body.endsWith("…"))
      for (const row of p.connections) {
        assert.lengthOf(row.claims, 1)
        assert.lengthOf(row.leases, 1)
        assert.strictEqual(row.open_waits, row.name === "agent-19" ? 0 : 1)
      }
      assert.isTrue(rowOf(p, "agent-00").you)

      const whole = yield* ok(me, "sophia.panorama", { compact: false })
      assert.lengthOf(whole.connections, 20)
      assert.lengthOf(whole.channels, 51)
      assert.deepStrictEqual(whole.more, {})
      assert.strictEqual(whole.channels[0].latest.body, body.trim())
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("the budget holds for long names, long resources and non-Latin text: rows are dropped and counted, the estimate errs high", () =>
    Effect.gen(function*() {
      const body = "決定：公開APIは安定させ、ストレージ層を新しいインターフェースの背後に移す。Ünïcödé ✓ ".repeat(5)
      const [me] = yield* fleet({
        name: (i) => `agent-${i}-${"x9q".repeat(18)}`,
        body,
        resource: (i) => `path:packages/a-rather-deeply-nested-folder-${i}/with/many/levels/**`
      })
      const p = yield* ok(me, "sophia.panorama", {})
      const text = JSON.stringify(p)
      const tokens = encode(text).length
      assert.isAtMost(tokens, 1500, `compact panorama: ${tokens} tokens`)
          console.log("DBG2", JSON.stringify(p))
  const { _inbox_unread: _u, _blocking: _b, _wait_resolved: _r, ...result } = p
      assert.isAtLeast(estimateTokens(JSON.stringify(result)), encode(JSON.stringify(result)).length, "the estimate is an upper bound")
      assert.strictEqual(p.connections.length + (p.more.connections ?? 0), 20)
      assert.strictEqual(p.channels.length + p.more.channels, 51)
      assert.isTrue(p.connections.some((c: any) => c.you === true), "the caller's own row stays")
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("compact counts per list what it cuts: claims and leases past three, orphans past three", () =>
    Effect.gen(function*() {
      const { caller: lead } = yield* connect("lead", "full")
      const { caller: gone } = yield* connect("gone", "full")
      for (let i = 0; i < 5; i++) yield* claim(lead, `lead-${i}`)
      for (let i = 0; i < 4; i++) yield* ok(lead, "sophia.lease_acquire", { resources: [`slot:s${i}`], reason: "r" })
      for (let i = 0; i < 4; i++) yield* claim(gone, `gone-${i}`)
      yield* Effect.flatMap(Auth, (auth) => auth.revoke("gone"))
      const p = yield* ok(lead, "sophia.panorama", {})
      assert.lengthOf(rowOf(p, "lead").claims, 3)
      assert.lengthOf(rowOf(p, "lead").leases, 3)
      assert.lengthOf(p.orphans.work, 3)
      assert.deepStrictEqual(p.more, { claims: 2, leases: 1, orphans: 1 })
      const whole = yield* ok(lead, "sophia.panorama", { compact: false })
      assert.lengthOf(rowOf(whole, "lead").claims, 5)
      assert.lengthOf(whole.orphans.work, 4)
    }).pipe(Effect.provide(SophiaTest)))
})
