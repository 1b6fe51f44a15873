import { assert, describe, it } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { Caller } from "../src/domain/Auth.js"
import { SophiaTest } from "../src/layers/App.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { ToolRegistry } from "../src/mcp/Registry.js"
import { connect } from "./support/Fixtures.js"

const call = (caller: Caller, tool: string, args: unknown = {}) =>
  Effect.flatMap(Dispatcher, (d) => d.call(caller, tool, args)).pipe(Effect.map((o) => o.body as any))

describe("sophia.orient", () => {
  it.effect("bootstraps a session: identity, counts that match the store, unread, open waits, claimed work", () =>
    Effect.gen(function*() {
      const { caller: a } = yield* connect("alice", "full")
      const { caller: b } = yield* connect("bob", "full")
      const { caller: eve } = yield* connect("eve", "full", "other-user")
      for (const channel of ["arc:one", "arc:two", "branch:main"]) {
        const r = yield* call(b, "sophia.coordination_post", { channel, kind: "status", body: "hi" })
        assert.isUndefined(r.error)
      }
      yield* call(eve, "sophia.coordination_post", { channel: "arc:eve", kind: "status", body: "not yours" })
      const wait = yield* call(a, "sophia.declare_wait", { on: "bob", predicate: { type: "post_exists", channel: "arc:one" }, reason: "r" })
      assert.isUndefined(wait.error)
      const opened = yield* call(a, "sophia.ledger_append", {
        work_id: "task-1",
        expected_head: null,
        events: [{ type: "opened", title: "Write the page" }, { type: "claimed" }]
      })
      assert.isUndefined(opened.error, JSON.stringify(opened.error))
      yield* call(b, "sophia.ledger_append", { work_id: "task-2", expected_head: null, events: [{ type: "opened", title: "Other" }] })
      const doc = yield* call(a, "sophia.add_document", { title: "Spec", body: "the spec body" })
      assert.isUndefined(doc.error, JSON.stringify(doc.error))

      const o = yield* call(a, "sophia.orient", { goal: "ship" })
      assert.strictEqual(o.connection_id, a.connectionId)
      assert.strictEqual(o.connection_short, a.connectionShort)
      assert.strictEqual(o.name, "alice")
      assert.strictEqual(o.profile, "full")
      assert.strictEqual(o.goal, "ship")

      // counts equal what the store holds for this user (and nothing of the other user)
      const sql = yield* SqlClient.SqlClient
      const n = (rows: ReadonlyArray<{ n: number | string }>) => Number(rows[0].n)
      const uid = a.userId
      assert.strictEqual(o.counts.posts, n(yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM posts WHERE user_id = ${uid}`))
      assert.strictEqual(o.counts.channels, n(yield* sql<{ n: number }>`SELECT COUNT(DISTINCT channel) AS n FROM posts WHERE user_id = ${uid}`))
      assert.strictEqual(o.counts.open_waits, 1)
      assert.strictEqual(o.counts.work_items, 2)
      assert.strictEqual(o.counts.documents, 1)
      assert.strictEqual(o.counts.posts, 4, "3 posts + the wait post; eve's post is not counted")
      assert.strictEqual(o.unread, o._inbox_unread)
      assert.strictEqual(o.unread, 3, "bob's three posts; the wait post is alice's own")
      assert.deepStrictEqual(o.my_open_waits.map((w: any) => w.wait_id), [wait.wait_id])
      assert.deepStrictEqual(o.my_claimed_work.map((w: any) => w.work_id), ["task-1"])
      assert.strictEqual(o.my_claimed_work[0].head, opened.head)
      const registry = yield* ToolRegistry
      assert.strictEqual(o.total_tools, registry.listFor("full", "dotted").length)
      assert.match(o.server_git_sha, /^([0-9a-f]{8}|unknown)$/)
      // orient reads waits without consuming their signals
      assert.deepStrictEqual(o._blocking.map((w: any) => w.wait_id), [wait.wait_id])

      const observer = (yield* connect("watcher", "observer")).caller
      const ob = yield* call(observer, "sophia.orient")
      assert.strictEqual(ob.total_tools, registry.listFor("observer", "dotted").length)
      assert.isBelow(ob.total_tools, o.total_tools)
      const scoped = (yield* connect("scoped", "full", undefined, ["entity-that-has-nothing"])).caller
      assert.strictEqual((yield* call(scoped, "sophia.orient")).counts.documents, 0, "documents are counted within the entity scope")
    }).pipe(Effect.provide(SophiaTest)))
})
