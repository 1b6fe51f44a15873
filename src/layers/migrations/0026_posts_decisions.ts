import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * A channel's latest decision or closeout, found at once (Coordination.recentChannels, for panorama): without it
 * the lookup walks the channel's posts newest first until the first one — ~11 ms on SQLite past 20,000 posts
 * since the last decision. A partial index holds only those posts; both stores use it for that lookup's
 * `kind IN ('decision', 'closeout') … ORDER BY channel_seq DESC LIMIT 1`. Portable SQL.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE INDEX posts_decisions ON posts (user_id, channel, channel_seq) WHERE kind IN ('decision', 'closeout')`
})
