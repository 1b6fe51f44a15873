import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * SQLite: posts enter their full-text index (`posts_fts`) in batches instead of one by one in each post's
 * transaction. Measured on a post's statements: FTS5 writes a new index segment (and its structure record)
 * at every commit that touched it, about half of a post's SQLite time; a batch of posts pays that once.
 * `posts_fts_progress` says, per user, the highest position whose post is indexed: every post of the user
 * at or below it is in `posts_fts` exactly once, none above. `Coordination` indexes past it in one write
 * transaction (rows and progress together), in the background after posts land and, before every search,
 * up to the newest post (so a search still finds every committed post, whoever wrote it). The posts the
 * old trigger indexed are all there: progress starts at each user's last position.
 * Postgres indexes `posts.search` (a generated tsvector) itself: nothing changes there.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql.onDialectOrElse({
    pg: () => Effect.void,
    orElse: () =>
      Effect.gen(function*() {
        yield* sql`DROP TRIGGER posts_fts_insert`
        yield* sql`CREATE TABLE posts_fts_progress (
          user_id TEXT PRIMARY KEY REFERENCES users(id),
          pos BIGINT NOT NULL
        )`
        yield* sql`INSERT INTO posts_fts_progress (user_id, pos) SELECT user_id, MAX(pos) FROM posts GROUP BY user_id`
      })
  })
})
