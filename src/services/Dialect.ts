import type { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"

/**
 * The one place the services name a dialect difference that is about concurrency, not syntax.
 *
 * On SQLite every write transaction begins with `BEGIN IMMEDIATE`: one writer at a time per file, so a
 * check-then-write inside a transaction cannot be raced. Postgres runs transactions READ COMMITTED
 * with any number of writers (several daemons, or one daemon's pool): a rule that reads and then writes
 * must say how it is made atomic. Where a row exists to lock, the services use the row lock of a
 * conditional UPDATE / upsert or `SELECT … FOR UPDATE`; where the rule is about rows that may not exist
 * yet (a name not yet taken, an approval not yet created, an edge that would close a cycle),
 * `serialize` takes a transaction-scoped advisory lock on a key naming what is decided — released by
 * the transaction's commit or rollback, never held across transactions.
 */

/**
 * Inside a transaction: the writers deciding about `key` go one at a time until this transaction ends
 * (Postgres `pg_advisory_xact_lock` on a 64-bit hash of the key; nothing on SQLite, whose single writer
 * already serializes them).
 */
export const serialize = (sql: SqlClient.SqlClient, key: string): Effect.Effect<void, SqlError> =>
  sql.onDialectOrElse({
    pg: () => Effect.asVoid(sql`SELECT pg_advisory_xact_lock(hashtextextended(${key}, 0))`),
    orElse: () => Effect.void
  })

/** `FOR UPDATE` on Postgres (lock the selected rows until the transaction ends); nothing on SQLite. */
export const forUpdate = (sql: SqlClient.SqlClient) =>
  sql.onDialectOrElse({ pg: () => sql.literal("FOR UPDATE"), orElse: () => sql.literal("") })
