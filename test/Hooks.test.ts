import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { encode } from "gpt-tokenizer/encoding/o200k_base"
import * as fs from "node:fs"
import * as path from "node:path"
import { HttpServer } from "../src/mcp/Http.js"
import { Auth } from "../src/services/Auth.js"
import { Coordination } from "../src/services/Coordination.js"
import { Hooks } from "../src/services/Hooks.js"
import { Waits } from "../src/services/Waits.js"
import { connect } from "./support/Fixtures.js"
import { ServeTest } from "./support/Serve.js"

/**
 * The hooks of Claude Code over HTTP (`POST /hooks/claude-code`), each event's input exactly as the runtime
 * sends it (test/fixtures/hooks/claude-code), on both stores.
 */

const FIXTURES = path.join(__dirname, "fixtures", "hooks", "claude-code")
const fixture = (event: string, changes: Record<string, unknown> = {}): Record<string, unknown> => ({
  ...JSON.parse(fs.readFileSync(path.join(FIXTURES, `${event}.json`), "utf8")),
  ...changes
})

interface Reply {
  readonly status: number
  readonly body: any
}

const post = (port: number, route: string, bearer: string | undefined, body: string) =>
  Effect.promise(async (): Promise<Reply> => {
    const res = await fetch(`http://127.0.0.1:${port}${route}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...(bearer !== undefined ? { authorization: `Bearer ${bearer}` } : {}) },
      body
    })
    const text = await res.text()
    return { status: res.status, body: text === "" ? undefined : JSON.parse(text) }
  })

/** One hook as Claude Code's HTTP hook sends it; the reply must be 200. */
const hook = (bearer: string, input: unknown) =>
  Effect.gen(function*() {
    const { port } = yield* HttpServer
    const reply = yield* post(port, "/hooks/claude-code", bearer, JSON.stringify(input))
    assert.strictEqual(reply.status, 200, JSON.stringify(reply.body))
    return reply.body
  })

/** A tool over the REST path. */
const tool = (bearer: string, name: string, args: unknown = {}) =>
  Effect.flatMap(HttpServer, ({ port }) => post(port, `/api/tools/${name}`, bearer, JSON.stringify(args)))

const unread = (bearer: string) => Effect.map(tool(bearer, "sophia.orient"), (r) => r.body.unread as number)

describe("POST /hooks/claude-code", () => {
  it.scoped("SessionStart: the brief — who, unread and addressed, waits, claimed work, leases, orphans, pending approvals — within ~400 tokens, nothing marked", () =>
    Effect.gen(function*() {
      const auth = yield* Auth
      const coordination = yield* Coordination
      const waits = yield* Waits
      // an assistant with a lot to say: every list longer than the brief shows, long names and titles
      const a = yield* connect("alice-the-assistant-with-a-rather-long-name", "assistant")
      const b = yield* connect("bob-who-also-has-a-long-name-for-a-connection", "full")
      const gone = yield* connect("gone", "full")
      const long = "a title far longer than any brief should carry ".repeat(6)
      for (let i = 0; i < 6; i++) {
        yield* tool(a.bearer, "sophia.ledger_append", {
          work_id: `work-item-number-${i}-of-alice-with-a-long-id`,
          expected_head: null,
          events: [{ type: "opened", title: `${i} ${long}` }, { type: "claimed" }]
        })
        yield* tool(gone.bearer, "sophia.ledger_append", {
          work_id: `work-left-behind-${i}-by-a-revoked-connection`,
          expected_head: null,
          events: [{ type: "opened", title: `${i} ${long}` }, { type: "claimed" }]
        })
        yield* waits.declare(a.caller, {
          on: b.caller.name,
          predicate: { type: "post_exists", channel: `arc:work-item-number-${i}-of-alice-with-a-long-id` },
          reason: long
        })
        yield* coordination.post(b.caller, { channel: "general", kind: "status", body: `status ${i}` })
        const gated = yield* tool(a.bearer, "sophia.add_document", { title: `doc ${i}`, body: "x" })
        assert.strictEqual(gated.body.error.code, "approval_required")
      }
      yield* coordination.post(b.caller, { channel: "general", kind: "question", body: "alice, a question", to: a.caller.name })
      yield* auth.revoke("gone")
      const before = yield* unread(a.bearer)
      assert.isAtLeast(before, 7)

      const reply = yield* hook(a.bearer, fixture("SessionStart"))
      assert.deepStrictEqual(Object.keys(reply), ["hookSpecificOutput"])
      assert.strictEqual(reply.hookSpecificOutput.hookEventName, "SessionStart")
      const brief: string = reply.hookSpecificOutput.additionalContext
      assert.include(brief, `you are ${a.caller.name} (connection ${a.caller.connectionShort}, profile assistant)`)
      assert.include(brief, `Unread posts: ${before}, 1 addressed to you`)
      assert.include(brief, "Your open waits (6)")
      assert.include(brief, "Your claimed work (6): work-item-number-")
      assert.include(brief, "and 3 more")
      assert.isAtMost(encode(brief).length, 400, brief)
      // the brief only tells: nothing was marked read
      assert.strictEqual(yield* unread(a.bearer), before)

      // the leases, the orphans and the pending approvals, for a connection with fewer lists
      const c = yield* connect("carol", "assistant")
      yield* tool(c.bearer, "sophia.add_document", { title: "doc", body: "x" })
      for (const dir of ["parser", "lexer", "printer", "cli"]) {
        const leased = yield* tool(c.bearer, "sophia.lease_acquire", { resources: [`path:src/${dir}/**`], reason: `refactor the ${dir}` })
        assert.strictEqual(leased.status, 200, JSON.stringify(leased.body))
      }
      yield* tool(c.bearer, "sophia.lease_acquire", { resources: ["slot:deploy"], mode: "shared", project: "infra", reason: "deploy" })
      const carol = (yield* hook(c.bearer, fixture("SessionStart"))).hookSpecificOutput.additionalContext as string
      // (the five were granted at one instant of the test clock: their order among equals is the store's)
      assert.include(carol, "Your leases (5): ")
      assert.match(carol, /Your leases \(5\): [^\n]*path:src\//)
      assert.include(carol, "(exclusive) until ")
      assert.include(carol, "and 2 more")
      assert.include(carol, "Orphaned work you may claim (6): work-left-behind-")
      assert.include(carol, "claimant revoked")
      assert.include(carol, "Your pending approvals (1)")
      assert.include(carol, "sophia.add_document")
      assert.include(carol, "sophia_approval_status")
      assert.isAtMost(encode(carol).length, 400, carol)

      // a connection of another user, with nothing: still a brief, short
      const fresh = yield* connect("fresh", "observer", "someone-else")
      const quiet = (yield* hook(fresh.bearer, fixture("SessionStart", { source: "resume" }))).hookSpecificOutput.additionalContext as string
      assert.include(quiet, "Unread posts: none.")
      assert.isAtMost(encode(quiet).length, 100, quiet)
    }).pipe(Effect.provide(ServeTest())))

  it.scoped("UserPromptSubmit and PostToolUse: the posts of others not had yet, once, newest 10 with how many more, no heartbeats, marked read via hook", () =>
    Effect.gen(function*() {
      const coordination = yield* Coordination
      const a = yield* connect("alice", "full")
      const b = yield* connect("bob", "full")
      // nothing new: {}
      assert.deepStrictEqual(yield* hook(a.bearer, fixture("UserPromptSubmit")), {})
      assert.deepStrictEqual(yield* hook(a.bearer, fixture("PostToolUse")), {})

      yield* coordination.post(b.caller, { channel: "general", kind: "status", body: "parser is\n  next" })
      yield* coordination.beacon(b.caller, { status: "alive" })
      yield* coordination.post(a.caller, { channel: "general", kind: "status", body: "my own post" })
      const first = yield* hook(a.bearer, fixture("UserPromptSubmit"))
      assert.strictEqual(first.hookSpecificOutput.hookEventName, "UserPromptSubmit")
      const text: string = first.hookSpecificOutput.additionalContext
      assert.include(text, "1 new post from other agents")
      assert.include(text, "[general #1] bob (status): parser is next")
      assert.notInclude(text, "alive", "heartbeats are left out")
      assert.notInclude(text, "my own post")
      assert.notInclude(text, "more unread")
      assert.strictEqual(yield* unread(a.bearer), 0)
      // delivered once: never again, by either hook
      assert.deepStrictEqual(yield* hook(a.bearer, fixture("UserPromptSubmit")), {})
      assert.deepStrictEqual(yield* hook(a.bearer, fixture("PostToolUse")), {})

      // a burst: the newest 10, and how many more; the rest on the next hook, then nothing
      for (let i = 1; i <= 13; i++) yield* coordination.post(b.caller, { channel: `c${i % 2}`, kind: "claim", body: `claim ${i}` })
      const burst: string = (yield* hook(a.bearer, fixture("PostToolUse"))).hookSpecificOutput.additionalContext
      assert.include(burst, "10 new posts")
      assert.include(burst, "and 3 more unread")
      const bodies = (text: string) => text.split("\n").flatMap((line) => /: (claim \d+)$/.exec(line)?.slice(1) ?? [])
      assert.deepStrictEqual(bodies(burst), [4, 5, 6, 7, 8, 9, 10, 11, 12, 13].map((i) => `claim ${i}`), "in the order they were posted")
      assert.strictEqual(yield* unread(a.bearer), 3)
      const rest: string = (yield* hook(a.bearer, fixture("PostToolUse"))).hookSpecificOutput.additionalContext
      assert.include(rest, "3 new posts")
      assert.deepStrictEqual(bodies(rest), ["claim 1", "claim 2", "claim 3"])
      assert.notInclude(rest, "more unread")
      assert.deepStrictEqual(yield* hook(a.bearer, fixture("PostToolUse")), {})
      assert.strictEqual(yield* unread(a.bearer), 0)
      // the inbox agrees: nothing left, and every delivered post reads as read in its conversation
      const inbox = (yield* tool(a.bearer, "sophia.coordination_inbox", {})).body
      assert.strictEqual(inbox.posts.length, 0)
      const conversation = (yield* tool(a.bearer, "sophia.coordination_inbox", { channel: "c1" })).body
      assert.isTrue(conversation.posts.every((p: { unread: boolean }) => !p.unread))
    }).pipe(Effect.provide(ServeTest())))

  it.scoped("UserPromptSubmit and PostToolUse carry the connection's waits that resolved, once (not again in the envelope)", () =>
    Effect.gen(function*() {
      const coordination = yield* Coordination
      const waits = yield* Waits
      const a = yield* connect("alice", "full")
      const b = yield* connect("bob", "full")
      const declared = yield* waits.declare(a.caller, { on: "bob", predicate: { type: "post_exists", channel: "review" }, reason: "the review" })
      yield* coordination.post(b.caller, { channel: "review", kind: "decision", body: "approved" })
      const text: string = (yield* hook(a.bearer, fixture("PostToolUse"))).hookSpecificOutput.additionalContext
      assert.include(text, `${declared.wait_id} satisfied`)
      assert.include(text, "[review #")
      const orient = (yield* tool(a.bearer, "sophia.orient")).body
      assert.isUndefined(orient._wait_resolved, "the hook reported it")
      assert.deepStrictEqual(yield* hook(a.bearer, fixture("UserPromptSubmit")), {})
    }).pipe(Effect.provide(ServeTest())))

  it.scoped("Stop and SubagentStop block for a targeted unread post and for a resolved wait, not for channel chatter", () =>
    Effect.gen(function*() {
      const coordination = yield* Coordination
      const waits = yield* Waits
      const a = yield* connect("alice", "full")
      const b = yield* connect("bob", "full")
      // chatter only: the agent may stop, and the chatter stays unread for it
      yield* coordination.post(b.caller, { channel: "general", kind: "status", body: "chatter" })
      yield* coordination.post(b.caller, { channel: "general", kind: "question", body: "who is on the parser?" })
      assert.deepStrictEqual(yield* hook(a.bearer, fixture("Stop")), {})
      assert.deepStrictEqual(yield* hook(a.bearer, fixture("SubagentStop")), {})
      assert.strictEqual(yield* unread(a.bearer), 2)

      // a post addressed to alice: blocked, the reason carries it, and delivers it
      yield* coordination.post(b.caller, { channel: "arc:parser", kind: "question", body: "alice, is the parser done?", to: "alice" })
      const blocked = yield* hook(a.bearer, fixture("Stop"))
      assert.deepStrictEqual(Object.keys(blocked).sort(), ["decision", "reason"])
      assert.strictEqual(blocked.decision, "block")
      assert.include(blocked.reason, "[arc:parser #1] bob → alice (question): alice, is the parser done?")
      assert.notInclude(blocked.reason, "chatter")
      assert.strictEqual(yield* unread(a.bearer), 2, "only the addressed post was delivered")
      assert.deepStrictEqual(yield* hook(a.bearer, fixture("Stop", { stop_hook_active: true })), {})

      // a subagent's stop: the same rule
      yield* coordination.post(b.caller, { channel: "arc:parser", kind: "question", body: "and the tests?", to: "alice" })
      const sub = yield* hook(a.bearer, fixture("SubagentStop"))
      assert.strictEqual(sub.decision, "block")
      assert.include(sub.reason, "and the tests?")

      // a wait that resolved and was not reported yet
      const declared = yield* waits.declare(a.caller, { on: "bob", predicate: { type: "post_exists", channel: "ci" }, reason: "green build" })
      yield* coordination.post(b.caller, { channel: "ci", kind: "status", body: "green" })
      const waited = yield* hook(a.bearer, fixture("Stop"))
      assert.strictEqual(waited.decision, "block")
      assert.include(waited.reason, `${declared.wait_id} satisfied`)
      assert.deepStrictEqual(yield* hook(a.bearer, fixture("Stop", { stop_hook_active: true })), {})
    }).pipe(Effect.provide(ServeTest())))

  it.scoped("Stop blocks at most SOPHIA_HOOK_MAX_CONTINUES times in a row while continuing, then lets the agent stop; a new stop loop starts over", () =>
    Effect.gen(function*() {
      const coordination = yield* Coordination
      const hooks = yield* Hooks
      const a = yield* connect("alice", "full")
      const b = yield* connect("bob", "full")
      assert.strictEqual(hooks.maxContinues, 3)
      const ask = (i: number) => coordination.post(b.caller, { channel: "dm", kind: "question", body: `question ${i}`, to: "alice" })
      yield* ask(0)
      assert.strictEqual((yield* hook(a.bearer, fixture("Stop"))).decision, "block")
      // bob keeps asking: each continuation is blocked again, three times in a row, then no more
      for (let i = 1; i <= 3; i++) {
        yield* ask(i)
        const again = yield* hook(a.bearer, fixture("Stop", { stop_hook_active: true }))
        assert.strictEqual(again.decision, "block", `continuation ${i}`)
        assert.include(again.reason, `question ${i}`)
      }
      yield* ask(4)
      assert.deepStrictEqual(yield* hook(a.bearer, fixture("Stop", { stop_hook_active: true })), {})
      // what was not delivered stays unread (the agent reads it next turn)
      assert.strictEqual(yield* unread(a.bearer), 1)
      // another session's loop is its own; a Stop that is not a continuation starts this one over
      assert.strictEqual((yield* hook(a.bearer, fixture("Stop", { session_id: "other", stop_hook_active: true }))).decision, "block")
      yield* ask(5)
      assert.strictEqual((yield* hook(a.bearer, fixture("Stop"))).decision, "block")
      yield* ask(6)
      assert.strictEqual((yield* hook(a.bearer, fixture("Stop", { stop_hook_active: true }))).decision, "block")
    }).pipe(Effect.provide(ServeTest())))

  it.scoped("any other event is {}; a revoked or missing bearer is 401 with the usual body; a body that is not JSON or not a hook input is 400; GET is 405", () =>
    Effect.gen(function*() {
      const { port } = yield* HttpServer
      const auth = yield* Auth
      const a = yield* connect("alice", "full")
      assert.deepStrictEqual(yield* hook(a.bearer, fixture("Notification")), {})
      assert.deepStrictEqual(yield* hook(a.bearer, { ...fixture("PostToolUse"), hook_event_name: "PreToolUse" }), {})

      const notJson = yield* post(port, "/hooks/claude-code", a.bearer, "{not json")
      assert.strictEqual(notJson.status, 400)
      assert.strictEqual(notJson.body.error.code, "validation_error")
      for (const body of ["", "[]", "\"Stop\"", JSON.stringify({ session_id: "s" })]) {
        const r = yield* post(port, "/hooks/claude-code", a.bearer, body)
        assert.strictEqual(r.status, 400, body)
        assert.strictEqual(r.body.error.code, "validation_error", body)
      }
      const get = yield* Effect.promise(() => fetch(`http://127.0.0.1:${port}/hooks/claude-code`))
      assert.strictEqual(get.status, 405)

      const missing = yield* post(port, "/hooks/claude-code", undefined, JSON.stringify(fixture("Stop")))
      assert.strictEqual(missing.status, 401)
      assert.deepStrictEqual([missing.body.error.code, missing.body.error.reason], ["unauthenticated", "missing"])
      yield* auth.revoke("alice")
      const revoked = yield* post(port, "/hooks/claude-code", a.bearer, JSON.stringify(fixture("Stop")))
      assert.strictEqual(revoked.status, 401)
      assert.deepStrictEqual([revoked.body.error.code, revoked.body.error.reason], ["unauthenticated", "unknown_or_revoked"])
      assert.isString(revoked.body.error.message)
      assert.isString(revoked.body.error.hint)
    }).pipe(Effect.provide(ServeTest())))
})

describe("sophia.post_receipts", () => {
  it.scoped("the author sees who has read its post and how (hook, inbox), and the target before it has; anyone else: not_found", () =>
    Effect.gen(function*() {
      const coordination = yield* Coordination
      const a = yield* connect("alice", "full")
      const b = yield* connect("bob", "full")
      const c = yield* connect("carol", "observer")
      yield* connect("dave", "full")
      const question = yield* coordination.post(a.caller, { channel: "arc:x", kind: "question", body: "bob?", to: "bob" })
      const note = yield* coordination.post(a.caller, { channel: "general", kind: "status", body: "fyi" })

      const receipts = (postId: string) => Effect.map(tool(a.bearer, "sophia.post_receipts", { post_id: postId }), (r) => r.body)
      // before anyone read: the target only, not yet
      const waiting = yield* receipts(question.post_id)
      assert.strictEqual(waiting.post_id, question.post_id)
      assert.deepStrictEqual(waiting.recipients, [{ connection_id: b.caller.connectionId, agent_name: "bob", read_at: null, via: null }])
      assert.deepStrictEqual((yield* receipts(note.post_id)).recipients, [])

      // bob has it through his Stop hook, carol through her inbox
      assert.strictEqual((yield* hook(b.bearer, fixture("Stop"))).decision, "block")
      yield* tool(c.bearer, "sophia.coordination_inbox", {})
      const read = (yield* receipts(question.post_id)).recipients as Array<any>
      assert.deepStrictEqual(read.map((r) => [r.agent_name, r.via]).sort(), [["bob", "hook"], ["carol", "inbox"]])
      for (const r of read) assert.isString(r.read_at)
      const noted = (yield* receipts(note.post_id)).recipients as Array<any>
      assert.deepStrictEqual(noted.map((r) => [r.agent_name, r.via]), [["carol", "inbox"]])
      // bob's UserPromptSubmit delivers the rest: via hook
      yield* hook(b.bearer, fixture("UserPromptSubmit"))
      const both = (yield* receipts(note.post_id)).recipients as Array<any>
      assert.deepStrictEqual(both.map((r) => [r.agent_name, r.via]).sort(), [["bob", "hook"], ["carol", "inbox"]])

      // only the author: the target, another reader and a stranger id all get not_found
      for (const [bearer, id] of [[b.bearer, question.post_id], [c.bearer, note.post_id], [a.bearer, "no-such-post"]] as const) {
        const refused = yield* tool(bearer, "sophia.post_receipts", { post_id: id })
        assert.strictEqual(refused.status, 404)
        assert.strictEqual(refused.body.error.code, "not_found")
      }
    }).pipe(Effect.provide(ServeTest())))
})

describe("two agents end to end", () => {
  it.scoped("B's Stop hook blocks with A's targeted question and, once B has it, lets B stop; A's receipt says B had it by hook", () =>
    Effect.gen(function*() {
      const a = yield* connect("agent-a", "full")
      const b = yield* connect("agent-b", "full")
      // both sessions start
      yield* hook(a.bearer, fixture("SessionStart"))
      yield* hook(b.bearer, fixture("SessionStart", { session_id: "b-session" }))
      // A asks B, through the tool as its agent would
      const asked = yield* tool(a.bearer, "sophia.coordination_post", {
        channel: "arc:release",
        kind: "question",
        body: "agent-b: may I tag the release?",
        to: "agent-b"
      })
      assert.strictEqual(asked.status, 200)
      // B finishes its turn: it may not stop yet
      const blocked = yield* hook(b.bearer, fixture("Stop", { session_id: "b-session" }))
      assert.strictEqual(blocked.decision, "block")
      assert.include(blocked.reason, "agent-b: may I tag the release?")
      // B answers (its continuation calls the tool), its PostToolUse hook has nothing new
      yield* tool(b.bearer, "sophia.coordination_post", { channel: "arc:release", kind: "answer", body: "yes", to: "agent-a" })
      assert.deepStrictEqual(yield* hook(b.bearer, fixture("PostToolUse", { session_id: "b-session" })), {})
      // and now B may stop
      assert.deepStrictEqual(yield* hook(b.bearer, fixture("Stop", { session_id: "b-session", stop_hook_active: true })), {})
      // A hears the answer at its next prompt; its receipt says B had the question through its hook
      const heard: string = (yield* hook(a.bearer, fixture("UserPromptSubmit"))).hookSpecificOutput.additionalContext
      assert.include(heard, "agent-b → agent-a (answer): yes")
      const receipt = (yield* tool(a.bearer, "sophia.post_receipts", { post_id: asked.body.post_id })).body
      assert.deepStrictEqual(receipt.recipients.map((r: any) => [r.agent_name, r.via]), [["agent-b", "hook"]])
    }).pipe(Effect.provide(ServeTest())))
})
