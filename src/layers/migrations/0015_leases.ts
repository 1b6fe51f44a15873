import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Leases (services/leases/). `leases` keeps every lease, active or ended (`status`), with its resources as a
 * JSON list; `lease_holds` has one row per resource of an *active* lease (deleted when the lease ends), which
 * is what a conflict check reads: a slot by its name, a `path:` glob by its base — the holds whose base is an
 * ancestor of (or equal to) the asked glob's base through `lease_holds_base`, those below it through
 * `lease_prefixes` (every segment-prefix of each hold's base), so a check touches the holds on its own chain
 * only, whatever the number of leases. `lease_slots` fixes a slot's capacity at its first lease;
 * `lease_takeovers` records each orphaned lease another connection took over. Portable SQL (SQLite and Postgres).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE leases (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users(id),
    connection_id TEXT NOT NULL REFERENCES connections(id),
    project TEXT NOT NULL,
    mode TEXT NOT NULL CHECK (mode IN ('exclusive', 'shared')),
    resources TEXT NOT NULL,
    reason TEXT NOT NULL,
    work_id TEXT,
    ttl_s INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    expires_ms BIGINT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('active', 'released', 'expired', 'taken_over')),
    ended_at TEXT,
    ended_by TEXT
  )`
  yield* sql`CREATE INDEX leases_due ON leases (expires_ms) WHERE status = 'active'`
  yield* sql`CREATE INDEX leases_active ON leases (user_id, project) WHERE status = 'active'`
  yield* sql`CREATE INDEX leases_work ON leases (user_id, work_id) WHERE work_id IS NOT NULL`
  yield* sql`CREATE TABLE lease_holds (
    lease_id TEXT NOT NULL REFERENCES leases(id),
    user_id TEXT NOT NULL,
    project TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('path', 'slot')),
    resource TEXT NOT NULL,
    base TEXT NOT NULL,
    connection_id TEXT NOT NULL,
    mode TEXT NOT NULL,
    expires_ms BIGINT NOT NULL,
    PRIMARY KEY (lease_id, resource)
  )`
  yield* sql`CREATE INDEX lease_holds_base ON lease_holds (user_id, project, kind, base)`
  yield* sql`CREATE TABLE lease_prefixes (
    user_id TEXT NOT NULL,
    project TEXT NOT NULL,
    prefix TEXT NOT NULL,
    lease_id TEXT NOT NULL REFERENCES leases(id),
    resource TEXT NOT NULL,
    PRIMARY KEY (user_id, project, prefix, lease_id, resource)
  )`
  yield* sql`CREATE INDEX lease_prefixes_lease ON lease_prefixes (lease_id)`
  yield* sql`CREATE TABLE lease_slots (
    user_id TEXT NOT NULL,
    project TEXT NOT NULL,
    name TEXT NOT NULL,
    capacity INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (user_id, project, name)
  )`
  yield* sql`CREATE TABLE lease_takeovers (
    lease_id TEXT NOT NULL REFERENCES leases(id),
    previous_lease_id TEXT NOT NULL REFERENCES leases(id),
    previous_connection_id TEXT NOT NULL,
    reason TEXT NOT NULL,
    since TEXT NOT NULL,
    at TEXT NOT NULL,
    PRIMARY KEY (lease_id, previous_lease_id)
  )`
})
