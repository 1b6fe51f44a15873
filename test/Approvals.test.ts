import { SqlClient } from "@effect/sql"
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Fiber, Layer, Queue, Schema } from "effect"
import { argsHash } from "../src/domain/Approvals.js"
import type { Caller } from "../src/domain/Auth.js"
import { makeCore, SophiaLive } from "../src/layers/App.js"
import { TestStore } from "../src/layers/Sql.js"
import type { CallOptions } from "../src/mcp/Dispatch.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { defineTool, READ_ONLY, ToolRegistry } from "../src/mcp/Registry.js"
import { knowledgeTools } from "../src/mcp/tools/knowledge.js"
import { Approvals } from "../src/services/Approvals.js"
import { Events } from "../src/services/Events.js"
import type { Knowledge } from "../src/services/Knowledge.js"
import { connectAllowingElicitation } from "./support/Allowance.js"
import { sophia, tempDb } from "./support/Cli.js"
import { connect } from "./support/Fixtures.js"

/** A fresh in-memory app whose gated calls wait `waitMs` for a decision. */
const appWithWait = (waitMs: number, registry?: Parameters<typeof makeCore>[1]) =>
  makeCore(TestStore, registry).pipe(
    Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["SOPHIA_APPROVAL_WAIT_MS", String(waitMs)]]))))
  )
const Fast = appWithWait(30)

const call = (caller: Caller, name: string, args: unknown, options?: CallOptions) =>
  Effect.flatMap(Dispatcher, (d) => d.call(caller, name, args, options)).pipe(Effect.map((o) => o.body as any))

const count = (table: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.map(sql<{ n: number }>`SELECT COUNT(*) AS n FROM ${sql(table)}`, (rows) => Number(rows[0].n))).pipe(Effect.orDie)

const decide = (id: string, decision: "approved" | "denied") => Effect.flatMap(Approvals, (a) => a.decide(id, decision))

describe("Approvals: profile × access class", () => {
  it.live("observer / assistant / full against read, coordinate, write and elevated tools", () =>
    Effect.gen(function*() {
      const tools = {
        read: ["sophia.search_documents", { query: "anything" }],
        coordinate: ["sophia.coordination_post", { channel: "general", kind: "status", body: "hi" }],
        write: ["sophia.add_document", { title: "t", body: "b" }],
        elevated: ["sophia.create_entity", { name: "alpha", kind: "project" }]
      } as const
      const expected = {
        observer: { read: "ok", coordinate: "forbidden_profile", write: "forbidden_profile", elevated: "forbidden_profile" },
        assistant: { read: "ok", coordinate: "ok", write: "approval_required", elevated: "owner_approval_required" },
        full: { read: "ok", coordinate: "ok", write: "ok", elevated: "owner_approval_required" }
      } as const
      for (const profile of ["observer", "assistant", "full"] as const) {
        const { caller } = yield* connect(`agent-${profile}`, profile)
        for (const access of ["read", "coordinate", "write", "elevated"] as const) {
          const [name, args] = tools[access]
          const body = yield* call(caller, name, args)
          const got = body.error ? body.error.code : "ok"
          assert.strictEqual(got, expected[profile][access], `${profile} × ${access}`)
          if (got === "approval_required" || got === "owner_approval_required") {
            assert.match(body.error.approval_id, /^apr-/)
          }
        }
      }
      // nothing gated was written: only the full connection's plain write went through
      assert.strictEqual(yield* count("documents"), 1)
      assert.strictEqual(yield* count("entities"), 0)
    }).pipe(Effect.provide(Fast)))

  it.live("write and elevated tools advertise approval_id; read tools do not", () =>
    Effect.gen(function*() {
      const d = yield* Dispatcher
      const props = (name: string) =>
        Object.keys((d.registry.inputJsonSchema(d.registry.lookup(name).pipe((o) => o._tag === "Some" ? o.value : undefined)!)
          .properties ?? {}) as object)
      assert.include(props("sophia.add_document"), "approval_id")
      assert.include(props("sophia.revert_mutation"), "approval_id")
      assert.notInclude(props("sophia.search_documents"), "approval_id")
    }).pipe(Effect.provide(Fast)))
})

describe("Approvals: binding and execution", () => {
  it.live("an approval is bound to its exact arguments and caller; approved, it runs once; denied, it refuses", () =>
    Effect.gen(function*() {
      const { caller } = yield* connect("helper", "assistant")
      const { caller: other } = yield* connect("other", "assistant")
      const args = { title: "Release notes", body: "v1 ships friday" }
      const first = yield* call(caller, "sophia.add_document", args)
      assert.strictEqual(first.error.code, "approval_required")
      const id = first.error.approval_id as string
      // the same call again (no id) finds the same pending approval instead of piling up new ones
      assert.strictEqual((yield* call(caller, "sophia.add_document", args)).error.approval_id, id)
      const listed = yield* Effect.flatMap(Approvals, (a) => a.list())
      assert.deepStrictEqual(listed.map((a) => a.approval_id), [id])
      assert.deepStrictEqual(listed[0].args, args)
      assert.strictEqual(listed[0].args_hash, argsHash({ ...args, approval_id: "ignored" }))
      yield* decide(id, "approved")

      // changed arguments need a new approval (and write nothing)
      const changed = yield* call(caller, "sophia.add_document", { ...args, body: "v1 ships monday", approval_id: id })
      assert.strictEqual(changed.error.code, "approval_required")
      assert.notStrictEqual(changed.error.approval_id, id)
      // another connection cannot ride this approval
      const stolen = yield* call(other, "sophia.add_document", { ...args, approval_id: id })
      assert.strictEqual(stolen.error.code, "approval_required")
      assert.notStrictEqual(stolen.error.approval_id, id)
      assert.strictEqual(yield* count("documents"), 0)

      // the approved call runs once; a repeat gets the same result, not a second document
      const done = yield* call(caller, "sophia.add_document", { ...args, approval_id: id })
      assert.isUndefined(done.error)
      const again = yield* call(caller, "sophia.add_document", { ...args, approval_id: id })
      assert.strictEqual(again.document_id, done.document_id)
      assert.strictEqual(yield* count("documents"), 1)
      // a fresh identical write without the id is a new call: a new approval
      const fresh = yield* call(caller, "sophia.add_document", args)
      assert.strictEqual(fresh.error.code, "approval_required")
      assert.notStrictEqual(fresh.error.approval_id, id)

      // denied
      yield* decide(fresh.error.approval_id, "denied")
      const denied = yield* call(caller, "sophia.add_document", { ...args, approval_id: fresh.error.approval_id })
      assert.strictEqual(denied.error.code, "approval_denied")
      assert.strictEqual(yield* count("documents"), 1)
      // the owner decides once
      const redecide = yield* Effect.flip(decide(fresh.error.approval_id, "approved"))
      assert.strictEqual(redecide._tag, "ValidationError")
    }).pipe(Effect.provide(Fast)))

  it.live("an approval_id that does not fit the call is never used silently: the refusal says why and names the new approval", () =>
    Effect.gen(function*() {
      const { caller } = yield* connect("helper", "assistant")
      const { caller: other } = yield* connect("other", "assistant")
      const args = { title: "Release notes", body: "v1 ships friday" }
      const id = (yield* call(caller, "sophia.add_document", args)).error.approval_id as string
      yield* decide(id, "approved")
      // the approved id, other arguments
      const changed = yield* call(caller, "sophia.add_document", { ...args, body: "v1 ships monday", approval_id: id })
      assert.strictEqual(changed.error.code, "approval_required")
      assert.notStrictEqual(changed.error.approval_id, id)
      assert.include(changed.error.message, `approval ${id} was given for other arguments of sophia.add_document`)
      assert.include(changed.error.message, `this call needs its own approval, ${changed.error.approval_id}`)
      // another connection's approval
      const stolen = yield* call(other, "sophia.add_document", { ...args, approval_id: id })
      assert.include(stolen.error.message, `approval_id ${id} is not an approval of this connection`)
      // an id that is no approval at all
      const made = yield* call(caller, "sophia.add_document", { ...args, title: "Other", approval_id: "apr-nope" })
      assert.include(made.error.message, "approval_id apr-nope is not an approval of this connection")
      // the matching call still runs once
      const done = yield* call(caller, "sophia.add_document", { ...args, approval_id: id })
      assert.isString(done.document_id)
      assert.strictEqual(yield* count("documents"), 1)
    }).pipe(Effect.provide(Fast)))

  it.live("approve-once executes once under a retry storm of concurrent re-calls", () =>
    Effect.gen(function*() {
      const { caller } = yield* connect("worker", "full")
      const args = { name: "alpha", kind: "project" }
      const first = yield* call(caller, "sophia.create_entity", args)
      assert.strictEqual(first.error.code, "owner_approval_required")
      const id = first.error.approval_id
      yield* decide(id, "approved")
      const results = yield* Effect.all(
        Array.from({ length: 40 }, () => call(caller, "sophia.create_entity", { ...args, approval_id: id })),
        { concurrency: "unbounded" }
      )
      for (const r of results) assert.isUndefined(r.error, JSON.stringify(r.error))
      assert.strictEqual(new Set(results.map((r) => r.entity_id)).size, 1)
      assert.strictEqual(yield* count("entities"), 1)
      assert.strictEqual(yield* count("mutations"), 1)
    }).pipe(Effect.provide(Fast)))

  it.live("a refused approved call releases its claim and writes nothing; the retry can still run it", () =>
    Effect.gen(function*() {
      const { caller } = yield* connect("worker", "full")
      const args = { name: "beta", kind: "project" }
      const first = yield* call(caller, "sophia.create_entity", args)
      const id = first.error.approval_id
      yield* decide(id, "approved")
      // make the approved call fail once: an entity of that name appears meanwhile (owner's direct path)
      const sql = yield* SqlClient.SqlClient
      const users = yield* sql<{ id: string }>`SELECT id FROM users`
      yield* sql`INSERT INTO entities (id, user_id, name, kind, created_by, created_at)
        VALUES ('ent-x', ${users[0].id}, 'beta', 'x', 'owner', '2026-01-01T00:00:00.000Z')`
      const refused = yield* call(caller, "sophia.create_entity", { ...args, approval_id: id })
      assert.strictEqual(refused.error.code, "validation_error")
      yield* sql`DELETE FROM entities WHERE id = 'ent-x'`
      const ran = yield* call(caller, "sophia.create_entity", { ...args, approval_id: id })
      assert.isUndefined(ran.error)
      assert.strictEqual(yield* count("entities"), 1)
    }).pipe(Effect.provide(Fast)))

  it.live("a call waiting within the bound runs as soon as the owner approves", () =>
    Effect.gen(function*() {
      const { caller } = yield* connect("worker", "full")
      const fiber = yield* Effect.fork(call(caller, "sophia.remember_fact", { subject: "s", predicate: "p", object: "o" }))
      const approvals = yield* Approvals
      let pending = yield* approvals.list()
      while (pending.length === 0) {
        yield* Effect.sleep("10 millis")
        pending = yield* approvals.list()
      }
      assert.strictEqual(pending[0].tool, "sophia.remember_fact")
      yield* approvals.decide(pending[0].approval_id, "approved")
      const body = yield* Fiber.join(fiber)
      assert.isUndefined(body.error)
      assert.match(body.fact_id, /^fact-/)
    }).pipe(Effect.provide(appWithWait(5_000))))

  it.live("elevated calls are never approved through elicitation; plain writes are, only where the owner allowed it", () =>
    Effect.gen(function*() {
      let asked = 0
      const accept: CallOptions = { elicit: () => Effect.sync(() => (asked++, "accept" as const)) }
      const decline: CallOptions = { elicit: () => Effect.succeed("decline" as const) }
      const { caller: full } = yield* connectAllowingElicitation("worker", "full")
      const elevated = yield* call(full, "sophia.create_entity", { name: "e", kind: "k" }, accept)
      assert.strictEqual(elevated.error.code, "owner_approval_required")
      assert.strictEqual(asked, 0)
      // a connection minted without the allowance (the default): its client is never asked, the owner decides
      const { caller: plain } = yield* connect("plain", "assistant")
      assert.strictEqual((yield* call(plain, "sophia.add_document", { title: "t0", body: "b0" }, accept)).error.code, "approval_required")
      assert.strictEqual(asked, 0)
      const { caller: helper } = yield* connectAllowingElicitation("helper")
      const written = yield* call(helper, "sophia.add_document", { title: "t", body: "b" }, accept)
      assert.isUndefined(written.error)
      assert.strictEqual(asked, 1)
      const refused = yield* call(helper, "sophia.add_document", { title: "t2", body: "b2" }, decline)
      assert.strictEqual(refused.error.code, "approval_denied")
      assert.strictEqual(yield* count("documents"), 1)
    }).pipe(Effect.provide(Fast)))
})

describe("Approvals: the ApprovalRequested event", () => {
  it.live("a new approval is published once, after its commit; re-binding to it or a refused call publishes nothing", () =>
    Effect.gen(function*() {
      const heard = yield* (yield* Events).listen
      const { caller } = yield* connect("helper", "assistant")
      const args = { title: "Heard", body: "by the portal" }
      const first = yield* call(caller, "sophia.add_document", args)
      const id = first.error.approval_id as string
      const requested = [...(yield* Queue.takeAll(heard))].filter((e) => e._tag === "ApprovalRequested")
      assert.deepStrictEqual(requested.map((e) => e._tag === "ApprovalRequested" && [e.approval_id, e.connection_id, e.tool, e.access, e.user_id]), [
        [id, caller.connectionId, "sophia.add_document", "write", caller.userId]
      ])
      // the same call again binds to the open approval: nothing new to decide
      assert.strictEqual((yield* call(caller, "sophia.add_document", args)).error.approval_id, id)
      // a call the service refuses anyway asks for no approval, so publishes none
      const { caller: poster } = yield* connect("poster", "full")
      const post = yield* call(poster, "sophia.coordination_post", { channel: "general", kind: "claim", body: "x" })
      yield* call(caller, "sophia.submit_claim_graph", { claims: [{ subject: "x", predicate: "is", object: "y", source_ids: [post.post_id] }] })
      const after = [...(yield* Queue.takeAll(heard))].map((e) => e._tag)
      assert.notInclude(after, "ApprovalRequested")
      yield* decide(id, "approved")
      assert.deepStrictEqual([...(yield* Queue.takeAll(heard))].map((e) => e._tag), ["ApprovalDecided"])
    }).pipe(Effect.scoped, Effect.provide(Fast)))
})

/** A read tool that composes another call, as `execute_code` does: the inner call passes the same gate. */
const composeTools = Effect.succeed([
  defineTool({
    name: "sophia.test_compose",
    group: "test",
    access: "read",
    description: "test only",
    annotations: READ_ONLY,
    input: Schema.Struct({ name: Schema.String, args: Schema.Unknown }),
    output: Schema.Struct({ inner: Schema.Unknown }),
    handler: (input, { invoke }) => Effect.map(invoke(input.name, input.args), (o) => ({ inner: o.body }))
  })
])

describe("Approvals: composed calls (execute_code path)", () => {
  it.live("a write made from inside a composed call needs the same approval", () =>
    Effect.gen(function*() {
      const { caller } = yield* connect("helper", "assistant")
      const args = { title: "inner", body: "from a script" }
      const out = yield* call(caller, "sophia.test_compose", { name: "sophia.add_document", args })
      assert.strictEqual(out.inner.error.code, "approval_required")
      yield* decide(out.inner.error.approval_id, "approved")
      const again = yield* call(caller, "sophia.test_compose", {
        name: "sophia.add_document",
        args: { ...args, approval_id: out.inner.error.approval_id }
      })
      assert.match(again.inner.document_id, /^doc-/)
      assert.strictEqual(yield* count("documents"), 1)
    }).pipe(Effect.provide(appWithWait(30, ToolRegistry.fromToolSets<Knowledge>(knowledgeTools, composeTools)))))
})

// each CLI process takes seconds to start on a loaded machine: the call waits up to 90 s for the gesture
describe("Approvals: the owner's channel (CLI, another process)", () => {
  const db = tempDb()
  it.live("`sophia approvals list|approve` decides an elevated call that is waiting in the daemon's process", () =>
    Effect.gen(function*() {
      const { caller } = yield* connect("worker", "full")
      const fiber = yield* Effect.fork(call(caller, "sophia.create_entity", { name: "gamma", kind: "team" }))
      const approvals = yield* Approvals
      while ((yield* approvals.list()).length === 0) yield* Effect.sleep("10 millis")
      const listed = sophia(["approvals", "list", "--db", db])
      assert.strictEqual(listed.status, 0, listed.stderr)
      const pending = JSON.parse(listed.stdout)
      assert.lengthOf(pending, 1)
      assert.strictEqual(pending[0].tool, "sophia.create_entity")
      assert.deepStrictEqual(pending[0].args, { name: "gamma", kind: "team" })
      const approved = sophia(["approvals", "approve", pending[0].approval_id, "--db", db])
      assert.strictEqual(approved.status, 0, approved.stderr)
      assert.strictEqual(JSON.parse(approved.stdout).status, "approved")
      const body = yield* Fiber.join(fiber)
      assert.isUndefined(body.error, JSON.stringify(body.error))
      assert.match(body.entity_id, /^ent-/)
      const late = yield* Effect.flip(approvals.decide(pending[0].approval_id, "denied"))
      assert.strictEqual(late._tag, "ValidationError")
    }).pipe(
      Effect.provide(
        SophiaLive(db).pipe(
          Layer.provide(
            Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["SOPHIA_APPROVAL_WAIT_MS", "90000"]])))
          )
        )
      )
    ), 150_000)
})

describe("Approvals: inside sophia.execute_code", () => {
  it.live("a snippet's write passes the same gate: approval_required, then once approved, it runs once", () =>
    Effect.gen(function*() {
      const { caller } = yield* connect("scripted", "assistant")
      const snippet = (approvalId?: string) => `
        try {
          const r = await sophia.addDocument({ title: "from a snippet", body: "scripted write"${
        approvalId ? `, approval_id: ${JSON.stringify(approvalId)}` : ""
      } })
          return { ok: r.document_id }
        } catch (e: any) { return { code: e.code, approval_id: e.approval_id ?? e.details?.approval_id } }`
      const first = yield* call(caller, "sophia.execute_code", { code: snippet() })
      assert.isUndefined(first.error, JSON.stringify(first.error))
      assert.strictEqual(first.result.code, "approval_required")
      const pending = yield* Effect.flatMap(Approvals, (a) => a.list())
      assert.lengthOf(pending, 1)
      assert.strictEqual(pending[0].tool, "sophia.add_document")
      assert.strictEqual(first.result.approval_id, pending[0].approval_id)
      assert.strictEqual(yield* count("documents"), 0)
      yield* decide(pending[0].approval_id, "approved")
      const second = yield* call(caller, "sophia.execute_code", { code: snippet(pending[0].approval_id) })
      const third = yield* call(caller, "sophia.execute_code", { code: snippet(pending[0].approval_id) })
      assert.match(second.result.ok, /^doc-/)
      assert.strictEqual(third.result.ok, second.result.ok)
      assert.strictEqual(yield* count("documents"), 1)
    }).pipe(Effect.provide(Fast)), 120_000)
})

describe("Approvals: a call the service would refuse anyway", () => {
  it.live("is refused at once, before any approval is asked for, and leaves nothing behind", () =>
    Effect.gen(function*() {
      const { caller: poster } = yield* connect("poster", "full")
      const { caller: assistant } = yield* connect("helper", "assistant")
      const post = yield* call(poster, "sophia.coordination_post", { channel: "general", kind: "claim", body: "x is true" })
      const started = Date.now()
      const refused = yield* call(assistant, "sophia.submit_claim_graph", {
        claims: [{ subject: "x", predicate: "is", object: "true", source_ids: [post.post_id] }]
      })
      assert.strictEqual(refused.error.code, "invalid_grounding_source")
      assert.isBelow(Date.now() - started, 1_500, "no wait for the owner (who would be given 2 s)")
      assert.strictEqual(yield* count("approvals"), 0, "the owner is not asked to approve a call that cannot succeed")
      assert.strictEqual(yield* count("facts"), 0)
      // a call that can succeed still needs its approval, and the dry run wrote nothing
      const doc = yield* call(assistant, "sophia.add_document", { title: "t", body: "b" })
      assert.strictEqual(doc.error.code, "approval_required")
      assert.strictEqual(yield* count("documents"), 0)
      assert.strictEqual(yield* count("mutations"), 0)
      assert.strictEqual(yield* count("approvals"), 1)
    }).pipe(Effect.provide(appWithWait(2_000))))
})
