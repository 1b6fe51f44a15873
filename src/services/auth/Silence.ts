import { SqlClient } from "@effect/sql"
import { Clock, Effect, Schema } from "effect"
import { ConnectionSilent } from "../../domain/Events.js"
import { silentAfterSConfig } from "../../domain/Orphans.js"
import type { Events } from "../Events.js"
import { spanned } from "../Spans.js"
import { makeStatements } from "../store/Statements.js"

const decodeSilent = Schema.decodeUnknown(Schema.Array(Schema.Struct({ id: Schema.String, user_id: Schema.String, since: Schema.String })))

/**
 * Silences noticed (docs/architecture.md, "Notifications"): a live connection with no call and no beacon for
 * `SOPHIA_SILENT_AFTER_S` (its creation if it never called) went silent; the sweep notices it once per silence
 * — `connections.silence_noted` keeps the last-seen moment it was noticed at, so a call after it and a new
 * silence is noticed again — and publishes `ConnectionSilent` in the transaction that notes it. A first look
 * reads (no write, no permit) and the conditional update writes only when something is new; of daemons racing,
 * the update's row lock lets one note each silence.
 */
export const makeSilence = (events: Effect.Effect.Success<typeof Events>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const { named } = yield* makeStatements
    const silentAfterS = yield* Effect.orDie(silentAfterSConfig)
    const unnoticed = named("Auth.unnoticedSilences", (p: { cutoff: string }) =>
      sql`SELECT id FROM connections WHERE revoked_at IS NULL AND COALESCE(last_seen_at, created_at) < ${p.cutoff}
        AND (silence_noted IS NULL OR silence_noted <> COALESCE(last_seen_at, created_at))`)
    const note = named("Auth.noteSilences", (p: { cutoff: string }) =>
      sql`UPDATE connections SET silence_noted = COALESCE(last_seen_at, created_at)
        WHERE revoked_at IS NULL AND COALESCE(last_seen_at, created_at) < ${p.cutoff}
        AND (silence_noted IS NULL OR silence_noted <> COALESCE(last_seen_at, created_at))
        RETURNING id, user_id, silence_noted AS since`)

    /** Notice the connections gone silent since the last look: each one's `ConnectionSilent`, once; returns how many. */
    const noticeSilence = spanned("Auth.noticeSilence", () => Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const cutoff = new Date(now - silentAfterS * 1000).toISOString()
      if ((yield* unnoticed({ cutoff })).length === 0) return 0
      return yield* events.transaction(Effect.gen(function*() {
        const noted = yield* Effect.flatMap(note({ cutoff }), decodeSilent)
        const at = new Date(now).toISOString()
        for (const row of noted) {
          yield* events.publish(new ConnectionSilent({ user_id: row.user_id, connection_id: row.id, since: row.since, at }))
        }
        return noted.length
      }))
    }).pipe(Effect.catchTag("SqlError", "ParseError", Effect.die)))

    return { noticeSilence } as const
  })
