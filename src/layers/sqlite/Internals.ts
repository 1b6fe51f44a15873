/**
 * What the SQLite adapter relies on in @effect/sql beyond its documented use, named once, here: each
 * internal, why the adapter needs it, and the versions it was checked against. Only this file touches them;
 * the rest of src/layers/sqlite/ goes through the functions below. package.json pins the peers to exactly
 * these versions and test/SqliteInternals.test.ts fails when the installed @effect/sql is another one (and
 * probes each behaviour below on the library itself): an upgrade starts by re-reading
 * `@effect/sql/src/internal/client.ts` against this list.
 *
 *  1. The value of `SqlClient.TransactionConnection` is `[connection, depth]`, depth 0 for the outermost
 *     transaction; the library's `withTransaction` (`makeWithTransaction`) finds it in the fiber's context,
 *     nests with `SAVEPOINT effect_sql_<depth + 1>` on that connection, and every statement made by the
 *     client runs on its connection. Why: the lean transaction (./Transactions.ts) begins the outermost
 *     transaction itself and must leave the context as the library would, so a nested `withTransaction`
 *     makes a savepoint on the writer and the transaction's statements (named ones included) run on it.
 *     (The named statements of src/services/store/Statements.ts also read `[0]` of it, on both stores.)
 *  2. `withTransaction` is an own property of the object `SqlClient.make` returns, read from the client at
 *     each call (`sql.withTransaction(…)`: services, the migrator), so replacing it on that object with
 *     `Object.assign` replaces it for everyone; `client.safe` is that same object, and `withoutTransforms()`
 *     returns it too when the client has no row transform (ours has none), so both carry the replacement.
 *     Why: @effect/sql offers no option for how the outermost transaction is run (its span, scope and
 *     effectful BEGIN/COMMIT cost ~65 µs around a ~34 µs raw transaction, on every write).
 *     `withLeanTransactions` checks the two identities when the store is built, and refuses to build
 *     without them.
 *  3. The library's transaction semantics, which the lean path keeps: a failed COMMIT or ROLLBACK is a
 *     defect; the transaction's connection is acquired through `transactionAcquirer` (its scope holding the
 *     write permit) for the outermost transaction only.
 *  4. `Connection` (SqlConnection.ts) as the client drives it: `` sql`…` `` through `execute`, `.raw` through
 *     `executeRaw`, `.values` through `executeValues`, BEGIN / COMMIT / SAVEPOINT / `.unprepared` through
 *     `executeUnprepared`; `acquirer` for every statement outside a transaction. Why: the adapter's own
 *     connections (./Connection.ts, the read routing of ./Client.ts) implement it, as
 *     @effect/sql-sqlite-node's client does.
 * Once read directly and no longer: `Context.unsafeMap` (effect's map behind a context) to tell whether a
 * fiber is in a transaction — `Context.getOption` is the same lookup through the public API.
 */
import * as Client from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { Context, Option } from "effect"

/** The versions every statement above was checked against (package.json pins the peers to them). */
export const CHECKED_AGAINST = { "@effect/sql": "0.52.1", effect: "3.22.4" } as const

/** (1) Whether the fiber whose context this is runs inside a transaction of this client. */
export const inTransaction = (context: Context.Context<never>): boolean =>
  Option.isSome(Context.getOption(context, Client.TransactionConnection))

/** (1) The context of the outermost transaction on `connection`, as the library's `withTransaction` makes it. */
export const outermostTransaction = <R>(context: Context.Context<R>, connection: Connection) =>
  Context.add(context, Client.TransactionConnection, [connection, 0] as const)

/**
 * (2) Any client `SqlClient.make` returned (the Postgres one too: layers/Pg.ts), its `withTransaction`
 * replaced by `wrap(library's own)` for everyone who reads it from the client — the Postgres store runs a
 * conflicting outermost transaction again this way (services/store/Conflicts.ts).
 */
export const wrapTransactions = (
  made: Client.SqlClient,
  wrap: (library: Client.SqlClient["withTransaction"]) => Client.SqlClient["withTransaction"]
): Client.SqlClient => Object.assign(made, { withTransaction: wrap(made.withTransaction) })

/**
 * (2) The client `SqlClient.make` returned, its outermost transactions run by `lean` (given the library's
 * own `withTransaction`, for the nested ones). A defect when the client is not the shape (2) describes.
 */
export const withLeanTransactions = (
  made: Client.SqlClient,
  lean: (library: Client.SqlClient["withTransaction"]) => Client.SqlClient["withTransaction"]
): Client.SqlClient => {
  if (made.safe !== made || made.withoutTransforms() !== made) {
    throw new Error(
      "@effect/sql's client is not the shape src/layers/sqlite/Internals.ts was checked against (client.safe and " +
        "withoutTransforms() are not the client itself): re-check the adapter against the installed version"
    )
  }
  return wrapTransactions(made, lean)
}
