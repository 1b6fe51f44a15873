/**
 * The store seam. Services need only `SqlClient`; this module is the one place that chooses which store
 * provides it: the SQLite file by default (./sqlite/, the only folder outside tests and benchmarks that
 * names the SQLite driver), Postgres by URL (./Pg.ts) — see `storeLayer`. It re-exports what the rest of
 * the project uses of the SQLite store.
 */
import type * as Client from "@effect/sql/SqlClient"
import { Config, Effect, Layer, Option, Redacted, Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { runMigrations, runMigrationsOnce } from "./Migrations.js"
import { backup } from "./sqlite/Backup.js"
import { SqliteLive, sqliteClient } from "./sqlite/Client.js"

export type { CheckpointEvent, CheckpointTuning } from "./sqlite/Checkpoints.js"
export type { SqliteStoreConfig } from "./sqlite/Client.js"
export { SqliteLive, sqliteClient } from "./sqlite/Client.js"

/** The Postgres store, loaded only when one is asked for (the driver costs a SQLite process ~20 ms to load). */
const loadPg = Effect.promise(() => import("./Pg.js"))

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

const isPostgresUrl = (url: string) => {
  try {
    const u = new URL(url)
    return u.protocol === "postgres:" || u.protocol === "postgresql:"
  } catch {
    return false
  }
}

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
    // a value that is no Postgres URL at all is said as such (the driver would report a DNS failure for "base")
    if (!isPostgresUrl(choice.url)) {
      return Layer.fail(new StoreUnavailable({
        message: `--database-url (or SOPHIA_DATABASE_URL) is not a Postgres URL: expected postgres://user@host:5432/database, got ${
          JSON.stringify(describeStore(choice) === "postgres" ? choice.url.slice(0, 80) : describeStore(choice))
        }`
      }))
    }
    // the pool with every migration applied once (PgClient rides along for LISTEN/NOTIFY)
    return Layer.effectDiscard(runMigrationsOnce).pipe(
      Layer.provideMerge(Layer.unwrapEffect(Effect.map(loadPg, (pg) => pg.pgClient({ url: choice.url })))),
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
  Effect.suspend(() => {
    const source = path.resolve(filename)
    const target = path.resolve(out)
    if (fs.existsSync(target)) {
      return Effect.fail(new StoreUnavailable({ message: `${target} already exists; choose a new --out file` }))
    }
    return backup(source, target).pipe(
      Effect.mapError((e) => new StoreUnavailable({ message: `${e.message}: ${describeCause(e)}` }))
    )
  })

/**
 * The store tests run on: a fresh in-memory SQLite, or — when `SOPHIA_TEST_DATABASE_URL` names a
 * Postgres server (the suite's Postgres run, see vitest.config.ts) — a fresh schema there, dropped
 * afterwards. One suite, two layers.
 */
export const TestStore: Layer.Layer<Client.SqlClient> = Layer.unwrapEffect(Effect.map(
  Effect.orDie(Config.option(Config.string("SOPHIA_TEST_DATABASE_URL"))),
  (url) =>
    Option.isSome(url) && url.value.trim() !== ""
      ? Layer.unwrapEffect(Effect.map(loadPg, (pg) => pg.PgFreshSchema(url.value)))
      : SqliteLive(":memory:")
))
