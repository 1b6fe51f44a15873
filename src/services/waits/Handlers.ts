import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import type { ConnectionRevoked, PostLanded } from "../../domain/Events.js"
import { DbInt } from "../../domain/Time.js"
import { makeStatements } from "../store/Statements.js"
import type { makeLeaseWaits } from "./LeaseWaits.js"
import type { makeResolutions } from "./Resolutions.js"
import { satisfiedHow } from "./Resolutions.js"

/**
 * What Waits does when another service's write witnessed something (subscribed where the layers are
 * composed, run inside that write's transaction): a post landed (the waits it satisfies resolve with it),
 * a connection was revoked (the waits on it become unverifiable then, not at the deadline).
 */

const OpenWaitRow = Schema.Struct({
  id: Schema.String,
  pred_type: Schema.Literal("post_exists", "seq_reached"),
  pred_kind: Schema.NullOr(Schema.String),
  pred_seq: DbInt,
  from_connection_id: Schema.NullOr(Schema.String)
})
const decodeOpenWaits = Schema.decodeUnknown(Schema.Array(OpenWaitRow))

export const makeHandlers = (
  resolutions: Effect.Effect.Success<typeof makeResolutions>,
  leaseWaits: Effect.Effect.Success<ReturnType<typeof makeLeaseWaits>>
) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const { named } = yield* makeStatements

    /** The open waits on a channel (the partial index `waits_open_channel`): every post asks, on its own connection. */
    const openOnChannel = named("Waits.openOnChannel", (p: { userId: string; channel: string }) =>
      sql`SELECT id, pred_type, pred_kind, pred_seq, from_connection_id FROM waits
        WHERE user_id = ${p.userId} AND pred_channel = ${p.channel} AND status = 'open'`)

    /** `PostLanded` (inside the post's transaction): resolve the open waits on its channel that it satisfies. */
    const onPostLanded = (row: PostLanded) =>
      Effect.gen(function*() {
        const rows = yield* openOnChannel({ userId: row.user_id, channel: row.channel })
        // the common case: no wait on the channel, nothing to decode
        if (rows.length === 0) return
        const open = yield* decodeOpenWaits(rows)
        for (const wait of open) {
          const matches = wait.pred_type === "seq_reached"
            ? row.channel_seq >= wait.pred_seq
            : row.channel_seq > wait.pred_seq &&
              (wait.pred_kind === null || wait.pred_kind === row.kind) &&
              (wait.from_connection_id === null || wait.from_connection_id === row.author)
          if (matches) {
            yield* resolutions.resolve(wait.id, {
              status: "satisfied",
              at: row.created_at,
              by: row.author,
              postId: row.post_id,
              how: satisfiedHow(row)
            })
          }
        }
      }).pipe(Effect.catchTag("SqlError", "ParseError", Effect.die))

    /**
     * `ConnectionRevoked` (inside its transaction): waits on it become unverifiable now; its own waits end; a
     * `lease_free` wait it stood in the way of may hold now (its leases are orphaned).
     */
    const onConnectionRevoked = (revoked: ConnectionRevoked) =>
      resolutions.resolveRevoked(revoked).pipe(
        Effect.zipRight(leaseWaits.onHolderRevoked(revoked.user_id, revoked.at)),
        Effect.catchTag("SqlError", "ParseError", Effect.die)
      )

    return { onPostLanded, onConnectionRevoked } as const
  })
