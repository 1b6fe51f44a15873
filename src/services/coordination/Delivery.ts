import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { Caller } from "../../domain/Auth.js"
import type { PostRow } from "../../domain/Coordination.js"
import type { ReadVia } from "../../domain/Receipts.js"
import { nowIso } from "../../domain/Time.js"
import { Auth } from "../Auth.js"
import { spanned } from "../Spans.js"
import { family, limitTo, makeStatements } from "../store/Statements.js"
import type { makeInboxPages } from "./InboxPages.js"
import type { makeReadMarks } from "./ReadMarks.js"
import type { DbPostRow } from "./Rows.js"
import { decodeOptionalNumber, decodePostRows, toPostRows as postRowsNamed } from "./Rows.js"
import type { makeUnread } from "./Unread.js"

/**
 * Delivery: posts handed to a connection by something other than its own inbox read — an agent runtime's
 * hook — and marked read as they are (`via` says how, for the receipts). Each post is delivered once: a
 * delivery returns only the posts whose read rows it wrote itself (a concurrent read of the same connection
 * that marked one first has had it), in the transaction that read them.
 * - `deliverNew`: the newest unread posts of others (the plain unread view: no heartbeats, no archived
 *   channels) and how many stay unread. A delivery that took every unread post moves the connection's scan
 *   mark past them, as a full read of the inbox does.
 * - `deliverToMe`: the unread posts addressed to the connection (`to`), oldest first, over the partial index
 *   `posts_to` (only targeted posts are in it), and how many addressed to it stay unread.
 * A quick check outside any transaction comes first: with nothing to deliver, no transaction is opened.
 */

export interface Delivered {
  readonly posts: ReadonlyArray<PostRow>
  /** unread posts of the same view left after this delivery */
  readonly more: number
}

export interface DeliveryParts {
  readonly pages: Effect.Effect.Success<typeof makeInboxPages>
  readonly readMarks: Effect.Effect.Success<typeof makeReadMarks>
  readonly unread: Effect.Effect.Success<typeof makeUnread>
}

const nothing: Delivered = { posts: [], more: 0 }

export const makeDelivery = ({ pages, readMarks, unread }: DeliveryParts) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const auth = yield* Auth
    const { named } = yield* makeStatements

    /** The unread posts addressed to `me`: a post counts as read with a read row or at or below its start. */
    const toMeFrom = (me: string, userId: string) =>
      sql`FROM posts p
        LEFT JOIN reads r ON r.user_id = p.user_id AND r.connection_id = ${me} AND r.pos = p.pos
        LEFT JOIN channels ch ON ch.user_id = p.user_id AND ch.id = p.channel
        WHERE p.to_connection_id = ${me} AND p.user_id = ${userId} AND p.connection_id <> ${me}
          AND p.kind <> 'heartbeat' AND ch.archived_at IS NULL AND r.post_id IS NULL
          AND p.pos > COALESCE((SELECT start_pos FROM inbox_state WHERE user_id = ${userId} AND connection_id = ${me}), 0)`
    const toMePage = family((limit: number) =>
      named(`Coordination.toMePage(${limit})`, (p: { me: string; userId: string }) =>
        sql`SELECT p.id, p.pos, p.channel, p.channel_seq, p.kind, p.body, p.refs, p.payload, p.connection_id,
            p.to_selector, p.to_connection_id, p.based_on_seq, p.created_at, 0 AS is_read, 0 AS archived
          ${toMeFrom(p.me, p.userId)}
          ORDER BY p.pos ${limitTo(sql, limit)}`)
    )
    const toMeCountQuery = named("Coordination.toMeCount", (p: { me: string; userId: string }) =>
      sql`SELECT COUNT(*) AS n ${toMeFrom(p.me, p.userId)}`)

    const toMeCount = (caller: Caller) =>
      toMeCountQuery({ me: caller.connectionId, userId: caller.userId }).pipe(
        Effect.flatMap(decodeOptionalNumber),
        Effect.map((rows) => rows[0]?.n ?? 0)
      )

    const toPostRows = postRowsNamed(auth.names)

    /** Mark `rows` read (`via`), and hand out those this delivery marked itself. */
    const handOut = (caller: Caller, rows: ReadonlyArray<DbPostRow>, advanceTo: number | undefined, via: ReadVia) =>
      Effect.gen(function*() {
        const now = yield* nowIso
        const added = yield* readMarks.markRead(caller, rows, now, advanceTo === undefined ? undefined : { to: advanceTo }, via)
        return yield* toPostRows(caller, rows.filter((r) => added.has(r.id)))
      })

    const deliverNew = spanned(
      "Coordination.deliverNew",
      (caller: Caller, limit: number, via: ReadVia): Effect.Effect<Delivered> =>
        Effect.flatMap(unread.unreadCount(caller), (n) =>
          n === 0 ? Effect.succeed(nothing) : sql.withTransaction(Effect.gen(function*() {
            const { lastPosBefore, lwm } = yield* pages.startOf(caller, {
              useMarks: true,
              advanceMarks: true,
              channel: undefined,
              withArchived: false
            })
            const rows = yield* pages.newestUnread(caller, lwm, limit)
            // a short page holds every unread post up to the last position committed before it
            const advanceTo = rows.length < limit && lastPosBefore > lwm ? lastPosBefore : undefined
            const posts = yield* handOut(caller, rows, advanceTo, via)
            return { posts, more: yield* unread.unreadCount(caller) }
          }))).pipe(Effect.catchTag("SqlError", "ParseError", Effect.die))
    )

    const deliverToMe = spanned(
      "Coordination.deliverToMe",
      (caller: Caller, limit: number, via: ReadVia): Effect.Effect<Delivered> =>
        Effect.flatMap(toMeCount(caller), (n) =>
          n === 0 ? Effect.succeed(nothing) : sql.withTransaction(Effect.gen(function*() {
            const rows = yield* Effect.flatMap(toMePage(limit)({ me: caller.connectionId, userId: caller.userId }), decodePostRows)
            const posts = yield* handOut(caller, rows, undefined, via)
            return { posts, more: yield* toMeCount(caller) }
          }))).pipe(Effect.catchTag("SqlError", "ParseError", Effect.die))
    )

    /** How many posts addressed to the caller are unread for it. */
    const countToMe = spanned(
      "Coordination.countToMe",
      (caller: Caller): Effect.Effect<number> => toMeCount(caller).pipe(Effect.catchTag("SqlError", "ParseError", Effect.die))
    )

    return { deliverNew, deliverToMe, countToMe } as const
  })
