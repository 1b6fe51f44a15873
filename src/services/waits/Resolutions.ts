import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import type { ConnectionRevoked } from "../../domain/Events.js"
import { WaitResolution } from "../../domain/Envelope.js"
import { WaitResolved } from "../../domain/Events.js"
import { Events } from "../Events.js"
import { makeStatements } from "../store/Statements.js"

/**
 * How a wait resolves: every resolution is one conditional update `... WHERE status = 'open'`, so a wait
 * resolves exactly once whichever daemon, sweep or post gets there first (zero rows: someone else resolved
 * it first), and publishes `WaitResolved` in the same transaction (the ledger observes it there).
 */

/** What a resolving update returns: enough to publish `WaitResolved`. */
const ResolvedWait = Schema.Struct({
  id: Schema.String,
  user_id: Schema.String,
  pred_channel: Schema.String,
  status: WaitResolution,
  resolved_by: Schema.NullOr(Schema.String),
  resolved_at: Schema.String,
  waiter_connection_id: Schema.String
})
const decodeResolvedWaits = Schema.decodeUnknown(Schema.Array(ResolvedWait))
const RESOLVED_COLUMNS = "id, user_id, pred_channel, status, resolved_by, resolved_at, waiter_connection_id"

export interface Resolution {
  readonly status: "satisfied" | "unsatisfied" | "unverifiable"
  readonly at: string
  readonly by: string | null
  readonly postId: string | null
  readonly how: string
}

/** How a satisfied wait says which post satisfied it. */
export const satisfiedHow = (post: { post_id: string; kind: string; channel: string; channel_seq: number }) =>
  `post ${post.post_id} (${post.kind}, channel_seq ${post.channel_seq} in ${post.channel})`

export const makeResolutions = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const events = yield* Events
  const { named } = yield* makeStatements
  const returning = sql.literal(RESOLVED_COLUMNS)

  /**
   * Publish each resolution (inside the transaction that resolved it: the ledger observes it there).
   * Returns how many there were.
   */
  const published = (rows: ReadonlyArray<unknown>) =>
    Effect.flatMap(decodeResolvedWaits(rows), (resolved) =>
      Effect.as(
        Effect.forEach(resolved, (r) =>
          events.publish(
            new WaitResolved({
              user_id: r.user_id,
              wait_id: r.id,
              channel: r.pred_channel,
              resolution: r.status,
              resolved_by: r.resolved_by,
              waiter: r.waiter_connection_id,
              at: r.resolved_at
            })
          ), { discard: true }),
        resolved.length
      ))

  const resolveOpen = named("Waits.resolve", (p: {
    id: string
    status: string
    at: string
    by: string | null
    postId: string | null
    how: string
  }) =>
    sql`UPDATE waits SET status = ${p.status}, resolved_at = ${p.at},
        resolved_by = ${p.by}, resolved_post_id = ${p.postId}, how = ${p.how}
      WHERE id = ${p.id} AND status = 'open'
      RETURNING ${returning}`)

  /** The one way a wait resolves: a conditional update. Returns 1 when this call resolved it, else 0. */
  const resolve = (waitId: string, resolution: Resolution) =>
    Effect.flatMap(
      resolveOpen({
        id: waitId,
        status: resolution.status,
        at: resolution.at,
        by: resolution.by,
        postId: resolution.postId,
        how: resolution.how
      }),
      published
    )

  const overdueOpen = named("Waits.resolveOverdue", (p: { id: string; at: string }) =>
    sql`UPDATE waits SET status = 'unsatisfied', resolved_at = ${p.at},
        resolved_by = NULL, how = 'the bound passed (' || expires_at || ') with the predicate unmet'
      WHERE id = ${p.id} AND status = 'open'
      RETURNING ${returning}`)

  /** An overdue wait, `unsatisfied` (its bound passed with the predicate unmet). */
  const resolveOverdue = (waitId: string, at: string) => Effect.flatMap(overdueOpen({ id: waitId, at }), published)

  const awaitedRevoked = named("Waits.resolveAwaitedRevoked", (p: { userId: string; connectionId: string; at: string; how: string }) =>
    sql`UPDATE waits SET status = 'unverifiable', resolved_at = ${p.at}, resolved_by = NULL, how = ${p.how}
      WHERE user_id = ${p.userId} AND status = 'open' AND pred_type <> 'lease_free'
        AND (on_connection_id = ${p.connectionId} OR from_connection_id = ${p.connectionId})
      RETURNING ${returning}`)
  const waiterRevoked = named("Waits.endWaiterRevoked", (p: { userId: string; connectionId: string; at: string }) =>
    sql`UPDATE waits SET status = 'cancelled', resolved_at = ${p.at}, delivered_at = ${p.at},
        how = 'the waiting connection was revoked'
      WHERE user_id = ${p.userId} AND status = 'open' AND waiter_connection_id = ${p.connectionId}`)

  /**
   * A revoked connection: the waits on it become `unverifiable` (the predicate can no longer be read), and
   * its own waits end, since a revoked waiter can never read a signal: without a delivery. (A `lease_free`
   * wait on it is not unverifiable: its leases are orphaned, so the wait may hold — `LeaseWaits`.)
   */
  const resolveRevoked = (revoked: ConnectionRevoked) =>
    Effect.gen(function*() {
      const params = { userId: revoked.user_id, connectionId: revoked.connection_id, at: revoked.at }
      yield* awaitedRevoked({
        ...params,
        how: `connection ${revoked.connection_id} was revoked: the predicate can no longer be read`
      }).pipe(Effect.flatMap(published))
      yield* waiterRevoked(params)
    })

  return { resolve, resolveOverdue, resolveRevoked } as const
})
