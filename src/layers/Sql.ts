/**
 * The store seam. Services need only `SqlClient`; this module is the one place that knows which store
 * provides it (the SQLite file by default; Postgres by URL once its layer lands) and the only file
 * outside tests and benchmarks that names the SQLite driver.
 *
 * The SQLite `SqlClient` is built on better-sqlite3 like `@effect/sql-sqlite-node`, with what that
 * client does not let us set:
 *  - write transactions begin with `BEGIN IMMEDIATE`: a plain `BEGIN` takes the write lock lazily and a
 *    second process then fails at once with SQLITE_BUSY_SNAPSHOT instead of waiting `busy_timeout`;
 *  - `busy_timeout` and `foreign_keys = ON` on the connection;
 *  - the one permit held for a whole statement (or a whole transaction), taken interruptibly;
 *  - `safeIntegers` set per run (statements are cached by text and shared).
 * One connection per process, serialized by a semaphore (better-sqlite3 is synchronous anyway).
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as Client from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import * as Statement from "@effect/sql/Statement"
import Sqlite from "better-sqlite3"
import { Context, Effect, Layer, Scope } from "effect"
import { runMigrations } from "./Migrations.js"
import * as fs from "node:fs"
import * as path from "node:path"

export interface SqliteStoreConfig {
  /** a file path, or `:memory:` */
  readonly filename: string
  readonly busyTimeoutMs?: number
}

const make = (config: SqliteStoreConfig) =>
  Effect.gen(function*() {
    if (config.filename !== ":memory:") {
      yield* Effect.sync(() => fs.mkdirSync(path.dirname(path.resolve(config.filename)), { recursive: true }))
    }
    const db = yield* Effect.acquireRelease(
      Effect.try({
        try: () => new Sqlite(config.filename, { timeout: config.busyTimeoutMs ?? 5000 }),
        catch: (cause) => new SqlError({ cause, message: `cannot open SQLite database ${config.filename}` })
      }),
      (db) => Effect.sync(() => db.close())
    )
    if (config.filename !== ":memory:") db.pragma("journal_mode = WAL")
    db.pragma(`busy_timeout = ${config.busyTimeoutMs ?? 5000}`)
    db.pragma("foreign_keys = ON")
    db.pragma("synchronous = NORMAL")

    // Prepared statements by SQL text. A plain Map: an Effect `Cache` costs more per lookup (hashing,
    // clock, fibers) than executing a small statement, and every statement of every call goes through here.
    const prepared = new Map<string, Sqlite.Statement>()
    const PREPARED_MAX = 500
    const prepare = (sql: string) =>
      Effect.suspend(() => {
        const hit = prepared.get(sql)
        if (hit) return Effect.succeed(hit)
        try {
          const statement = db.prepare(sql)
          if (prepared.size >= PREPARED_MAX) prepared.delete(prepared.keys().next().value!)
          prepared.set(sql, statement)
          return Effect.succeed(statement)
        } catch (cause) {
          return Effect.fail(new SqlError({ cause, message: `Failed to prepare statement: ${String(cause)}` }))
        }
      })

    const runStatement = (statement: Sqlite.Statement, params: ReadonlyArray<unknown>, raw: boolean) =>
      Effect.withFiberRuntime<ReadonlyArray<any>, SqlError>((fiber) => {
        // set on every run: statements are cached by text and shared by callers that want numbers
        statement.safeIntegers(Context.get(fiber.currentContext, Client.SafeIntegers))
        try {
          if (statement.reader) return Effect.succeed(statement.all(...params))
          const result = statement.run(...params)
          return Effect.succeed(raw ? (result as unknown as ReadonlyArray<any>) : [])
        } catch (cause) {
          return Effect.fail(new SqlError({ cause, message: `Failed to execute statement: ${String(cause)}` }))
        }
      })

    const run = (sql: string, params: ReadonlyArray<unknown>, raw = false) =>
      Effect.flatMap(prepare(sql), (s) => runStatement(s, params, raw))

    const connection: Connection = {
      execute: (sql, params, transformRows) => transformRows ? Effect.map(run(sql, params), transformRows) : run(sql, params),
      executeRaw: (sql, params) => run(sql, params, true),
      executeValues: (sql, params) =>
        Effect.acquireUseRelease(
          prepare(sql),
          (statement) =>
            Effect.try({
              try: () => {
                if (statement.reader) {
                  statement.raw(true)
                  return statement.all(...params) as ReadonlyArray<ReadonlyArray<unknown>>
                }
                statement.run(...params)
                return []
              },
              catch: (cause) => new SqlError({ cause, message: `Failed to execute statement: ${String(cause)}` })
            }),
          (statement) => Effect.sync(() => statement.reader && statement.raw(false))
        ),
      executeUnprepared: (sql, params, transformRows) => {
        const effect = Effect.suspend(() => {
          try {
            return runStatement(db.prepare(sql), params ?? [], false)
          } catch (cause) {
            return Effect.fail(new SqlError({ cause, message: `Failed to prepare statement: ${String(cause)}` }))
          }
        })
        return transformRows ? Effect.map(effect, transformRows) : effect
      },
      executeStream: () => Effect.dieMessage("executeStream not implemented for SQLite")
    }

    const semaphore = yield* Effect.makeSemaphore(1)
    // The permit is held until the statement's (or the transaction's) scope closes: @effect/sql runs each
    // statement scoped, so a statement outside a transaction can never run inside another fiber's open
    // transaction. Waiting for it is interruptible (a long poll or a client that went away stops
    // queueing); once taken, its release is registered before anything can interrupt.
    const acquirer = Effect.uninterruptibleMask((restore) =>
      Effect.as(
        Effect.zipRight(
          restore(semaphore.take(1)),
          Effect.tap(Effect.scope, (scope) => Scope.addFinalizer(scope, semaphore.release(1)))
        ),
        connection
      )
    )

    const client = yield* Client.make({
      acquirer,
      transactionAcquirer: acquirer,
      compiler: Statement.makeCompilerSqlite(),
      spanAttributes: [["db.system.name", "sqlite"]],
      beginTransaction: "BEGIN IMMEDIATE"
    })
    return client
  })

/** The bare SQLite `SqlClient` for one file (or `:memory:`), no migrations. */
export const sqliteClient = (config: SqliteStoreConfig): Layer.Layer<Client.SqlClient, SqlError> =>
  Layer.scopedContext(Effect.map(make(config), (client) => Context.make(Client.SqlClient, client))).pipe(
    Layer.provide(Reactivity.layer)
  )

/** The store every service runs on: the SQLite file (or `:memory:`) with every migration applied. */
export const SqliteLive = (filename: string): Layer.Layer<Client.SqlClient> =>
  Layer.effectDiscard(runMigrations).pipe(Layer.provideMerge(sqliteClient({ filename })), Layer.orDie)
