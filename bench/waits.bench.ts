/**
 * Waits benchmark (`npm run bench waits`):
 *  - a sweep tick with 1k waits due, over 1k open waits and over 100k open waits: the sweep reads only
 *    due rows through the partial index on the deadline, so the ratio should stay ≤ 2;
 *  - declare_wait (post + cycle check) with 10k open edges in the user's graph.
 */
import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { SophiaLive } from "../src/layers/App.js"
import { SophiaWithRaw, SqliteStore, StoreWithRaw, tempDb } from "./support/Raw.js"
import { Auth } from "../src/services/Auth.js"
import { Waits } from "../src/services/Waits.js"

const fmt = (ms: number) => ms < 1 ? `${(ms * 1000).toFixed(0)} µs` : `${ms.toFixed(2)} ms`
const median = (xs: Array<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

/** One fresh database with `open` open waits of which `due` are overdue; returns the median sweep tick. */
const tick = (open: number, due: number, rounds = 5) =>
  Effect.gen(function*() {
    const samples: Array<number> = []
    for (let r = 0; r < rounds; r++) {
      const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "sophia-waits-bench-")), "w.db")
      const ms = yield* Effect.gen(function*() {
        const auth = yield* Auth
        const waits = yield* Waits
        const { raw } = yield* SqliteStore
        const a = yield* auth.createConnection({ name: "a", profile: "full" })
        const b = yield* auth.createConnection({ name: "b", profile: "full" })
        const now = Date.now()
        const insert = raw.prepare(`INSERT INTO waits (id, user_id, waiter_connection_id, on_connection_id, on_selector,
          pred_type, pred_channel, pred_seq, predicate, reason, post_id, created_at, expires_at, expires_ms, status)
          VALUES (?, ?, ?, ?, 'b', 'seq_reached', ?, 1, '{}', 'bench', 'post-x', ?, ?, ?, 'open')`)
        raw.transaction(() => {
          for (let i = 0; i < open; i++) {
            const expires = i < due ? now - 1000 : now + 3_600_000
            insert.run(randomUUID(), a.user_id, a.connection_id, b.connection_id, `c-${i % 100}`, new Date(now).toISOString(),
              new Date(expires).toISOString(), expires)
          }
        })()
        raw.exec("ANALYZE")
        const t0 = performance.now()
        const resolved = yield* waits.sweep()
        const elapsed = performance.now() - t0
        if (resolved !== due) throw new Error(`sweep resolved ${resolved}, expected ${due}`)
        return elapsed
      }).pipe(Effect.provide(SophiaWithRaw(file)), Effect.scoped)
      samples.push(ms)
    }
    return median(samples)
  })

const plan = Effect.gen(function*() {
  const { raw } = yield* SqliteStore
  return raw.prepare(`EXPLAIN QUERY PLAN UPDATE waits SET status = 'unsatisfied' WHERE status = 'open' AND expires_ms <= ?`)
    .all(Date.now()).map((r: any) => r.detail).join("; ")
}).pipe(Effect.provide(SophiaWithRaw(tempDb("plan.db"))), Effect.scoped)

const declareWithEdges = (edges: number) =>
  Effect.gen(function*() {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "sophia-waits-bench-")), "d.db")
    return yield* Effect.gen(function*() {
      const auth = yield* Auth
      const waits = yield* Waits
      const { raw } = yield* SqliteStore
      // a fleet of 200 connections with `edges` open waits among them, acyclic (i waits on j > i)
      const ids: Array<string> = []
      let userId = ""
      for (let i = 0; i < 200; i++) {
        const c = yield* auth.createConnection({ name: `n${i}`, profile: "full" })
        ids.push(c.connection_id)
        userId = c.user_id
      }
      const insert = raw.prepare(`INSERT INTO waits (id, user_id, waiter_connection_id, on_connection_id, on_selector,
        pred_type, pred_channel, pred_seq, predicate, reason, post_id, created_at, expires_at, expires_ms, status)
        VALUES (?, ?, ?, ?, 'x', 'seq_reached', 'bench', 1, '{}', 'bench', 'post-x', ?, ?, ?, 'open')`)
      const now = Date.now()
      raw.transaction(() => {
        for (let e = 0; e < edges; e++) {
          const i = e % 199
          const j = i + 1 + (Math.floor(e / 199) % (199 - i))
          insert.run(randomUUID(), userId, ids[i], ids[j], new Date(now).toISOString(), new Date(now + 3_600_000).toISOString(),
            now + 3_600_000)
        }
      })()
      const last = yield* auth.authenticate((yield* auth.createConnection({ name: "declarer", profile: "full" })).bearer)
      const samples: Array<number> = []
      for (let k = 0; k < 50; k++) {
        const t0 = performance.now()
        yield* waits.declare(last, {
          on: `n${k % 200}`,
          predicate: { type: "seq_reached", channel: `c-${k}`, seq: 5 },
          reason: "bench"
        })
        samples.push(performance.now() - t0)
      }
      return median(samples)
    }).pipe(Effect.provide(SophiaWithRaw(file)), Effect.scoped)
  })

const main = Effect.gen(function*() {
  const small = yield* tick(1_000, 1_000)
  const large = yield* tick(100_000, 1_000, 3)
  const declare = yield* declareWithEdges(10_000)
  const declareSmall = yield* declareWithEdges(10)
  const queryPlan = yield* plan
  console.log(`## Waits\n`)
  console.log(`| measure | value |`)
  console.log(`|---|---|`)
  console.log(`| sweep tick, 1k due of 1k open (median of 5) | ${fmt(small)} |`)
  console.log(`| sweep tick, 1k due of 100k open (median of 3) | ${fmt(large)} |`)
  console.log(`| **ratio 100k / 1k open** (target ≤ 2) | **${(large / small).toFixed(2)}** |`)
  console.log(`| declare_wait (post + cycle check), 10 open edges (median of 50) | ${fmt(declareSmall)} |`)
  console.log(`| declare_wait (post + cycle check), 10k open edges (median of 50) | ${fmt(declare)} |`)
  console.log(`| sweep query plan | \`${queryPlan}\` |`)
  console.log()
})

Effect.runPromise(main).catch((e) => {
  console.error(e)
  process.exit(1)
})
