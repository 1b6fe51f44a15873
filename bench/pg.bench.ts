/**
 * Postgres benchmark (`npm run bench pg`). Needs Postgres at SOPHIA_BENCH_POSTGRES_URL (default
 * postgres://postgres@127.0.0.1:5432/test); each part runs on a fresh database, dropped afterwards.
 *  - posts/s and appends/s through the services (Coordination.post, Ledger.append) against raw `pg`
 *    clients running the same statements in the same transactions, same pool size, same concurrency
 *    (target ≥ 0.5 of raw);
 *  - aggregate REST throughput (posts) with 1, 2 and 3 daemons on one database, a fixed client count;
 *  - cross-daemon wake latency: a post committed on daemon A until daemon B's events service hears it
 *    (LISTEN/NOTIFY), p50/p99 (target p99 ≤ 50 ms).
 */
import { Effect, Layer, ManagedRuntime, Queue } from "effect"
import { spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import * as path from "node:path"
import Pg from "pg"
import type { Caller } from "../src/domain/Auth.js"
import { SophiaLive } from "../src/layers/App.js"
import { CrossDaemonEvents } from "../src/layers/CrossDaemon.js"
import { StoreChoice } from "../src/layers/Sql.js"
import { Auth } from "../src/services/Auth.js"
import { Coordination } from "../src/services/Coordination.js"
import { Events } from "../src/services/Events.js"
import { Ledger } from "../src/services/Ledger.js"
import { freshDatabase } from "./support/PgDatabase.js"

const N = Number(process.env.PG_BENCH_OPS ?? 3000)
const CONCURRENCY = 8
const POOL = 10
const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..")

const quantile = (xs: ReadonlyArray<number>, q: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]
}

/** Run `op(i)` for i < n with `concurrency` in flight; ops/s. */
const throughput = async (n: number, concurrency: number, op: (i: number) => Promise<unknown>) => {
  let next = 0
  const t0 = performance.now()
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < n) await op(next++)
  }))
  return n / ((performance.now() - t0) / 1000)
}

/** The same statements as Coordination.post (a status post, its counters) and Ledger.append (one asserted event). */
const rawPost = async (pool: Pg.Pool, userId: string, author: string, channel: string, i: number) => {
  const c = await pool.connect()
  try {
    const now = new Date().toISOString()
    await c.query("BEGIN")
    const cc = await c.query(
      `INSERT INTO channel_counters (user_id, channel, last_seq, visible, last_post_at) VALUES ($1, $2, 1, 1, $3)
       ON CONFLICT (user_id, channel) DO UPDATE SET last_seq = channel_counters.last_seq + 1,
         visible = channel_counters.visible + excluded.visible, last_post_at = excluded.last_post_at
       RETURNING last_seq, visible, (SELECT ch.archived_at FROM channels ch WHERE ch.user_id = channel_counters.user_id AND ch.id = channel_counters.channel) AS archived_at`,
      [userId, channel, now]
    )
    const pc = await c.query(
      `INSERT INTO post_counters (user_id, last_pos, visible) VALUES ($1, 1, 1)
       ON CONFLICT (user_id) DO UPDATE SET last_pos = post_counters.last_pos + 1, visible = post_counters.visible + excluded.visible
       RETURNING last_pos`,
      [userId]
    )
    await c.query(
      `INSERT INTO posts (id, user_id, pos, channel, channel_seq, kind, body, refs, payload, connection_id, to_selector,
         to_connection_id, based_on_seq, created_at) VALUES ($1, $2, $3, $4, $5, 'status', $6, '[]', NULL, $7, NULL, NULL, NULL, $8)`,
      [`raw-${randomUUID()}`, userId, pc.rows[0].last_pos, channel, cc.rows[0].last_seq, `raw post ${i}`, author, now]
    )
    await c.query(
      `INSERT INTO inbox_channel_state (user_id, connection_id, channel, consumed, lwm_pos) VALUES ($1, $2, $3, 1, 0)
       ON CONFLICT (user_id, connection_id, channel) DO UPDATE SET consumed = inbox_channel_state.consumed + excluded.consumed`,
      [userId, author, channel]
    )
    await c.query(
      `INSERT INTO inbox_state (user_id, connection_id, consumed, lwm) VALUES ($1, $2, 1, 0)
       ON CONFLICT (user_id, connection_id) DO UPDATE SET consumed = inbox_state.consumed + excluded.consumed`,
      [userId, author]
    )
    // the wait hook's probe (open waits on the channel)
    await c.query(`SELECT id FROM waits WHERE user_id = $1 AND pred_channel = $2 AND status = 'open'`, [userId, channel])
    await c.query("COMMIT")
  } finally {
    c.release()
  }
}
const rawAppend = async (pool: Pg.Pool, userId: string, actor: string, workId: string, i: number) => {
  const c = await pool.connect()
  try {
    const now = new Date().toISOString()
    await c.query("BEGIN")
    const w = await c.query(
      `SELECT w.head, w.seq, f.field FROM ledger_work w LEFT JOIN ledger_fields f ON f.user_id = w.user_id AND f.work_id = w.work_id AND f.field = 'n'
       WHERE w.user_id = $1 AND w.work_id = $2`,
      [userId, workId]
    )
    const head = w.rows[0].head as string
    const seq = Number(w.rows[0].seq) + 1
    const hash = randomUUID().replaceAll("-", "") + randomUUID().replaceAll("-", "")
    const moved = await c.query(
      `UPDATE ledger_work SET head = $1, seq = $2, title = 't', status = 'open', resolution = NULL, claimant = NULL, workers = $3,
         updated_at = $4 WHERE user_id = $5 AND work_id = $6 AND head = $7 RETURNING seq`,
      [hash, seq, JSON.stringify([actor]), now, userId, workId, head]
    )
    if (moved.rowCount !== 1) throw new Error("raw append lost its head")
    await c.query(
      `INSERT INTO ledger_events (user_id, work_id, seq, parent, type, data, evidence, actor, at, hash)
       VALUES ($1, $2, $3, $4, 'asserted', $5, 'asserted', $6, $7, $8)`,
      [userId, workId, seq, head, JSON.stringify({ field: "n", value: i }), actor, now, hash]
    )
    await c.query(
      `INSERT INTO ledger_fields (user_id, work_id, field, value, evidence, set_by, at, seq) VALUES ($1, $2, 'n', $3, 'asserted', $4, $5, $6)
       ON CONFLICT (user_id, work_id, field) DO UPDATE SET value = excluded.value, evidence = excluded.evidence,
         set_by = excluded.set_by, at = excluded.at, seq = excluded.seq`,
      [userId, workId, String(i), actor, now, seq]
    )
    await c.query("COMMIT")
  } finally {
    c.release()
  }
}

const serviceVsRaw = async () => {
  const db = await freshDatabase()
  const runtime = ManagedRuntime.make(SophiaLive(StoreChoice.postgres(db.url)))
  const pool = new Pg.Pool({ connectionString: db.url, max: POOL })
  try {
    const callers = await runtime.runPromise(Effect.gen(function*() {
      const auth = yield* Auth
      const out: Array<Caller> = []
      for (let i = 0; i < CONCURRENCY; i++) {
        const m = yield* auth.createConnection({ name: `bench-${i}`, profile: "full" })
        out.push(yield* auth.authenticate(m.bearer))
      }
      return out
    }))
    const post = (i: number) =>
      runtime.runPromise(Effect.flatMap(Coordination, (c) =>
        c.post(callers[i % CONCURRENCY], { channel: `ch-${i % 4}`, kind: "status", body: `post ${i}` })))
    // each lane extends the head its previous append returned (as an agent does; no extra read)
    const heads = new Map<number, string>()
    const append = (lane: number, i: number) =>
      runtime.runPromise(Effect.flatMap(Ledger, (l) =>
        l.append(callers[lane], {
          work_id: `svc-${lane}`,
          expected_head: heads.get(lane)!,
          events: [{ type: "asserted", field: "n", value: i }]
        } as any))).then((r) => heads.set(lane, r.head))
    // warm up both paths
    await throughput(200, CONCURRENCY, post)
    const u = callers[0].userId
    await throughput(200, CONCURRENCY, (i) => rawPost(pool, u, callers[i % CONCURRENCY].connectionId, `raw-${i % 4}`, i))
    const postsService = await throughput(N, CONCURRENCY, post)
    const postsRaw = await throughput(N, CONCURRENCY, (i) => rawPost(pool, u, callers[i % CONCURRENCY].connectionId, `raw-${i % 4}`, i))
    // appends: one work item per in-flight client (no head contention: throughput, not races)
    for (let k = 0; k < CONCURRENCY; k++) {
      const [svc] = await runtime.runPromise(Effect.flatMap(Ledger, (l) =>
        Effect.all([
          l.append(callers[k], { work_id: `svc-${k}`, expected_head: null, events: [{ type: "opened", title: "t" }] } as any),
          l.append(callers[k], { work_id: `raw-${k}`, expected_head: null, events: [{ type: "opened", title: "t" }] } as any)
        ])))
      heads.set(k, svc.head)
    }
    // each in-flight lane owns one item: lane = i mod CONCURRENCY is not stable under the pull loop, so
    // appends go through per-lane loops
    const laneThroughput = async (op: (lane: number, i: number) => Promise<unknown>) => {
      const per = Math.floor(N / CONCURRENCY)
      const t0 = performance.now()
      await Promise.all(Array.from({ length: CONCURRENCY }, async (_, lane) => {
        for (let i = 0; i < per; i++) await op(lane, i)
      }))
      return (per * CONCURRENCY) / ((performance.now() - t0) / 1000)
    }
    const appendsService = await laneThroughput(append)
    const appendsRaw = await laneThroughput((lane, i) => rawAppend(pool, u, callers[lane].connectionId, `raw-${lane}`, i))
    return { postsService, postsRaw, appendsService, appendsRaw }
  } finally {
    await pool.end()
    await runtime.dispose()
    await db.drop()
  }
}

/** `bench/support/pg-daemon.ts` processes on one database; REST posts from `clients` loops for `ms`. */
const aggregate = async (daemons: number, clients: number, ms: number) => {
  const db = await freshDatabase()
  const children: Array<ReturnType<typeof spawn>> = []
  try {
    const started = await Promise.all(Array.from({ length: daemons }, (_, d) =>
      new Promise<{ url: string; bearers: Array<string> }>((resolve, reject) => {
        const child = spawn(process.execPath, ["--import", "tsx", path.join(ROOT, "bench/support/pg-daemon.ts")], {
          env: { ...process.env, SOPHIA_DATABASE_URL: db.url, AGENTS: String(Math.ceil(clients / daemons)), DAEMON: String(d) },
          stdio: ["ignore", "pipe", "inherit"]
        })
        children.push(child)
        let out = ""
        child.stdout!.on("data", (x) => {
          out += x
          const line = out.split("\n").find((l) => l.startsWith("{"))
          if (line && out.includes("\n")) resolve(JSON.parse(line))
        })
        child.once("exit", (code) => reject(new Error(`pg-daemon exited ${code}`)))
      })))
    let count = 0
    const deadline = performance.now() + ms
    await Promise.all(Array.from({ length: clients }, async (_, i) => {
      const d = started[i % daemons]
      const bearer = d.bearers[Math.floor(i / daemons) % d.bearers.length]
      let n = 0
      while (performance.now() < deadline) {
        const r = await fetch(`${d.url}/api/tools/sophia.coordination_post`, {
          method: "POST",
          headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json" },
          body: JSON.stringify({ channel: `load-${i % 4}`, kind: "status", body: `c${i} n${n++}` })
        })
        await r.json()
        if (r.status === 200) count++
      }
    }))
    return count / (ms / 1000)
  } finally {
    for (const c of children) c.kill("SIGTERM")
    await new Promise((r) => setTimeout(r, 500))
    await db.drop()
  }
}

/** A post committed on daemon A until daemon B's events service hears it. */
const wakeLatency = async (samples: number) => {
  const db = await freshDatabase()
  const daemon = () => ManagedRuntime.make(CrossDaemonEvents.pipe(Layer.provideMerge(SophiaLive(StoreChoice.postgres(db.url)))))
  const a = daemon()
  const b = daemon()
  try {
    const caller = await a.runPromise(Effect.gen(function*() {
      const auth = yield* Auth
      return yield* auth.authenticate((yield* auth.createConnection({ name: "waker", profile: "full" })).bearer)
    }))
    await b.runPromise(Effect.void)
    return await b.runPromise(Effect.scoped(Effect.gen(function*() {
      const queue = yield* (yield* Events).listen
      const latencies: Array<number> = []
      for (let i = 0; i < samples; i++) {
        const receipt = yield* Effect.promise(() =>
          a.runPromise(Effect.flatMap(Coordination, (c) => c.post(caller, { channel: "wake", kind: "status", body: `w${i}` })))
        )
        // the clock starts at commit (the post's receipt), ends when B's listener has the event
        const t0 = performance.now()
        while (true) {
          const e = yield* Queue.take(queue)
          if (e._tag === "PostLanded" && e.post_id === receipt.post_id) break
        }
        latencies.push(performance.now() - t0)
      }
      return { p50: quantile(latencies, 0.5), p99: quantile(latencies, 0.99) }
    })))
  } finally {
    await b.dispose()
    await a.dispose()
    await db.drop()
  }
}

const main = async () => {
  console.log(`## Postgres (${N} ops per measure, ${CONCURRENCY} in flight, pool ${POOL})\n`)
  const s = await serviceVsRaw()
  console.log("| measure | service | raw pg, same statements | ratio |")
  console.log("|---|---|---|---|")
  console.log(`| posts/s | ${s.postsService.toFixed(0)} | ${s.postsRaw.toFixed(0)} | ${(s.postsService / s.postsRaw).toFixed(2)} |`)
  console.log(`| appends/s | ${s.appendsService.toFixed(0)} | ${s.appendsRaw.toFixed(0)} | ${(s.appendsService / s.appendsRaw).toFixed(2)} |`)
  const clients = 24
  const rows: Array<string> = []
  let one = 0
  for (const d of [1, 2, 3]) {
    const rate = await aggregate(d, clients, 8000)
    if (d === 1) one = rate
    rows.push(`| ${d} | ${rate.toFixed(0)} | ${(rate / one).toFixed(2)} |`)
  }
  console.log(`\n| daemons (${clients} REST clients, posts) | posts/s | vs 1 daemon |\n|---|---|---|\n${rows.join("\n")}`)
  const w = await wakeLatency(300)
  console.log(`\n| cross-daemon wake (post committed on A → B's events) | p50 | p99 |\n|---|---|---|\n| LISTEN/NOTIFY | ${w.p50.toFixed(2)} ms | ${w.p99.toFixed(2)} ms |`)
}

main().then(() => process.exit(0), (e) => {
  console.error(e)
  process.exit(1)
})
