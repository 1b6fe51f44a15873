/**
 * The envelope on a SQLite file keeps a quiet caller's `_inbox_unread` while nothing is committed anywhere
 * (services/readmodel/Envelope.ts, `StoreVersion` from layers/sqlite/). What must hold: the kept count is never served after
 * any commit — this process's, or a real second OS process's on the same file — and a caller with an open
 * or undelivered wait is read every time (its `_blocking` / `_wait_resolved` are never skipped). A commit that
 * changes no envelope (a lease's, `EnvelopeNeutral`) does not end it, and the count stays exact across it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import type { Caller } from "../src/domain/Auth.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { StoreVersion } from "../src/services/store/Statements.js"
import { tempDb } from "./support/Cli.js"
import { appOnFile, connect } from "./support/Fixtures.js"
import { otherProcessPosts } from "./support/OtherProcess.js"

/** The app built on a fresh file, its store's version, and a caller's tool call (the body). */
const onFreshFile = Effect.gen(function*() {
  const db = tempDb()
  // the search indexer held off: its batches are this process's commits, which would move the version
  // between the steps below and hide a count kept too long
  const context = yield* Layer.build(appOnFile(db, 600_000))
  const dispatcher = Context.get(context, Dispatcher)
  // (the app's published type names only SqlClient of the store's services)
  const version = context.unsafeMap.get(StoreVersion.key) as Context.Tag.Service<typeof StoreVersion>
  const inApp = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, context) as Effect.Effect<A, E>
  const call = (caller: Caller, tool: string, args: unknown = {}) =>
    Effect.map(dispatcher.call(caller, tool, args), (o) => o.body as any)
  return { db, version, inApp, call }
})

describe("Envelope: the kept unread count", () => {
  it.live("is served only while nothing was committed, by this process or another one on the same file", () =>
    Effect.gen(function*() {
      const { call, db, inApp, version } = yield* onFreshFile
      const { caller: reader } = yield* inApp(connect("reader"))
      const { bearer: writerBearer, caller: writer } = yield* inApp(connect("writer"))

      // a trivial call commits nothing: the premise of keeping the count between calls
      assert.strictEqual((yield* call(reader, "sophia.orient"))._inbox_unread, 0)
      const quiet = version.current()
      assert.strictEqual((yield* call(reader, "sophia.orient"))._inbox_unread, 0)
      assert.strictEqual((yield* call(reader, "sophia.orient"))._inbox_unread, 0)
      assert.strictEqual(version.current(), quiet)

      // this process's commit
      yield* call(writer, "sophia.coordination_post", { channel: "arc:kept", kind: "status", body: "one" })
      assert.strictEqual((yield* call(reader, "sophia.orient"))._inbox_unread, 1)
      assert.strictEqual((yield* call(reader, "sophia.orient"))._inbox_unread, 1)

      // another OS process's commits on the same file, through its own store
      const seqs = yield* otherProcessPosts(db, writerBearer, "arc:kept", 3)
      assert.deepStrictEqual(seqs, [2, 3, 4])
      assert.strictEqual((yield* call(reader, "sophia.orient"))._inbox_unread, 4)

      // a caller with an open wait is read every time: `_blocking` on every response while it is open
      const wait = yield* call(reader, "sophia.declare_wait", {
        on: "writer",
        predicate: { type: "post_exists", channel: "arc:answer" },
        reason: "need the answer"
      })
      for (let i = 0; i < 2; i++) {
        const body = yield* call(reader, "sophia.orient")
        assert.strictEqual(body._blocking?.length, 1)
        assert.strictEqual(body._blocking[0].wait_id, wait.wait_id)
      }
      // resolved by the writer's post: delivered once, then gone, and the plain count is kept again
      yield* call(writer, "sophia.coordination_post", { channel: "arc:answer", kind: "answer", body: "here" })
      const resolved = yield* call(reader, "sophia.orient")
      assert.strictEqual(resolved._wait_resolved?.length, 1)
      assert.isUndefined(resolved._blocking)
      const after = yield* call(reader, "sophia.orient")
      assert.isUndefined(after._wait_resolved)
      assert.isUndefined(after._blocking)
      // the four status posts and the writer's answer (the wait's own post is the reader's: never unread)
      assert.strictEqual(after._inbox_unread, 5)

      // reading the inbox (marking) commits, and the next envelope says so
      const page = yield* call(reader, "sophia.coordination_inbox", { limit: 50 })
      assert.strictEqual(page.posts.length, 5)
      assert.strictEqual(page._inbox_unread, 0)
      assert.strictEqual((yield* call(reader, "sophia.orient"))._inbox_unread, 0)
    }).pipe(Effect.scoped), 120_000)

  it.live("is kept across a lease's commits (envelope-neutral: they change no envelope), and stays exact; a release that resolves a wait is an ordinary commit", () =>
    Effect.gen(function*() {
      const { call, db, inApp, version } = yield* onFreshFile
      const { caller: holder } = yield* inApp(connect("holder"))
      const { bearer: writerBearer, caller: writer } = yield* inApp(connect("writer"))
      const { caller: waiter } = yield* inApp(connect("waiter"))
      const relevant = () => version.current() - version.neutral()

      yield* call(writer, "sophia.coordination_post", { channel: "arc:lease", kind: "status", body: "one" })
      assert.strictEqual((yield* call(holder, "sophia.orient"))._inbox_unread, 1)
      // a grant and a release commit, neutrally: the store moved, what an envelope reads did not
      const before = { current: version.current(), neutral: version.neutral(), relevant: relevant() }
      const held = yield* call(holder, "sophia.lease_acquire", { resources: ["path:src/**"], reason: "r" })
      assert.strictEqual(held._inbox_unread, 1)
      const released = yield* call(holder, "sophia.lease_release", { lease_id: held.lease_id })
      assert.strictEqual(released._inbox_unread, 1)
      assert.strictEqual(version.current(), before.current + 2)
      assert.strictEqual(version.neutral(), before.neutral + 2)
      assert.strictEqual(relevant(), before.relevant)
      // a refused grant commits nothing
      yield* call(writer, "sophia.lease_acquire", { resources: ["slot:s"], reason: "r" })
      const refused = yield* call(holder, "sophia.lease_acquire", { resources: ["slot:s"], reason: "r" })
      assert.strictEqual(refused.error?.code, "lease_conflict")
      assert.strictEqual(version.neutral(), before.neutral + 3)

      // exact across them: a post here, then posts by another OS process, each seen by the next lease call
      yield* call(writer, "sophia.coordination_post", { channel: "arc:lease", kind: "status", body: "two" })
      const next = yield* call(holder, "sophia.lease_acquire", { resources: ["path:docs/**"], reason: "r" })
      assert.strictEqual(next._inbox_unread, 2)
      assert.deepStrictEqual(yield* otherProcessPosts(db, writerBearer, "arc:lease", 2), [3, 4])
      const renewed = yield* call(holder, "sophia.lease_renew", { lease_id: next.lease_id })
      assert.strictEqual(renewed._inbox_unread, 4)

      // a release that resolves a wait publishes WaitResolved: an ordinary commit, and the waiter hears of it
      const wait = yield* call(waiter, "sophia.declare_wait", { predicate: { type: "lease_free", resource: "path:docs/a.md" }, reason: "r" })
      assert.isUndefined(wait.resolution)
      const neutralBefore = version.neutral()
      const relevantBefore = relevant()
      yield* call(holder, "sophia.lease_release", { lease_id: next.lease_id })
      assert.strictEqual(version.neutral(), neutralBefore)
      assert.isAbove(relevant(), relevantBefore)
      const heard = yield* call(waiter, "sophia.orient")
      assert.deepStrictEqual(heard._wait_resolved?.map((r: any) => [r.wait_id, r.resolution]), [[wait.wait_id, "satisfied"]])
    }).pipe(Effect.scoped), 120_000)

  it.live("right after the caller's own write it is stamped without asking the store, and stays exact", () =>
    Effect.gen(function*() {
      const { call, db, inApp, version } = yield* onFreshFile
      const { caller: reader } = yield* inApp(connect("reader"))
      const { bearer: writerBearer } = yield* inApp(connect("writer"))

      assert.strictEqual((yield* call(reader, "sophia.orient"))._inbox_unread, 0)
      // another process posts; nobody here has asked the store since
      assert.deepStrictEqual(yield* otherProcessPosts(db, writerBearer, "arc:stamp", 2), [1, 2])
      const beforeOwnWrite = version.known()
      // the reader's own post: its envelope is read (this process committed) under a stamp that has not
      // counted the other process's posts yet, and still says what is there
      const own = yield* call(reader, "sophia.coordination_post", { channel: "arc:mine", kind: "status", body: "mine" })
      assert.strictEqual(own._inbox_unread, 2)
      assert.isAbove(version.known(), beforeOwnWrite)
      // another commit elsewhere: the next envelope must not reuse the count kept under that stamp
      assert.deepStrictEqual(yield* otherProcessPosts(db, writerBearer, "arc:stamp", 1), [3])
      assert.strictEqual((yield* call(reader, "sophia.orient"))._inbox_unread, 3)
      assert.strictEqual((yield* call(reader, "sophia.orient"))._inbox_unread, 3)
      // and known() never runs ahead of the store's own answer
      assert.isAtMost(version.known(), version.current())
    }).pipe(Effect.scoped), 120_000)
})
