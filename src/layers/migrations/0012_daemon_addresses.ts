import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Where the daemons serving this database listen: one row per running `sophia serve` (its base URL and a
 * random instance id its `/healthz` repeats), so `sophia portal` links to the daemon that serves this
 * database, not to a default port. A clean stop deletes its row; a killed daemon's row is found dead by
 * its `/healthz` not answering with its instance id. Portable SQL (SQLite and Postgres).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE daemon_addresses (
    instance_id TEXT PRIMARY KEY,
    base_url TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started_at TEXT NOT NULL
  )`
})
