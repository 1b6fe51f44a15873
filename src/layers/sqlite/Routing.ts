import * as Client from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import type Sqlite from "better-sqlite3"
import type { Scope } from "effect"
import { Context, Effect } from "effect"
import type { Mode, SqliteConnection } from "./Connection.js"
import type { Permit } from "./Permit.js"

/**
 * Reads off the write path, for a file (WAL): statements outside a transaction that only read never queue
 * behind the write permit: WAL gives them the last committed state, never a transaction in progress. They
 * run on the writer connection when no one holds the permit (its page cache is warm, while the reader's is
 * invalidated by every commit of the writer: measured 30 against 65 µs for the envelope's probe), else on a
 * second, read-only connection. The choice and the statement are one synchronous step (`runSync`, inside
 * one `withFiberRuntime`): no fiber can take the permit and begin a transaction between them. Statements
 * that write (an UPDATE outside a transaction, say) take the permit on the writer for the one statement.
 */
export const routeReads = (store: {
  readonly db: Sqlite.Database
  readonly writer: SqliteConnection
  readonly reader: SqliteConnection
  readonly permit: Permit
  readonly takePermit: Effect.Effect<void, never, Scope.Scope>
}): Connection => {
  const { db, permit, reader, takePermit, writer } = store
  const route = <A>(
    sql: string,
    params: ReadonlyArray<unknown>,
    mode: Mode,
    onWriter: (c: Connection) => Effect.Effect<A, SqlError>
  ): Effect.Effect<ReadonlyArray<any> | A, SqlError> =>
    Effect.withFiberRuntime((fiber) => {
      let readonly: boolean
      try {
        readonly = reader.prepareSync(sql).readonly
      } catch {
        // the read-only handle refuses to prepare a write on some schemas: the writer decides
        readonly = false
      }
      if (!readonly) return Effect.scoped(Effect.zipRight(takePermit, onWriter(writer.connection)))
      const on = !permit.held() && !db.inTransaction ? writer : reader
      try {
        return Effect.succeed(on.runSync(sql, params, mode, Context.get(fiber.currentContext, Client.SafeIntegers)))
      } catch (error) {
        return Effect.fail(error as SqlError)
      }
    })
  return {
    execute: (sql, params, transform) => {
      const rows = route(sql, params, "rows", (c) => c.execute(sql, params, undefined))
      return transform ? Effect.map(rows, transform) : rows
    },
    executeRaw: (sql, params) => route(sql, params, "raw", (c) => c.executeRaw(sql, params)),
    executeValues: (sql, params) =>
      route(sql, params, "values", (c) => c.executeValues(sql, params)) as Effect.Effect<
        ReadonlyArray<ReadonlyArray<unknown>>,
        SqlError
      >,
    executeUnprepared: (sql, params, transform) =>
      Effect.scoped(Effect.zipRight(takePermit, writer.connection.executeUnprepared(sql, params, transform))),
    executeStream: writer.connection.executeStream
  }
}
