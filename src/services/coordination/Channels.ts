import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import type { ParseError } from "effect/ParseResult"
import { spanned } from "../Spans.js"
import { forUpdate, serialize } from "../store/Locking.js"
import { makeStatements } from "../store/Statements.js"
import { decodeOptionalNumber } from "./Rows.js"

/**
 * The lifecycle of a channel inside the write transaction that changes it: holding a channel still (a wait
 * being declared, a channel's first post), and archiving / re-opening it, which moves the channel's counts
 * out of or back into the user's and every connection's totals (rare, O(connections that touched the
 * channel)). Tables written: `channels`, `post_counters`, `inbox_state` (read: `channel_counters`,
 * `inbox_channel_state`, `posts`).
 */
export const makeChannelLifecycle = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const { named } = yield* makeStatements

  const channelKey = (userId: string, channel: string) => `channel/${userId}/${channel}`

  /**
   * The channel's advisory lock (Postgres; nothing on SQLite, one writer): what a channel's first post takes,
   * which has no counter row to lock before its insert, so a wait declared on the channel (`holdChannel`)
   * and the post cannot miss each other.
   */
  const serializeChannel = (userId: string, channel: string): Effect.Effect<void, SqlError> =>
    serialize(sql, channelKey(userId, channel))

  const lockCounter = named("Coordination.holdChannel", (p: { userId: string; channel: string }) =>
    sql`SELECT last_seq FROM channel_counters WHERE user_id = ${p.userId} AND channel = ${p.channel} ${forUpdate(sql)}`)

  /**
   * Inside the caller's transaction: no post lands on the channel until it ends, and every post that
   * landed before is visible to the caller's next statements. A wait being declared holds it, so a post
   * either lands before (the declaration reads it) or after (the post's hook sees the committed wait).
   * Postgres: the channel's advisory lock (for a channel with no post yet; see `serializeChannel`) and the
   * counter row `FOR UPDATE` (every later post takes that row first). SQLite: nothing (one writer).
   */
  const holdChannel = spanned("Coordination.holdChannel", (userId: string, channel: string): Effect.Effect<void> =>
    Effect.gen(function*() {
      yield* serializeChannel(userId, channel)
      yield* lockCounter({ userId, channel })
    }).pipe(Effect.catchTag("SqlError", Effect.die)))

  // ---- archive: the channel's counts out of the totals ----

  const markArchived = named(
    "Coordination.markArchived",
    (p: { userId: string; channel: string; postId: string; now: string }) =>
      sql`INSERT INTO channels (user_id, id, archived_at, archived_by_post, updated_at)
        VALUES (${p.userId}, ${p.channel}, ${p.now}, ${p.postId}, ${p.now})
        ON CONFLICT (user_id, id) DO UPDATE SET archived_at = ${p.now}, archived_by_post = ${p.postId}, updated_at = ${p.now}`
  )
  const userVisibleLess = named("Coordination.userVisibleLess", (p: { userId: string; visible: number }) =>
    sql`UPDATE post_counters SET visible = visible - ${p.visible} WHERE user_id = ${p.userId}`)
  const connectionsConsumedLess = named("Coordination.connectionsConsumedLess", (p: { userId: string; channel: string }) =>
    sql`UPDATE inbox_state SET consumed = consumed - (SELECT ics.consumed FROM inbox_channel_state ics
        WHERE ics.user_id = inbox_state.user_id AND ics.connection_id = inbox_state.connection_id AND ics.channel = ${p.channel})
      WHERE user_id = ${p.userId} AND EXISTS (SELECT 1 FROM inbox_channel_state ics
        WHERE ics.user_id = inbox_state.user_id AND ics.connection_id = inbox_state.connection_id AND ics.channel = ${p.channel})`)

  /** Take a channel's counts out of the user's and every connection's totals. */
  const archive = (userId: string, channel: string, visible: number, postId: string, now: string) =>
    Effect.gen(function*() {
      yield* markArchived({ userId, channel, postId, now })
      yield* userVisibleLess({ userId, visible })
      yield* connectionsConsumedLess({ userId, channel })
    })

  // ---- re-open: the counts back, and the scan marks lowered ----

  const markOpen = named("Coordination.markOpen", (p: { userId: string; channel: string; now: string }) =>
    sql`UPDATE channels SET archived_at = NULL, archived_by_post = NULL, updated_at = ${p.now}
      WHERE user_id = ${p.userId} AND id = ${p.channel}`)
  const userVisibleMore = named("Coordination.userVisibleMore", (p: { userId: string; visible: number }) =>
    sql`UPDATE post_counters SET visible = visible + ${p.visible} WHERE user_id = ${p.userId}`)
  const connectionsConsumedMore = named("Coordination.connectionsConsumedMore", (p: { userId: string; channel: string }) =>
    sql`UPDATE inbox_state SET consumed = consumed + (SELECT ics.consumed FROM inbox_channel_state ics
        WHERE ics.user_id = inbox_state.user_id AND ics.connection_id = inbox_state.connection_id AND ics.channel = ${p.channel})
      WHERE user_id = ${p.userId} AND EXISTS (SELECT 1 FROM inbox_channel_state ics
        WHERE ics.user_id = inbox_state.user_id AND ics.connection_id = inbox_state.connection_id AND ics.channel = ${p.channel})`)
  const firstPos = named("Coordination.firstPosInChannel", (p: { userId: string; channel: string }) =>
    sql`SELECT MIN(pos) AS n FROM posts WHERE user_id = ${p.userId} AND channel = ${p.channel}`)
  const lowerScanMarks = named(
    "Coordination.lowerScanMarks",
    (p: { userId: string; channel: string; below: number; visible: number }) =>
      sql`UPDATE inbox_state SET lwm = CASE WHEN lwm < ${p.below} THEN lwm ELSE ${p.below} END
        WHERE user_id = ${p.userId} AND lwm > ${p.below} AND NOT EXISTS (SELECT 1 FROM inbox_channel_state ics
          WHERE ics.user_id = inbox_state.user_id AND ics.connection_id = inbox_state.connection_id
            AND ics.channel = ${p.channel} AND ics.consumed >= ${p.visible})`
  )

  /** Put a channel's counts back, and lower the scan mark of connections that have unread posts in it. */
  const unarchive = (userId: string, channel: string, visible: number, now: string): Effect.Effect<void, SqlError | ParseError> =>
    Effect.gen(function*() {
      yield* markOpen({ userId, channel, now })
      yield* userVisibleMore({ userId, visible })
      yield* connectionsConsumedMore({ userId, channel })
      const first = yield* firstPos({ userId, channel }).pipe(Effect.flatMap(decodeOptionalNumber))
      const below = (first[0]?.n ?? 1) - 1
      yield* lowerScanMarks({ userId, channel, below, visible })
    })

  return { holdChannel, serializeChannel, archive, unarchive } as const
})
