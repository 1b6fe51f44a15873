import { SqlClient } from "@effect/sql"
import { Clock, Effect, Schema } from "effect"
import type { Caller } from "../../domain/Auth.js"
import { DbInt } from "../../domain/Time.js"
import { makeStatements } from "../store/Statements.js"

/**
 * How many times in a row a stop loop was blocked while the agent was already continuing because of a
 * block (`stop_hook_active`): the table `hook_stop_streaks`, one row per connection and stop loop (a
 * session, or one subagent of it), kept in the store so the bound holds whichever daemon answers. A row is
 * written only when such a block is given, and cleared by the loop's next Stop that is not a continuation;
 * a connection's rows untouched for a day are dropped when it writes one (sessions end without telling).
 */

const decodeStreak = Schema.decodeUnknown(Schema.Array(Schema.Struct({ streak: DbInt })))
const STALE_MS = 24 * 60 * 60 * 1000

export const makeStreaks = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const { named } = yield* makeStatements

  const select = named("Hooks.streak", (p: { connectionId: string; loop: string }) =>
    sql`SELECT streak FROM hook_stop_streaks WHERE connection_id = ${p.connectionId} AND loop_key = ${p.loop}`)
  const upsert = named("Hooks.setStreak", (p: { connectionId: string; loop: string; streak: number; at: string }) =>
    sql`INSERT INTO hook_stop_streaks (connection_id, loop_key, streak, updated_at)
      VALUES (${p.connectionId}, ${p.loop}, ${p.streak}, ${p.at})
      ON CONFLICT (connection_id, loop_key) DO UPDATE SET streak = excluded.streak, updated_at = excluded.updated_at`)
  const dropStale = named("Hooks.dropStaleStreaks", (p: { connectionId: string; before: string }) =>
    sql`DELETE FROM hook_stop_streaks WHERE connection_id = ${p.connectionId} AND updated_at < ${p.before}`)
  const clearRow = named("Hooks.clearStreak", (p: { connectionId: string; loop: string }) =>
    sql`DELETE FROM hook_stop_streaks WHERE connection_id = ${p.connectionId} AND loop_key = ${p.loop}`)

  /** The loop's current streak (0 without a row). */
  const get = (caller: Caller, loop: string): Effect.Effect<number> =>
    select({ connectionId: caller.connectionId, loop }).pipe(
      Effect.flatMap(decodeStreak),
      Effect.map((rows) => rows[0]?.streak ?? 0),
      Effect.catchTag("SqlError", "ParseError", Effect.die)
    )

  /** One more block given while continuing. */
  const bump = (caller: Caller, loop: string, streak: number): Effect.Effect<void> =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      yield* dropStale({ connectionId: caller.connectionId, before: new Date(now - STALE_MS).toISOString() })
      yield* upsert({ connectionId: caller.connectionId, loop, streak: streak + 1, at: new Date(now).toISOString() })
    }).pipe(sql.withTransaction, Effect.catchTag("SqlError", Effect.die))

  /** The loop starts over (a Stop that is not a continuation): no write when there is nothing to clear. */
  const clear = (caller: Caller, loop: string): Effect.Effect<void> =>
    Effect.flatMap(get(caller, loop), (streak) =>
      streak === 0
        ? Effect.void
        : Effect.asVoid(clearRow({ connectionId: caller.connectionId, loop })).pipe(Effect.catchTag("SqlError", Effect.die)))

  return { get, bump, clear } as const
})
