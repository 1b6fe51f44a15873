import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { SophiaLive } from "../src/layers/App.js"
import { SqliteStore } from "../src/layers/SqliteStore.js"
Effect.runPromise(Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const { raw } = yield* SqliteStore
  const N = 20000
  for (let r = 0; r < 2; r++) {
    let t0 = performance.now()
    for (let i = 0; i < N; i++) yield* sql`SELECT ${i} AS x`
    const a = (performance.now() - t0) / N * 1000
    const st = raw.prepare("SELECT ? AS x")
    t0 = performance.now()
    for (let i = 0; i < N; i++) st.all(i)
    const b = (performance.now() - t0) / N * 1000
    t0 = performance.now()
    for (let i = 0; i < N; i++) yield* sql`SELECT ${i} AS x`.pipe(Effect.withTracerEnabled(false))
    const c = (performance.now() - t0) / N * 1000
    console.log({ effect_sql_us: a.toFixed(1), raw_us: b.toFixed(1), no_tracer_us: c.toFixed(1) })
  }
}).pipe(Effect.provide(SophiaLive("/tmp/micro.db")), Effect.scoped))
