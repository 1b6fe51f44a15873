/**
 * Coordination benchmark (`npm run bench coordination`). One run, one SQLite file, 50 connections:
 *  - posts/s through Coordination.post vs a raw better-sqlite3 insert of the same row, each in its own
 *    transaction (target ≥ 0.5 of raw); beside them the floor: the statements a post runs (counters, the
 *    row, its author's read state, the wait lookup) straight through better-sqlite3 in one transaction
 *    each, so the table separates what SQLite itself costs from what the service adds;
 *  - inbox p50/p99 at 10k and at 100k posts (target: flat — the reads are indexed and bounded);
 *  - the cost `_inbox_unread` adds to a trivial tool call (sophia.orient through the Dispatcher with the
 *    empty envelope vs the live one; target ≤ 5%).
 * Set COORD_BENCH_POSTS to change the large size (default 100000; 1000000 takes a few minutes more).
 * Most rows are bulk-loaded (see `bulkLoad`); only the measured blocks go through the service.
 */
import { Context, Effect, Layer } from "effect"
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { Caller } from "../src/domain/Auth.js"
import type { InboxInput, PostKind } from "../src/domain/Coordination.js"
import { EnvelopeLive, SophiaLive } from "../src/layers/App.js"
import { SophiaWithRaw, SqliteStore, StoreWithRaw, tempDb } from "./support/Raw.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { Envelope } from "../src/mcp/Envelope.js"
import { Auth } from "../src/services/Auth.js"
import { Coordination } from "../src/services/Coordination.js"

const LARGE = Number(process.env.COORD_BENCH_POSTS ?? 100_000)
const SMALL = Math.min(10_000, LARGE)
// (the measured posts of each size are part of it: 3 blocks of 2000 through the service)
const CONNECTIONS = 50
const CHANNELS = 20
const SAMPLES = 300

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sophia-coord-bench-"))
const dbFile = path.join(dir, "bench.db")

const quantile = (xs: ReadonlyArray<number>, q: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]
}
const fmt = (ms: number) => ms < 1 ? `${(ms * 1000).toFixed(0)} µs` : `${ms.toFixed(2)} ms`

let seed = 12345
const rand = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff
const pick = <T>(xs: ReadonlyArray<T>) => xs[Math.floor(rand() * xs.length)]
const channels = Array.from({ length: CHANNELS }, (_, i) => (i % 2 ? `arc:task-${i}` : `branch:b-${i}`))
const kindOf = (): PostKind => (rand() < 0.03 ? "heartbeat" : pick(["status", "question", "answer", "claim", "decision"] as const))

const timed = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const t0 = performance.now()
    yield* effect
    return performance.now() - t0
  })

const program = Effect.gen(function*() {
  const auth = yield* Auth
  const coordination = yield* Coordination
  const { raw } = yield* SqliteStore
  const rows: Array<Array<string>> = []

  const callers: Array<Caller> = []
  for (let i = 0; i < CONNECTIONS; i++) {
    const minted = yield* auth.createConnection({ name: `agent-${i}`, profile: "full" })
    callers.push(yield* Effect.orDie(auth.authenticate(minted.bearer)))
  }
  const userId = callers[0].userId

  // the raw baseline: the same row into a clone of the posts table, one transaction per insert
  raw.exec(`CREATE TABLE bench_raw_posts (
    id TEXT PRIMARY KEY, user_id TEXT NOT NULL REFERENCES users(id), pos BIGINT NOT NULL, channel TEXT NOT NULL,
    channel_seq BIGINT NOT NULL, kind TEXT NOT NULL, body TEXT NOT NULL, refs TEXT NOT NULL DEFAULT '[]', payload TEXT,
    connection_id TEXT NOT NULL REFERENCES connections(id), to_selector TEXT, to_connection_id TEXT REFERENCES connections(id),
    based_on_seq BIGINT, created_at TEXT NOT NULL, UNIQUE (user_id, channel, channel_seq), UNIQUE (user_id, pos))`)
  const rawInsert = raw.prepare(`INSERT INTO bench_raw_posts (id, user_id, pos, channel, channel_seq, kind, body, refs,
    payload, connection_id, to_selector, to_connection_id, based_on_seq, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
  const begin = raw.prepare("BEGIN IMMEDIATE")
  const commit = raw.prepare("COMMIT")
  let rawPos = 0
  const rawSeq = new Map<string, number>()
  const rawPosts = (n: number) => {
    const t0 = performance.now()
    for (let i = 0; i < n; i++) {
      const channel = pick(channels)
      const seq = (rawSeq.get(channel) ?? 0) + 1
      rawSeq.set(channel, seq)
      begin.run()
      rawInsert.run(`post-${randomUUID()}`, userId, ++rawPos, channel, seq, kindOf(), `update ${i}: all good`, "[]", null,
        pick(callers).connectionId, null, null, null, new Date().toISOString())
      commit.run()
    }
    return performance.now() - t0
  }
  // the floor: the statements Coordination.post runs on SQLite (same text), straight through better-sqlite3
  const floorBumpChannel = raw.prepare(`INSERT INTO channel_counters (user_id, channel, last_seq, visible, last_post_at)
    VALUES (?, ?, 1, ?, ?) ON CONFLICT (user_id, channel) DO UPDATE SET last_seq = channel_counters.last_seq + 1,
      visible = channel_counters.visible + excluded.visible, last_post_at = excluded.last_post_at
    RETURNING last_seq, visible, (SELECT ch.archived_at FROM channels ch
      WHERE ch.user_id = channel_counters.user_id AND ch.id = channel_counters.channel) AS archived_at`)
  const floorBumpUser = raw.prepare(`INSERT INTO post_counters (user_id, last_pos, visible) VALUES (?, 1, ?)
    ON CONFLICT (user_id) DO UPDATE SET last_pos = post_counters.last_pos + 1, visible = post_counters.visible + excluded.visible
    RETURNING last_pos`)
  const floorInsert = raw.prepare(`INSERT INTO posts (id, user_id, pos, channel, channel_seq, kind, body, refs, payload,
    connection_id, to_selector, to_connection_id, based_on_seq, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
  const floorConsumeChannel = raw.prepare(`INSERT INTO inbox_channel_state (user_id, connection_id, channel, consumed, lwm_pos)
    VALUES (?, ?, ?, ?, 0) ON CONFLICT (user_id, connection_id, channel) DO UPDATE
      SET consumed = inbox_channel_state.consumed + excluded.consumed`)
  const floorConsumeTotal = raw.prepare(`INSERT INTO inbox_state (user_id, connection_id, consumed, lwm) VALUES (?, ?, ?, 0)
    ON CONFLICT (user_id, connection_id) DO UPDATE SET consumed = inbox_state.consumed + excluded.consumed`)
  const floorWaits = raw.prepare(`SELECT id, pred_type, pred_kind, pred_seq, from_connection_id FROM waits
    WHERE user_id = ? AND pred_channel = ? AND status = 'open'`)
  const floorPosts = (n: number) => {
    const t0 = performance.now()
    for (let i = 0; i < n; i++) {
      const channel = pick(channels)
      const kind = kindOf()
      const author = pick(callers).connectionId
      const visible = kind === "heartbeat" ? 0 : 1
      const now = new Date().toISOString()
      begin.run()
      const c = floorBumpChannel.get(userId, channel, visible, now) as { last_seq: number; archived_at: string | null }
      const archived = c.archived_at !== null
      const u = floorBumpUser.get(userId, visible === 1 && !archived ? 1 : 0) as { last_pos: number }
      floorInsert.run(`post-${randomUUID()}`, userId, u.last_pos, channel, c.last_seq, kind, `floor ${i}: all good`, "[]", null,
        author, null, null, null, now)
      if (visible === 1) {
        floorConsumeChannel.run(userId, author, channel, 1)
        floorConsumeTotal.run(userId, author, visible === 1 && !archived ? 1 : 0)
      }
      floorWaits.all(userId, channel)
      commit.run()
    }
    return performance.now() - t0
  }
  // the block ends with every post of it in the search index: the batches the app's indexer writes in the
  // background during the block are counted, and what it had not reached yet is indexed inside the timing
  const servicePosts = (n: number) =>
    timed(Effect.gen(function*() {
      for (let i = 0; i < n; i++) {
        yield* coordination.post(pick(callers), { channel: pick(channels), kind: kindOf(), body: `update ${i}: all good` })
      }
      yield* coordination.indexPosts()
    }))
  let total = 0
  /**
   * Bulk-load posts straight into the tables, writing exactly what Coordination.post would (positions,
   * gapless channel_seq, the counters, the authors' own consumption), so growing the database does not
   * take minutes. Measurements are never taken on this path.
   */
  const bulkLoad = (n: number) => {
    if (n <= 0) return
    const insert = raw.prepare(`INSERT INTO posts (id, user_id, pos, channel, channel_seq, kind, body, refs, payload,
      connection_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, '[]', NULL, ?, ?)`)
    raw.transaction(() => {
      const user = raw.prepare("SELECT last_pos, visible FROM post_counters WHERE user_id = ?").get(userId) as any
      let lastPos = Number(user?.last_pos ?? 0)
      let visible = 0
      const seqs = new Map<string, { seq: number; visible: number }>()
      for (const c of raw.prepare("SELECT channel, last_seq FROM channel_counters WHERE user_id = ?").all(userId) as any[]) {
        seqs.set(c.channel, { seq: Number(c.last_seq), visible: 0 })
      }
      const own = new Map<string, number>()
      const now = new Date().toISOString()
      for (let i = 0; i < n; i++) {
        const channel = pick(channels)
        const kind = kindOf()
        const author = pick(callers).connectionId
        const ch = seqs.get(channel) ?? { seq: 0, visible: 0 }
        ch.seq++
        lastPos++
        insert.run(`post-${randomUUID()}`, userId, lastPos, channel, ch.seq, kind, `bulk ${i}: all good`, author, now)
        if (kind !== "heartbeat") {
          ch.visible++
          visible++
          own.set(`${author}\u0000${channel}`, (own.get(`${author}\u0000${channel}`) ?? 0) + 1)
        }
        seqs.set(channel, ch)
      }
      raw.prepare(`INSERT INTO post_counters (user_id, last_pos, visible) VALUES (?, ?, ?)
        ON CONFLICT (user_id) DO UPDATE SET last_pos = excluded.last_pos, visible = post_counters.visible + excluded.visible`)
        .run(userId, lastPos, visible)
      const cc = raw.prepare(`INSERT INTO channel_counters (user_id, channel, last_seq, visible, last_post_at)
        VALUES (?, ?, ?, ?, ?) ON CONFLICT (user_id, channel) DO UPDATE SET last_seq = excluded.last_seq,
        visible = channel_counters.visible + excluded.visible, last_post_at = excluded.last_post_at`)
      for (const [channel, c] of seqs) cc.run(userId, channel, c.seq, c.visible, now)
      const ics = raw.prepare(`INSERT INTO inbox_channel_state (user_id, connection_id, channel, consumed, lwm_pos)
        VALUES (?, ?, ?, ?, 0) ON CONFLICT (user_id, connection_id, channel) DO UPDATE SET consumed = inbox_channel_state.consumed + excluded.consumed`)
      const st = raw.prepare(`INSERT INTO inbox_state (user_id, connection_id, consumed, lwm) VALUES (?, ?, ?, 0)
        ON CONFLICT (user_id, connection_id) DO UPDATE SET consumed = inbox_state.consumed + excluded.consumed`)
      for (const [key, k] of own) {
        const [conn, channel] = key.split("\u0000")
        ics.run(userId, conn, channel, k)
        st.run(userId, conn, k)
      }
    }).immediate()
    total += n
  }
  // small alternating blocks, so that load bursts on a shared machine hit both sides alike
  const BLOCK = 250
  const BLOCKS = 16
  /**
   * Grow the database to `size` posts: bulk-load, then measured service blocks alternating with raw ones
   * (and with floor blocks, whose posts are real posts of the graph).
   */
  const growTo = (size: number) =>
    Effect.gen(function*() {
      bulkLoad(size - total - 2 * BLOCK * BLOCKS)
      // rows written around the service (bulk, floor) are indexed for search untimed, so a service block's
      // timing holds the indexing of its own posts only
      yield* coordination.indexPosts()
      let serviceMs = 0
      let rawMs = 0
      let floorMs = 0
      for (let b = 0; b < BLOCKS; b++) {
        serviceMs += yield* servicePosts(BLOCK)
        total += BLOCK
        rawMs += rawPosts(BLOCK)
        floorMs += floorPosts(BLOCK)
        yield* coordination.indexPosts()
        total += BLOCK
      }
      return {
        service: (BLOCK * BLOCKS / serviceMs) * 1000,
        raw: (BLOCK * BLOCKS / rawMs) * 1000,
        floor: (BLOCK * BLOCKS / floorMs) * 1000
      }
    })

  // readers: one that never reads (a backlog), one caught up that reads what arrived since
  const backlog = callers[1]
  const caughtUp = callers[2]
  const drain = (c: Caller) =>
    Effect.gen(function*() {
      for (;;) {
        const r = yield* coordination.inbox(c, { limit: 200 })
        if (r.posts.length === 0) return
      }
    })

  const inboxLatencies = Effect.gen(function*() {
    yield* drain(caughtUp)
    const sample = <E>(input: () => InboxInput, who: () => Caller, before?: Effect.Effect<void, E>) =>
      Effect.gen(function*() {
        const ts: Array<number> = []
        for (let i = 0; i < 30; i++) yield* coordination.inbox(who(), { ...input(), peek: true }) // warm-up
        for (let i = 0; i < SAMPLES; i++) {
          if (before) yield* before
          ts.push(yield* timed(coordination.inbox(who(), input())))
        }
        return ts
      })
    const arrivals = Effect.gen(function*() {
      for (let i = 0; i < 5; i++) {
        yield* coordination.post(pick(callers.slice(3)), { channel: pick(channels), kind: "status", body: "new" })
      }
    })
    const peekBacklog = yield* sample(() => ({ limit: 50, peek: true }), () => backlog)
    const readBacklog = yield* sample(() => ({ limit: 50 }), () => pick(callers.slice(3)))
    const caught = yield* sample(() => ({ limit: 50 }), () => caughtUp, arrivals)
    const channelPeek = yield* sample(() => ({ limit: 50, peek: true, channel: pick(channels) }), () => backlog)
    const history = yield* sample(
      () => ({ limit: 50, peek: true, unread_only: false, channel: pick(channels) }),
      () => caughtUp
    )
    total += SAMPLES * 5
    return { peekBacklog, readBacklog, caught, channelPeek, history }
  })

  // warm up (JIT, statement caches) on both sides before anything is measured
  yield* servicePosts(300)
  rawPosts(300)
  floorPosts(300)
  total += 600
  const small = yield* growTo(SMALL)
  const atSmall = yield* inboxLatencies
  const large = yield* growTo(LARGE)
  const atLarge = yield* inboxLatencies

  // `_inbox_unread` on a trivial call: the same Dispatcher over the empty vs the live envelope
  const withEnvelope = <R>(envelope: Layer.Layer<Envelope, never, R>) =>
    Effect.map(Layer.build(Dispatcher.Default.pipe(Layer.provide(envelope))), (ctx) => Context.get(ctx, Dispatcher))
  // only `_inbox_unread` (what this area adds), and the app's whole live envelope (waits' signals too)
  const UnreadEnvelope = Layer.effect(
    Envelope,
    Effect.map(Coordination, (c) => ({
      fields: (caller: Caller) => Effect.map(c.unreadCount(caller), (n) => ({ _inbox_unread: n }))
    }))
  )
  const plain = yield* withEnvelope(Envelope.Empty)
  const live = yield* withEnvelope(UnreadEnvelope)
  const full = yield* withEnvelope(EnvelopeLive)
  // one call of each, in turn, timed one by one: medians are robust to the machine's load bursts
  const CALLS = 3000
  const tPlain: Array<number> = []
  const tLive: Array<number> = []
  const tFull: Array<number> = []
  const tMoved: Array<number> = []
  // the live envelope keeps a quiet caller's count while nothing is committed (layers/App.ts). The callers
  // take turns and every turn commits (below), so each turn first reads its caller's envelope once, untimed:
  // the timed call after it is the quiet caller's (nothing committed since its last call). The last call of
  // each turn pays the whole probe again, after a commit by another connection (the raw handle).
  const touch = raw.prepare("UPDATE post_counters SET visible = visible WHERE user_id = ?")
  for (let i = 0; i < CALLS + 300; i++) {
    const caller = callers[i % CONNECTIONS]
    const a = yield* timed(plain.call(caller, "sophia.orient", {}))
    const b = yield* timed(live.call(caller, "sophia.orient", {}))
    yield* full.call(caller, "sophia.orient", {})
    const c = yield* timed(full.call(caller, "sophia.orient", {}))
    touch.run(userId)
    const d = yield* timed(full.call(caller, "sophia.orient", {}))
    if (i >= 300) {
      tPlain.push(a)
      tLive.push(b)
      tFull.push(c)
      tMoved.push(d)
    }
  }
  const perPlain = quantile(tPlain, 0.5)
  const perLive = quantile(tLive, 0.5)
  const perFull = quantile(tFull, 0.5)
  const perMoved = quantile(tMoved, 0.5)
  const unreadTs: Array<number> = []
  for (let i = 0; i < 2000; i++) unreadTs.push(yield* timed(coordination.unreadCount(callers[i % CONNECTIONS])))

  rows.push(["posts/s via Coordination.post (grow to 10k)", small.service.toFixed(0), `raw ${small.raw.toFixed(0)}/s`, `${(small.service / small.raw).toFixed(2)} of raw`])
  rows.push([`posts/s via Coordination.post (grow to ${LARGE / 1000}k)`, large.service.toFixed(0), `raw ${large.raw.toFixed(0)}/s`, `${(large.service / large.raw).toFixed(2)} of raw`])
  rows.push(["floor: a post's statements, better-sqlite3 (grow to 10k)", small.floor.toFixed(0), `raw ${small.raw.toFixed(0)}/s`, `${(small.floor / small.raw).toFixed(2)} of raw`])
  rows.push([`floor: a post's statements, better-sqlite3 (grow to ${LARGE / 1000}k)`, large.floor.toFixed(0), `raw ${large.raw.toFixed(0)}/s`, `${(large.floor / large.raw).toFixed(2)} of raw`])
  const lat = (label: string, a: ReadonlyArray<number>, b: ReadonlyArray<number>) =>
    rows.push([label, `${fmt(quantile(a, 0.5))} / ${fmt(quantile(a, 0.99))}`, `${fmt(quantile(b, 0.5))} / ${fmt(quantile(b, 0.99))}`, `${(quantile(b, 0.5) / quantile(a, 0.5)).toFixed(2)}× p50`])
  rows.push(["**inbox p50 / p99**", `at ${SMALL / 1000}k posts`, `at ${LARGE / 1000}k posts`, "growth"])
  lat("peek, limit 50, ~all unread (backlog)", atSmall.peekBacklog, atLarge.peekBacklog)
  lat("read+mark 50, backlog readers", atSmall.readBacklog, atLarge.readBacklog)
  lat("read+mark, caught-up reader (5 new)", atSmall.caught, atLarge.caught)
  lat("peek, channel filter, limit 50", atSmall.channelPeek, atLarge.channelPeek)
  lat("history (unread_only false), channel", atSmall.history, atLarge.history)
  rows.push(["**`_inbox_unread`**", "", "", ""])
  rows.push(["sophia.orient via Dispatcher, empty envelope (p50)", fmt(perPlain), "", ""])
  rows.push(["sophia.orient via Dispatcher, + `_inbox_unread` read by a statement every call (p50)", fmt(perLive), "", `+${(((perLive - perPlain) / perPlain) * 100).toFixed(1)}%`])
  rows.push(["sophia.orient via Dispatcher, the app's envelope (`_inbox_unread` + waits), nothing committed since (p50)", fmt(perFull), "", `+${(((perFull - perPlain) / perPlain) * 100).toFixed(1)}%`])
  rows.push(["  ↳ the same right after another connection's commit (the probe runs again) (p50)", fmt(perMoved), "", `+${(((perMoved - perPlain) / perPlain) * 100).toFixed(1)}%`])
  rows.push(["Coordination.unreadCount alone p50 / p99", `${fmt(quantile(unreadTs, 0.5))} / ${fmt(quantile(unreadTs, 0.99))}`, "", ""])
  return rows
})

const main = Effect.scoped(program).pipe(Effect.provide(SophiaWithRaw(dbFile)))

const t0 = performance.now()
Effect.runPromise(main).then((rows) => {
  console.log(`## Coordination — ${new Date().toISOString()} — ${os.cpus()[0]?.model ?? "cpu"} ×${os.cpus().length}, node ${process.version}`)
  console.log(`SQLite file (WAL, synchronous=NORMAL), ${CONNECTIONS} connections, ${CHANNELS} channels, ~3% heartbeats; ${((performance.now() - t0) / 1000).toFixed(0)} s\n`)
  console.log("| measure | value | baseline / at large | ratio |")
  console.log("|---|---|---|---|")
  for (const r of rows) console.log(`| ${r.join(" | ")} |`)
  fs.rmSync(dir, { recursive: true, force: true })
}).catch((e) => {
  console.error(e)
  fs.rmSync(dir, { recursive: true, force: true })
  process.exit(1)
})
