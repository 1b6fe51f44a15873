import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * A connection's active leases by their holder (orient's `my_leases`, the portal's Fleet): read through
 * this partial index, whatever the number of the user's leases. Portable SQL (SQLite and Postgres).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE INDEX leases_holder ON leases (connection_id) WHERE status = 'active'`
})
