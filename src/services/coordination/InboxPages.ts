import type { Statement } from "@effect/sql"
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Schema } from "effect"
import type { ParseError } from "effect/ParseResult"
import type { Caller } from "../../domain/Auth.js"
import { DbInt } from "../../domain/Time.js"
import { family, limitTo, makeStatements } from "../store/Statements.js"
import type { DbPostRow } from "./Rows.js"
import { decodeOptionalNumber, decodePostRows } from "./Rows.js"

/**
 * The inbox's pages and the scan marks read before one. The default view (unread only) is an anti-join
 * against `reads`, bounded below by a per-connection low-water mark (`inbox_state.lwm`, a post position
 * below which nothing is unread in the default view; per channel `inbox_channel_state.lwm_pos`, the same
 * within one channel). Indexes: (user_id, pos) and (user_id, channel, pos). The page is ordered by the
 * user's post position `pos`, which within a channel is the `channel_seq` order.
 *
 * A connection that started caught up (`CaughtUp.ts`) has a start position (`inbox_state.start_pos`): a
 * post at or below it was never unread for it, read row or not. Every page asks it, once per statement.
 */

/** What a page shows, as the inbox's input asks (`after`: the position the page starts past). */
export interface PageFilter {
  readonly userId: string
  readonly connectionId: string
  readonly after: number
  readonly channel?: string | undefined
  readonly withArchived: boolean
  readonly kinds?: ReadonlyArray<string> | undefined
  readonly withHeartbeats: boolean
  readonly unreadOnly: boolean
  /** only posts addressed to the reader (`to`) */
  readonly toMe: boolean
  readonly beforeSeq?: number | undefined
}

/** Where a read's page starts: past the global scan mark `lwm` or the channel's `lwmPos` (0: none applies). */
export interface PageStart {
  readonly lwm: number
  readonly lwmPos: number
  /** The user's last position committed before the page (0 when the read does not need it). */
  readonly lastPosBefore: number
}
const decodeMarks = Schema.decodeUnknown(
  Schema.Tuple(Schema.Struct({ lwm: Schema.NullOr(DbInt), last_pos: Schema.NullOr(DbInt) }))
)

/** The plain unread inbox (no channel, kind, heartbeat, archive or seq asked for): most reads are it. */
const isPlainUnread = (f: PageFilter) =>
  f.unreadOnly && f.channel === undefined && !f.withArchived && f.kinds === undefined && !f.withHeartbeats &&
  f.beforeSeq === undefined && !f.toMe

export const makeInboxPages = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const { named } = yield* makeStatements

  /** The reader's start position (0: none, every post it has not read is unread), a constant subquery. */
  const startPosOf = (userId: string, connectionId: string) =>
    sql`COALESCE((SELECT start_pos FROM inbox_state WHERE user_id = ${userId} AND connection_id = ${connectionId}), 0)`

  /**
   * A page of the posts `where` selects (conditions joined by AND), with the reader's read marks joined: a
   * post counts as read when it has a read row or lies at or below the reader's start position.
   */
  const postsPage = (
    reader: { readonly userId: string; readonly connectionId: string },
    where: ReadonlyArray<Statement.Fragment>,
    limit: number,
    newest: boolean
  ) =>
    sql`SELECT p.id, p.pos, p.channel, p.channel_seq, p.kind, p.body, p.refs, p.payload, p.connection_id,
        p.to_selector, p.to_connection_id, p.based_on_seq, p.created_at,
        CASE WHEN r.post_id IS NULL AND p.pos > ${startPosOf(reader.userId, reader.connectionId)} THEN 0 ELSE 1 END AS is_read,
        CASE WHEN ch.archived_at IS NULL THEN 0 ELSE 1 END AS archived
      FROM posts p
      LEFT JOIN reads r ON r.user_id = p.user_id AND r.connection_id = ${reader.connectionId} AND r.pos = p.pos
      LEFT JOIN channels ch ON ch.user_id = p.user_id AND ch.id = p.channel
      WHERE ${sql.and(where)}
      ORDER BY p.pos ${newest ? sql.literal("DESC") : sql.literal("ASC")}
      ${limitTo(sql, limit)}`
  const pageConditions = (f: PageFilter) => {
    const where = [sql`p.user_id = ${f.userId}`, sql`p.pos > ${f.after}`]
    if (f.channel !== undefined) {
      where.push(sql`p.channel = ${f.channel}`)
    } else if (!f.withArchived) {
      where.push(sql`ch.archived_at IS NULL`)
    }
    if (f.kinds !== undefined) where.push(sql`p.kind IN ${sql.in(f.kinds)}`)
    if (!f.withHeartbeats && !(f.kinds?.includes("heartbeat") ?? false)) where.push(sql`p.kind <> 'heartbeat'`)
    if (f.toMe) where.push(sql`p.to_connection_id = ${f.connectionId}`)
    if (f.unreadOnly) {
      where.push(sql`p.connection_id <> ${f.connectionId}`)
      where.push(sql`r.post_id IS NULL`)
      where.push(sql`p.pos > ${startPosOf(f.userId, f.connectionId)}`)
    }
    if (f.beforeSeq !== undefined) where.push(sql`p.channel_seq < ${f.beforeSeq}`)
    return where
  }
  // the plain unread view as a named statement, one per page size (its LIMIT is text): oldest first (the
  // inbox), or the newest (a hook's delivery)
  const plainUnread = (name: string, newest: boolean) =>
    family((limit: number) =>
      named(`Coordination.${name}(${limit})`, (p: { me: string; userId: string; after: number }) =>
        postsPage(
          { userId: p.userId, connectionId: p.me },
          pageConditions({
            userId: p.userId,
            connectionId: p.me,
            after: p.after,
            withArchived: false,
            withHeartbeats: false,
            unreadOnly: true,
            toMe: false
          }),
          limit,
          newest
        ))
    )
  const unreadPage = plainUnread("unreadPage", false)
  const newestUnreadPage = plainUnread("newestUnreadPage", true)
  /** The newest `limit` posts of the plain unread view past `after`, returned in position order. */
  const newestUnread = (caller: Caller, after: number, limit: number) =>
    newestUnreadPage(limit)({ me: caller.connectionId, userId: caller.userId, after }).pipe(
      Effect.flatMap(decodePostRows),
      Effect.map((rows) => [...rows].reverse())
    )

  /**
   * The page `filter` selects, at most `limit` posts in position order; `newest`: the last `limit` of them
   * (the conversation without a cursor), still returned in position order.
   */
  const page = (filter: PageFilter, limit: number, newest: boolean): Effect.Effect<ReadonlyArray<DbPostRow>, SqlError | ParseError> =>
    (isPlainUnread(filter)
      ? unreadPage(limit)({ me: filter.connectionId, userId: filter.userId, after: filter.after })
      : postsPage(filter, pageConditions(filter), limit, newest)).pipe(
        Effect.flatMap(decodePostRows),
        Effect.map((rows) => newest ? [...rows].reverse() : rows)
      )

  const channelMarks = named("Coordination.channelMarks", (p: { userId: string; connectionId: string; channel: string }) =>
    sql`SELECT (SELECT lwm_pos FROM inbox_channel_state
        WHERE user_id = ${p.userId} AND connection_id = ${p.connectionId} AND channel = ${p.channel}) AS lwm,
      (SELECT last_pos FROM post_counters WHERE user_id = ${p.userId}) AS last_pos`)
  const totalMarks = named("Coordination.totalMarks", (p: { userId: string; connectionId: string }) =>
    sql`SELECT (SELECT lwm FROM inbox_state WHERE user_id = ${p.userId} AND connection_id = ${p.connectionId}) AS lwm,
      (SELECT last_pos FROM post_counters WHERE user_id = ${p.userId}) AS last_pos`)
  const lastPosQuery = named("Coordination.lastPos", (p: { userId: string }) =>
    sql`SELECT last_pos AS n FROM post_counters WHERE user_id = ${p.userId}`)

  const marksOf = (statement: Effect.Effect<ReadonlyArray<unknown>, SqlError>) =>
    Effect.map(Effect.flatMap(statement, decodeMarks), ([marks]) => marks)

  /**
   * Where a read's page starts: the scan marks its view starts past, and the user's last position read with
   * them. The low-water marks apply to unread-only views without heartbeats (`useMarks`). The last position
   * is read before the page: under concurrent writers a post may commit between two statements, so
   * "everything up to here was seen" must be a position committed no later than the page's own snapshot
   * (positions commit in order: the counter row's lock). It is read with the mark, in one statement.
   */
  const startOf = (caller: Caller, view: {
    readonly useMarks: boolean
    /** Whether the read may advance a mark (and so needs the last position even without one). */
    readonly advanceMarks: boolean
    readonly channel: string | undefined
    readonly withArchived: boolean
  }): Effect.Effect<PageStart, SqlError | ParseError> =>
    Effect.gen(function*() {
      const { connectionId, userId } = caller
      if (view.useMarks && view.channel !== undefined) {
        const marks = yield* marksOf(channelMarks({ userId, connectionId, channel: view.channel }))
        return { lwm: 0, lwmPos: marks.lwm ?? 0, lastPosBefore: marks.last_pos ?? 0 }
      }
      if (view.useMarks && !view.withArchived) {
        const marks = yield* marksOf(totalMarks({ userId, connectionId }))
        return { lwm: marks.lwm ?? 0, lwmPos: 0, lastPosBefore: marks.last_pos ?? 0 }
      }
      if (!view.advanceMarks) return { lwm: 0, lwmPos: 0, lastPosBefore: 0 }
      const rows = yield* Effect.flatMap(lastPosQuery({ userId }), decodeOptionalNumber)
      return { lwm: 0, lwmPos: 0, lastPosBefore: rows[0]?.n ?? 0 }
    })

  return { page, newestUnread, startOf } as const
})
