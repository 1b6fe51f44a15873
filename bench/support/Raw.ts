/**
 * The benchmarks' raw baselines need a better-sqlite3 handle on the same database the services use. The
 * core no longer exposes one (services need only `SqlClient`), so a bench opens its own second
 * connection on the same file, with the pragmas the store sets (src/layers/Sql.ts).
 */
import { SqlClient } from "@effect/sql"
import Sqlite from "better-sqlite3"
import { Context, Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { SophiaLive, SqliteLive } from "../../src/layers/App.js"
import { TracingLive } from "../../src/observability/Tracing.js"

/** Observability as `sophia serve` has it by default: no OTLP endpoint set, so no tracer (src/main.ts). */
const AsTheDaemonRuns = TracingLive({ name: "sophia", version: "bench" })

export class SqliteStore extends Context.Tag("bench/SqliteStore")<SqliteStore, { readonly raw: Sqlite.Database }>() {}

/** A raw handle on `file`, closed with the layer. */
export const rawLayer = (file: string) =>
  Layer.scoped(
    SqliteStore,
    Effect.acquireRelease(
      Effect.sync(() => {
        const raw = new Sqlite(file, { timeout: 5000 })
        raw.pragma("journal_mode = WAL")
        raw.pragma("busy_timeout = 5000")
        raw.pragma("foreign_keys = ON")
        raw.pragma("synchronous = NORMAL")
        return { raw }
      }),
      ({ raw }) => Effect.sync(() => raw.close())
    )
  )

/** A temp file for benches that used `:memory:` only to reach the raw handle. */
export const tempDb = (name: string) => path.join(fs.mkdtempSync(path.join(os.tmpdir(), "sophia-bench-")), name)

/** The app over `file` plus a raw handle on the same file (opened after the migrations ran). */
export const SophiaWithRaw = (file: string) =>
  rawLayer(file).pipe(Layer.provideMerge(SophiaLive(file)), Layer.provide(AsTheDaemonRuns))

/** The services' store over `file` plus a raw handle on it. */
export const StoreWithRaw = (file: string): Layer.Layer<SqlClient.SqlClient | SqliteStore> =>
  rawLayer(file).pipe(Layer.provideMerge(SqliteLive(file)), Layer.provide(AsTheDaemonRuns))
