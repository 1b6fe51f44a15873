/**
 * The posts' full-text index on SQLite is written in batches (migration 0010, `Coordination.indexPosts`,
 * `SearchIndexFeed` in layers/App.ts), not inside each post's transaction. What must hold: a search finds
 * every committed post at once — this process's, another OS process's, thousands not yet indexed — each
 * exactly once; the background fiber indexes posts without any search; the progress row never runs ahead
 * of the index.
 */
import { SqlClient } from "@effect/sql"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import type { Caller } from "../src/domain/Auth.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { tempDb } from "./support/Cli.js"
import { appOnFile, connect } from "./support/Fixtures.js"
import { otherProcessPosts } from "./support/OtherProcess.js"

/** Run an effect against a built app (the tests keep one open across another process's writes). */
const runIn = (context: Context.Context<any>) => <A, E>(effect: Effect.Effect<A, E, any>) =>
  Effect.provide(effect, context) as Effect.Effect<A, E>

const indexCounts = (userId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.map(
      sql<{ rows: number; distinct_posts: number; progress: number | null; newest: number | null }>`SELECT
        (SELECT COUNT(*) FROM posts_fts WHERE user_id = ${userId}) AS rows,
        (SELECT COUNT(DISTINCT post_id) FROM posts_fts WHERE user_id = ${userId}) AS distinct_posts,
        (SELECT pos FROM posts_fts_progress WHERE user_id = ${userId}) AS progress,
        (SELECT MAX(pos) FROM posts WHERE user_id = ${userId}) AS newest`,
      ([r]) => ({ rows: Number(r.rows), distinct: Number(r.distinct_posts), progress: Number(r.progress ?? 0), newest: Number(r.newest ?? 0) })
    )).pipe(Effect.orDie)

/** The index counts once the user's progress reaches `pos` (polled: the background fiber's work), or after 5 s. */
const countsOnceIndexed = (run: ReturnType<typeof runIn>, userId: string, pos: number) =>
  Effect.gen(function*() {
    let counts = yield* run(indexCounts(userId))
    for (let tries = 0; tries < 100 && counts.progress < pos; tries++) {
      yield* Effect.sleep("50 millis")
      counts = yield* run(indexCounts(userId))
    }
    return counts
  })

const search = (caller: Caller, query: string, limit = 50) =>
  Effect.flatMap(Dispatcher, (d) => d.call(caller, "sophia.search", { query, kinds: ["posts"], limit })).pipe(
    Effect.map((o) => {
      assert.isTrue(o.ok, JSON.stringify(o.body))
      return (o.body as any).items as ReadonlyArray<{ kind: string; id: string; snippet: string }>
    })
  )

describe("posts' search index in batches (SQLite)", () => {
  it.live("a search finds every committed post at once, each once: this process's, another process's, and a backlog past one batch", () =>
    Effect.gen(function*() {
      const db = tempDb()
      // the background indexer waits a minute: everything below is indexed by the searches themselves
      const context = yield* Layer.build(appOnFile(db, 60_000))
      const run = runIn(context)
      const { caller: reader } = yield* run(connect("reader"))
      const { bearer, caller: writer } = yield* run(connect("writer"))

      const dispatcher = yield* run(Dispatcher)
      const mine = yield* dispatcher.call(writer, "sophia.coordination_post", { channel: "arc:idx", kind: "status", body: "kumquat harvest done" })
      assert.isTrue(mine.ok)
      assert.deepStrictEqual((yield* run(search(reader, "kumquat"))).map((i) => i.id), [(mine.body as any).post_id])

      // another OS process on the same file: its posts are found by this process's very next search
      const seqs = yield* otherProcessPosts(db, bearer, "arc:idx", 4)
      assert.deepStrictEqual(seqs, [2, 3, 4, 5])
      const theirs = yield* run(search(reader, "0"))
      assert.strictEqual(theirs.length, 4)

      // a backlog larger than one batch (1000), written straight to the table as another writer would
      yield* run(Effect.flatMap(SqlClient.SqlClient, (sql) =>
        sql.withTransaction(Effect.gen(function*() {
          const now = new Date().toISOString()
          for (let i = 0; i < 2500; i++) {
            const pos = 6 + i
            yield* sql`INSERT INTO posts (id, user_id, pos, channel, channel_seq, kind, body, connection_id, created_at)
              VALUES (${`post-bulk-${i}`}, ${writer.userId}, ${pos}, 'arc:bulk', ${i + 1}, 'status',
                ${i === 2499 ? "the last persimmon" : `bulk ${i}`}, ${writer.connectionId}, ${now})`
          }
          yield* sql`UPDATE post_counters SET last_pos = 2505, visible = visible + 2500 WHERE user_id = ${writer.userId}`
        }))
      ).pipe(Effect.orDie))
      const before = yield* run(indexCounts(writer.userId))
      assert.deepStrictEqual(before, { rows: 5, distinct: 5, progress: 5, newest: 2505 })
      assert.deepStrictEqual((yield* run(search(reader, "persimmon"))).map((i) => i.id), ["post-bulk-2499"])
      const after = yield* run(indexCounts(writer.userId))
      assert.deepStrictEqual(after, { rows: 2505, distinct: 2505, progress: 2505, newest: 2505 })
      // and nothing is indexed twice by a search with nothing left to do
      yield* run(search(reader, "kumquat"))
      assert.deepStrictEqual(yield* run(indexCounts(writer.userId)), after)
    }).pipe(Effect.scoped), 120_000)

  it.live("the background fiber indexes posts that landed, without any search", () =>
    Effect.gen(function*() {
      const db = tempDb()
      const context = yield* Layer.build(appOnFile(db, 20))
      const run = runIn(context)
      const { caller: writer } = yield* run(connect("writer"))
      const dispatcher = yield* run(Dispatcher)
      for (let i = 0; i < 30; i++) {
        const o = yield* dispatcher.call(writer, "sophia.coordination_post", { channel: `arc:bg-${i % 3}`, kind: "status", body: `note ${i}` })
        assert.isTrue(o.ok)
      }
      assert.deepStrictEqual(yield* countsOnceIndexed(run, writer.userId, 30), { rows: 30, distinct: 30, progress: 30, newest: 30 })
    }).pipe(Effect.scoped), 60_000)

  it.live("a process starting on a file with unindexed posts indexes them at start", () =>
    Effect.gen(function*() {
      const db = tempDb()
      const userId = yield* Effect.scoped(Effect.gen(function*() {
        const context = yield* Layer.build(appOnFile(db, 60_000))
        const run = runIn(context)
        const { caller: writer } = yield* run(connect("writer"))
        const dispatcher = yield* run(Dispatcher)
        for (let i = 0; i < 7; i++) yield* dispatcher.call(writer, "sophia.coordination_post", { channel: "arc:start", kind: "status", body: `n ${i}` })
        // closed before its indexer's pause ends: nothing indexed yet
        assert.deepStrictEqual(yield* run(indexCounts(writer.userId)), { rows: 0, distinct: 0, progress: 0, newest: 7 })
        return writer.userId
      }))
      const context = yield* Layer.build(appOnFile(db, 60_000))
      assert.deepStrictEqual(yield* countsOnceIndexed(runIn(context), userId, 7), { rows: 7, distinct: 7, progress: 7, newest: 7 })
    }).pipe(Effect.scoped), 60_000)
})
