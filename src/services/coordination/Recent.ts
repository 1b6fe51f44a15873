import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { PostKind } from "../../domain/Coordination.js"
import type { RecentChannel } from "../../domain/Panorama.js"
import { preview } from "../../domain/Panorama.js"
import { DbInt } from "../../domain/Time.js"
import { Auth } from "../Auth.js"
import { spanned } from "../Spans.js"
import { family, limitTo, makeStatements } from "../store/Statements.js"

/**
 * The channels where something happened lately, for `panorama`: a user's channels with a post since a
 * time, most recently active first, each with its latest `decision` or `closeout` (however old), the author's
 * name joined live. A channel that only ever had heartbeats is left out (its `visible` count is 0), as the
 * inbox leaves heartbeats out. The recent channels come from `channel_counters` through its index on
 * `(user_id, last_post_at)`; each one's latest decision or closeout is one probe of the partial index
 * `posts_decisions` (migration 0026), which holds only those.
 */

/** The longest preview of a latest post's body read from the store (`panorama` cuts it further). */
export const LATEST_BODY_MAX = 1000

const RecentRow = Schema.Struct({
  channel: Schema.String,
  last_seq: DbInt,
  last_post_at: Schema.String,
  archived: DbInt,
  latest_kind: Schema.NullOr(PostKind),
  latest_seq: Schema.NullOr(DbInt),
  latest_by: Schema.NullOr(Schema.String),
  latest_body: Schema.NullOr(Schema.String),
  latest_at: Schema.NullOr(Schema.String)
})
const decodeRecent = Schema.decodeUnknown(Schema.Array(RecentRow))

export const makeRecent = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const auth = yield* Auth
  const { named, namedValues } = yield* makeStatements

  // one statement per page size (a LIMIT is text)
  const selectRecent = family((limit: number) =>
    named("Coordination.recentChannels", (p: { userId: string; since: string }) =>
      sql`SELECT cc.channel, cc.last_seq, cc.last_post_at,
          CASE WHEN ch.archived_at IS NULL THEN 0 ELSE 1 END AS archived,
          d.kind AS latest_kind, d.channel_seq AS latest_seq, d.connection_id AS latest_by,
          substr(d.body, 1, ${sql.literal(String(LATEST_BODY_MAX + 1))}) AS latest_body, d.created_at AS latest_at
        FROM channel_counters cc
        LEFT JOIN channels ch ON ch.user_id = cc.user_id AND ch.id = cc.channel
        LEFT JOIN posts d ON d.id = (SELECT p.id FROM posts p
          WHERE p.user_id = cc.user_id AND p.channel = cc.channel AND p.kind IN ('decision', 'closeout')
          ORDER BY p.channel_seq DESC LIMIT 1)
        WHERE cc.user_id = ${p.userId} AND cc.last_post_at >= ${p.since} AND cc.visible > 0
        ORDER BY cc.last_post_at DESC, cc.channel ${limitTo(sql, limit)}`))
  const countRecent = namedValues("Coordination.countRecentChannels", (p: { userId: string; since: string }) =>
    sql`SELECT COUNT(*) FROM channel_counters WHERE user_id = ${p.userId} AND last_post_at >= ${p.since} AND visible > 0`)

  /**
   * The user's channels with a post at or after `since` (ISO time), at most `limit` of them (most recently
   * active first), and how many there are in all; each latest body cut to `bodyChars` (≤ 1,000).
   */
  const recentChannels = spanned("Coordination.recentChannels", (userId: string, options: {
    readonly since: string
    readonly limit: number
    readonly bodyChars: number
  }): Effect.Effect<{ readonly channels: ReadonlyArray<RecentChannel>; readonly total: number }> =>
    Effect.gen(function*() {
      const rows = yield* Effect.flatMap(selectRecent(options.limit)({ userId, since: options.since }), decodeRecent)
      const total = rows.length < options.limit
        ? rows.length
        : Number((yield* countRecent({ userId, since: options.since }))[0][0])
      const authors = rows.flatMap((r) => (r.latest_by === null ? [] : [r.latest_by]))
      const names = authors.length === 0 ? new Map<string, string>() : yield* auth.names(authors)
      const bodyChars = Math.min(options.bodyChars, LATEST_BODY_MAX)
      const channels = rows.map((r): RecentChannel => ({
        channel: r.channel,
        last_seq: r.last_seq,
        last_post_at: r.last_post_at,
        ...(r.archived === 1 ? { archived: true } : {}),
        latest: r.latest_kind === null || r.latest_seq === null || r.latest_by === null || r.latest_at === null
          ? null
          : {
            kind: r.latest_kind,
            channel_seq: r.latest_seq,
            agent_name: names.get(r.latest_by) ?? r.latest_by.slice(0, 8),
            body: preview(r.latest_body ?? "", bodyChars),
            created_at: r.latest_at
          }
      }))
      return { channels, total }
    }).pipe(Effect.catchTag("SqlError", "ParseError", Effect.die)))

  return { recentChannels } as const
})
