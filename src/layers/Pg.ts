/**
 * The Postgres store: `@effect/sql-pg`'s `SqlClient` over a connection pool, for any number of daemons
 * on one database. Services see the same `SqlClient` as on SQLite; what differs between the dialects is
 * kept here and in the store seam's modules under `services/store/` (locking: `Locking.ts`):
 *  - BIGINT (`int8`), `COUNT(*)` and `SUM` (`numeric`) come back from `pg` as strings; here they are
 *    parsed to JavaScript numbers (every counter, seq and position stays far below 2^53);
 *  - migrations run once, under a session advisory lock, even when several daemons start together
 *    (see `Migrations.runMigrationsOnce`);
 *  - transactions are READ COMMITTED (Postgres' default): the rules that relied on SQLite's single writer
 *    are explicit in the services (row locks of conditional updates and upserts, unique constraints,
 *    an advisory lock through `Locking.serialize` where no row exists to lock; each says which and why).
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import type * as Client from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Duration, Effect, Layer, Redacted } from "effect"
import { randomUUID } from "node:crypto"
import Pg from "pg"
import { retryingTransactions } from "../services/store/Conflicts.js"
import { runMigrationsOnce } from "./Migrations.js"
import { wrapTransactions } from "./sqlite/Internals.js"

const INT8 = 20
const NUMERIC = 1700

/** `pg`'s type parsers, except that int8 and numeric become numbers (see the module comment). */
const types: Pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: "text" | "binary") =>
    oid === INT8 || oid === NUMERIC
      ? (value: string) => Number(value)
      : Pg.types.getTypeParser(oid, format as "text")) as Pg.CustomTypesConfig["getTypeParser"]
}

export interface PgStoreConfig {
  readonly url: Redacted.Redacted | string
  readonly maxConnections?: number
}

/**
 * The bare Postgres `SqlClient`, no migrations. The layer also provides `PgClient` (CrossDaemon.ts finds it
 * with `Effect.serviceOption` for LISTEN/NOTIFY); its type says only `SqlClient` so that the published
 * declarations never name `@effect/sql-pg` (whose own declarations need `@types/pg` and `@types/node` in
 * an embedder's type-check).
 */
export const pgClient = (config: PgStoreConfig): Layer.Layer<Client.SqlClient, SqlError> =>
  PgClient.layer({
    url: typeof config.url === "string" ? Redacted.make(config.url) : config.url,
    types,
    maxConnections: config.maxConnections ?? 10,
    idleTimeout: Duration.seconds(30),
    connectTimeout: Duration.seconds(5),
    applicationName: "sophia"
  }).pipe(
    // a serialization failure or deadlock runs the outermost transaction again (services/store/Conflicts.ts);
    // `withTransaction` is an own property of the client, read at each call (layers/sqlite/Internals.ts (2))
    Layer.tap((context) => Effect.sync(() => wrapTransactions(Context.get(context, PgClient.PgClient), (library) => retryingTransactions(library))))
  )

/** The store every service runs on, over Postgres: the pool with every migration applied (once). */
export const PgLive = (url: Redacted.Redacted | string, options: { readonly maxConnections?: number } = {}): Layer.Layer<Client.SqlClient> =>
  Layer.effectDiscard(runMigrationsOnce).pipe(
    Layer.provideMerge(pgClient({ url, ...options })),
    Layer.orDie
  )

/** Is a Postgres server answering at `url`? (a probe for tests and CI; never throws) */
export const reachable = (url: string, timeoutMs = 2000): Promise<boolean> =>
  new Promise((resolve) => {
    const client = new Pg.Client({ connectionString: url, connectionTimeoutMillis: timeoutMs })
    client.connect().then(
      () => client.end().then(() => resolve(true), () => resolve(true)),
      () => resolve(false)
    )
  })

/** `url` with its sessions' `search_path` set to `schema` (each test runs in a schema of its own). */
export const withSearchPath = (url: string, schema: string): string => {
  const u = new URL(url)
  u.searchParams.set("options", `-c search_path=${schema}`)
  return u.toString()
}

/**
 * A fresh, empty Postgres schema on `url` for as long as the layer lives, with the store over it
 * (migrations applied); the schema is dropped when the layer's scope closes. What the dual-dialect
 * test suite builds for every test that asks for a store.
 */
export const PgFreshSchema = (url: string): Layer.Layer<Client.SqlClient> =>
  Layer.unwrapScoped(Effect.gen(function*() {
    const schema = `t_${randomUUID().replaceAll("-", "")}`
    const admin = () => new Pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 })
    const once = (statement: string) =>
      Effect.promise(async () => {
        const c = admin()
        await c.connect()
        try {
          await c.query(statement)
        } finally {
          await c.end()
        }
      })
    yield* Effect.acquireRelease(
      once(`CREATE SCHEMA ${schema}`),
      () => Effect.ignore(once(`DROP SCHEMA IF EXISTS ${schema} CASCADE`))
    )
    const scoped = withSearchPath(url, schema)
    return Layer.effectDiscard(runMigrationsOnce).pipe(
      Layer.provideMerge(pgClient({ url: scoped, maxConnections: 4 })),
      Layer.orDie
    )
  }))
