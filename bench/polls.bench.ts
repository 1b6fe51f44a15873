/**
 * Long polls bench (issue 28). `npm run bench polls`. In process, through the Dispatcher, over a SQLite file,
 * the per-connection cap raised for the bench (`SOPHIA_LONG_POLLS_PER_CONNECTION`).
 *
 *  1. Cost per post with 2,000 parked polls of one connection against none, blocks alternating in the same run:
 *     (a) polls the posts do not concern (another channel): every post is matched against the connection's one
 *         group, not against 2,000 polls; target ≤ 1.1×;
 *     (b) polls every post wakes (the unread inbox): one read per post, one poll returns it and is parked again;
 *         against one parked poll doing the same (the work of a wake-up, whatever the number parked; target
 *         ≤ 1.1×) and against none.
 *  2. Other users' calls while one post wakes 2,000 parked polls of other connections (user A: 2,000
 *     connections × 1 poll, and 250 connections × 8 polls), against the same post with none parked: user B's
 *     `coordination_post` + `coordination_inbox` latencies from the post until every poll answered (p50, p99);
 *     target p99 ≤ 2× without.
 */
import { ConfigProvider, Effect, Fiber, Layer, ManagedRuntime, Queue } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import type { Caller } from "../src/domain/Auth.js"
import { SophiaLive } from "../src/layers/App.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { Auth } from "../src/services/Auth.js"
import { Wakeups } from "../src/services/Wakeups.js"
import { tempDb } from "./support/Raw.js"

const PARKED = Number(process.env.BENCH_PARKED ?? 2_000)
const POSTS_PER_BLOCK = Number(process.env.BENCH_POSTS ?? 200)
const BLOCKS = Number(process.env.BENCH_BLOCKS ?? 6)
/** progress on stderr (the tables go to stdout) */
const progress = (what: string) => Effect.sync(() => process.stderr.write(`[polls ${new Date().toISOString().slice(11, 19)}] ${what}\n`))
const ROUNDS = 3
const now = () => performance.now()
const pct = (xs: ReadonlyArray<number>, p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]
const median = (xs: ReadonlyArray<number>) => pct(xs, 0.5)
const ms = (x: number) => `${x.toFixed(2)} ms`
const ratio = (a: number, b: number) => `${(a / b).toFixed(2)}×`

const file = tempDb("polls.db")
const config = ConfigProvider.fromMap(new Map([["SOPHIA_LONG_POLLS_PER_CONNECTION", String(PARKED * 2)]]))
const runtime = ManagedRuntime.make(SophiaLive(file).pipe(Layer.provide(Layer.setConfigProvider(config)), Layer.orDie))

const result = await runtime.runPromise(Effect.gen(function*() {
  const auth = yield* Auth
  const dispatcher = yield* Dispatcher
  const wakeups = yield* Wakeups
  const mint = (name: string, user: string) =>
    Effect.flatMap(auth.createConnection({ name, profile: "full", user }), (m) => Effect.orDie(auth.authenticate(m.bearer)))
  const call = (caller: Caller, name: string, args: unknown) =>
    Effect.flatMap(dispatcher.call(caller, name, args), (o) => (o.ok ? Effect.succeed(o.body) : Effect.dieMessage(JSON.stringify(o.body))))
  const post = (caller: Caller, channel: string, body: string) => call(caller, "sophia.coordination_post", { channel, kind: "status", body })
  const untilWaiting = (n: number) =>
    Effect.gen(function*() {
      // (yielding to the other fibers; the event loop every 100 turns)
      for (let i = 1; wakeups.stats().waiting !== n || wakeups.parkedCount() !== n; i++) {
        yield* (i % 100 === 0 ? Effect.sleep(0) : Effect.yieldNow())
      }
    })

  // ---------------------------------------------------------------- 1. one connection's 2,000 polls
  const a = yield* mint("poster", "owner")
  const b = yield* mint("poller", "owner")
  /** Park `n` polls of b with `args`; each answer goes to `answers`. */
  const park = (n: number, args: unknown, answers: Queue.Queue<unknown>) =>
    Effect.forEach(Array.from({ length: n }), () => Effect.fork(Effect.flatMap(call(b, "sophia.coordination_inbox", args), (r) => Queue.offer(answers, r))), {
      concurrency: "unbounded"
    })
  const postBlock = (label: string) =>
    Effect.gen(function*() {
      const t0 = now()
      for (let i = 0; i < POSTS_PER_BLOCK; i++) yield* post(a, "c", `${label} ${i}`)
      return (now() - t0) / POSTS_PER_BLOCK
    })
  /** Posts that each wake b's unread polls: one answers, a new one is parked in its place. */
  const wokenBlock = (n: number, label: string) =>
    Effect.gen(function*() {
      const answers = yield* Queue.unbounded<unknown>()
      const polls = [...yield* park(n, { wait_s: 60 }, answers)]
      yield* untilWaiting(n)
      const t0 = now()
      for (let i = 0; i < POSTS_PER_BLOCK; i++) {
        yield* post(a, "c", `${label} ${i}`)
        yield* Queue.take(answers)
        polls.push(...yield* park(1, { wait_s: 60 }, answers))
        yield* untilWaiting(n)
      }
      const perPost = (now() - t0) / POSTS_PER_BLOCK
      yield* Fiber.interruptAll(polls)
      return perPost
    })
  /** b reads its inbox empty (so that its unread polls park) */
  const drain = Effect.gen(function*() {
    while (((yield* call(b, "sophia.coordination_inbox", { limit: 200 })).posts as Array<unknown>).length > 0) {
      // (read again)
    }
  })
  yield* postBlock("warm")
  yield* drain
  const none: Array<number> = []
  const unconcerned: Array<number> = []
  const one: Array<number> = []
  const woken: Array<number> = []
  for (let block = 0; block < BLOCKS; block++) {
    yield* progress(`block ${block + 1} of ${BLOCKS}`)
    none.push(yield* postBlock("none"))
    yield* drain
    const answers = yield* Queue.unbounded<unknown>()
    const quiet = yield* park(PARKED, { channel: "quiet", unread_only: true, wait_s: 60 }, answers)
    yield* untilWaiting(PARKED)
    unconcerned.push(yield* postBlock("unconcerned"))
    yield* Fiber.interruptAll(quiet)
    yield* drain
    one.push(yield* wokenBlock(1, "one"))
    woken.push(yield* wokenBlock(PARKED, "woken"))
  }

  // ---------------------------------------------------------------- 2. other users' calls
  yield* progress(`minting ${PARKED} connections of user A`)
  const other = yield* mint("other", "user-b")
  const usersA = yield* Effect.forEach(Array.from({ length: PARKED }, (_, i) => i), (i) => mint(`a${i}`, "user-a"))
  const posterA = yield* mint("poster-a", "user-a")
  let seq = 0
  /** B's closed loop (a post, then its inbox) until `stop`; each call's latency. */
  const loopB = (stop: { done: boolean }) =>
    Effect.gen(function*() {
      const out: Array<readonly [start: number, ms: number]> = []
      while (!stop.done) {
        const s = now()
        yield* post(other, "b-work", `b ${seq++}`)
        const r = now()
        out.push([s, r - s])
        yield* call(other, "sophia.coordination_inbox", { channel: "b-work", limit: 5 })
        out.push([r, now() - r])
        // (an in-process loop of SQLite calls never waits on I/O: let the event loop's timers run between calls)
        yield* Effect.sleep(0)
      }
      return out
    })
  /** One post by A with `connections` × `each` polls of A's connections parked: B's latencies from the post until all answered. */
  let newsChannel = 0
  const onePost = (connections: number, each: number) =>
    Effect.gen(function*() {
      // (a channel of its own each time: A's connections never have an earlier post unread there)
      const channel = `a-news-${newsChannel++}`
      const answers = yield* Queue.unbounded<unknown>()
      const polls = yield* Effect.forEach(usersA.slice(0, connections).flatMap((c) => Array.from({ length: each }, () => c)), (c) =>
        Effect.fork(Effect.flatMap(call(c, "sophia.coordination_inbox", { channel, unread_only: true, wait_s: 60 }), (r) =>
          Queue.offer(answers, r))), { concurrency: "unbounded" })
      yield* untilWaiting(connections * each)
      const stop = { done: false }
      const b = yield* Effect.fork(loopB(stop))
      yield* Effect.sleep("300 millis")
      const t0 = now()
      yield* post(posterA, channel, "for everyone")
      // every poll answers (one per connection: the group's others have nothing new and stay parked)
      for (let i = 0; i < connections; i++) yield* Queue.take(answers)
      const window = now() - t0
      // B is measured over the calls that overlap [post, post + span]: the span is the time every poll took to
      // answer, at least 1 s (without polls, the span of the round before)
      const span = connections === 0 ? lastSpan : Math.max(1_000, window)
      lastSpan = span
      const left = t0 + span - now()
      if (left > 0) yield* Effect.sleep(left)
      stop.done = true
      const latencies = yield* Fiber.join(b)
      yield* Fiber.interruptAll(polls)
      return { latencies: latencies.filter(([start, took]) => start + took >= t0 && start <= t0 + span).map(([, took]) => took), window }
    })
  let lastSpan = 1_000
  const rounds: Array<{ readonly label: string; readonly p50: number; readonly p99: number; readonly window: number }> = []
  for (let round = 0; round < ROUNDS; round++) {
    for (const [label, connections, each] of [[`${PARKED} connections × 1 poll`, PARKED, 1], ["none", 0, 0], [`${PARKED / 8} connections × 8 polls`, PARKED / 8, 8], ["none", 0, 0]] as const) {
      yield* progress(`round ${round + 1}: ${label}`)
      const r = yield* onePost(connections, each)
      rounds.push({ label, p50: pct(r.latencies, 0.5), p99: pct(r.latencies, 0.99), window: r.window })
    }
  }
  return { none, unconcerned, one, woken, rounds }
}))
await runtime.dispose()
fs.rmSync(path.dirname(file), { recursive: true, force: true })

const { none, one, rounds, unconcerned, woken } = result
console.log(`#### Long polls (issue 28) — ${new Date().toISOString()}\n`)
console.log(`1. Per post (${BLOCKS} blocks × ${POSTS_PER_BLOCK} posts, alternating; medians of the blocks)\n`)
console.log("| measure | per post | vs none | vs one parked |")
console.log("|---|---|---|---|")
console.log(`| none parked | ${ms(median(none))} | 1.00× | |`)
console.log(`| ${PARKED} parked polls of one connection, not concerned by the posts | ${ms(median(unconcerned))} | ${ratio(median(unconcerned), median(none))} | |`)
console.log(`| 1 parked poll, woken by every post (answers, parked again) | ${ms(median(one))} | ${ratio(median(one), median(none))} | 1.00× |`)
console.log(`| ${PARKED} parked polls of one connection, woken by every post | ${ms(median(woken))} | ${ratio(median(woken), median(none))} | ${ratio(median(woken), median(one))} |`)
console.log(`\n2. User B's calls (a post, then an inbox read) after one post by user A: the calls overlapping the time from the post until every poll answered (at least 1 s)\n`)
console.log("| A's parked polls | B p50 | B p99 | post → every poll answered |")
console.log("|---|---|---|---|")
for (const r of rounds) console.log(`| ${r.label} | ${ms(r.p50)} | ${ms(r.p99)} | ${r.label === "none" ? "(same length)" : ms(r.window)} |`)
const p99Of = (label: string) => median(rounds.filter((r) => r.label === label).map((r) => r.p99))
console.log(`\nB's p99 (median of ${ROUNDS} rounds): with ${PARKED} × 1 ${ratio(p99Of(`${PARKED} connections × 1 poll`), p99Of("none"))}, with ${PARKED / 8} × 8 ${
  ratio(p99Of(`${PARKED / 8} connections × 8 polls`), p99Of("none"))
} of without (target ≤ 2×)`)
