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
 * On a file: one writer connection per process, serialized by the write permit (better-sqlite3 is synchronous
 * anyway); single reads outside a transaction on the writer when it is free, else on a read-only second
 * connection (`make`); WAL checkpoints in a worker thread with a third (`checkpointsOffLoop`).
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as Client from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import * as Statement from "@effect/sql/Statement"
import Sqlite from "better-sqlite3"
import { Config, Context, Effect, Exit, FiberRef, Layer, Option, Redacted, Runtime, Schema, Scope } from "effect"
import { DirectConnection, StoreVersion } from "../services/Statements.js"
import { makePermit } from "./Permit.js"
import { runMigrations, runMigrationsOnce } from "./Migrations.js"
import { pgClient, PgFreshSchema } from "./Pg.js"
import * as fs from "node:fs"
import * as path from "node:path"
import { Worker } from "node:worker_threads"

export interface SqliteStoreConfig {
  /** a file path, or `:memory:` */
  readonly filename: string
  readonly busyTimeoutMs?: number
  /** the pace of the off-loop WAL checkpoints of a file (defaults in `checkpointsOffLoop`) */
  readonly checkpoints?: CheckpointTuning
}

const open = (filename: string, options: Sqlite.Options) =>
  Effect.acquireRelease(
    Effect.try({
      try: () => new Sqlite(filename, options),
      catch: (cause) => new SqlError({ cause, message: `cannot open SQLite database ${filename}` })
    }),
    (db) => Effect.sync(() => db.close())
  )

/** What a statement returns: its rows as objects, better-sqlite3's run info (`executeRaw`), or rows as arrays. */
type Mode = "rows" | "raw" | "values"

/**
 * An @effect/sql `Connection` over one better-sqlite3 handle, with its own prepared-statement cache.
 * `runSync` prepares and runs one statement in one synchronous step (the routing below relies on it: no
 * other fiber runs between its choice of connection and the statement). `afterCommit`, for the writer,
 * is called synchronously after every statement that committed (a COMMIT, or a write outside a transaction).
 */
const connectionOf = (db: Sqlite.Database, afterCommit?: () => void) => {
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

  /** Throws a `SqlError`, nothing else. */
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

/** The checkpoint worker's script: beside this file in src/ and in dist/ (the build copies `.mjs` files). */
const CHECKPOINTER = new URL("../layers/checkpointer.mjs", import.meta.url)

/** How the off-loop checkpoints are paced (defaults below); tests shrink them and observe the events. */
export interface CheckpointTuning {
  /** ask the worker for a PASSIVE checkpoint every this many commits */
  readonly every?: number
  /** when the worker reports at least this many frames in the WAL, reset it (see `catchUp`) */
  readonly resetFrames?: number
  /** when the worker has not answered for this many commits, the writer checkpoints itself */
  readonly behind?: number
  /** the worker's script (tests substitute failing ones) */
  readonly worker?: URL
  readonly observe?: (event: CheckpointEvent) => void
}

export type CheckpointEvent =
  | { readonly _tag: "Started" }
  | {
    readonly _tag: "Checkpointed"
    readonly by: "worker" | "writer"
    readonly reset: boolean
    readonly busy: number
    readonly log: number
    readonly checkpointed: number
  }
  | { readonly _tag: "FellBack"; readonly reason: string }
  | { readonly _tag: "Stopped" }

const noEvent = () => {}

/**
 * WAL checkpoints off the event loop. SQLite's automatic checkpoint (every 1000 WAL pages) runs inside
 * the COMMIT that crosses the threshold, on the writer connection: it copies the pages into the database
 * file and fsyncs twice, on the main thread, stalling every fiber. Instead the writer runs with
 * `wal_autocheckpoint = 0` and a worker thread with its own connection (./checkpointer.mjs) checkpoints:
 *  - Pacing: a count of commits, kept synchronously after each one; every `every` commits (a few hundred
 *    WAL pages for a post) the worker is asked for a PASSIVE checkpoint, which never blocks a writer. A
 *    count rather than a timer: an idle store costs nothing, and a busy one is checkpointed at its pace.
 *    The worker is started on the first request, so a short CLI command never starts it.
 *  - Reset: a checkpoint concurrent with commits never catches up with the end of the WAL, and SQLite only
 *    rewinds the WAL to its start when a write transaction begins on a fully checkpointed WAL: under a
 *    steady write load the file would grow forever. So when the worker reports `resetFrames` frames in the
 *    WAL, the next writer to take the write permit first waits (asynchronously: the event loop and the
 *    readers go on) for one more worker checkpoint, which now reaches the end; its BEGIN then rewinds the WAL.
 *  - Fallbacks, so the WAL stays bounded whatever happens to the worker: if it cannot start, fails or exits,
 *    the writer goes back to SQLite's own automatic checkpoint; if it has not answered for `behind` commits
 *    (stuck), the writer checkpoints itself after the commit that crosses that line, as SQLite would.
 * Durability is unchanged: the same checkpoint (PASSIVE, synchronous = NORMAL) on another connection.
 * Other processes on the file are unaffected: their connections keep their own settings, and a
 * checkpoint that finds another one running returns `busy` and is simply retried at the next request.
 */
const checkpointsOffLoop = (
  db: Sqlite.Database,
  filename: string,
  timeout: number,
  tuning: CheckpointTuning,
  warn: (message: string) => void
) => {
  const every = tuning.every ?? 64
  const resetFrames = tuning.resetFrames ?? 2000
  const behind = tuning.behind ?? 1024
  const observe = tuning.observe ?? noEvent
  let state: "idle" | "running" | "gone" | "stopped" = "idle"
  let worker: Worker | undefined
  let commits = 0
  let asked = 0 // the commit count at the last request
  let answered = 0 // the commit count of the last request the worker answered
  let resetWanted = false
  let nextId = 1
  const waiting = new Map<number, () => void>()
  const wakeAll = () => {
    for (const wake of waiting.values()) wake()
    waiting.clear()
  }

  const fallBack = (reason: string) => {
    if (state === "gone" || state === "stopped") return
    state = "gone"
    resetWanted = false
    wakeAll()
    try {
      db.pragma("wal_autocheckpoint = 1000")
    } catch {
      // the connection is closing: nothing left to checkpoint for
    }
    warn(`SQLite checkpoints are back on the main thread: ${reason}`)
    observe({ _tag: "FellBack", reason })
  }

  const start = () => {
    try {
      worker = new Worker(tuning.worker ?? CHECKPOINTER, { workerData: { filename, timeout } })
    } catch (error) {
      return fallBack(`the checkpoint worker cannot start: ${String(error)}`)
    }
    // never what keeps the process alive (stopping it refs it again until it has exited)
    worker.unref()
    worker.on("message", (answer: { id: number; commits: number; error?: string; busy: number; log: number; checkpointed: number }) => {
      answered = Math.max(answered, answer.commits)
      if (answer.error !== undefined) {
        warn(`a SQLite checkpoint failed in the checkpoint worker: ${answer.error}`)
      } else {
        const reset = answer.id !== 0
        if (!reset && answer.log >= resetFrames) resetWanted = true
        observe({ _tag: "Checkpointed", by: "worker", reset, busy: answer.busy, log: answer.log, checkpointed: answer.checkpointed })
      }
      const wake = waiting.get(answer.id)
      waiting.delete(answer.id)
      wake?.()
    })
    worker.on("error", (error) => fallBack(`the checkpoint worker failed: ${String(error)}`))
    worker.on("exit", (code) => fallBack(`the checkpoint worker exited (${code})`))
    state = "running"
    observe({ _tag: "Started" })
  }

  const ask = (id: number) => {
    asked = commits
    worker!.postMessage({ id, commits })
  }

  /** After every commit on the writer, synchronously (no I/O unless the worker is stuck). */
  const committed = () => {
    commits++
    if (state === "gone" || state === "stopped") return
    if (commits - asked >= every) {
      if (state === "idle") {
        answered = commits // counted from the start, not from the store's opening
        start()
      }
      if (state === "running") ask(0)
    }
    if (commits - answered >= behind) {
      answered = commits
      try {
        const [row] = db.pragma("wal_checkpoint(PASSIVE)") as Array<{ busy: number; log: number; checkpointed: number }>
        observe({ _tag: "Checkpointed", by: "writer", reset: false, ...row! })
      } catch (error) {
        warn(`a SQLite checkpoint failed: ${String(error)}`)
      }
    }
  }

  /**
   * Run by the writer that just took the write permit: when the WAL wants a reset, one worker checkpoint
   * while no writer of this process appends (see above). Bounded: a worker that does not answer within
   * `RESET_WAIT_MS` is not waited for (the `behind` fallback takes over). A timer of the process, not the
   * fiber's `Clock`: a layer built under `TestClock` must not wait forever.
   */
  const RESET_WAIT_MS = 2000
  const catchUp: Effect.Effect<void> = Effect.suspend(() => {
    if (!resetWanted || state !== "running") return Effect.void
    resetWanted = false
    return Effect.async<void>((resume) => {
      const id = nextId++
      const timer = setTimeout(() => {
        waiting.delete(id)
        resume(Effect.void)
      }, RESET_WAIT_MS)
      waiting.set(id, () => {
        clearTimeout(timer)
        resume(Effect.void)
      })
      ask(id)
      return Effect.sync(() => {
        clearTimeout(timer)
        waiting.delete(id)
      })
    })
  })

  /** Stop the worker (its connection closed first) before the store's connections close; kill it if stuck. */
  const STOP_WAIT_MS = 5000
  const stop: Effect.Effect<void> = Effect.async<void>((resume) => {
    const running = state === "running" ? worker : undefined
    state = "stopped"
    wakeAll()
    if (running === undefined) return resume(Effect.void)
    running.ref()
    const timer = setTimeout(() => void running.terminate(), STOP_WAIT_MS)
    running.once("exit", () => {
      clearTimeout(timer)
      observe({ _tag: "Stopped" })
      resume(Effect.void)
    })
    running.postMessage("stop")
  })

  return { committed, catchUp, stop }
}

/**
 * The outermost write transaction without @effect/sql's per-transaction machinery: its
 * `SqlClient.withTransaction` opens a span (a no-op one when tracing is off), makes and extends a scope for
 * the permit, and runs BEGIN and COMMIT through the effectful statement path — measured ~65 µs around a
 * ~34 µs raw BEGIN / INSERT / COMMIT, on every post, append and marking read. Here: take the permit
 * (interruptibly, in arrival order), wait for a due WAL reset, BEGIN IMMEDIATE, run the effect with the
 * transaction's connection in its context (`TransactionConnection`, as the library sets it, so nested
 * transactions and fixed statements see it), COMMIT on success or ROLLBACK on any failure or interruption,
 * release the permit — the same semantics on the same connection. A failed COMMIT or ROLLBACK is a defect,
 * as in the library; a failed BEGIN (the lock not had within `busy_timeout`) fails the transaction with its
 * `SqlError`, where the library would first try a ROLLBACK, fail that too and die. No `sql.transaction`
 * span: when tracing is on, the statements' spans sit under the service's and the tool's spans (issue 16:
 * hot internal paths untraced, tool-level spans kept). Nested transactions (savepoints) keep the library's
 * path.
 */
const leanTransactions = (
  library: Client.SqlClient["withTransaction"],
  writer: ReturnType<typeof connectionOf>,
  permit: ReturnType<typeof makePermit>,
  catchUp: Effect.Effect<void> | undefined
): Client.SqlClient["withTransaction"] => {
  // (the writer connection's own statement path, as the library's BEGIN and COMMIT take it)
  const statement = (sql: string): Effect.Effect<void, SqlError> => Effect.asVoid(writer.connection.executeRaw(sql, []))
  const begin = statement("BEGIN IMMEDIATE")
  const commit = Effect.orDie(statement("COMMIT"))
  const rollback = Effect.orDie(statement("ROLLBACK"))
  return <R, E, A>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError, R> =>
    Effect.withFiberRuntime<A, E | SqlError, R>((fiber) => {
      const context = fiber.currentContext
      if (context.unsafeMap.has(Client.TransactionConnection.key)) return library(effect)
      const inside = Context.add(context, Client.TransactionConnection, [writer.connection, 0] as const)
      return Effect.uninterruptibleMask((restore) =>
        Effect.zipRight(
          restore(permit.take),
          Effect.ensuring(
            Effect.zipRight(
              catchUp === undefined ? begin : Effect.zipRight(restore(catchUp), begin),
              Effect.flatMap(
                Effect.exit(Effect.locally(restore(effect), FiberRef.currentContext, inside)),
                (exit) => Effect.zipRight(Exit.isSuccess(exit) ? commit : rollback, exit)
              )
            ),
            permit.release
          )
        )
      )
    })
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
      // checkpoints are the worker's (see `checkpointsOffLoop`)
      if (file) db.pragma("wal_autocheckpoint = 0")
    })
    const runtime = yield* Effect.runtime<never>()
    const checkpoints = file
      ? checkpointsOffLoop(db, config.filename, timeout, config.checkpoints ?? {}, (message) =>
        Runtime.runFork(runtime)(Effect.logWarning(message)))
      : undefined
    // every commit on the writer, counted (see `StoreVersion`), and handed to the checkpoint pacing
    let commits = 0
    const writer = connectionOf(db, () => {
      commits++
      checkpoints?.committed()
    })
    // other connections' commits (other processes; this one's reader and checkpointer never write): the
    // writer's `data_version` moves on each. `commits + moves` strictly grows whenever either does.
    const dataVersion = db.prepare("PRAGMA data_version").pluck()
    let seenDataVersion: unknown = dataVersion.get()
    let moves = 0
    const version = {
      current: () => {
        const now = dataVersion.get()
        if (now !== seenDataVersion) {
          seenDataVersion = now
          moves++
        }
        return commits + moves
      },
      known: () => commits + moves
    }

    // The write permit is held until the transaction's (or the statement's) scope closes, so nothing runs
    // inside another fiber's open transaction. It goes to waiters in arrival order (see ./Permit.ts).
    // Waiting for it is interruptible (a long poll or a client that went away stops queueing); once
    // taken, its release is registered before anything can interrupt. The taker then waits for a WAL
    // reset if one is due (`checkpointsOffLoop`).
    const permit = makePermit()
    const takePermit = Effect.uninterruptibleMask((restore) =>
      Effect.zipRight(
        restore(permit.take),
        Effect.flatMap(Effect.scope, (scope) => {
          const registered = Scope.addFinalizer(scope, permit.release)
          return checkpoints === undefined ? registered : Effect.zipRight(registered, restore(checkpoints.catchUp))
        })
      )
    )
    const transactionAcquirer = Effect.as(takePermit, writer.connection)

    // Reads off the write path. On a file (WAL), statements outside a transaction that only read never
    // queue behind the write permit: WAL gives them the last committed state, never a transaction in
    // progress. They run on the writer connection when no one holds the permit (its page cache is warm,
    // while the reader's is invalidated by every commit of the writer: measured 30 against 65 µs for the
    // envelope's probe), else on a second, read-only connection. The choice and the statement are one
    // synchronous step (`runSync`, inside one `withFiberRuntime`): no fiber can take the permit and begin
    // a transaction between them. Statements that write (an UPDATE outside a transaction, say) take the
    // permit on the writer for the one statement. `:memory:` has one connection: everything takes the
    // permit, as a transaction would.
    let acquirer: Effect.Effect<Connection, never, Scope.Scope> = transactionAcquirer
    let direct: Connection | undefined
    if (file) {
      const readerDb = yield* open(config.filename, { timeout, readonly: true, fileMustExist: true })
      readerDb.pragma(`busy_timeout = ${timeout}`)
      const reader = connectionOf(readerDb)
      // after the reader's close in the scope's order, so it runs first: the worker is gone before any
      // connection closes, and the writer's close (the last) checkpoints what is left
      yield* Effect.addFinalizer(() => checkpoints!.stop)
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
      const routing: Connection = {
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
      acquirer = Effect.succeed(routing)
      direct = routing
    }

    const made = yield* Client.make({
      acquirer,
      transactionAcquirer,
      compiler: Statement.makeCompilerSqlite(),
      spanAttributes: [["db.system.name", "sqlite"]],
      beginTransaction: "BEGIN IMMEDIATE"
    })
    // (the library's `safe` is the client object itself, so it carries the replacement too)
    const client: Client.SqlClient = Object.assign(made, {
      withTransaction: leanTransactions(made.withTransaction, writer, permit, checkpoints?.catchUp)
    })
    return { client, direct, version }
  })

/** The bare SQLite `SqlClient` for one file (or `:memory:`), no migrations. */
export const sqliteClient = (config: SqliteStoreConfig): Layer.Layer<Client.SqlClient, SqlError> =>
  Layer.scopedContext(Effect.map(make(config), ({ client, direct, version }) => {
    const context = Context.add(Context.make(Client.SqlClient, client), StoreVersion, version)
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
