/**
 * The store seam. Services need only `SqlClient`; this module is the one place that knows which store
 * provides it (the SQLite file by default; Postgres by URL, `./Pg.ts`: see `storeLayer`) and the only
 * file outside tests and benchmarks that names the SQLite driver.
 *
 * The SQLite `SqlClient` is built on better-sqlite3 like `@effect/sql-sqlite-node`, with what that
 * client does not let us set:
 *  - write transactions begin with `BEGIN IMMEDIATE`: a plain `BEGIN` takes the write lock lazily and a
 *    second process then fails at once with SQLITE_BUSY_SNAPSHOT instead of waiting `busy_timeout`;
 *  - `busy_timeout` and `foreign_keys = ON` on the connection;
 *  - the one permit held for a whole statement (or a whole transaction), taken interruptibly, first come
 *    first served;
 *  - `safeIntegers` set per run (statements are cached by text and shared).
 * One connection per process, serialized by a semaphore (better-sqlite3 is synchronous anyway).
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as Client from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import * as Statement from "@effect/sql/Statement"
import Sqlite from "better-sqlite3"
import { Config, Context, Effect, Layer, Option, Redacted, Schema, Scope } from "effect"
import { DirectConnection } from "../services/Statements.js"
import { makePermit } from "./Permit.js"
import { runMigrations, runMigrationsOnce } from "./Migrations.js"
import { pgClient, PgFreshSchema } from "./Pg.js"
import * as fs from "node:fs"
import * as path from "node:path"

export interface SqliteStoreConfig {
  /** a file path, or `:memory:` */
  readonly filename: string
  readonly busyTimeoutMs?: number
}

const open = (filename: string, options: Sqlite.Options) =>
  Effect.acquireRelease(
    Effect.try({
      try: () => new Sqlite(filename, options),
      catch: (cause) => new SqlError({ cause, message: `cannot open SQLite database ${filename}` })
    }),
    (db) => Effect.sync(() => db.close())
  )

/** An @effect/sql `Connection` over one better-sqlite3 handle, with its own prepared-statement cache. */
const connectionOf = (db: Sqlite.Database) => {
  // Prepared statements by SQL text. A plain Map: an Effect `Cache` costs more per lookup (hashing,
  // clock, fibers) than executing a small statement, and every statement of every call goes through here.
  const prepared = new Map<string, Sqlite.Statement>()
  const PREPARED_MAX = 500
  const prepareSync = (sql: string): Sqlite.Statement => {
    const hit = prepared.get(sql)
    if (hit) return hit
    const statement = db.prepare(sql)
    if (prepared.size >= PREPARED_MAX) prepared.delete(prepared.keys().next().value!)
    prepared.set(sql, statement)
    return statement
  }
  const prepare = (sql: string) =>
    Effect.suspend(() => {
      try {
        return Effect.succeed(prepareSync(sql))
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
          // (through the cache too: every transaction's BEGIN IMMEDIATE and COMMIT come this way)
          return runStatement(prepareSync(sql), params ?? [], false)
        } catch (cause) {
          return Effect.fail(new SqlError({ cause, message: `Failed to prepare statement: ${String(cause)}` }))
        }
      })
      return transformRows ? Effect.map(effect, transformRows) : effect
    },
    executeStream: () => Effect.dieMessage("executeStream not implemented for SQLite")
  }
  return { connection, prepareSync }
}

/** Create `file` empty with mode 0600 unless it exists (an empty file is an empty SQLite database). */
const createPrivate = (file: string) => {
  let fd: number
  try {
    fd = fs.openSync(file, "wx", 0o600)
  } catch {
    return // it exists (or cannot be created: opening it reports that)
  }
  try {
    fs.fchmodSync(fd, 0o600)
  } finally {
    fs.closeSync(fd)
  }
}

const make = (config: SqliteStoreConfig) =>
  Effect.gen(function*() {
    const file = config.filename !== ":memory:"
    // every step that touches the file fails as a `SqlError` (a path that cannot be created, a file that
    // is not a database), never as a defect: the CLI reports it in one line
    const attempt = <A>(what: string, f: () => A) =>
      Effect.try({ try: f, catch: (cause) => new SqlError({ cause, message: `${what}: ${String(cause)}` }) })
    if (file) {
      yield* attempt("cannot create the database folder", () =>
        fs.mkdirSync(path.dirname(path.resolve(config.filename)), { recursive: true, mode: 0o700 })
      )
    }
    // the owner's alone: a new database file is created 0600 (whatever the umask); SQLite gives its -wal and
    // -shm files the database file's mode
    if (file) yield* Effect.sync(() => createPrivate(config.filename))
    const timeout = config.busyTimeoutMs ?? 5000
    const db = yield* open(config.filename, { timeout })
    yield* attempt(`cannot use ${config.filename}`, () => {
      if (file) db.pragma("journal_mode = WAL")
      db.pragma(`busy_timeout = ${timeout}`)
      db.pragma("foreign_keys = ON")
      db.pragma("synchronous = NORMAL")
    })
    const writer = connectionOf(db)

    // The write permit is held until the transaction's (or the statement's) scope closes, so nothing runs
    // inside another fiber's open transaction. It goes to waiters in arrival order (see ./Permit.ts).
    // Waiting for it is interruptible (a long poll or a client that went away stops queueing); once
    // taken, its release is registered before anything can interrupt.
    const permit = makePermit()
    const takePermit = Effect.uninterruptibleMask((restore) =>
      Effect.zipRight(
        restore(permit.take),
        Effect.tap(Effect.scope, (scope) => Scope.addFinalizer(scope, permit.release))
      )
    )
    const transactionAcquirer = Effect.as(takePermit, writer.connection)

    // Reads off the write path. On a file (WAL), statements outside a transaction that only read go to a
    // second, read-only connection and never queue behind the write permit: WAL gives them the last
    // committed state, never a transaction in progress. Statements that write (an UPDATE outside a
    // transaction, say) take the permit on the writer for the one statement. `:memory:` has one
    // connection: everything takes the permit, as a transaction would.
    let acquirer: Effect.Effect<Connection, never, Scope.Scope> = transactionAcquirer
    let direct: Connection | undefined
    if (file) {
      const readerDb = yield* open(config.filename, { timeout, readonly: true, fileMustExist: true })
      readerDb.pragma(`busy_timeout = ${timeout}`)
      const reader = connectionOf(readerDb)
      const route = <A>(
        sql: string,
        onReader: (c: Connection) => Effect.Effect<A, SqlError>,
        onWriter: (c: Connection) => Effect.Effect<A, SqlError>
      ): Effect.Effect<A, SqlError> =>
        Effect.suspend(() => {
          let readonly: boolean
          try {
            readonly = reader.prepareSync(sql).readonly
          } catch {
            // the read-only handle refuses to prepare a write on some schemas: the writer decides
            readonly = false
          }
          return readonly ? onReader(reader.connection) : Effect.scoped(Effect.zipRight(takePermit, onWriter(writer.connection)))
        })
      const routing: Connection = {
        execute: (sql, params, transform) =>
          route(sql, (c) => c.execute(sql, params, transform), (c) => c.execute(sql, params, transform)),
        executeRaw: (sql, params) => route(sql, (c) => c.executeRaw(sql, params), (c) => c.executeRaw(sql, params)),
        executeValues: (sql, params) => route(sql, (c) => c.executeValues(sql, params), (c) => c.executeValues(sql, params)),
        executeUnprepared: (sql, params, transform) =>
          Effect.scoped(Effect.zipRight(takePermit, writer.connection.executeUnprepared(sql, params, transform))),
        executeStream: writer.connection.executeStream
      }
      acquirer = Effect.succeed(routing)
      direct = routing
    }

    const client = yield* Client.make({
      acquirer,
      transactionAcquirer,
      compiler: Statement.makeCompilerSqlite(),
      spanAttributes: [["db.system.name", "sqlite"]],
      beginTransaction: "BEGIN IMMEDIATE"
    })
    return { client, direct }
  })

/** The bare SQLite `SqlClient` for one file (or `:memory:`), no migrations. */
export const sqliteClient = (config: SqliteStoreConfig): Layer.Layer<Client.SqlClient, SqlError> =>
  Layer.scopedContext(Effect.map(make(config), ({ client, direct }) => {
    const context = Context.make(Client.SqlClient, client)
    // the permit-free path for single statements outside a transaction (files only: see `make`)
    return direct === undefined ? context : Context.add(context, DirectConnection, direct)
  })).pipe(Layer.provide(Reactivity.layer))

/** The store every service runs on: the SQLite file (or `:memory:`) with every migration applied. */
export const SqliteLive = (filename: string): Layer.Layer<Client.SqlClient> =>
  Layer.effectDiscard(runMigrations).pipe(Layer.provideMerge(sqliteClient({ filename })), Layer.orDie)

/** Where the graph lives: a SQLite file (or `:memory:`), or a Postgres database by URL. */
export type StoreChoice = { readonly filename: string } | { readonly url: string }

export const StoreChoice = {
  sqlite: (filename: string): StoreChoice => ({ filename }),
  postgres: (url: string | Redacted.Redacted): StoreChoice => ({ url: typeof url === "string" ? url : Redacted.value(url) })
}

/** A short, password-free description of the store for logs and banners. */
export const describeStore = (choice: StoreChoice): string => {
  if (!("url" in choice)) return choice.filename === ":memory:" ? ":memory:" : path.resolve(choice.filename)
  try {
    const u = new URL(choice.url)
    u.password = ""
    return u.toString()
  } catch {
    return "postgres"
  }
}

/** The store could not be opened (not a database, an unreadable path, an unreachable Postgres…): one line. */
export class StoreUnavailable extends Schema.TaggedError<StoreUnavailable>()("StoreUnavailable", {
  message: Schema.String
}) {}

const describeCause = (error: unknown): string => {
  const cause = (error as { cause?: unknown }).cause ?? error
  const code = (cause as { code?: unknown }).code
  const message = cause instanceof Error ? cause.message : String(cause)
  return typeof code === "string" && !message.includes(code) ? `${message} (${code})` : message
}

/**
 * THE store constructor: every process (daemon, stdio, CLI commands) builds its store through here.
 * Expected failures (a file that is not a database, a path that cannot be opened) are `StoreUnavailable`
 * with one line naming the place; nothing else about the store is decided outside this function.
 */
export const storeLayer = (choice: StoreChoice): Layer.Layer<Client.SqlClient, StoreUnavailable> => {
  if ("url" in choice) {
    // the pool with every migration applied once (PgClient rides along for LISTEN/NOTIFY)
    return Layer.effectDiscard(runMigrationsOnce).pipe(
      Layer.provideMerge(pgClient({ url: choice.url })),
      Layer.mapError((e) =>
        new StoreUnavailable({ message: `cannot use the Postgres database ${describeStore(choice)}: ${describeCause(e)}` })
      )
    )
  }
  const where = choice.filename === ":memory:" ? ":memory:" : path.resolve(choice.filename)
  return Layer.effectDiscard(runMigrations).pipe(
    Layer.provideMerge(sqliteClient({ filename: choice.filename })),
    Layer.mapError((e) => new StoreUnavailable({ message: `cannot use the database ${where}: ${describeCause(e)}` }))
  )
}

/**
 * An online, consistent copy of a SQLite database file through SQLite's backup API, taken in one step
 * (so the copy is one snapshot even while a daemon keeps writing). Refuses to overwrite `out`.
 */
export const backupSqlite = (filename: string, out: string) =>
  Effect.gen(function*() {
    const source = path.resolve(filename)
    const target = path.resolve(out)
    if (fs.existsSync(target)) {
      return yield* new StoreUnavailable({ message: `${target} already exists; choose a new --out file` })
    }
    const db = yield* open(source, { readonly: true, fileMustExist: true, timeout: 5000 }).pipe(
      Effect.mapError((e) => new StoreUnavailable({ message: `cannot open the database ${source}: ${describeCause(e)}` }))
    )
    yield* Effect.tryPromise({
      try: () => db.backup(target, { progress: () => 0x7fffffff }),
      catch: (e) => new StoreUnavailable({ message: `backup of ${source} to ${target} failed: ${describeCause(e)}` })
    })
    // the copy is the owner's alone, like the database itself
    yield* Effect.sync(() => fs.chmodSync(target, 0o600))
    return { source, out: target, bytes: fs.statSync(target).size }
  }).pipe(Effect.scoped)

/**
 * The store tests run on: a fresh in-memory SQLite, or — when `SOPHIA_TEST_DATABASE_URL` names a
 * Postgres server (the suite's Postgres run, see vitest.config.ts) — a fresh schema there, dropped
 * afterwards. One suite, two layers.
 */
export const TestStore: Layer.Layer<Client.SqlClient> = Layer.unwrapEffect(Effect.map(
  Effect.orDie(Config.option(Config.string("SOPHIA_TEST_DATABASE_URL"))),
  (url) => Option.isSome(url) && url.value.trim() !== "" ? PgFreshSchema(url.value) : SqliteLive(":memory:")
))
