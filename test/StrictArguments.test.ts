/**
 * Strict arguments (docs/architecture.md, "Refusal codes"; issue 27): a key a tool does not define is refused
 * with `validation_error`, naming the key, the valid key it is closest to and every valid key — on every tool
 * of the registry, before anything else about the call is judged, and nothing is done.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type { Caller } from "../src/domain/Auth.js"
import { SophiaTest } from "../src/layers/App.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { ToolRegistry } from "../src/mcp/Registry.js"
import { Coordination } from "../src/services/Coordination.js"
import { connect } from "./support/Fixtures.js"

const call = (caller: Caller, tool: string, args: unknown) =>
  Effect.flatMap(Dispatcher, (d) => d.call(caller, tool, args)).pipe(Effect.map((o) => ({ ok: o.ok, body: o.body as any })))

describe("strict arguments", () => {
  it.effect("every tool refuses a misspelled key, with the key it was meant to be and the keys it takes", () =>
    Effect.gen(function*() {
      const registry = yield* ToolRegistry
      const { caller } = yield* connect("speller")
      for (const tool of registry.tools) {
        const schema = registry.inputJsonSchema(tool)
        assert.strictEqual(schema.additionalProperties, false, tool.name)
        const keys = Object.keys((schema.properties as object | undefined) ?? {})
        const [meant] = keys
        const wrong = meant === undefined ? "bogus" : meant + meant.slice(-1)
        const out = yield* call(caller, tool.name, { [wrong]: 1 })
        assert.isFalse(out.ok, tool.name)
        assert.strictEqual(out.body.error.code, "validation_error", tool.name)
        assert.deepStrictEqual(out.body.error.unknown, [wrong], tool.name)
        assert.deepStrictEqual(out.body.error.valid_keys, keys, tool.name)
        assert.deepStrictEqual(out.body.error.did_you_mean, meant === undefined ? {} : { [wrong]: meant }, tool.name)
        assert.include(out.body.error.message, wrong, tool.name)
        if (meant !== undefined) assert.include(out.body.error.message, `did you mean ${meant}?`, tool.name)
      }
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("a misspelled inbox filter reads nothing and marks nothing read (it used to read the global inbox)", () =>
    Effect.gen(function*() {
      const { caller: poster } = yield* connect("poster")
      const { caller: reader } = yield* connect("reader")
      yield* call(poster, "sophia.coordination_post", { channel: "arc:build-42", kind: "status", body: "built" })
      yield* call(poster, "sophia.coordination_post", { channel: "general", kind: "status", body: "hello" })
      const before = yield* Effect.flatMap(Coordination, (c) => c.unreadCount(reader))
      assert.strictEqual(before, 2)
      const out = yield* call(reader, "sophia.coordination_inbox", { channnel: "arc:build-42" })
      assert.isFalse(out.ok)
      assert.deepStrictEqual(out.body.error.did_you_mean, { channnel: "channel" })
      assert.strictEqual(out.body._inbox_unread, 2)
      assert.strictEqual(yield* Effect.flatMap(Coordination, (c) => c.unreadCount(reader)), 2)
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("the unknown key is named even when other arguments are wrong too; a far-off key gets no guess", () =>
    Effect.gen(function*() {
      const { caller } = yield* connect("writer")
      const out = yield* call(caller, "sophia.coordination_post", { channel: 5, kindd: "status", zzzzzzzz: true })
      assert.strictEqual(out.body.error.code, "validation_error")
      assert.deepStrictEqual(out.body.error.unknown, ["kindd", "zzzzzzzz"])
      assert.deepStrictEqual(out.body.error.did_you_mean, { kindd: "kind" })
      // an approval id is a key of every write tool: not unknown
      const gated = yield* call(caller, "sophia.add_document", { title: "t", body: "b", approval_id: "nope" })
      assert.notStrictEqual(gated.body.error?.code, "validation_error")
    }).pipe(Effect.provide(SophiaTest)))
})

describe("one shape for the head", () => {
  it.effect("every ledger tool that reports a work item's head reports it as top-level `head`", () =>
    Effect.gen(function*() {
      const { caller: worker } = yield* connect("worker")
      const { caller: reviewer } = yield* connect("reviewer")
      const ok = (out: { ok: boolean; body: any }) => {
        assert.isTrue(out.ok, JSON.stringify(out.body))
        return out.body
      }
      const appended = ok(yield* call(worker, "sophia.ledger_append", {
        work_id: "w",
        expected_head: null,
        events: [{ type: "opened", title: "t" }, { type: "claimed" }]
      }))
      const status = ok(yield* call(worker, "sophia.ledger_status", { work_id: "w" }))
      assert.strictEqual(status.head, appended.head)
      assert.strictEqual(status.settled.seq, appended.seq)
      const log = ok(yield* call(worker, "sophia.ledger_log", { work_id: "w" }))
      assert.strictEqual(log.head, appended.head)
      const requested = ok(yield* call(worker, "sophia.review_request", {
        work_id: "w",
        expected_head: appended.head,
        artifact: { uri: "file://a", sha256: "a".repeat(64) }
      }))
      assert.isString(requested.head)
      const verdict = ok(yield* call(reviewer, "sophia.review_verdict", {
        request_id: requested.request_id,
        expected_head: requested.head,
        verdict: "approved",
        artifact_sha256: "a".repeat(64)
      }))
      assert.strictEqual(ok(yield* call(worker, "sophia.ledger_status", { work_id: "w" })).head, verdict.head)
    }).pipe(Effect.provide(SophiaTest)))
})

describe("refusals that state the rule", () => {
  it.effect("one message per argument: a union's alternatives once, no 'Expected undefined', a missing key told what it is for", () =>
    Effect.gen(function*() {
      const { caller } = yield* connect("asker")
      const message = (tool: string, args: unknown) =>
        Effect.map(call(caller, tool, args), (out) => {
          assert.strictEqual(out.body.error.code, "validation_error", tool)
          return out.body.error.message as string
        })
      const waitS = yield* message("sophia.coordination_inbox", { wait_s: 120 })
      assert.strictEqual(waitS, "wait_s: Expected a number between 0 and 60, actual 120")
      const kind = yield* message("sophia.coordination_post", { channel: "c", kind: "nope", body: "x" })
      assert.match(kind, /^kind: must be one of "question", "answer", .*"closeout"; got "nope"$/)
      assert.strictEqual(kind.match(/Expected/g), null)
      const head = yield* message("sophia.ledger_append", { work_id: "w", events: [{ type: "opened", title: "t" }] })
      assert.include(head, "expected_head: is missing: the head you extend (null: create)")
      const predicate = yield* message("sophia.declare_wait", { on: "asker", predicate: "soon", reason: "r" })
      assert.include(predicate, "predicate: is not of the expected shape (got \"soon\")")
      assert.isBelow(predicate.length, 200)
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("a claim on an item another agent holds names that agent and the ways forward (ask, wait, take over once orphaned)", () =>
    Effect.gen(function*() {
      const { caller: holder } = yield* connect("builder")
      const { caller: other } = yield* connect("tester")
      const opened = yield* call(holder, "sophia.ledger_append", {
        work_id: "build-42",
        expected_head: null,
        events: [{ type: "opened", title: "build" }, { type: "claimed" }]
      })
      const claim = yield* call(other, "sophia.ledger_append", { work_id: "build-42", expected_head: opened.body.head, events: [{ type: "claimed" }] })
      assert.strictEqual(claim.body.error.code, "invalid_transition")
      assert.strictEqual(claim.body.error.agent_name, "builder")
      assert.strictEqual(claim.body.error.claimant, holder.connectionId)
      assert.include(claim.body.error.message, `claimed by builder (${holder.connectionShort})`)
      assert.lengthOf(claim.body.error.next, 3)
      assert.match(claim.body.error.message, /ask it: sophia\.coordination_post.*wait for it: sophia\.declare_wait.*take it over once builder is revoked or silent/s)
      // releasing another's claim says the same
      const release = yield* call(other, "sophia.ledger_append", { work_id: "build-42", expected_head: opened.body.head, events: [{ type: "released" }] })
      assert.strictEqual(release.body.error.agent_name, "builder")
    }).pipe(Effect.provide(SophiaTest)))
})
