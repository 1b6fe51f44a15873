import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * The owner's portal: one-time login links, browser sessions (cookie `sophia_portal`, stored as a hash,
 * with the session's CSRF token), and the connection row the portal acts as for each user (the owner's
 * actions are journaled as that connection's, never a mystery author). Portable SQL (SQLite and Postgres).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE portal_logins (
    token_hash TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users(id),
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    used_at TEXT
  )`
  yield* sql`CREATE TABLE portal_sessions (
    id TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL UNIQUE,
    user_id TEXT NOT NULL REFERENCES users(id),
    csrf TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    revoked_at TEXT
  )`
  yield* sql`CREATE TABLE portal_identity (
    user_id TEXT PRIMARY KEY REFERENCES users(id),
    connection_id TEXT NOT NULL REFERENCES connections(id)
  )`
})
