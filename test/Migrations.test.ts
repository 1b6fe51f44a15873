/**
 * Migrations over data that predates them: a store migrated up to an earlier step, filled with rows in
 * that step's shape, then brought up to date by the migrator every process runs. On both stores (a fresh
 * in-memory SQLite, or a fresh Postgres schema in the suite's Postgres run).
 */
import { assert, describe, it } from "@effect/vitest"
import { Migrator, SqlClient } from "@effect/sql"
import { Config, Effect, Layer, Option } from "effect"
import Pg from "pg"
import { randomUUID } from "node:crypto"
import { makeCore } from "../src/layers/App.js"
import { migrations, runMigrations } from "../src/layers/Migrations.js"
import { pgClient, withSearchPath } from "../src/layers/Pg.js"
import { sqliteClient } from "../src/layers/Sql.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { hashBearer } from "../src/services/Auth.js"

/** A store with no migration applied: `:memory:`, or a fresh Postgres schema dropped afterwards. */
const BareStore: Layer.Layer<SqlClient.SqlClient> = Layer.unwrapScoped(Effect.gen(function*() {
  const url = yield* Effect.orDie(Config.option(Config.string("SOPHIA_TEST_DATABASE_URL")))
  if (Option.isNone(url) || url.value.trim() === "") return Layer.orDie(sqliteClient({ filename: ":memory:" }))
  const schema = `t_${randomUUID().replaceAll("-", "")}`
  const once = (statement: string) =>
    Effect.promise(async () => {
      const c = new Pg.Client({ connectionString: url.value })
      await c.connect()
      try {
        await c.query(statement)
      } finally {
        await c.end()
      }
    })
  yield* Effect.acquireRelease(once(`CREATE SCHEMA ${schema}`), () => Effect.ignore(once(`DROP SCHEMA ${schema} CASCADE`)))
  return Layer.orDie(pgClient({ url: withSearchPath(url.value, schema), maxConnections: 2 }))
}))

/** The migrator over the steps before `name` only (the same table as the real one). */
const migrateUpTo = (name: keyof typeof migrations) =>
  Migrator.make({})({
    loader: Migrator.fromRecord(Object.fromEntries(Object.entries(migrations).filter(([step]) => step < name))),
    table: "sophia_migrations"
  })

describe("migrations over existing data", () => {
  it.effect("0009: read marks move to the post's position, each one kept, and the inbox still sees what was read", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* migrateUpTo("0009_reads_by_position")
      const now = new Date().toISOString()
      const [user, author, reader] = [randomUUID(), randomUUID(), randomUUID()]
      const readerBearer = `sph_${randomUUID()}`
      yield* sql`INSERT INTO users (id, name, is_owner, created_at) VALUES (${user}, 'owner', 1, ${now})`
      for (const [id, name, bearer] of [[author, "author", `sph_${randomUUID()}`], [reader, "reader", readerBearer]]) {
        yield* sql`INSERT INTO connections (id, user_id, name, profile, entity_scope, token_hash, created_at)
          VALUES (${id}, ${user}, ${name}, 'full', '[]', ${hashBearer(bearer)}, ${now})`
      }
      // three posts by the author in one channel; the reader has read the first and the third (in the
      // old shape: by post id), so one post is unread — counters as the services keep them
      const posts = [1, 2, 3].map((pos) => ({ id: `post-${randomUUID()}`, pos }))
      for (const p of posts) {
        yield* sql`INSERT INTO posts (id, user_id, pos, channel, channel_seq, kind, body, connection_id, created_at)
          VALUES (${p.id}, ${user}, ${p.pos}, 'arc:old', ${p.pos}, 'status', ${`old ${p.pos}`}, ${author}, ${now})`
      }
      yield* sql`INSERT INTO post_counters (user_id, last_pos, visible) VALUES (${user}, 3, 3)`
      yield* sql`INSERT INTO channel_counters (user_id, channel, last_seq, visible, last_post_at) VALUES (${user}, 'arc:old', 3, 3, ${now})`
      yield* sql`INSERT INTO inbox_state (user_id, connection_id, consumed, lwm) VALUES (${author}, ${author}, 3, 0)`
      yield* sql`INSERT INTO inbox_state (user_id, connection_id, consumed, lwm) VALUES (${user}, ${reader}, 2, 0)`
      yield* sql`INSERT INTO inbox_channel_state (user_id, connection_id, channel, consumed, lwm_pos)
        VALUES (${user}, ${reader}, 'arc:old', 2, 0)`
      for (const p of [posts[0], posts[2]]) {
        yield* sql`INSERT INTO reads (user_id, connection_id, post_id, read_at) VALUES (${user}, ${reader}, ${p.id}, ${now})`
      }

      yield* runMigrations
      const marks = yield* sql<{ pos: number; post_id: string; read_at: string }>`SELECT pos, post_id, read_at FROM reads
        WHERE user_id = ${user} AND connection_id = ${reader} ORDER BY pos`
      assert.deepStrictEqual(
        marks.map((m) => ({ pos: Number(m.pos), post_id: m.post_id, read_at: m.read_at })),
        [posts[0], posts[2]].map((p) => ({ pos: p.pos, post_id: p.id, read_at: now }))
      )
      // one mark per post and connection (the key), and only for a post that exists (the parent key)
      const twice = yield* sql`INSERT INTO reads (user_id, connection_id, pos, post_id, read_at)
        VALUES (${user}, ${reader}, 1, ${posts[0].id}, ${now})`.pipe(Effect.flip)
      assert.strictEqual(twice._tag, "SqlError")
      const orphan = yield* sql.withTransaction(sql`INSERT INTO reads (user_id, connection_id, pos, post_id, read_at)
        VALUES (${user}, ${reader}, 99, 'post-none', ${now})`).pipe(Effect.flip)
      assert.strictEqual(orphan._tag, "SqlError")

      // the services over the migrated store: the reader's unread inbox is the one post it had not read
      const inbox = yield* Effect.gen(function*() {
        const dispatcher = yield* Dispatcher
        const caller = yield* dispatcher.authenticate(readerBearer)
        const first = yield* dispatcher.call(caller, "sophia.coordination_inbox", {})
        const again = yield* dispatcher.call(caller, "sophia.coordination_inbox", {})
        return { first: first.body as any, again: again.body as any }
      }).pipe(Effect.provide(makeCore(Layer.succeed(SqlClient.SqlClient, sql))))
      assert.deepStrictEqual(inbox.first.posts.map((p: any) => p.body), ["old 2"])
      assert.strictEqual(inbox.first._inbox_unread, 0)
      assert.deepStrictEqual(inbox.again.posts, [], "marked read in the new shape")
      const conversation = yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM reads WHERE connection_id = ${reader}`
      assert.strictEqual(Number(conversation[0].n), 3)
    }).pipe(Effect.provide(BareStore)))

  it.effect("0010: posts the old trigger indexed stay found, once each, and new posts are indexed in batches", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* migrateUpTo("0010_posts_search_batched")
      const now = new Date().toISOString()
      const [user, author] = [randomUUID(), randomUUID()]
      const bearer = `sph_${randomUUID()}`
      yield* sql`INSERT INTO users (id, name, is_owner, created_at) VALUES (${user}, 'owner', 1, ${now})`
      yield* sql`INSERT INTO connections (id, user_id, name, profile, entity_scope, token_hash, created_at)
        VALUES (${author}, ${user}, 'author', 'full', '[]', ${hashBearer(bearer)}, ${now})`
      // three posts written before the migration (on SQLite the old insert trigger indexes each one)
      for (const pos of [1, 2, 3]) {
        yield* sql`INSERT INTO posts (id, user_id, pos, channel, channel_seq, kind, body, connection_id, created_at)
          VALUES (${`post-old-${pos}`}, ${user}, ${pos}, 'arc:old', ${pos}, 'status', ${`quince batch ${pos}`}, ${author}, ${now})`
      }
      yield* sql`INSERT INTO post_counters (user_id, last_pos, visible) VALUES (${user}, 3, 3)`
      yield* sql`INSERT INTO channel_counters (user_id, channel, last_seq, visible, last_post_at) VALUES (${user}, 'arc:old', 3, 3, ${now})`
      yield* sql`INSERT INTO inbox_state (user_id, connection_id, consumed, lwm) VALUES (${user}, ${author}, 3, 0)`

      yield* runMigrations
      const sqlite = sql.onDialectOrElse({ pg: () => false, orElse: () => true })
      if (sqlite) {
        const [progress] = yield* sql<{ pos: number }>`SELECT pos FROM posts_fts_progress WHERE user_id = ${user}`
        assert.strictEqual(Number(progress.pos), 3, "the trigger's posts count as indexed")
      }
      const found = yield* Effect.gen(function*() {
        const dispatcher = yield* Dispatcher
        const caller = yield* dispatcher.authenticate(bearer)
        const ids = (o: { readonly body: unknown }) => ((o.body as any).items as Array<{ id: string }>).map((i) => i.id).sort()
        const old = ids(yield* dispatcher.call(caller, "sophia.search", { query: "quince", kinds: ["posts"] }))
        yield* dispatcher.call(caller, "sophia.coordination_post", { channel: "arc:new", kind: "status", body: "quince again" })
        const all = ids(yield* dispatcher.call(caller, "sophia.search", { query: "quince", kinds: ["posts"] }))
        return { old, all }
      }).pipe(Effect.provide(makeCore(Layer.succeed(SqlClient.SqlClient, sql))))
      assert.deepStrictEqual(found.old, ["post-old-1", "post-old-2", "post-old-3"])
      assert.strictEqual(found.all.length, 4)
      if (sqlite) {
        const [counts] = yield* sql<{ rows: number; progress: number }>`SELECT
          (SELECT COUNT(*) FROM posts_fts WHERE user_id = ${user}) AS rows,
          (SELECT pos FROM posts_fts_progress WHERE user_id = ${user}) AS progress`
        assert.deepStrictEqual({ rows: Number(counts.rows), progress: Number(counts.progress) }, { rows: 4, progress: 4 })
      }
    }).pipe(Effect.provide(BareStore)))
})
