import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import type { ConnectionCreated } from "../../domain/Events.js"
import { DbInt } from "../../domain/Time.js"
import { spanned } from "../Spans.js"
import { forShare } from "../store/Locking.js"
import { makeStatements } from "../store/Statements.js"

/**
 * Where a new connection starts reading. Minted without its backlog, it starts caught up: every post of
 * its user committed before it existed counts as consumed, so its unread count starts at 0 and its inbox
 * empty; every post after counts as usual. Recorded once, inside the minting transaction
 * (`ConnectionCreated`, wired in layers/App.ts), in the read-mark model's own terms:
 * - `inbox_state`: `consumed` = the user's visible posts, `lwm` and `start_pos` = the user's last position;
 * - `inbox_channel_state`, one row per channel: `consumed` = the channel's visible posts, `lwm_pos` = that
 *   position (archived channels too, so an archive or a re-open moves exact counts);
 * - `start_pos` tells the pages a post at or below it is read though it has no read row (`InboxPages.ts`),
 *   so a conversation flags it read and a read never counts it consumed twice.
 * Posts targeted at the connection are never caught up: a post names its recipient among live
 * connections only (`Auth.resolve`), after the connection row has committed — later than the position read
 * here. (Minted with its backlog, nothing is recorded: every post is unread, as before.)
 *
 * Exact under concurrent posts (Postgres): the user's counter row is share-locked first (created if the user
 * has never posted), so a post that already took its position has committed before the counts are read,
 * and a post that has not yet taken one waits until this transaction ends — it lands after the start.
 * Every post takes that row (`Posting.ts`, `bumpUser`) before it commits. SQLite: one writer.
 */

const decodeCounters = Schema.decodeUnknown(Schema.Tuple(Schema.Struct({ last_pos: DbInt, visible: DbInt })))

export const makeCaughtUp = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const { named } = yield* makeStatements

  const ensureCounters = named("Coordination.ensureCounters", (p: { userId: string }) =>
    sql`INSERT INTO post_counters (user_id, last_pos, visible) VALUES (${p.userId}, 0, 0)
      ON CONFLICT (user_id) DO NOTHING`)
  const holdCounters = named("Coordination.holdCounters", (p: { userId: string }) =>
    sql`SELECT last_pos, visible FROM post_counters WHERE user_id = ${p.userId} ${forShare(sql)}`)
  const startTotals = named(
    "Coordination.startTotals",
    (p: { userId: string; connectionId: string; visible: number; lastPos: number }) =>
      sql`INSERT INTO inbox_state (user_id, connection_id, consumed, lwm, start_pos)
        VALUES (${p.userId}, ${p.connectionId}, ${p.visible}, ${p.lastPos}, ${p.lastPos})`
  )
  const startChannels = named(
    "Coordination.startChannels",
    (p: { userId: string; connectionId: string; lastPos: number }) =>
      sql`INSERT INTO inbox_channel_state (user_id, connection_id, channel, consumed, lwm_pos)
        SELECT user_id, ${p.connectionId}, channel, visible, ${p.lastPos} FROM channel_counters WHERE user_id = ${p.userId}`
  )

  /** Record that a connection starts caught up (inside the transaction that minted it). */
  const startCaughtUp = (userId: string, connectionId: string) =>
    Effect.gen(function*() {
      yield* ensureCounters({ userId })
      const [{ last_pos: lastPos, visible }] = yield* holdCounters({ userId }).pipe(Effect.flatMap(decodeCounters))
      yield* startTotals({ userId, connectionId, visible, lastPos })
      yield* startChannels({ userId, connectionId, lastPos })
    })

  /** The subscriber of `ConnectionCreated` (atomic: a connection is never minted half caught up). */
  const onConnectionCreated = spanned(
    "Coordination.onConnectionCreated",
    (event: ConnectionCreated): Effect.Effect<void> =>
      (event.backlog ? Effect.void : startCaughtUp(event.user_id, event.connection_id)).pipe(
        Effect.catchTag("SqlError", "ParseError", Effect.die)
      )
  )

  return { onConnectionCreated } as const
})
