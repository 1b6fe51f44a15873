/**
 * The SQLite store's I/O paths on a real file (src/layers/sqlite/): WAL checkpoints in a worker thread,
 * off the event loop, with their fallbacks, and single reads outside a transaction routed to the warm
 * writer connection when the write permit is free — never into another fiber's open transaction.
 */
import { SqlClient } from "@effect/sql"
import { assert, describe, it } from "@effect/vitest"
import Sqlite from "better-sqlite3"
import { Context, Deferred, Effect, Fiber, Layer } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { CheckpointEvent, CheckpointTuning } from "../src/layers/Sql.js"
import { NEWEST_MIGRATION, runMigrations } from "../src/layers/Migrations.js"
import { sqliteClient } from "../src/layers/Sql.js"
import { StoreVersion } from "../src/services/store/Statements.js"

const tempDb = () => path.join(fs.mkdtempSync(path.join(os.tmpdir(), "sophia-io-")), "store.db")
const fixture = (name: string) => new URL(`./fixtures/${name}`, import.meta.url)

/** The store on `file` for the effect, its checkpoint events collected. */
const withStore = <A, E>(
  file: string,
  tuning: CheckpointTuning,
  f: (sql: SqlClient.SqlClient, events: Array<CheckpointEvent>) => Effect.Effect<A, E>
) => {
  const events: Array<CheckpointEvent> = []
  return Effect.scoped(
    Effect.flatMap(
      Layer.build(sqliteClient({ filename: file, checkpoints: { ...tuning, observe: (e) => events.push(e) } })),
      (context) => f(context.unsafeMap.get(SqlClient.SqlClient.key) as SqlClient.SqlClient, events)
    )
  ).pipe(Effect.map((a) => ({ a, events })))
}

/** Let the event loop turn (worker messages are delivered there), as a daemon's I/O does. */
const nextTurn = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))

/** `n` small transactions back to back, letting the event loop turn now and then as a daemon's does. */
const commitMany = (sql: SqlClient.SqlClient, n: number) =>
  Effect.gen(function*() {
    yield* sql`CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)`
    for (let i = 0; i < n; i++) {
      yield* sql.withTransaction(sql`INSERT INTO t (body) VALUES (${"x".repeat(400)})`)
      if (i % 8 === 0) yield* nextTurn
    }
  })

/** What the writer connection says (a statement inside a transaction runs on it). */
const writerAutocheckpoint = (sql: SqlClient.SqlClient) =>
  Effect.map(sql.withTransaction(sql<{ wal_autocheckpoint: number }>`PRAGMA wal_autocheckpoint`), (rows) => rows[0]!.wal_autocheckpoint)

const walBytes = (file: string) => fs.existsSync(`${file}-wal`) ? fs.statSync(`${file}-wal`).size : 0

/** The file as another process would find it after the store closed. */
const reopen = (file: string) => {
  const db = new Sqlite(file, { readonly: true })
  try {
    const integrity = db.pragma("integrity_check", { simple: true })
    const rows = db.prepare("SELECT count(*) AS n FROM t").get() as { n: number }
    return { integrity, rows: rows.n }
  } finally {
    db.close()
  }
}

const COMMITS = 6000
// without any checkpoint the WAL would hold every commit: ~3 pages of 4 KiB each, some 70 MB
const WAL_BOUND = 16 * 1024 * 1024

describe("SQLite checkpoints off the event loop", () => {
  it.live("the worker checkpoints, the writer never does, and the WAL stays bounded under a steady load", () =>
    Effect.gen(function*() {
      const file = tempDb()
      const { a, events } = yield* withStore(file, {}, (sql, events) =>
        Effect.gen(function*() {
          yield* commitMany(sql, COMMITS)
          return { autocheckpoint: yield* writerAutocheckpoint(sql), wal: walBytes(file), eventsBeforeClose: events.length }
        }))
      assert.strictEqual(a.autocheckpoint, 0)
      const checkpoints = events.filter((e) => e._tag === "Checkpointed")
      const byWorker = checkpoints.filter((e) => e.by === "worker")
      assert.isAtLeast(byWorker.length, COMMITS / 64 / 2)
      // some of them were the resets the steady load needs (a checkpoint racing commits never reaches the end)
      assert.isAtLeast(byWorker.filter((e) => e.reset).length, 1)
      assert.isFalse(events.some((e) => e._tag === "FellBack"))
      assert.isBelow(a.wal, WAL_BOUND)
      // closing stopped the worker, then the last connection's close checkpointed and removed the WAL
      assert.strictEqual(events.at(-1)?._tag, "Stopped")
      assert.isFalse(fs.existsSync(`${file}-wal`))
      assert.deepStrictEqual(reopen(file), { integrity: "ok", rows: COMMITS })
    }))

  it.live("a worker that dies hands the checkpoints back to the writer (SQLite's own), and the WAL stays bounded", () =>
    Effect.gen(function*() {
      const file = tempDb()
      const { a, events } = yield* withStore(file, { worker: fixture("checkpointer-dies.mjs") }, (sql) =>
        Effect.gen(function*() {
          yield* commitMany(sql, COMMITS)
          return { autocheckpoint: yield* writerAutocheckpoint(sql), wal: walBytes(file) }
        }))
      const fellBack = events.findIndex((e) => e._tag === "FellBack")
      assert.isAtLeast(fellBack, 0)
      assert.isAtLeast(events.slice(0, fellBack).filter((e) => e._tag === "Checkpointed" && e.by === "worker").length, 1)
      assert.strictEqual(a.autocheckpoint, 1000)
      assert.isBelow(a.wal, WAL_BOUND)
      assert.isFalse(fs.existsSync(`${file}-wal`))
      assert.deepStrictEqual(reopen(file), { integrity: "ok", rows: COMMITS })
    }))

  it.live("a worker that never answers: the writer checkpoints itself every `behind` commits", () =>
    Effect.gen(function*() {
      const file = tempDb()
      const { a, events } = yield* withStore(file, { worker: fixture("checkpointer-stuck.mjs"), behind: 500 }, (sql) =>
        Effect.gen(function*() {
          yield* commitMany(sql, COMMITS)
          return { autocheckpoint: yield* writerAutocheckpoint(sql), wal: walBytes(file) }
        }))
      const byWriter = events.filter((e) => e._tag === "Checkpointed" && e.by === "writer")
      assert.isAtLeast(byWriter.length, COMMITS / 500 - 1)
      assert.isFalse(events.some((e) => e._tag === "Checkpointed" && e.by === "worker"))
      assert.strictEqual(a.autocheckpoint, 0)
      assert.isBelow(a.wal, WAL_BOUND)
      // it still stopped when told
      assert.strictEqual(events.at(-1)?._tag, "Stopped")
      assert.deepStrictEqual(reopen(file), { integrity: "ok", rows: COMMITS })
    }))

  it.live("a short-lived store (a CLI command) never starts the worker", () =>
    Effect.gen(function*() {
      const file = tempDb()
      const { events } = yield* withStore(file, {}, (sql) => commitMany(sql, 10))
      assert.deepStrictEqual(events, [])
      assert.deepStrictEqual(reopen(file), { integrity: "ok", rows: 10 })
    }))

  it.live("`:memory:` has no worker and SQLite's own checkpoints", () =>
    Effect.scoped(Effect.gen(function*() {
      const context = yield* Layer.build(sqliteClient({ filename: ":memory:" }))
      const sql = context.unsafeMap.get(SqlClient.SqlClient.key) as SqlClient.SqlClient
      const rows = yield* sql<{ wal_autocheckpoint: number }>`PRAGMA wal_autocheckpoint`
      assert.strictEqual(rows[0]!.wal_autocheckpoint, 1000)
    })))
})

describe("SQLite reads outside a transaction", () => {
  // `PRAGMA wal_autocheckpoint` tells the connections apart: 0 on the writer, SQLite's default on the reader
  const whichConnection = (sql: SqlClient.SqlClient) =>
    Effect.map(sql<{ wal_autocheckpoint: number }>`PRAGMA wal_autocheckpoint`, (rows) =>
      rows[0]!.wal_autocheckpoint === 0 ? "writer" : "reader")

  it.live("run on the warm writer when the permit is free; on the reader, without waiting, during another fiber's transaction", () =>
    Effect.gen(function*() {
      const file = tempDb()
      yield* withStore(file, {}, (sql) =>
        Effect.gen(function*() {
          yield* sql`CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)`
          yield* sql`INSERT INTO t (body) VALUES ('committed')`
          assert.strictEqual(yield* whichConnection(sql), "writer")

          const inside = yield* Deferred.make<void>()
          const finish = yield* Deferred.make<void>()
          const writer = yield* Effect.fork(sql.withTransaction(Effect.gen(function*() {
            yield* sql`INSERT INTO t (body) VALUES ('uncommitted')`
            yield* Deferred.succeed(inside, undefined)
            yield* Deferred.await(finish)
          })))
          yield* Deferred.await(inside)
          // the transaction is open with its write: a read neither waits for it nor sees it
          const during = yield* sql<{ body: string }>`SELECT body FROM t ORDER BY id`.pipe(Effect.timeout("2 seconds"))
          assert.deepStrictEqual(during.map((r) => r.body), ["committed"])
          assert.strictEqual(yield* whichConnection(sql), "reader")
          yield* Deferred.succeed(finish, undefined)
          yield* Fiber.join(writer)
          const after = yield* sql<{ body: string }>`SELECT body FROM t ORDER BY id`
          assert.deepStrictEqual(after.map((r) => r.body), ["committed", "uncommitted"])
          assert.strictEqual(yield* whichConnection(sql), "writer")
        }))
    }))

  it.live("never see half of another fiber's transaction, under many concurrent writers and readers", () =>
    Effect.gen(function*() {
      const file = tempDb()
      const { a } = yield* withStore(file, {}, (sql) =>
        Effect.gen(function*() {
          yield* sql`CREATE TABLE pairs (id INTEGER PRIMARY KEY, side TEXT NOT NULL)`
          // each transaction writes two rows, yielding between them so other fibers run mid-transaction
          const writeOne = sql.withTransaction(Effect.gen(function*() {
            yield* sql`INSERT INTO pairs (side) VALUES ('a')`
            yield* Effect.yieldNow()
            yield* nextTurn
            yield* sql`INSERT INTO pairs (side) VALUES ('b')`
          }))
          const seen: Array<number> = []
          const readOne = Effect.flatMap(sql<{ n: number }>`SELECT count(*) AS n FROM pairs`, (rows) =>
            Effect.sync(() => seen.push(rows[0]!.n)))
          yield* Effect.all(
            [
              Effect.forEach(Array.from({ length: 200 }), () => writeOne, { concurrency: 8, discard: true }),
              Effect.forEach(Array.from({ length: 2000 }), (_, i) => Effect.zipRight(i % 4 === 0 ? nextTurn : Effect.yieldNow(), readOne), {
                concurrency: 8,
                discard: true
              })
            ],
            { concurrency: "unbounded", discard: true }
          )
          return seen
        }))
      assert.strictEqual(a.length, 2000)
      assert.deepStrictEqual(a.filter((n) => n % 2 !== 0), [])
      // the readers really did run while transactions were open and after commits
      assert.isAbove(new Set(a).size, 10)
    }))
})

describe("SQLite store version (what lets a reader keep what it read while nothing moved)", () => {
  /** A real second process committing one row to the file through its own connection. */
  const otherProcessInserts = (file: string, body: string) => {
    const script = `const Sqlite = require("better-sqlite3"); const db = new Sqlite(process.argv[1], { timeout: 5000 });
      db.prepare("INSERT INTO t (body) VALUES (?)").run(process.argv[2]); db.close()`
    const r = spawnSync(process.execPath, ["-e", script, file, body], { cwd: process.cwd(), encoding: "utf8" })
    assert.strictEqual(r.status, 0, r.stderr)
  }

  it.live("moves on every commit — this process's transactions and single writes, another process's — and only then", () =>
    Effect.scoped(Effect.gen(function*() {
      const file = tempDb()
      const context = yield* Layer.build(sqliteClient({ filename: file }))
      const sql = Context.get(context, SqlClient.SqlClient)
      // (the layer's published type names only SqlClient)
      const version = context.unsafeMap.get(StoreVersion.key) as Context.Tag.Service<typeof StoreVersion>
      yield* sql`CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)`
      const moved = <A, E>(effect: Effect.Effect<A, E>) =>
        Effect.gen(function*() {
          const before = version.current()
          yield* effect
          return version.current() !== before
        })
      // reads move nothing, on either connection (one of them runs during another fiber's open transaction)
      assert.isFalse(yield* moved(sql`SELECT count(*) AS n FROM t`))
      assert.isFalse(yield* moved(Effect.sync(() => version.current())))
      // this process: a transaction, and a single write outside one
      assert.isTrue(yield* moved(sql.withTransaction(sql`INSERT INTO t (body) VALUES ('tx')`)))
      assert.isTrue(yield* moved(sql`INSERT INTO t (body) VALUES ('single')`))
      // a transaction still open moves nothing yet; its commit does
      const inside = yield* Deferred.make<number>()
      const finish = yield* Deferred.make<void>()
      const writer = yield* Effect.fork(sql.withTransaction(Effect.gen(function*() {
        yield* sql`INSERT INTO t (body) VALUES ('held')`
        yield* Deferred.succeed(inside, version.current())
        yield* Deferred.await(finish)
      })))
      const during = yield* Deferred.await(inside)
      assert.strictEqual(version.current(), during)
      assert.isTrue(yield* moved(Effect.zipRight(Deferred.succeed(finish, undefined), Fiber.join(writer))))
      // another process's commit on the same file
      assert.isTrue(yield* moved(Effect.sync(() => otherProcessInserts(file, "elsewhere"))))
      const rows = yield* sql<{ body: string }>`SELECT body FROM t ORDER BY id`
      assert.deepStrictEqual(rows.map((r) => r.body), ["tx", "single", "held", "elsewhere"])
      // and once seen, it stays put again
      const settled = version.current()
      assert.strictEqual(version.current(), settled)
    })))
})

describe("SQLite write transactions (the lean outermost path)", () => {
  const open = (file: string, busyTimeoutMs = 5000) =>
    Effect.map(Layer.build(sqliteClient({ filename: file, busyTimeoutMs })), (context) => Context.get(context, SqlClient.SqlClient))
  const bodies = (sql: SqlClient.SqlClient) =>
    Effect.map(sql<{ body: string }>`SELECT body FROM t ORDER BY id`, (rows) => rows.map((r) => r.body))

  it.live("commit on success; roll back on failure, defect or interruption; savepoints inside; the permit always comes back", () =>
    Effect.scoped(Effect.gen(function*() {
      const sql = yield* open(tempDb())
      yield* sql`CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)`
      yield* sql.withTransaction(sql`INSERT INTO t (body) VALUES ('kept')`)
      // a failure, a defect, an interruption: nothing of the transaction stays
      const failed = yield* sql.withTransaction(Effect.zipRight(sql`INSERT INTO t (body) VALUES ('failed')`, Effect.fail("no"))).pipe(Effect.flip)
      assert.strictEqual(failed, "no")
      const died = yield* sql.withTransaction(Effect.zipRight(sql`INSERT INTO t (body) VALUES ('died')`, Effect.die("boom"))).pipe(Effect.exit)
      assert.isTrue(died._tag === "Failure")
      const inside = yield* Deferred.make<void>()
      const stuck = yield* Effect.fork(sql.withTransaction(Effect.gen(function*() {
        yield* sql`INSERT INTO t (body) VALUES ('interrupted')`
        yield* Deferred.succeed(inside, undefined)
        yield* Effect.never
      })))
      yield* Deferred.await(inside)
      yield* Fiber.interrupt(stuck)
      // a savepoint rolled back inside a transaction that commits
      yield* sql.withTransaction(Effect.gen(function*() {
        yield* sql`INSERT INTO t (body) VALUES ('outer')`
        yield* sql.withTransaction(Effect.zipRight(sql`INSERT INTO t (body) VALUES ('inner')`, Effect.fail("inner"))).pipe(Effect.ignore)
      }))
      // every permit came back: the next transaction runs at once
      yield* sql.withTransaction(sql`INSERT INTO t (body) VALUES ('after')`).pipe(Effect.timeout("2 seconds"))
      assert.deepStrictEqual(yield* bodies(sql), ["kept", "outer", "after"])
    })))

  // every `sophia` command migrates its store first: one already at the newest migration is told by a read,
  // so a command starts while a daemon holds the write lock (the migrator's BEGIN IMMEDIATE would wait for it)
  it.live("a store at the newest migration opens while another process holds the write lock; an older one waits for it", () =>
    Effect.scoped(Effect.gen(function*() {
      const file = tempDb()
      yield* Effect.provide(runMigrations, yield* Layer.build(sqliteClient({ filename: file })))
      const other = new Sqlite(file, { timeout: 5000 })
      yield* Effect.addFinalizer(() => Effect.sync(() => other.close()))
      other.prepare("BEGIN IMMEDIATE").run()
      other.prepare("INSERT INTO users (id, name, is_owner, created_at) VALUES ('u', 'owner', 1, 'now')").run()
      const current = yield* open(file, 200)
      assert.deepStrictEqual(yield* Effect.provideService(runMigrations, SqlClient.SqlClient, current), [])
      // a store one migration behind goes to the migrator, which needs the lock: refused after the timeout
      other.prepare("ROLLBACK").run()
      other.prepare("DELETE FROM sophia_migrations WHERE migration_id = ?").run(NEWEST_MIGRATION)
      other.prepare("BEGIN IMMEDIATE").run()
      const behind = yield* Effect.provideService(runMigrations, SqlClient.SqlClient, current).pipe(Effect.flip)
      assert.strictEqual(behind._tag, "SqlError")
      other.prepare("ROLLBACK").run()
    })))

  it.live("a BEGIN that cannot get the lock from another process in time fails with SqlError and frees the permit", () =>
    Effect.scoped(Effect.gen(function*() {
      const file = tempDb()
      const sql = yield* open(file, 200)
      yield* sql`CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)`
      // another connection (as another process would) holds the write lock
      const other = new Sqlite(file, { timeout: 5000 })
      other.prepare("BEGIN IMMEDIATE").run()
      other.prepare("INSERT INTO t (body) VALUES ('other')").run()
      const refused = yield* sql.withTransaction(sql`INSERT INTO t (body) VALUES ('mine')`).pipe(Effect.flip)
      assert.strictEqual(refused._tag, "SqlError")
      other.prepare("COMMIT").run()
      other.close()
      // the permit was released: the next write goes through
      yield* sql.withTransaction(sql`INSERT INTO t (body) VALUES ('mine')`).pipe(Effect.timeout("2 seconds"))
      assert.deepStrictEqual(yield* bodies(sql), ["other", "mine"])
    })))
})
