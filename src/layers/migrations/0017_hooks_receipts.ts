import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Receipts and hooks.
 * - `reads.via`: how a read mark was written — `inbox` (a read of `sophia.coordination_inbox`, what every
 *   existing mark was), `hook` (delivered by an agent runtime's hook), `resource` (an MCP resource read).
 *   One more column on the row a read already writes: nothing more on the write path.
 * - `posts_to`: the posts addressed to a connection, by recipient and position, partial (only targeted
 *   posts carry an entry, so an untargeted post's insert pays nothing): the Stop hook's "is a post to me
 *   unread?" and a receipt's target without scanning the user's posts.
 * - `hook_stop_streaks` (owned by Hooks): how many times in a row a runtime's Stop hook was answered with
 *   a block while it was already continuing because of one (`stop_hook_active`), per connection and stop
 *   loop (a session, or a subagent of it), so the bound `SOPHIA_HOOK_MAX_CONTINUES` holds whichever
 *   daemon answers.
 * Portable SQL (SQLite and Postgres).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE reads ADD COLUMN via TEXT NOT NULL DEFAULT 'inbox'`
  yield* sql`CREATE INDEX posts_to ON posts (to_connection_id, pos) WHERE to_connection_id IS NOT NULL`
  yield* sql`CREATE TABLE hook_stop_streaks (
    connection_id TEXT NOT NULL,
    loop_key TEXT NOT NULL,
    streak BIGINT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (connection_id, loop_key)
  )`
})
