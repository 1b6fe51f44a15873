import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * SQLite: documents and facts enter their full-text indexes as posts do since 0010 — in batches after the
 * write, never inside it (services/store/FullText.ts). Documents were indexed in their own transaction
 * (and left the index in the revert's), facts by an insert trigger that never took a deleted fact out.
 *
 * Each kind gets a change log, `<kind>_fts_changes` (`pos`, an integer primary key: it only grows, and
 * positions are shared by all users; one row per row added, deleted or restored), and a per-user progress,
 * `<kind>_fts_progress` (the position up to which the index follows the log). A row's index rowid is the
 * position of its first change, so a batch takes a changed row out of the index without scanning it.
 *
 * What is indexed today is taken as is: each index row becomes its row's first change, at the index
 * rowid it already has, and every user's progress starts past it. A second copy of a row, and rows deleted
 * since (facts: every deleted fact), leave the index. Live rows the index does not hold get a change past
 * the progress: the next search (or the feed) indexes them. The facts' trigger goes.
 * Postgres indexes generated tsvector columns itself: nothing changes there.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const kinds = [
    { table: "documents", fts: "documents_fts", key: "document_id" },
    { table: "facts", fts: "facts_fts", key: "fact_id" }
  ] as const
  yield* sql.onDialectOrElse({
    pg: () => Effect.void,
    orElse: () =>
      Effect.gen(function*() {
        yield* sql`DROP TRIGGER facts_fts_insert`
        for (const { fts, key, table } of kinds) {
          const [rows, index, id] = [sql(table), sql(fts), sql(key)]
          const changes = sql(`${fts}_changes`)
          const progress = sql(`${fts}_progress`)
          yield* sql`CREATE TABLE ${changes} (
            pos INTEGER PRIMARY KEY,
            user_id TEXT NOT NULL REFERENCES users(id),
            ${id} TEXT NOT NULL
          )`
          yield* sql`CREATE INDEX ${sql(`${fts}_changes_user`)} ON ${changes} (user_id, pos)`
          yield* sql`CREATE INDEX ${sql(`${fts}_changes_row`)} ON ${changes} (${id}, pos)`
          yield* sql`CREATE TABLE ${progress} (
            user_id TEXT PRIMARY KEY REFERENCES users(id),
            pos BIGINT NOT NULL
          )`
          // (the bare user_id is the MIN(rowid) row's: SQLite's rule for a bare column beside MIN)
          yield* sql`INSERT INTO ${changes} (pos, user_id, ${id}) SELECT MIN(rowid), user_id, ${id} FROM ${index} GROUP BY ${id}`
          yield* sql`DELETE FROM ${index} WHERE rowid NOT IN (
            SELECT c.pos FROM ${changes} c JOIN ${rows} b ON b.id = c.${id} WHERE b.deleted_at IS NULL)`
          yield* sql`INSERT INTO ${progress} (user_id, pos) SELECT user_id, MAX(pos) FROM ${changes} GROUP BY user_id`
          yield* sql`INSERT INTO ${changes} (user_id, ${id}) SELECT user_id, id FROM ${rows}
            WHERE deleted_at IS NULL AND id NOT IN (SELECT ${id} FROM ${changes}) ORDER BY created_at, id`
        }
      })
  })
})
