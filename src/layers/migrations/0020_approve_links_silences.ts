import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * What notifications need of the portal and of connections (docs/architecture.md, "Notifications"):
 * `portal_logins.approval_id` / `portal_sessions.approval_id` — an approve link is a one-time login limited to
 * one approval, and the session it opens sees and decides only that one (null: the owner's full login) —
 * and `connections.silence_noted`, the last-seen moment at which the sweep noticed a connection gone silent
 * (`ConnectionSilent` once per silence). Portable SQL (SQLite and Postgres).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE portal_logins ADD COLUMN approval_id TEXT`
  yield* sql`ALTER TABLE portal_sessions ADD COLUMN approval_id TEXT`
  yield* sql`ALTER TABLE connections ADD COLUMN silence_noted TEXT`
})
