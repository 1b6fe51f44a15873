import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Schema } from "effect"
import type { ParseError } from "effect/ParseResult"
import type { Caller } from "../../domain/Auth.js"
import type { ReadVia } from "../../domain/Receipts.js"
import { forShare, whenWritersConcurrent } from "../store/Locking.js"
import { makeStatements } from "../store/Statements.js"
import type { DbPostRow } from "./Rows.js"

/**
 * What a connection has consumed (its own posts and the ones it read), kept exact inside the write that
 * changes it: the read rows (`reads`), and per connection its consumed counts and scan marks, in total
 * (`inbox_state`) and per channel (`inbox_channel_state`). A post counts its author's own post here; a
 * marking read inserts its read rows and settles each state row once.
 *
 * A read row says when (`read_at`) and how (`via`: the inbox tool, a runtime's hook, a resource read) the
 * post reached the connection: its receipt (`Receipts.ts`). Every connection with a read row has an
 * `inbox_state` row too (written by the same read, if not before), which is how a receipt finds the readers
 * of one post by primary key.
 */

/** A scan mark a read may advance: the channel's (`channel` given) or the connection's global one. */
export type ScanAdvance =
  | { readonly channel: string; readonly to: number }
  | { readonly channel?: undefined; readonly to: number }

type ChannelStateRow = {
  readonly user_id: string
  readonly connection_id: string
  readonly channel: string
  readonly consumed: number
  readonly lwm_pos: number
}
type ReadRow = {
  readonly user_id: string
  readonly connection_id: string
  readonly pos: number
  readonly post_id: string
  readonly read_at: string
  readonly via: ReadVia
}

const decodeArchiveStates = Schema.decodeUnknown(
  Schema.Array(Schema.Struct({ id: Schema.String, archived_at: Schema.NullOr(Schema.String) }))
)

/** The largest page of the inbox (`SOPHIA_INBOX_LIMIT_MAX`'s default), the bound of the shaped statements below. */
const PAGE_ROWS = 200

/** The read marks' statements, each made once. */
const makeReadMarkStatements = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const { named, shaped } = yield* makeStatements

  /** `n` more of the channel's posts are consumed (own or read) by the connection. */
  const consumeInChannel = named(
    "Coordination.consumeInChannel",
    (p: { userId: string; connectionId: string; channel: string; n: number }) =>
      sql`INSERT INTO inbox_channel_state (user_id, connection_id, channel, consumed, lwm_pos)
        VALUES (${p.userId}, ${p.connectionId}, ${p.channel}, ${p.n}, 0)
        ON CONFLICT (user_id, connection_id, channel) DO UPDATE
          SET consumed = inbox_channel_state.consumed + excluded.consumed`
  )
  /** `n` more of the user's visible posts are consumed by the connection. */
  const consumeInTotal = named("Coordination.consumeInTotal", (p: { userId: string; connectionId: string; n: number }) =>
    sql`INSERT INTO inbox_state (user_id, connection_id, consumed, lwm) VALUES (${p.userId}, ${p.connectionId}, ${p.n}, 0)
      ON CONFLICT (user_id, connection_id) DO UPDATE SET consumed = inbox_state.consumed + excluded.consumed`)

  /**
   * A read's settlement of one channel's state: `n` more of its posts consumed and, when `advance` is 1,
   * the channel's scan mark moved to `lwmPos` — one upsert for both.
   */
  const settleChannel = named(
    "Coordination.settleChannel",
    (p: { userId: string; connectionId: string; channel: string; n: number; lwmPos: number; advance: number }) =>
      sql`INSERT INTO inbox_channel_state (user_id, connection_id, channel, consumed, lwm_pos)
        VALUES (${p.userId}, ${p.connectionId}, ${p.channel}, ${p.n}, ${p.lwmPos})
        ON CONFLICT (user_id, connection_id, channel) DO UPDATE
          SET consumed = inbox_channel_state.consumed + excluded.consumed,
            lwm_pos = CASE WHEN ${p.advance} = 1 THEN excluded.lwm_pos ELSE inbox_channel_state.lwm_pos END`
  )
  /**
   * `consumeInChannel` for several channels in one statement (a page of the whole inbox spans many), one
   * statement per count of channels up to a page's worth. The rows go in channel order (two readers of one
   * connection on two daemons lock them in the same order).
   */
  const consumeInChannelsStatement = shaped(
    "Coordination.consumeInChannels",
    5 * 64,
    (p: { rows: ReadonlyArray<ChannelStateRow> }) =>
      sql`INSERT INTO inbox_channel_state ${sql.insert(p.rows)}
        ON CONFLICT (user_id, connection_id, channel) DO UPDATE
          SET consumed = inbox_channel_state.consumed + excluded.consumed`
  )
  /** The same for the connection's totals: `n` more consumed, and the global scan mark when `advance` is 1. */
  const settleTotal = named(
    "Coordination.settleTotal",
    (p: { userId: string; connectionId: string; n: number; lwm: number; advance: number }) =>
      sql`INSERT INTO inbox_state (user_id, connection_id, consumed, lwm) VALUES (${p.userId}, ${p.connectionId}, ${p.n}, ${p.lwm})
        ON CONFLICT (user_id, connection_id) DO UPDATE SET consumed = inbox_state.consumed + excluded.consumed,
          lwm = CASE WHEN ${p.advance} = 1 THEN excluded.lwm ELSE inbox_state.lwm END`
  )

  /** The read marks of a page, one row of 6 per post: one statement per count of posts up to the largest page. */
  const insertReads = shaped(
    "Coordination.insertReads",
    6 * PAGE_ROWS,
    (p: { rows: ReadonlyArray<ReadRow> }) =>
      sql<{ post_id: string }>`INSERT INTO reads ${sql.insert(p.rows)} ON CONFLICT DO NOTHING RETURNING post_id`
  )

  /** (Postgres) share-lock the channels' counter rows, in channel order. */
  const shareChannels = shaped(
    "Coordination.shareChannels",
    PAGE_ROWS + 1,
    (p: { userId: string; channels: ReadonlyArray<string> }) =>
      sql`SELECT channel FROM channel_counters WHERE user_id = ${p.userId}
        AND ${sql.in("channel", p.channels)} ORDER BY channel ${forShare(sql)}`
  )
  const archiveStates = shaped(
    "Coordination.archiveStates",
    PAGE_ROWS + 1,
    (p: { userId: string; channels: ReadonlyArray<string> }) =>
      sql`SELECT id, archived_at FROM channels WHERE user_id = ${p.userId} AND ${sql.in("id", p.channels)}`
  )

  return {
    consumeInChannel,
    consumeInTotal,
    settleChannel,
    consumeInChannelsStatement,
    settleTotal,
    insertReads,
    shareChannels,
    archiveStates
  } as const
})

export const makeReadMarks = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const {
    archiveStates,
    consumeInChannel,
    consumeInChannelsStatement,
    consumeInTotal,
    insertReads,
    settleChannel,
    settleTotal,
    shareChannels
  } = yield* makeReadMarkStatements

  /**
   * The author's own visible post is never unread for it: one more consumed in the channel, and `totalInc`
   * (0 when the channel is archived) in the connection's total.
   */
  const consumeOwnPost = (userId: string, connectionId: string, channel: string, totalInc: number) =>
    Effect.gen(function*() {
      yield* consumeInChannel({ userId, connectionId, channel, n: 1 })
      // (an inbox_state row exists wherever an inbox_channel_state row does: archive moves counts between them)
      yield* consumeInTotal({ userId, connectionId, n: totalInc })
    })

  /** Several channels' consumption in one statement (rows in channel order), or the one upsert for one channel. */
  const consumeInChannels = (userId: string, connectionId: string, counts: ReadonlyArray<readonly [string, number]>) => {
    if (counts.length === 0) return Effect.void
    if (counts.length === 1) return Effect.asVoid(consumeInChannel({ userId, connectionId, channel: counts[0][0], n: counts[0][1] }))
    const rows = [...counts].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([channel, n]): ChannelStateRow => ({ user_id: userId, connection_id: connectionId, channel, consumed: n, lwm_pos: 0 }))
    return Effect.asVoid(consumeInChannelsStatement({ rows }))
  }

  /**
   * Insert the read rows; per channel, how many visible posts this read really consumed and whether it is
   * archived, and the ids of the posts it really marked.
   */
  const consume = (caller: Caller, candidates: ReadonlyArray<DbPostRow>, now: string, via: ReadVia) =>
    Effect.gen(function*() {
      const perChannel = new Map<string, { n: number; archived: boolean }>()
      if (candidates.length === 0) return { perChannel, added: new Set<string>() }
      // Concurrent readers of one connection (two daemons): only the rows this insert really added are
      // counted (RETURNING skips those another transaction marked first), so `consumed` never counts a
      // read twice.
      const rows = candidates.map((r): ReadRow => ({
        user_id: caller.userId,
        connection_id: caller.connectionId,
        pos: r.pos,
        post_id: r.id,
        read_at: now,
        via
      }))
      const inserted = yield* insertReads({ rows })
      const added = new Set(inserted.map((r) => r.post_id))
      const fresh = candidates.filter((r) => added.has(r.id))
      // Archive state per channel as it stands now: the counter rows are share-locked first (Postgres;
      // in channel order, so readers never deadlock one another), so no closeout can archive or re-open
      // one of these channels before this transaction ends, and the state read after the lock is current.
      const channelsRead = [...new Set(fresh.filter((r) => r.kind !== "heartbeat").map((r) => r.channel))].sort()
      // (SQLite: the page's own reading is current, nothing can have moved under the write lock.)
      const archivedNow = new Map<string, boolean>()
      if (channelsRead.length > 0) {
        yield* whenWritersConcurrent(
          sql,
          Effect.gen(function*() {
            yield* shareChannels({ userId: caller.userId, channels: channelsRead })
            const states = yield* archiveStates({ userId: caller.userId, channels: channelsRead }).pipe(
              Effect.flatMap(decodeArchiveStates)
            )
            for (const c of channelsRead) archivedNow.set(c, false)
            for (const st of states) archivedNow.set(st.id, st.archived_at !== null)
          })
        )
      }
      for (const r of fresh) {
        if (r.kind === "heartbeat") continue
        const c = perChannel.get(r.channel) ?? { n: 0, archived: archivedNow.get(r.channel) ?? r.archived === 1 }
        c.n++
        perChannel.set(r.channel, c)
      }
      return { perChannel, added }
    })

  /**
   * Mark the returned posts read for this connection only, keeping the counters exact, and move the scan
   * mark the read may advance (`advance`: the channel's, or the global one) in the same upserts: each
   * state row is written once per read. Returns the ids of the posts this read marked (a concurrent read of
   * the same connection may have marked some first).
   */
  const markRead = (
    caller: Caller,
    rows: ReadonlyArray<DbPostRow>,
    now: string,
    advance: ScanAdvance | undefined,
    via: ReadVia = "inbox"
  ): Effect.Effect<ReadonlySet<string>, SqlError | ParseError> =>
    Effect.gen(function*() {
      const { connectionId, userId } = caller
      const candidates = rows.filter((r) => r.connection_id !== connectionId && r.is_read === 0)
      const { added, perChannel } = yield* consume(caller, candidates, now, via)
      let total = 0
      const channelMark = advance?.channel
      const counts: Array<readonly [string, number]> = []
      for (const [channel, { archived, n }] of perChannel) {
        if (channel === channelMark) {
          yield* settleChannel({ userId, connectionId, channel, n, lwmPos: advance!.to, advance: 1 })
        } else {
          counts.push([channel, n])
        }
        if (!archived) total += n
      }
      yield* consumeInChannels(userId, connectionId, counts)
      if (channelMark !== undefined && !perChannel.has(channelMark)) {
        yield* settleChannel({ userId, connectionId, channel: channelMark, n: 0, lwmPos: advance!.to, advance: 1 })
      }
      const totalMark = advance !== undefined && advance.channel === undefined ? advance.to : undefined
      // (a read that marked only heartbeats still writes its inbox_state row: see the receipts above)
      if (perChannel.size > 0 || added.size > 0 || totalMark !== undefined) {
        yield* settleTotal({ userId, connectionId, n: total, lwm: totalMark ?? 0, advance: totalMark !== undefined ? 1 : 0 })
      }
      return added
    })

  return { consumeOwnPost, markRead } as const
})
