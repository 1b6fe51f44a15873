import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Knowledge: entities, documents (+ their full-text index), facts and the documents they cite, import
 * sessions and the mutation journal. Rows are never physically removed by a revert: `deleted_at` marks
 * them gone, so a revert of a revert restores them exactly.
 *
 * Full-text search is SQLite FTS5: a standalone table holding a copy of title and body plus the
 * document's id, user and entity (unindexed columns, so ranking and filtering never leave the index);
 * a deleted document leaves it. Postgres has no FTS5: a generated tsvector column under a GIN index
 * (added here in the Postgres branch: no Postgres database predates it, the store was refused before). Lookups by id lists go through the primary keys only (no (user_id, …) index on
 * documents or facts' sources that the planner could prefer for an `id IN (…)` query).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE entities (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users(id),
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_at TEXT NOT NULL,
    deleted_at TEXT
  )`
  yield* sql`CREATE UNIQUE INDEX entities_live_name ON entities (user_id, name) WHERE deleted_at IS NULL`
  yield* sql`CREATE TABLE documents (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users(id),
    entity_id TEXT REFERENCES entities(id),
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    uri TEXT,
    import_session_id TEXT,
    created_by TEXT NOT NULL,
    created_at TEXT NOT NULL,
    deleted_at TEXT
  )`
  yield* sql.onDialectOrElse({
    // Postgres: a generated tsvector (title weight A, body B; the 'simple' configuration, no stemming,
    // like unicode61) under a GIN index; deleted documents are filtered by the query
    pg: () =>
      Effect.zipRight(
        sql`ALTER TABLE documents ADD COLUMN search tsvector GENERATED ALWAYS AS
          (setweight(to_tsvector('simple', title), 'A') || setweight(to_tsvector('simple', body), 'B')) STORED`,
        sql`CREATE INDEX documents_search ON documents USING GIN (search)`
      ),
    orElse: () =>
      sql`CREATE VIRTUAL TABLE documents_fts USING fts5(document_id UNINDEXED, user_id UNINDEXED, entity_id UNINDEXED, title, body, tokenize = 'unicode61 remove_diacritics 2')`
  })
  yield* sql`CREATE TABLE facts (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users(id),
    entity_id TEXT REFERENCES entities(id),
    subject TEXT NOT NULL,
    predicate TEXT NOT NULL,
    object TEXT NOT NULL,
    origin TEXT NOT NULL CHECK (origin IN ('claim', 'remembered')),
    created_by TEXT NOT NULL,
    created_at TEXT NOT NULL,
    deleted_at TEXT
  )`
  yield* sql`CREATE INDEX facts_subject ON facts (user_id, subject)`
  yield* sql`CREATE INDEX facts_predicate ON facts (user_id, predicate)`
  yield* sql`CREATE TABLE fact_sources (
    fact_id TEXT NOT NULL REFERENCES facts(id),
    document_id TEXT NOT NULL REFERENCES documents(id),
    PRIMARY KEY (fact_id, document_id)
  )`
  yield* sql`CREATE INDEX fact_sources_document ON fact_sources (document_id)`
  yield* sql`CREATE TABLE import_sessions (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users(id),
    connection_id TEXT NOT NULL,
    entity_id TEXT,
    status TEXT NOT NULL,
    document_count INTEGER NOT NULL,
    created_at TEXT NOT NULL
  )`
  yield* sql`CREATE TABLE mutations (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users(id),
    connection_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    changes TEXT NOT NULL,
    reverts TEXT,
    reverted_by TEXT,
    created_at TEXT NOT NULL
  )`
  yield* sql`CREATE INDEX mutations_user ON mutations (user_id, created_at)`
})
