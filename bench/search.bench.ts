/**
 * Search bench (`npm run bench search`): `sophia.search` at `BENCH_SEARCH_N` (default 100,000) documents,
 * facts and posts each, on a SQLite file, through the Dispatcher, against baselines taken in the same run:
 *  1. BM25 only: p50/p99 vs the slowest of the three single-kind raw FTS5 queries for the same words
 *     (target ≤ 2×);
 *  2. with dense retrieval (an embeddings provider in its own process: the suite's deterministic server,
 *     `BENCH_DIM` dimensions, default 384; `BENCH_PROVIDER_DELAY_MS` per request): the feed's drain rate vs
 *     the provider's own rate measured by a bare client in batches of the same size (target ≥ 0.8×); then
 *     `sophia.search` with dense vs the same raw baseline, each query's vector asked of the provider before
 *     the timed searches so provider time is excluded (target ≤ 3×); and the nearest-neighbour scan per kind,
 *     exact vs int8 quantized (time and recall@10), which chose `EXACT_UP_TO` (services/embeddings/Nearest.ts).
 */
import { ConfigProvider, Effect, Layer, ManagedRuntime } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { performance } from "node:perf_hooks"
import type { Caller } from "../src/domain/Auth.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { Auth } from "../src/services/Auth.js"
import { makeCorpus, pct } from "./support/Corpus.js"
import { SophiaWithRaw, SqliteStore, tempDb } from "./support/Raw.js"

const N = Number(process.env.BENCH_SEARCH_N ?? 100_000)
const SEARCHES = Number(process.env.BENCH_SEARCHES ?? 300)
const DIM = Number(process.env.BENCH_DIM ?? 384)
const DELAY = Number(process.env.BENCH_PROVIDER_DELAY_MS ?? 0)
const BATCH = 64
/** `BENCH_DENSE=0`: the BM25 part only (it runs on a tree without dense retrieval, to compare with before) */
const DENSE = process.env.BENCH_DENSE !== "0"

const ms = (x: number) => x.toFixed(2)

// the corpus (bench/support/Corpus.ts), the same in every search bench
const { text, queries: makeQueries } = makeCorpus()
const queries = makeQueries(SEARCHES)

const mint = (name: string) =>
  Effect.gen(function*() {
    const auth = yield* Auth
    const minted = yield* auth.createConnection({ name, profile: "full" })
    return (yield* Effect.orDie(auth.authenticate(minted.bearer))) as Caller
  })

type App = ReturnType<typeof SophiaWithRaw>
type Runtime = ManagedRuntime.ManagedRuntime<Layer.Layer.Success<App>, Layer.Layer.Error<App>>

const load = (raw: import("better-sqlite3").Database, caller: Caller) => {
  const at = new Date().toISOString()
  const insertDoc = raw.prepare(`INSERT INTO documents (id, user_id, entity_id, title, body, uri, import_session_id, created_by, created_at)
    VALUES (?, ?, NULL, ?, ?, NULL, 'bench', ?, ?)`)
  const logDoc = raw.prepare(`INSERT INTO documents_fts_changes (user_id, document_id) VALUES (?, ?)`)
  const logFact = raw.prepare(`INSERT INTO facts_fts_changes (user_id, fact_id) VALUES (?, ?)`)
  const insertFact = raw.prepare(`INSERT INTO facts (id, user_id, entity_id, subject, predicate, object, origin, created_by, created_at)
    VALUES (?, ?, NULL, ?, ?, ?, 'remembered', ?, ?)`)
  const insertPost = raw.prepare(`INSERT INTO posts (id, user_id, pos, channel, channel_seq, kind, body, refs, payload, connection_id,
    to_selector, to_connection_id, based_on_seq, created_at) VALUES (?, ?, ?, ?, ?, 'status', ?, '[]', NULL, ?, NULL, NULL, NULL, ?)`)
  const counters = raw.prepare(`INSERT INTO post_counters (user_id, last_pos, visible) VALUES (?, ?, ?)
    ON CONFLICT (user_id) DO UPDATE SET last_pos = excluded.last_pos, visible = excluded.visible`)
  raw.transaction(() => {
    for (let i = 0; i < N; i++) {
      insertDoc.run(`doc-b-${i}`, caller.userId, text(5), text(60), caller.connectionId, at)
      logDoc.run(caller.userId, `doc-b-${i}`)
      insertFact.run(`fact-b-${i}`, caller.userId, text(2), text(1), text(6), caller.connectionId, at)
      logFact.run(caller.userId, `fact-b-${i}`)
      insertPost.run(`post-b-${i}`, caller.userId, i + 1, `c${i % 20}`, Math.floor(i / 20) + 1, text(30), caller.connectionId, at)
    }
    counters.run(caller.userId, N, N)
  }).immediate()
}

/** Alternating: the three raw FTS5 queries (the slowest is the baseline), then `sophia.search`. */
const measure = async (runtime: Runtime, caller: Caller) => {
  const { dispatcher, raw } = await runtime.runPromise(Effect.gen(function*() {
    return { dispatcher: yield* Dispatcher, raw: (yield* SqliteStore).raw }
  }))
  const ftsExpr = (q: string) => q.split(" ").map((w) => `"${w}"`).join(" OR ")
  const rawKinds = [
    raw.prepare(`SELECT document_id FROM documents_fts WHERE documents_fts MATCH ? AND user_id = ?
      ORDER BY bm25(documents_fts, 0.0, 0.0, 0.0, 3.0, 1.0) LIMIT 10`),
    raw.prepare(`SELECT fact_id FROM facts_fts WHERE facts_fts MATCH ? AND user_id = ? ORDER BY bm25(facts_fts) LIMIT 10`),
    raw.prepare(`SELECT post_id FROM posts_fts WHERE posts_fts MATCH ? AND user_id = ? ORDER BY bm25(posts_fts) LIMIT 10`)
  ]
  for (const q of queries.slice(0, 20)) {
    for (const s of rawKinds) s.all(ftsExpr(q), caller.userId)
    await runtime.runPromise(dispatcher.call(caller, "sophia.search", { query: q }))
  }
  const slowest: Array<number> = []
  const tool: Array<number> = []
  let items = 0
  let dense = 0
  let signals = ""
  for (const q of queries) {
    let worst = 0
    for (const s of rawKinds) {
      const t = performance.now()
      s.all(ftsExpr(q), caller.userId)
      worst = Math.max(worst, performance.now() - t)
    }
    slowest.push(worst)
    const t = performance.now()
    const out = await runtime.runPromise(dispatcher.call(caller, "sophia.search", { query: q }))
    tool.push(performance.now() - t)
    if (!out.ok) throw new Error(JSON.stringify(out.body))
    const body = out.body as { items: Array<{ signals?: Array<string> }>; fusion: { signals: Array<string> }; degraded?: string }
    if (body.degraded !== undefined) throw new Error(`degraded: ${body.degraded}`)
    items += body.items.length
    dense += body.items.filter((i) => i.signals?.includes("dense")).length
    signals = body.fusion.signals.join("+")
  }
  return { slowest, tool, items: items / queries.length, dense: dense / queries.length, signals }
}

const row = (label: string, m: Awaited<ReturnType<typeof measure>>) =>
  `| ${label} (${m.signals}) | ${ms(pct(m.tool, 50))} | ${ms(pct(m.tool, 99))} | ${ms(pct(m.slowest, 50))} | ${ms(pct(m.slowest, 99))} | ` +
  `**${(pct(m.tool, 50) / pct(m.slowest, 50)).toFixed(2)}× / ${(pct(m.tool, 99) / pct(m.slowest, 99)).toFixed(2)}×** | ${
    m.items.toFixed(1)
  } (${m.dense.toFixed(1)} by dense) |`

/** The provider in a process of its own; its URL. */
const startProvider = async () => {
  const child = spawn(process.execPath, ["--import", "tsx", path.join(path.dirname(new URL(import.meta.url).pathname), "support/embedding-provider.ts"), String(DIM), String(DELAY)], {
    stdio: ["ignore", "pipe", "inherit"]
  })
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.once("data", (d: Buffer) => resolve(d.toString().trim()))
    child.once("exit", (code) => reject(new Error(`provider exited ${code}`)))
  })
  return { url, stop: () => child.kill() }
}

/** The provider's own rate: a bare client, batches of `BATCH` texts one after another. */
const providerRate = async (url: string, texts: ReadonlyArray<string>) => {
  const t0 = performance.now()
  for (let i = 0; i < texts.length; i += BATCH) {
    const r = await fetch(`${url}/v1/embeddings`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "bench", input: texts.slice(i, i + BATCH) })
    })
    const body = await r.json() as { data: Array<unknown> }
    if (body.data.length === 0) throw new Error("no vectors")
  }
  return texts.length / ((performance.now() - t0) / 1000)
}

const main = async () => {
  const file = tempDb("search.db")
  try {
    // ---- 1: BM25 only
    const bm25 = ManagedRuntime.make(SophiaWithRaw(file).pipe(Layer.orDie))
    const caller = await bm25.runPromise(mint("searcher"))
    const t0 = performance.now()
    load(await bm25.runPromise(Effect.map(SqliteStore, (s) => s.raw)), caller)
    const loadS = (performance.now() - t0) / 1000
    const lexical = await measure(bm25, caller)
    await bm25.dispose()
    if (!DENSE) {
      console.log(`## sophia.search — ${N} documents + ${N} facts + ${N} posts (loaded raw in ${loadS.toFixed(1)} s), ${SEARCHES} queries\n`)
      console.log(`| search, limit 10, dispatcher path | p50 ms | p99 ms | slowest raw FTS5 kind p50 | p99 | ratio p50 / p99 | items (by dense) |`)
      console.log(`|---|---|---|---|---|---|---|`)
      console.log(row("BM25 only", lexical))
      return
    }

    // ---- 2: with dense retrieval
    const provider = await startProvider()
    try {
      const sample = Array.from({ length: 40 * BATCH }, () => text(60))
      const providerTps = await providerRate(provider.url, sample)
      const config = ConfigProvider.fromMap(new Map([
        ["SOPHIA_EMBEDDINGS_URL", provider.url],
        ["SOPHIA_EMBEDDINGS_MODEL", "bench"],
        ["SOPHIA_EMBEDDINGS_BATCH", String(BATCH)],
        ["SOPHIA_EMBEDDINGS_TIMEOUT_MS", "30000"]
      ]))
      const t1 = performance.now()
      const dense = ManagedRuntime.make(SophiaWithRaw(file).pipe(Layer.provide(Layer.setConfigProvider(config)), Layer.orDie))
      // (imported here: the BM25 part also runs on a tree that has no Embeddings service)
      const { Embeddings } = await import("../src/services/Embeddings.js")
      const embeddings = await dense.runPromise(Embeddings)
      let status = embeddings.status()!
      while (status.embedded < 3 * N || status.backlog > 0) {
        await new Promise((r) => setTimeout(r, 200))
        status = embeddings.status()!
      }
      const drainS = (performance.now() - t1) / 1000
      const drainTps = status.embedded / drainS
      // provider time excluded: every query's vector asked (and kept) before the timed searches
      for (const q of queries) await dense.runPromise(Effect.orDie(embeddings.queryVector(q)))
      const tLoad = performance.now()
      await dense.runPromise(Effect.forEach(["documents", "facts", "posts"] as const, (kind) =>
        Effect.flatMap(Effect.orDie(embeddings.queryVector(queries[0])), (v) => embeddings.nearest(caller.userId, kind, v, 10, undefined))))
      const memoryLoadS = (performance.now() - tLoad) / 1000
      const withDense = await measure(dense, caller)

      // the scan per kind: exact vs int8 quantized, time and recall@10 against exact
      const scans = { exact: [] as Array<number>, quantized: [] as Array<number> }
      let overlap = 0
      let asked = 0
      for (const q of queries.slice(0, 100)) {
        const v = await dense.runPromise(Effect.orDie(embeddings.queryVector(q)))
        for (const kind of ["documents", "facts", "posts"] as const) {
          let t = performance.now()
          const exact = await dense.runPromise(embeddings.nearest(caller.userId, kind, v, 10, undefined, "exact"))
          scans.exact.push(performance.now() - t)
          t = performance.now()
          const quantized = await dense.runPromise(embeddings.nearest(caller.userId, kind, v, 10, undefined, "quantized"))
          scans.quantized.push(performance.now() - t)
          const truth = new Set(exact.map((n) => n.id))
          overlap += quantized.filter((n) => truth.has(n.id)).length
          asked += exact.length
        }
      }
      await dense.dispose()

      console.log(`## sophia.search — ${N} documents + ${N} facts + ${N} posts (loaded raw in ${loadS.toFixed(1)} s), ${SEARCHES} queries\n`)
      console.log(`| search, limit 10, dispatcher path | p50 ms | p99 ms | slowest raw FTS5 kind p50 | p99 | ratio p50 / p99 | items (by dense) |`)
      console.log(`|---|---|---|---|---|---|---|`)
      console.log(row("BM25 only", lexical))
      console.log(row(`with dense, ${DIM} dims, provider time excluded`, withDense))
      console.log(`\n| embedding | value |\n|---|---|`)
      console.log(`| provider's own rate (bare client, batches of ${BATCH}, ${DELAY} ms delay) | ${providerTps.toFixed(0)} texts/s |`)
      console.log(`| the feed's drain of ${status.embedded} rows (read, embed, store) | ${drainTps.toFixed(0)} rows/s in ${drainS.toFixed(1)} s: **${(drainTps / providerTps).toFixed(2)}×** the provider's rate |`)
      console.log(`| first search after start: ${3 * N} vectors read into memory (+ quantized) | ${memoryLoadS.toFixed(1)} s |`)
      console.log(`| nearest per kind at ${N} vectors, exact scan | p50 ${ms(pct(scans.exact, 50))} ms, p99 ${ms(pct(scans.exact, 99))} ms (${(pct(scans.exact, 50) / N * 1000).toFixed(3)} ms per 1k vectors) |`)
      console.log(`| nearest per kind at ${N} vectors, int8 quantized scan + exact re-rank of the best 50 | p50 ${ms(pct(scans.quantized, 50))} ms, p99 ${ms(pct(scans.quantized, 99))} ms; recall@10 vs exact ${(overlap / Math.max(1, asked)).toFixed(3)} |`)
    } finally {
      provider.stop()
    }
  } finally {
    fs.rmSync(path.dirname(file), { recursive: true, force: true })
  }
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
