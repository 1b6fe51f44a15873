import type { Statement } from "@effect/sql"
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import type { Caller } from "../../domain/Auth.js"
import type { ChannelSummary, InboxInput } from "../../domain/Coordination.js"
import { DbInt } from "../../domain/Time.js"
import { spanned } from "../Spans.js"
import { limitTo, makeStatements } from "../store/Statements.js"
import { decodeOptionalNumber } from "./Rows.js"

/**
 * Unread counts. A connection's global unread is two primary-key lookups: `post_counters.visible` (the
 * user's non-heartbeat posts in non-archived channels) minus `inbox_state.consumed` (those of them that are
 * the connection's own or that it has read), both kept exact by the writes that change them. Per channel,
 * the same with `channel_counters.visible` and `inbox_channel_state.consumed`. Every statement here that
 * counts a connection's unread uses the one arithmetic below.
 */

const DbChannelRow = Schema.Struct({
  channel: Schema.String,
  last_seq: DbInt,
  unread: DbInt,
  last_post_at: Schema.String,
  archived: DbInt,
  total_unread: DbInt
})
const decodeChannelRows = Schema.decodeUnknown(Schema.Array(DbChannelRow))

const decodeConsumed = Schema.decodeUnknown(Schema.NonEmptyArray(Schema.Struct({
  visible: DbInt,
  connection_id: Schema.NullOr(Schema.String),
  consumed: Schema.NullOr(DbInt)
})))

const MAX_CHANNELS_LISTED = 100

export const makeUnread = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const { named, shaped } = yield* makeStatements

  /** The connection's global unread, as this module's statements compute it (never handed out). */
  const unreadOfConnection = (userId: string, connectionId: string) =>
    sql`(COALESCE((SELECT visible FROM post_counters WHERE user_id = ${userId}), 0)
      - COALESCE((SELECT consumed FROM inbox_state WHERE user_id = ${userId} AND connection_id = ${connectionId}), 0))`

  const unreadQuery = named("Coordination.unreadCount", (p: { userId: string; connectionId: string }) =>
    sql`SELECT ${unreadOfConnection(p.userId, p.connectionId)} AS n`)
  /**
   * The caller's global unread count: one statement, two primary-key lookups. It runs on every response
   * of every tool, so it is deliberately not wrapped in its own span, and its errors (SqlError and
   * ParseError, nothing else) become defects through `Effect.orDie`: the two-tag `catchTag` costs ~0.5 µs
   * more a call here (measured: 6.0 against 5.5 µs of CPU a call, 50,000 calls in one fiber).
   */
  const unreadCount = (caller: Caller): Effect.Effect<number> =>
    unreadQuery({ userId: caller.userId, connectionId: caller.connectionId }).pipe(
      Effect.flatMap(decodeOptionalNumber),
      Effect.map((rows) => rows[0]?.n ?? 0),
      Effect.orDie
    )

  // the user's visible count on one row, left-joined to the listed connections' consumed counts: at least
  // one row even when no listed connection has read or posted anything yet
  const consumedOf = shaped("Coordination.unreadOf", 1000, (p: { userId: string; ids: ReadonlyArray<string> }) =>
    sql`SELECT pc.visible, s.connection_id, s.consumed
      FROM (SELECT COALESCE((SELECT visible FROM post_counters WHERE user_id = ${p.userId}), 0) AS visible) pc
      LEFT JOIN inbox_state s ON s.user_id = ${p.userId} AND ${sql.in("s.connection_id", p.ids)}`)
  /**
   * Every listed connection's global unread count (as `unreadCount`: the user's visible posts minus those
   * the connection consumed) in one statement: the portal's fleet view, instead of one count per connection.
   */
  const unreadOf = spanned(
    "Coordination.unreadOf",
    (userId: string, connectionIds: ReadonlyArray<string>): Effect.Effect<ReadonlyMap<string, number>> =>
      connectionIds.length === 0
        ? Effect.succeed(new Map())
        : consumedOf({ userId, ids: [...new Set(connectionIds)] }).pipe(
          Effect.flatMap(decodeConsumed),
          Effect.map((rows) => {
            const visible = rows[0].visible
            const consumed = new Map<string, number>()
            for (const r of rows) if (r.connection_id !== null) consumed.set(r.connection_id, r.consumed ?? 0)
            return new Map(connectionIds.map((id) => [id, visible - (consumed.get(id) ?? 0)]))
          }),
          Effect.catchTag("SqlError", "ParseError", Effect.die)
        )
  )

  /**
   * The caller's channels, most recent first, with its unread in each (archived ones only when asked),
   * and on every row its global unread count (read in the same snapshot: the inbox's `unread_count`
   * costs no statement of its own).
   */
  const channelsQuery = (connectionId: string, userId: string, archivedFilter: Statement.Fragment) =>
    sql`SELECT cc.channel, cc.last_seq, cc.visible - COALESCE(ics.consumed, 0) AS unread, cc.last_post_at,
        CASE WHEN ch.archived_at IS NULL THEN 0 ELSE 1 END AS archived,
        ${unreadOfConnection(userId, connectionId)} AS total_unread
      FROM channel_counters cc
      LEFT JOIN inbox_channel_state ics
        ON ics.user_id = cc.user_id AND ics.connection_id = ${connectionId} AND ics.channel = cc.channel
      LEFT JOIN channels ch ON ch.user_id = cc.user_id AND ch.id = cc.channel
      WHERE cc.user_id = ${userId} ${archivedFilter}
      ORDER BY cc.last_post_at DESC, cc.channel
      ${limitTo(sql, MAX_CHANNELS_LISTED)}`
  const everyChannel = named("Coordination.everyChannel", (p: { connectionId: string; userId: string }) =>
    channelsQuery(p.connectionId, p.userId, sql``))
  /** (the named channel is listed even when archived) */
  const openChannels = named(
    "Coordination.openChannels",
    (p: { connectionId: string; userId: string; named: string | null }) =>
      channelsQuery(p.connectionId, p.userId, sql`AND (ch.archived_at IS NULL OR cc.channel = ${p.named})`)
  )

  /** The channel list and the global unread count (from the list's rows; with no row listed, asked on its own). */
  const listChannels = (caller: Caller, input: InboxInput) =>
    (input.include_archived === true
      ? everyChannel({ connectionId: caller.connectionId, userId: caller.userId })
      : openChannels({ connectionId: caller.connectionId, userId: caller.userId, named: input.channel ?? null })).pipe(
        Effect.flatMap(decodeChannelRows),
        Effect.catchTag("SqlError", "ParseError", Effect.die),
        Effect.flatMap((rows) =>
          Effect.map(rows.length > 0 ? Effect.succeed(rows[0].total_unread) : unreadCount(caller), (unread) => ({
            unread,
            channels: rows.map((r): ChannelSummary => ({
              channel: r.channel,
              last_seq: r.last_seq,
              unread: r.unread,
              last_post_at: r.last_post_at,
              archived: r.archived === 1
            }))
          }))
        )
      )

  return { unreadCount, unreadOf, listChannels } as const
})
