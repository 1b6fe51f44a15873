import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Waits. `status` is `open` until exactly one conditional update (`... WHERE status = 'open'`) resolves
 * it, whichever daemon or transaction gets there first. Partial indexes keep every hot path bounded by
 * what it touches: the sweep reads only due open waits, the envelope only the caller's open or
 * undelivered ones, the post hook only the open waits on that channel.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE waits (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users(id),
    waiter_connection_id TEXT NOT NULL REFERENCES connections(id),
    on_connection_id TEXT NOT NULL REFERENCES connections(id),
    on_selector TEXT NOT NULL,
    from_connection_id TEXT REFERENCES connections(id),
    pred_type TEXT NOT NULL,
    pred_channel TEXT NOT NULL,
    pred_kind TEXT,
    pred_seq BIGINT NOT NULL,
    predicate TEXT NOT NULL,
    reason TEXT NOT NULL,
    post_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    expires_ms BIGINT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('open', 'satisfied', 'unsatisfied', 'unverifiable', 'cancelled')),
    resolved_at TEXT,
    resolved_by TEXT,
    resolved_post_id TEXT,
    how TEXT,
    delivered_at TEXT
  )`
  yield* sql`CREATE INDEX waits_due ON waits (expires_ms) WHERE status = 'open'`
  yield* sql`CREATE INDEX waits_open_channel ON waits (user_id, pred_channel) WHERE status = 'open'`
  yield* sql`CREATE INDEX waits_open_waiter ON waits (waiter_connection_id) WHERE status = 'open'`
  yield* sql`CREATE INDEX waits_open_on ON waits (on_connection_id) WHERE status = 'open'`
  yield* sql`CREATE INDEX waits_open_user ON waits (user_id) WHERE status = 'open'`
  yield* sql`CREATE INDEX waits_undelivered ON waits (waiter_connection_id) WHERE status <> 'open' AND delivered_at IS NULL`
})
