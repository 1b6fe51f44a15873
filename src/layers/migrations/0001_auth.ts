import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/** Users and their connections. Tokens are stored only as SHA-256 hashes. */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE users (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    is_owner INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL
  )`
  yield* sql`CREATE TABLE connections (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users(id),
    name TEXT NOT NULL,
    profile TEXT NOT NULL CHECK (profile IN ('observer', 'assistant', 'full')),
    entity_scope TEXT NOT NULL DEFAULT '[]',
    token_hash TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    revoked_at TEXT,
    last_seen_at TEXT
  )`
  // a name is unique among a user's live connections; a revoked one frees its name
  yield* sql`CREATE UNIQUE INDEX connections_live_name ON connections (user_id, name) WHERE revoked_at IS NULL`
  yield* sql`CREATE INDEX connections_user ON connections (user_id)`
})
