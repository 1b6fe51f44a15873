import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Where a connection starts reading: `inbox_state.start_pos`, the user's last post position when the
 * connection was minted caught up (services/coordination/CaughtUp.ts); a post at or below it is not
 * unread for that connection, read row or not. 0 = no start: every post it has not read is unread — what
 * every existing connection keeps (they started with the history unread). Portable SQL (SQLite and Postgres).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE inbox_state ADD COLUMN start_pos BIGINT NOT NULL DEFAULT 0`
})
