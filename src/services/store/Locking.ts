import type { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"

/**
 * The one module that names how the two stores differ in concurrency (the other difference, full-text
 * search, is `FullText.ts`). No service writes `FOR UPDATE`, `FOR SHARE` or an advisory lock inline.
 *
 * On SQLite every write transaction begins with `BEGIN IMMEDIATE`: one writer at a time per file, so a
 * check-then-write inside a transaction cannot be raced. Postgres runs transactions READ COMMITTED
 * with any number of writers (several daemons, or one daemon's pool): a rule that reads and then writes
 * must say how it is made atomic. Where a row exists to lock, the services use the row lock of a
 * conditional UPDATE / upsert or `forUpdate` / `forShare`; where the rule is about rows that may not exist
 * yet (a name not yet taken, an approval not yet created, an edge that would close a cycle),
 * `serialize` takes a transaction-scoped advisory lock on a key naming what is decided — released by
 * the transaction's commit or rollback, never held across transactions.
 */

/**
 * The keys `serialize` takes that more than one service decides under, and their order. A transaction that
 * takes both takes `LEASES_LOCK` first, `WAIT_GRAPH_LOCK` second (a grant, whose cycle check follows its
 * decision); none takes a lease lock while it holds the wait-graph lock (a declaration takes the wait-graph
 * lock only). One order, so two transactions can never each hold the lock the other waits for.
 */
export const LEASES_LOCK = (userId: string, project: string) => `leases/${userId}/${project}`
export const WAIT_GRAPH_LOCK = (userId: string) => `wait-graph/${userId}`

/** Whether writers of this store run concurrently (Postgres), so a read inside a write may be raced. */
export const writersConcurrent = (sql: SqlClient.SqlClient): boolean =>
  sql.onDialectOrElse({ pg: () => true, orElse: () => false })

/**
 * Inside a transaction: the writers deciding about `key` go one at a time until this transaction ends
 * (Postgres `pg_advisory_xact_lock` on a 64-bit hash of the key; nothing on SQLite, whose single writer
 * already serializes them).
 */
export const serialize = (sql: SqlClient.SqlClient, key: string): Effect.Effect<void, SqlError> =>
  writersConcurrent(sql) ? Effect.asVoid(sql`SELECT pg_advisory_xact_lock(hashtextextended(${key}, 0))`) : Effect.void

/** `FOR UPDATE` on Postgres (lock the selected rows until the transaction ends); nothing on SQLite. */
export const forUpdate = (sql: SqlClient.SqlClient) => sql.literal(writersConcurrent(sql) ? "FOR UPDATE" : "")

/**
 * `FOR SHARE` on Postgres (no other transaction may change the selected rows until this one ends, while
 * readers share them); nothing on SQLite.
 */
export const forShare = (sql: SqlClient.SqlClient) => sql.literal(writersConcurrent(sql) ? "FOR SHARE" : "")

/**
 * Run `effect` only where writers run concurrently (Postgres): a re-read under a lock that SQLite's single
 * writer makes needless (what the transaction read before is still current there).
 */
export const whenWritersConcurrent = <E>(sql: SqlClient.SqlClient, effect: Effect.Effect<void, E>): Effect.Effect<void, E> =>
  writersConcurrent(sql) ? effect : Effect.void

/**
 * `FOR UPDATE SKIP LOCKED` on Postgres: claim rows no other transaction holds, skipping those it does (several
 * daemons taking due work from one queue, each row once); nothing on SQLite, whose single writer claims alone.
 */
export const skipLocked = (sql: SqlClient.SqlClient) => sql.literal(writersConcurrent(sql) ? "FOR UPDATE SKIP LOCKED" : "")

/**
 * How many independent reads to run at once: all of them on Postgres (each statement on a pooled connection
 * of its own), one at a time on SQLite, whose one reader connection runs them in turn anyway — there forking
 * a fiber per read only added scheduling (measured on `sophia.search`'s three kinds: p50 2.0 ms one at a
 * time against 2.9–3.7 ms forked).
 */
export const readConcurrency = (sql: SqlClient.SqlClient): "unbounded" | 1 => writersConcurrent(sql) ? "unbounded" : 1
