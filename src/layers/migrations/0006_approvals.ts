import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Approvals: a pending permission bound to one caller, one tool and the hash of the exact arguments.
 * `status`: pending → approved | denied; approved → executed (claimed by a conditional update inside the
 * transaction that runs the call, which also stores the result handed to every retry).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE approvals (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users(id),
    connection_id TEXT NOT NULL REFERENCES connections(id),
    tool TEXT NOT NULL,
    access TEXT NOT NULL,
    args_hash TEXT NOT NULL,
    args TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'executed')),
    created_at TEXT NOT NULL,
    decided_at TEXT,
    decided_via TEXT,
    executed_at TEXT,
    result TEXT
  )`
  yield* sql`CREATE INDEX approvals_binding ON approvals (connection_id, tool, args_hash, status)`
  yield* sql`CREATE INDEX approvals_status ON approvals (status, created_at)`
})
