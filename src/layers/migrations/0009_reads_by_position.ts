import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Read marks keyed by the post's position instead of its id. A connection reads its inbox in position
 * order, so its marks now land at the end of its own key range: marking a page of 20 posts writes one or
 * two index pages, where the random post ids (UUIDs) of the old key scattered them over up to 20 (each
 * written again to the WAL at commit); the inbox's join to the marks walks the same pages in order.
 * `post_id` stays (the row still says which post). The parent key is the post's (user_id, pos), a
 * unique key of `posts`. On SQLite the table is WITHOUT ROWID: the key is the table, one b-tree instead
 * of a table plus its index. Existing marks are copied over with their post's position.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const clustered = yield* sql.onDialectOrElse({ pg: () => Effect.succeed(""), orElse: () => Effect.succeed(" WITHOUT ROWID") })
  yield* sql.unsafe(`CREATE TABLE reads_by_position (
    user_id TEXT NOT NULL,
    connection_id TEXT NOT NULL,
    pos BIGINT NOT NULL,
    post_id TEXT NOT NULL,
    read_at TEXT NOT NULL,
    PRIMARY KEY (user_id, connection_id, pos),
    FOREIGN KEY (user_id, pos) REFERENCES posts (user_id, pos)
  )${clustered}`)
  yield* sql`INSERT INTO reads_by_position (user_id, connection_id, pos, post_id, read_at)
    SELECT r.user_id, r.connection_id, p.pos, r.post_id, r.read_at FROM reads r JOIN posts p ON p.id = r.post_id`
  yield* sql`DROP TABLE reads`
  yield* sql`ALTER TABLE reads_by_position RENAME TO reads`
})
