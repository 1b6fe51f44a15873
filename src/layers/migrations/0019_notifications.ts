import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Notifications (docs/architecture.md, "Notifications"): the owner's targets (a URL, the events it hears, its
 * format and optional signing secret) and the outbox — one row per notification and target, written in the
 * transaction of the event it reports, claimed and sent by the daemons' workers. `id` is the `Sophia-Delivery`
 * header, the same on every retry; a claim moves `next_at` past the send's timeout, so a row claimed by a daemon that
 * died is due again then (at least once). Due rows are found through `notify_outbox_due` (pending rows by `next_at`),
 * dead letters through `notify_outbox_dead`. Portable SQL (SQLite and Postgres).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE notify_targets (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users(id),
    url TEXT NOT NULL,
    events TEXT NOT NULL,
    format TEXT NOT NULL,
    secret TEXT,
    created_at TEXT NOT NULL
  )`
  yield* sql`CREATE INDEX notify_targets_user ON notify_targets (user_id)`
  yield* sql`CREATE TABLE notify_outbox (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    target_id TEXT NOT NULL,
    event TEXT NOT NULL,
    content TEXT NOT NULL,
    created_at TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_at TEXT NOT NULL,
    claimed_by TEXT,
    last_error TEXT,
    delivered_at TEXT
  )`
  yield* sql`CREATE INDEX notify_outbox_due ON notify_outbox (next_at) WHERE status = 'pending'`
  yield* sql`CREATE INDEX notify_outbox_target ON notify_outbox (target_id, created_at)`
})
