/**
 * Search on Postgres (`npm run bench search-pg`): `sophia.search` (BM25 only) at `BENCH_SEARCH_N` (default
 * 100,000) documents, facts and posts each, through the Dispatcher, on a fresh database (dropped afterwards) at
 * SOPHIA_BENCH_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/test). Baselines in the same run,
 * alternating with each search: the three single-kind ranking queries a raw `pg` client runs (tsvector @@
 * tsquery, ts_rank, LIMIT 10) — the slowest of them, and their sum (what running the kinds one after another
 * would cost at least). `sophia.search` runs the kinds concurrently on pooled connections.
 */
import { Effect, Layer, ManagedRuntime } from "effect"
import { performance } from "node:perf_hooks"
import Pg from "pg"
import type { Caller } from "../src/domain/Auth.js"
import { SophiaLive } from "../src/layers/App.js"
import { StoreChoice } from "../src/layers/Sql.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { Auth } from "../src/services/Auth.js"
import { makeCorpus, pct } from "./support/Corpus.js"
import { freshDatabase } from "./support/PgDatabase.js"

const N = Number(process.env.BENCH_SEARCH_N ?? 100_000)
const SEARCHES = Number(process.env.BENCH_SEARCHES ?? 300)

const ms = (x: number) => x.toFixed(2)

// the corpus (bench/support/Corpus.ts), the same in every search bench
const { text, queries: makeQueries } = makeCorpus()
const queries = makeQueries(SEARCHES)

const main = async () => {
  const { url, drop } = await freshDatabase()
  const raw = new Pg.Client({ connectionString: url })
  const runtime = ManagedRuntime.make(SophiaLive(StoreChoice.postgres(url)).pipe(Layer.orDie))
  try {
    const { caller, dispatcher } = await runtime.runPromise(Effect.gen(function*() {
      const auth = yield* Auth
      const minted = yield* auth.createConnection({ name: "searcher", profile: "full" })
      return { caller: (yield* Effect.orDie(auth.authenticate(minted.bearer))) as Caller, dispatcher: yield* Dispatcher }
    }))
    await raw.connect()
    const t0 = performance.now()
    const at = new Date().toISOString()
    const CHUNK = 5000
    for (let start = 0; start < N; start += CHUNK) {
      const ids = Array.from({ length: Math.min(CHUNK, N - start) }, (_, k) => start + k)
      await raw.query(
        `INSERT INTO documents (id, user_id, entity_id, title, body, uri, import_session_id, created_by, created_at)
         SELECT 'doc-b-' || i, $1, NULL, t, b, NULL, 'bench', $2, $3 FROM unnest($4::int[], $5::text[], $6::text[]) AS x(i, t, b)`,
        [caller.userId, caller.connectionId, at, ids, ids.map(() => text(5)), ids.map(() => text(60))]
      )
      await raw.query(
        `INSERT INTO facts (id, user_id, entity_id, subject, predicate, object, origin, created_by, created_at)
         SELECT 'fact-b-' || i, $1, NULL, s, p, o, 'remembered', $2, $3 FROM unnest($4::int[], $5::text[], $6::text[], $7::text[]) AS x(i, s, p, o)`,
        [caller.userId, caller.connectionId, at, ids, ids.map(() => text(2)), ids.map(() => text(1)), ids.map(() => text(6))]
      )
      await raw.query(
        `INSERT INTO posts (id, user_id, pos, channel, channel_seq, kind, body, refs, payload, connection_id, to_selector,
           to_connection_id, based_on_seq, created_at)
         SELECT 'post-b-' || i, $1, i + 1, 'c' || (i % 20), i / 20 + 1, 'status', b, '[]', NULL, $2, NULL, NULL, NULL, $3
         FROM unnest($4::int[], $5::text[]) AS x(i, b)`,
        [caller.userId, caller.connectionId, at, ids, ids.map(() => text(30))]
      )
    }
    await raw.query(`ANALYZE`)
    const loadS = (performance.now() - t0) / 1000

    const tsq = (q: string) => q.split(" ").map((w) => `'${w}'`).join(" | ")
    const rankers = [
      `SELECT b.id FROM documents b, to_tsquery('simple', $1) q(q) WHERE b.search @@ q.q AND b.user_id = $2 AND b.deleted_at IS NULL
        ORDER BY ts_rank('{0, 0, 0.3333, 1.0}', b.search, q.q) DESC, b.id LIMIT 10`,
      `SELECT b.id FROM facts b, to_tsquery('simple', $1) q(q) WHERE b.search @@ q.q AND b.user_id = $2 AND b.deleted_at IS NULL
        ORDER BY ts_rank(b.search, q.q) DESC, b.id LIMIT 10`,
      `SELECT b.id FROM posts b, to_tsquery('simple', $1) q(q) WHERE b.search @@ q.q AND b.user_id = $2
        ORDER BY ts_rank(b.search, q.q) DESC, b.id LIMIT 10`
    ]
    const search = (q: string) => runtime.runPromise(dispatcher.call(caller, "sophia.search", { query: q }))
    for (const q of queries.slice(0, 20)) {
      for (const r of rankers) await raw.query(r, [tsq(q), caller.userId])
      await search(q)
    }
    const slowest: Array<number> = []
    const sum: Array<number> = []
    const tool: Array<number> = []
    for (const q of queries) {
      let worst = 0
      let all = 0
      for (const r of rankers) {
        const t = performance.now()
        await raw.query(r, [tsq(q), caller.userId])
        const d = performance.now() - t
        worst = Math.max(worst, d)
        all += d
      }
      slowest.push(worst)
      sum.push(all)
      const t = performance.now()
      const out = await search(q)
      tool.push(performance.now() - t)
      if (!out.ok) throw new Error(JSON.stringify(out.body))
    }
    console.log(`## sophia.search on Postgres — ${N} documents + ${N} facts + ${N} posts (loaded in ${loadS.toFixed(1)} s), ${SEARCHES} queries\n`)
    console.log(`| measure | p50 ms | p99 ms |`)
    console.log(`|---|---|---|`)
    console.log(`| sophia.search (BM25 only, limit 10, dispatcher path; kinds concurrently) | ${ms(pct(tool, 50))} | ${ms(pct(tool, 99))} |`)
    console.log(`| slowest single-kind raw ranking query | ${ms(pct(slowest, 50))} | ${ms(pct(slowest, 99))} |`)
    console.log(`| the three raw ranking queries one after another | ${ms(pct(sum, 50))} | ${ms(pct(sum, 99))} |`)
    console.log(
      `\nratio search / slowest single kind: **p50 ${(pct(tool, 50) / pct(slowest, 50)).toFixed(2)}×, p99 ${
        (pct(tool, 99) / pct(slowest, 99)).toFixed(2)
      }×**; search / the three in sequence: p50 ${(pct(tool, 50) / pct(sum, 50)).toFixed(2)}×\n`
    )
  } finally {
    await raw.end().catch(() => undefined)
    await runtime.dispose()
    await drop()
  }
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
