import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Dense retrieval (services/Embeddings.ts): the vectors of documents, facts and posts as the configured
 * model embedded them, and how far the background feed has read each kind.
 *
 * `embedding_vectors`: one row per (model, kind, item): the item's user and entity (so a nearest-neighbour
 * scan filters by user and entity scope without asking the owners), its unit-length vector as little-endian
 * float32 (a BLOB on SQLite, BYTEA on Postgres: no pgvector extension is installed here, and an exact scan
 * in memory is the method up to the size measured in docs/architecture.md) and `seq`, the order rows were
 * written in (every write holds the `embeddings` lock, so on Postgres too a row with a higher `seq` never
 * commits before a lower one): each daemon keeps the vectors in memory and reads only the rows past the
 * last `seq` it holds. Another model's rows are not read; a model change re-embeds everything.
 *
 * `embedding_progress`: per (model, kind, user) where the feed stands — posts by the user's post position
 * (`pos`), documents and facts by (`at`, `item_id`) over every user (`user_id` = '').
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql.onDialectOrElse({
    pg: () =>
      sql`CREATE TABLE embedding_vectors (
        seq BIGSERIAL PRIMARY KEY,
        model TEXT NOT NULL,
        kind TEXT NOT NULL,
        item_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        entity_id TEXT,
        vector BYTEA NOT NULL,
        UNIQUE (model, kind, item_id)
      )`,
    orElse: () =>
      sql`CREATE TABLE embedding_vectors (
        seq INTEGER PRIMARY KEY,
        model TEXT NOT NULL,
        kind TEXT NOT NULL,
        item_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        entity_id TEXT,
        vector BLOB NOT NULL,
        UNIQUE (model, kind, item_id)
      )`
  })
  yield* sql`CREATE INDEX embedding_vectors_scan ON embedding_vectors (user_id, kind, model, seq)`
  yield* sql`CREATE TABLE embedding_progress (
    model TEXT NOT NULL,
    kind TEXT NOT NULL,
    user_id TEXT NOT NULL,
    pos BIGINT NOT NULL,
    at TEXT NOT NULL,
    item_id TEXT NOT NULL,
    PRIMARY KEY (model, kind, user_id)
  )`
})
