/**
 * An @effect/sql `Connection` over one better-sqlite3 handle (as @effect/sql-sqlite-node's client makes
 * one), with what that client does not let us set: `safeIntegers` per run (statements are cached by text and
 * shared), a plain Map as the prepared-statement cache, and a synchronous step (`runSync`) that the read
 * routing of ./Client.ts relies on.
 */
import * as Client from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import Sqlite from "better-sqlite3"
import type { Scope } from "effect"
import { Context, Effect } from "effect"

/** Open a better-sqlite3 handle for the scope; a path that cannot be opened fails as a `SqlError`. */
export const open = (filename: string, options: Sqlite.Options): Effect.Effect<Sqlite.Database, SqlError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.try({
      try: () => new Sqlite(filename, options),
      catch: (cause) => new SqlError({ cause, message: `cannot open SQLite database ${filename}` })
    }),
    (db) => Effect.sync(() => db.close())
  )

/** What a statement returns: its rows as objects, better-sqlite3's run info (`executeRaw`), or rows as arrays. */
export type Mode = "rows" | "raw" | "values"

/** How many prepared statements a connection keeps (the services' statements are far fewer texts). */
const PREPARED_MAX = 500

export interface SqliteConnection {
  readonly connection: Connection
  /** the prepared statement of `sql`, from the cache (throws what better-sqlite3 throws) */
  readonly prepareSync: (sql: string) => Sqlite.Statement
  /** prepare and run one statement in one synchronous step; throws a `SqlError`, nothing else */
  readonly runSync: (sql: string, params: ReadonlyArray<unknown>, mode: Mode, safeIntegers: boolean) => ReadonlyArray<any>
}

/**
 * The connection over `db`. `runSync` prepares and runs one statement in one synchronous step (the routing
 * relies on it: no other fiber runs between its choice of connection and the statement). `afterCommit`, for
 * the writer, is called synchronously after every statement that committed (a COMMIT, or a write outside a
 * transaction).
 */
export const connectionOf = (db: Sqlite.Database, afterCommit?: () => void): SqliteConnection => {
  // Prepared statements by SQL text. A plain Map: an Effect `Cache` costs more per lookup (hashing,
  // clock, fibers) than executing a small statement, and every statement of every call goes through here.
  const prepared = new Map<string, Sqlite.Statement>()
  const prepareSync = (sql: string): Sqlite.Statement => {
    const hit = prepared.get(sql)
    if (hit) return hit
    const statement = db.prepare(sql)
    if (prepared.size >= PREPARED_MAX) prepared.delete(prepared.keys().next().value!)
    prepared.set(sql, statement)
    return statement
  }

  const runSync = (sql: string, params: ReadonlyArray<unknown>, mode: Mode, safeIntegers: boolean): ReadonlyArray<any> => {
    let statement: Sqlite.Statement
    try {
      statement = prepareSync(sql)
    } catch (cause) {
      throw new SqlError({ cause, message: `Failed to prepare statement: ${String(cause)}` })
    }
    const wasInTransaction = afterCommit !== undefined && db.inTransaction
    let rows: ReadonlyArray<any>
    try {
      // set on every run: statements are cached by text and shared by callers that want numbers (or arrays)
      statement.safeIntegers(safeIntegers)
      if (statement.reader) {
        if (mode === "values") {
          statement.raw(true)
          try {
            rows = statement.all(...params)
          } finally {
            statement.raw(false)
          }
        } else {
          rows = statement.all(...params)
        }
      } else {
        const result = statement.run(...params)
        rows = mode === "raw" ? (result as unknown as ReadonlyArray<any>) : []
      }
    } catch (cause) {
      throw new SqlError({ cause, message: `Failed to execute statement: ${String(cause)}` })
    }
    // a transaction ended (COMMIT is a "read-only" statement to SQLite), or a write ran outside one (and
    // not a BEGIN IMMEDIATE, which is not "read-only" but leaves a transaction open)
    if (afterCommit !== undefined && !db.inTransaction && (wasInTransaction || !statement.readonly)) afterCommit()
    return rows
  }

  const run = (sql: string, params: ReadonlyArray<unknown>, mode: Mode) =>
    Effect.withFiberRuntime<ReadonlyArray<any>, SqlError>((fiber) => {
      try {
        return Effect.succeed(runSync(sql, params, mode, Context.get(fiber.currentContext, Client.SafeIntegers)))
      } catch (error) {
        return Effect.fail(error as SqlError)
      }
    })

  const connection: Connection = {
    execute: (sql, params, transformRows) =>
      transformRows ? Effect.map(run(sql, params, "rows"), transformRows) : run(sql, params, "rows"),
    executeRaw: (sql, params) => run(sql, params, "raw"),
    executeValues: (sql, params) => run(sql, params, "values") as Effect.Effect<ReadonlyArray<ReadonlyArray<unknown>>, SqlError>,
    // (through the cache too: every transaction's BEGIN IMMEDIATE and COMMIT come this way)
    executeUnprepared: (sql, params, transformRows) =>
      transformRows ? Effect.map(run(sql, params ?? [], "rows"), transformRows) : run(sql, params ?? [], "rows"),
    executeStream: () => Effect.dieMessage("executeStream not implemented for SQLite")
  }
  return { connection, prepareSync, runSync }
}
