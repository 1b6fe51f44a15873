import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import type { Caller } from "../domain/Auth.js"
import { Knowledge } from "./Knowledge.js"
import { DbInt } from "../domain/Time.js"

const Counts = Schema.Struct({
  posts: DbInt,
  channels: DbInt,
  open_waits: DbInt,
  work_items: DbInt
})
const decodeCounts = Schema.decodeUnknown(Schema.Array(Counts))
const ClaimedRow = Schema.Struct({
  work_id: Schema.String,
  title: Schema.String,
  status: Schema.String,
  head: Schema.String,
  seq: DbInt
})
const decodeClaimed = Schema.decodeUnknown(Schema.Array(ClaimedRow))

/**
 * The read model behind `sophia.orient`: what one call needs to bootstrap a session — counts across the
 * caller's user (documents within its entity scope) and the work it has claimed. Each count is one
 * indexed aggregate; nothing here writes.
 */
export class Orient extends Effect.Service<Orient>()("sophia/Orient", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const knowledge = yield* Knowledge

    const overview = Effect.fn("Orient.overview")(function*(caller: Caller) {
      const [counts] = yield* sql`SELECT
          (SELECT COALESCE(MAX(last_pos), 0) FROM post_counters WHERE user_id = ${caller.userId}) AS posts,
          (SELECT COUNT(*) FROM channel_counters WHERE user_id = ${caller.userId}) AS channels,
          (SELECT COUNT(*) FROM waits WHERE user_id = ${caller.userId} AND status = 'open') AS open_waits,
          (SELECT COUNT(*) FROM ledger_work WHERE user_id = ${caller.userId}) AS work_items`.pipe(
          Effect.flatMap(decodeCounts)
        )
      const claimed = yield* sql`SELECT work_id, title, status, head, seq FROM ledger_work
        WHERE user_id = ${caller.userId} AND claimant = ${caller.connectionId} AND status <> 'closed'
        ORDER BY updated_at DESC LIMIT 50`.pipe(Effect.flatMap(decodeClaimed))
      const documents = yield* knowledge.countDocuments(caller)
      return { counts: { ...counts, documents }, claimed }
    }, Effect.orDie)

    return { overview } as const
  })
}) {}
