import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Full-text indexes for `sophia.search` over facts and posts (documents already have `documents_fts`).
 *
 * SQLite: standalone FTS5 tables (a copy of the text plus the row's id, user and — for facts — entity as
 * unindexed columns, so ranking and filtering stay inside the index; not external-content tables, whose
 * rowid link a VACUUM would break), filled by insert triggers and back-filled here. Searches always join
 * back to the base table, so a fact deleted (soft: `deleted_at`) or a row removed leaves nothing visible.
 * Postgres has no FTS5: its index (tsvector) belongs to the Postgres port and is created there.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql.onDialectOrElse({
    pg: () => Effect.void,
    orElse: () =>
      Effect.gen(function*() {
        yield* sql`CREATE VIRTUAL TABLE facts_fts USING fts5(fact_id UNINDEXED, user_id UNINDEXED, entity_id UNINDEXED, subject, predicate, object, tokenize = 'unicode61 remove_diacritics 2')`
        yield* sql`CREATE VIRTUAL TABLE posts_fts USING fts5(post_id UNINDEXED, user_id UNINDEXED, body, tokenize = 'unicode61 remove_diacritics 2')`
        yield* sql`CREATE TRIGGER facts_fts_insert AFTER INSERT ON facts BEGIN
          INSERT INTO facts_fts (fact_id, user_id, entity_id, subject, predicate, object)
          VALUES (new.id, new.user_id, new.entity_id, new.subject, new.predicate, new.object);
        END`
        yield* sql`CREATE TRIGGER posts_fts_insert AFTER INSERT ON posts BEGIN
          INSERT INTO posts_fts (post_id, user_id, body) VALUES (new.id, new.user_id, new.body);
        END`
        yield* sql`INSERT INTO facts_fts (fact_id, user_id, entity_id, subject, predicate, object)
          SELECT id, user_id, entity_id, subject, predicate, object FROM facts`
        yield* sql`INSERT INTO posts_fts (post_id, user_id, body) SELECT id, user_id, body FROM posts`
      })
  })
})
