/**
 * The full-text indexes on SQLite are written in batches (store/FullText.ts; migrations 0010 for posts,
 * 0011 for documents and facts; `SearchIndexFeed` in services/Search.ts), not inside the transaction of
 * the write. What must hold: a search finds every committed post, document and fact at once — this
 * process's, another OS process's, thousands not yet indexed — each exactly once; a deleted document or
 * fact is never found, a restored one is found again, once; the background fiber indexes without any
 * search; the progress row never runs ahead of the index.
 */
import { Migrator, SqlClient } from "@effect/sql"
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Context, Effect, Layer } from "effect"
import { randomUUID } from "node:crypto"
import type { Caller } from "../src/domain/Auth.js"
import { makeCore } from "../src/layers/App.js"
import { migrations, runMigrations } from "../src/layers/Migrations.js"
import { sqliteClient } from "../src/layers/Sql.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { hashBearer } from "../src/services/Auth.js"
import { Knowledge } from "../src/services/Knowledge.js"
import { SearchIndexFeed } from "../src/services/Search.js"
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

/** A changing kind's index rows, distinct rows, progress and newest logged change for one user. */
const knowledgeCounts = (kind: "documents" | "facts", userId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => {
    const [fts, key] = kind === "documents" ? ["documents_fts", "document_id"] : ["facts_fts", "fact_id"]
    return Effect.map(
      sql<{ rows: number; distinct_rows: number; progress: number | null; newest: number | null }>`SELECT
        (SELECT COUNT(*) FROM ${sql(fts)} WHERE user_id = ${userId}) AS rows,
        (SELECT COUNT(DISTINCT ${sql(key)}) FROM ${sql(fts)} WHERE user_id = ${userId}) AS distinct_rows,
        (SELECT pos FROM ${sql(`${fts}_progress`)} WHERE user_id = ${userId}) AS progress,
        (SELECT MAX(pos) FROM ${sql(`${fts}_changes`)} WHERE user_id = ${userId}) AS newest`,
      ([r]) => ({ rows: Number(r.rows), distinct: Number(r.distinct_rows), progress: Number(r.progress ?? 0), newest: Number(r.newest ?? 0) })
    )
  }).pipe(Effect.orDie)

const searchKind = (caller: Caller, kind: "documents" | "facts", query: string, limit = 100) =>
  Effect.flatMap(Dispatcher, (d) => d.call(caller, "sophia.search", { query, kinds: [kind], limit })).pipe(
    Effect.map((o) => {
      assert.isTrue(o.ok, JSON.stringify(o.body))
      return ((o.body as any).items as ReadonlyArray<{ id: string }>).map((i) => i.id)
    })
  )

/** A fresh file with the app on it (its background indexer out of the way) and a writer connected. */
const writerOnFreshFile = Effect.gen(function*() {
  const run = runIn(yield* Layer.build(appOnFile(tempDb(), 60_000)))
  const { caller } = yield* run(connect("writer"))
  return { caller, run, knowledge: yield* run(Knowledge), sql: yield* run(SqlClient.SqlClient) }
})

describe("documents' and facts' search indexes in batches (SQLite)", () => {
  it.live("a deleted document or fact leaves the index, a restored one comes back once, whenever the batches run", () =>
    Effect.gen(function*() {
      const db = tempDb()
      // the background indexer waits a minute: the searches index
      const context = yield* Layer.build(appOnFile(db, 60_000))
      const run = runIn(context)
      const { caller } = yield* run(connect("writer"))
      const knowledge = yield* run(Knowledge)

      const added = yield* run(knowledge.addDocument(caller, { title: "Kumquat notes", body: "the kumquat harvest" }))
      // logged in the write, not indexed: nothing reaches documents_fts until a batch runs
      assert.deepStrictEqual(yield* run(knowledgeCounts("documents", caller.userId)), { rows: 0, distinct: 0, progress: 0, newest: 1 })
      assert.deepStrictEqual(yield* run(searchKind(caller, "documents", "kumquat")), [added.document_id])
      assert.deepStrictEqual(yield* run(knowledgeCounts("documents", caller.userId)), { rows: 1, distinct: 1, progress: 1, newest: 1 })
      const removed = yield* run(knowledge.revert(caller, added.mutation_id))
      assert.deepStrictEqual(yield* run(searchKind(caller, "documents", "kumquat")), [])
      assert.strictEqual((yield* run(knowledgeCounts("documents", caller.userId))).rows, 0)
      yield* run(knowledge.revert(caller, removed.mutation_id))
      assert.deepStrictEqual(yield* run(searchKind(caller, "documents", "kumquat")), [added.document_id])
      assert.strictEqual((yield* run(knowledgeCounts("documents", caller.userId))).rows, 1)

      // added, deleted and restored with no batch in between: indexed once
      const other = yield* run(knowledge.addDocument(caller, { title: "Persimmon notes", body: "the persimmon harvest" }))
      const gone = yield* run(knowledge.revert(caller, other.mutation_id))
      yield* run(knowledge.revert(caller, gone.mutation_id))
      assert.deepStrictEqual(yield* run(searchKind(caller, "documents", "persimmon")), [other.document_id])
      // indexed, then deleted and restored with no batch in between: still once
      const again = yield* run(knowledge.revert(caller, other.mutation_id))
      yield* run(knowledge.revert(caller, again.mutation_id))
      assert.deepStrictEqual(yield* run(searchKind(caller, "documents", "harvest")).pipe(Effect.map((ids) => [...ids].sort())), [added.document_id, other.document_id].sort())
      const counts = yield* run(knowledgeCounts("documents", caller.userId))
      assert.deepStrictEqual({ rows: counts.rows, distinct: counts.distinct, caughtUp: counts.progress === counts.newest }, { rows: 2, distinct: 2, caughtUp: true })

      // facts: a reverted claim graph leaves the index, its revert brings it back
      const claim = yield* run(knowledge.submitClaimGraph(caller, {
        claims: [
          { subject: "kumquat", predicate: "ripens", object: "winter", source_ids: [added.document_id] },
          { subject: "kumquat", predicate: "grows", object: "slowly", source_ids: [added.document_id] }
        ]
      }))
      assert.sameMembers([...yield* run(searchKind(caller, "facts", "kumquat"))], [...claim.fact_ids])
      const unclaimed = yield* run(knowledge.revert(caller, claim.mutation_id))
      assert.deepStrictEqual(yield* run(searchKind(caller, "facts", "kumquat")), [])
      assert.strictEqual((yield* run(knowledgeCounts("facts", caller.userId))).rows, 0)
      yield* run(knowledge.revert(caller, unclaimed.mutation_id))
      assert.sameMembers([...yield* run(searchKind(caller, "facts", "kumquat"))], [...claim.fact_ids])
      assert.strictEqual((yield* run(knowledgeCounts("facts", caller.userId))).rows, 2)
    }).pipe(Effect.scoped), 60_000)

  it.live("a row another writer put at a position the change log reserves is replaced by the batch, not a failure on every retry", () =>
    Effect.gen(function*() {
      const { caller, knowledge, run, sql } = yield* writerOnFreshFile
      // a process of an older version writes the index itself, at the rowid the next logged change will reserve
      yield* run(sql`INSERT INTO documents_fts (rowid, document_id, user_id, entity_id, title, body)
        VALUES (1, 'stray', ${caller.userId}, NULL, 'stray', 'quince stray row')`)
      const added = yield* run(knowledge.addDocument(caller, { title: "Quince notes", body: "the quince harvest" }))
      assert.deepStrictEqual(yield* run(searchKind(caller, "documents", "quince")), [added.document_id])
      assert.deepStrictEqual(yield* run(knowledgeCounts("documents", caller.userId)), { rows: 1, distinct: 1, progress: 1, newest: 1 })
    }).pipe(Effect.scoped), 60_000)

  it.live("a search whose catching up fails still answers, from the index as it stands", () =>
    Effect.gen(function*() {
      const { caller, knowledge, run, sql } = yield* writerOnFreshFile
      const first = yield* run(knowledge.addDocument(caller, { title: "Medlar notes", body: "the medlar harvest" }))
      assert.deepStrictEqual(yield* run(searchKind(caller, "documents", "medlar")), [first.document_id])
      // from now on every batch fails (its progress cannot be written)
      yield* run(sql`CREATE TRIGGER progress_refused BEFORE UPDATE ON documents_fts_progress BEGIN SELECT RAISE(ABORT, 'refused'); END`)
      yield* run(knowledge.addDocument(caller, { title: "More medlar notes", body: "another medlar harvest" }))
      assert.deepStrictEqual(yield* run(searchKind(caller, "documents", "medlar")), [first.document_id])
      // once batches can be written again, the next search finds both
      yield* run(sql`DROP TRIGGER progress_refused`)
      assert.lengthOf(yield* run(searchKind(caller, "documents", "medlar")), 2)
    }).pipe(Effect.scoped), 60_000)

  it.live("an import session past several batches is found whole by the next search, each document once", () =>
    Effect.gen(function*() {
      const db = tempDb()
      const context = yield* Layer.build(appOnFile(db, 60_000))
      const run = runIn(context)
      const { caller } = yield* run(connect("importer"))
      const knowledge = yield* run(Knowledge)
      // 300 documents: three batches (a batch takes 128 documents)
      const session = yield* run(knowledge.importDocuments(caller, {
        documents: Array.from({ length: 300 }, (_, i) => ({ title: `Lighthouse ${i}`, body: `lighthouse log ${i}` }))
      }))
      const found = yield* run(searchKind(caller, "documents", "lighthouse", 100))
      assert.lengthOf(found, 100)
      assert.deepStrictEqual(yield* run(knowledgeCounts("documents", caller.userId)), { rows: 300, distinct: 300, progress: 300, newest: 300 })
      assert.includeMembers([...session.document_ids], [...found])
    }).pipe(Effect.scoped), 60_000)

  it.live("the background fiber indexes documents and facts that changed, without any search", () =>
    Effect.gen(function*() {
      const db = tempDb()
      const context = yield* Layer.build(appOnFile(db, 60_000))
      // this file's feed, quick (the app's own waits a minute)
      yield* Layer.build(SearchIndexFeed.pipe(
        Layer.provide(Layer.succeedContext(context)),
        Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["SOPHIA_SEARCH_INDEX_DELAY_MS", "20"]]))))
      ))
      const run = runIn(context)
      const { caller } = yield* run(connect("writer"))
      const knowledge = yield* run(Knowledge)
      const docs = []
      for (let i = 0; i < 5; i++) docs.push(yield* run(knowledge.addDocument(caller, { title: `note ${i}`, body: `quince ${i}` })))
      yield* run(knowledge.rememberFact(caller, { subject: "quince", predicate: "is", object: "tart" }))
      yield* run(knowledge.revert(caller, docs[0].mutation_id))
      const settled = (kind: "documents" | "facts", newest: number) =>
        Effect.gen(function*() {
          let counts = yield* run(knowledgeCounts(kind, caller.userId))
          for (let tries = 0; tries < 100 && counts.progress < newest; tries++) {
            yield* Effect.sleep("50 millis")
            counts = yield* run(knowledgeCounts(kind, caller.userId))
          }
          return counts
        })
      assert.deepStrictEqual(yield* settled("documents", 6), { rows: 4, distinct: 4, progress: 6, newest: 6 })
      assert.deepStrictEqual(yield* settled("facts", 1), { rows: 1, distinct: 1, progress: 1, newest: 1 })
    }).pipe(Effect.scoped), 60_000)
})

describe("migration 0011 over an index written the old way (SQLite)", () => {
  it.effect("indexed rows stay found once, deleted ones leave, rows the index missed are indexed by the next search", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* Migrator.make({})({
        loader: Migrator.fromRecord(Object.fromEntries(Object.entries(migrations).filter(([step]) => step < "0011_knowledge_search_batched"))),
        table: "sophia_migrations"
      })
      const now = new Date().toISOString()
      const bearer = `sph_${randomUUID()}`
      const [u1, c1] = [randomUUID(), randomUUID()]
      yield* sql`INSERT INTO users (id, name, is_owner, created_at) VALUES (${u1}, 'owner', 1, ${now})`
      yield* sql`INSERT INTO connections (id, user_id, name, profile, entity_scope, token_hash, created_at)
        VALUES (${c1}, ${u1}, 'author', 'full', '[]', ${hashBearer(bearer)}, ${now})`
      const doc = (id: string, deleted: boolean, indexed: boolean) =>
        Effect.gen(function*() {
          yield* sql`INSERT INTO documents (id, user_id, title, body, created_by, created_at, deleted_at)
            VALUES (${id}, ${u1}, ${`title ${id}`}, 'wombat burrow', ${c1}, ${now}, ${deleted ? now : null})`
          // the old Knowledge indexed a document in its transaction and took it out when deleting it
          if (indexed) yield* sql`INSERT INTO documents_fts (document_id, user_id, entity_id, title, body) VALUES (${id}, ${u1}, NULL, ${`title ${id}`}, 'wombat burrow')`
        })
      yield* doc("doc-live", false, true)
      yield* doc("doc-deleted", true, false)
      yield* doc("doc-missed", false, false)
      // facts were indexed by a trigger that never took a deleted fact out
      for (const [id, deleted] of [["fact-live", false], ["fact-deleted", true]] as const) {
        yield* sql`INSERT INTO facts (id, user_id, subject, predicate, object, origin, created_by, created_at, deleted_at)
          VALUES (${id}, ${u1}, 'wombat', 'digs', ${id}, 'remembered', ${c1}, ${now}, ${deleted ? now : null})`
      }

      yield* runMigrations
      const rows = (table: string, key: string) =>
        Effect.map(sql<{ id: string }>`SELECT ${sql(key)} AS id FROM ${sql(table)} ORDER BY 1`, (r) => r.map((x) => x.id))
      assert.deepStrictEqual(yield* rows("documents_fts", "document_id"), ["doc-live"])
      assert.deepStrictEqual(yield* rows("facts_fts", "fact_id"), ["fact-live"])
      const found = yield* Effect.gen(function*() {
        const dispatcher = yield* Dispatcher
        const caller = yield* dispatcher.authenticate(bearer)
        const ids = (o: { readonly body: unknown }) => ((o.body as any).items as Array<{ id: string }>).map((i) => i.id).sort()
        return {
          documents: ids(yield* dispatcher.call(caller, "sophia.search", { query: "wombat", kinds: ["documents"] })),
          facts: ids(yield* dispatcher.call(caller, "sophia.search", { query: "wombat", kinds: ["facts"] }))
        }
      }).pipe(Effect.provide(makeCore(Layer.succeed(SqlClient.SqlClient, sql))))
      assert.deepStrictEqual(found, { documents: ["doc-live", "doc-missed"], facts: ["fact-live"] })
      assert.deepStrictEqual(yield* rows("documents_fts", "document_id"), ["doc-live", "doc-missed"])
      // the facts' trigger is gone: a fact written now is indexed by the batches, not twice
      const triggers = yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'trigger' AND name = 'facts_fts_insert'`
      assert.strictEqual(Number(triggers[0].n), 0)
    }).pipe(Effect.provide(Layer.orDie(sqliteClient({ filename: ":memory:" })))))
})
