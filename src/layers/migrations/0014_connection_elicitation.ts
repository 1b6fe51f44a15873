import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Whether a connection's own MCP client may approve its plain writes by answering elicitation:
 * `connections.allow_elicitation`, 1 only where the owner minted the connection with that allowance. 0 —
 * what every existing connection keeps — means the owner decides every gated call (the client's answer is
 * never asked). Portable SQL (SQLite and Postgres).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE connections ADD COLUMN allow_elicitation INTEGER NOT NULL DEFAULT 0`
})
