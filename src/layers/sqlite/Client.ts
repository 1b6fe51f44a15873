/**
 * The SQLite store: an @effect/sql `SqlClient` on better-sqlite3, a fork of @effect/sql-sqlite-node's
 * client with what that client does not let us set:
 *  - write transactions begin with `BEGIN IMMEDIATE`: a plain `BEGIN` takes the write lock lazily and a
 *    second process then fails at once with SQLITE_BUSY_SNAPSHOT instead of waiting `busy_timeout`;
 *  - `busy_timeout` and `foreign_keys = ON` on the connection;
 *  - the one permit held for a whole statement (or a whole transaction), taken interruptibly, first come
 *    first served (./Permit.ts, ./Transactions.ts), and the outermost transaction on a lean path;
 *  - `safeIntegers` set per run (statements are cached by text and shared: ./Connection.ts).
 * On a file: one writer connection per process, serialized by the write permit (better-sqlite3 is
 * synchronous anyway); single reads outside a transaction on the writer when it is free, else on a
 * read-only second connection (./Routing.ts); WAL checkpoints in a worker thread with a third
 * (./Checkpoints.ts). What it relies on inside @effect/sql is listed in ./Internals.ts.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as Client from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import * as Statement from "@effect/sql/Statement"
import type Sqlite from "better-sqlite3"
import { Context, Effect, Layer, Runtime } from "effect"
import type { Scope } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { DirectConnection, StoreVersion } from "../../services/store/Statements.js"
import { runMigrations } from "../Migrations.js"
import type { CheckpointTuning } from "./Checkpoints.js"
import { checkpointsOffLoop } from "./Checkpoints.js"
import { connectionOf, open } from "./Connection.js"
import { withLeanTransactions } from "./Internals.js"
import { makePermit } from "./Permit.js"
import { routeReads } from "./Routing.js"
import { makeWritePath } from "./Transactions.js"

export interface SqliteStoreConfig {
  /** a file path, or `:memory:` */
  readonly filename: string
  readonly busyTimeoutMs?: number
  /** the pace of the off-loop WAL checkpoints of a file (defaults in `checkpointsOffLoop`) */
  readonly checkpoints?: CheckpointTuning
}

/**
 * Create `dir` and its missing parents, owner-only, one level at a time. Not `mkdirSync(dir, { recursive:
 * true })`: under a pseudo-filesystem such as /proc, Node's recursive mkdir retries forever (ENOENT for the
 * child of a parent that exists), spinning a core and ignoring SIGTERM. Here the first level that cannot be
 * created throws, and the caller reports it in one line.
 */
const createFolder = (dir: string) => {
  const missing: Array<string> = []
  let at = dir
  while (!fs.existsSync(at)) {
    missing.push(at)
    const parent = path.dirname(at)
    if (parent === at) break
    at = parent
  }
  for (const level of missing.reverse()) fs.mkdirSync(level, { mode: 0o700 })
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

/**
 * What the store offers as `StoreVersion`: the writer's own commits, counted, plus the moves of the
 * writer's `PRAGMA data_version`, which moves on every other connection's commit (other processes; this
 * one's reader and checkpointer never write). `commits + moves` strictly grows whenever either does.
 */
const versionOf = (db: Sqlite.Database, commits: () => number, neutral: () => number): Context.Tag.Service<StoreVersion> => {
  const dataVersion = db.prepare("PRAGMA data_version").pluck()
  let seenDataVersion: unknown = dataVersion.get()
  let moves = 0
  return {
    current: () => {
      const now = dataVersion.get()
      if (now !== seenDataVersion) {
        seenDataVersion = now
        moves++
      }
      return commits() + moves
    },
    known: () => commits() + moves,
    neutral
  }
}

/** Open (creating a file's folder and the file, owner-only) and set up the writer's handle. */
const openWriter = (filename: string, timeout: number) =>
  Effect.gen(function*() {
    const file = filename !== ":memory:"
    // every step that touches the file fails as a `SqlError` (a path that cannot be created, a file that
    // is not a database), never as a defect: the CLI reports it in one line
    const attempt = <A>(what: string, f: () => A) =>
      Effect.try({ try: f, catch: (cause) => new SqlError({ cause, message: `${what}: ${String(cause)}` }) })
    if (file) {
      yield* attempt("cannot create the database folder", () => createFolder(path.dirname(path.resolve(filename))))
    }
    // the owner's alone: a new database file is created 0600 (whatever the umask); SQLite gives its -wal and
    // -shm files the database file's mode
    if (file) yield* Effect.sync(() => createPrivate(filename))
    const db = yield* open(filename, { timeout })
    yield* attempt(`cannot use ${filename}`, () => {
      if (file) db.pragma("journal_mode = WAL")
      db.pragma(`busy_timeout = ${timeout}`)
      db.pragma("foreign_keys = ON")
      db.pragma("synchronous = NORMAL")
      // checkpoints are the worker's (see `checkpointsOffLoop`)
      if (file) db.pragma("wal_autocheckpoint = 0")
    })
    return db
  })

const make = (config: SqliteStoreConfig) =>
  Effect.gen(function*() {
    const file = config.filename !== ":memory:"
    const timeout = config.busyTimeoutMs ?? 5000
    const db = yield* openWriter(config.filename, timeout)
    const runtime = yield* Effect.runtime<never>()
    const checkpoints = file
      ? checkpointsOffLoop(db, config.filename, timeout, config.checkpoints ?? {}, (message) =>
        Runtime.runFork(runtime)(Effect.logWarning(message)))
      : undefined
    // every commit on the writer, counted (see `StoreVersion`), and handed to the checkpoint pacing; the
    // envelope-neutral ones counted apart in the same step (the write path says which COMMIT is one)
    let commits = 0
    let neutral = 0
    let nextCommitNeutral = false
    const writer = connectionOf(db, () => {
      commits++
      if (nextCommitNeutral) neutral++
      nextCommitNeutral = false
      checkpoints?.committed()
    })
    const version = versionOf(db, () => commits, () => neutral)
    const permit = makePermit()
    const writePath = makeWritePath(writer.connection, permit, checkpoints?.catchUp, (isNeutral) => {
      nextCommitNeutral = isNeutral
    })

    // `:memory:` has one connection: everything takes the permit, as a transaction would. A file routes its
    // reads (./Routing.ts), and offers that routing as the permit-free `DirectConnection`.
    let acquirer: Effect.Effect<Connection, never, Scope.Scope> = writePath.transactionAcquirer
    let direct: Connection | undefined
    if (file) {
      const readerDb = yield* open(config.filename, { timeout, readonly: true, fileMustExist: true })
      readerDb.pragma(`busy_timeout = ${timeout}`)
      const reader = connectionOf(readerDb)
      // after the reader's close in the scope's order, so it runs first: the worker is gone before any
      // connection closes, and the writer's close (the last) checkpoints what is left
      yield* Effect.addFinalizer(() => checkpoints!.stop)
      direct = routeReads({ db, writer, reader, permit, takePermit: writePath.takePermit })
      acquirer = Effect.succeed(direct)
    }

    const made = yield* Client.make({
      acquirer,
      transactionAcquirer: writePath.transactionAcquirer,
      compiler: Statement.makeCompilerSqlite(),
      spanAttributes: [["db.system.name", "sqlite"]],
      beginTransaction: "BEGIN IMMEDIATE"
    })
    const client = withLeanTransactions(made, writePath.withTransaction)
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
