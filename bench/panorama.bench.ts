/**
 * Panorama benchmark (`npm run bench panorama`): `sophia.panorama` for a fleet of 20 agents and 50 channels
 * against `sophia.orient` of the same caller, in the same run, both through the Dispatcher as an agent's
 * call runs (envelope included), calls alternating one by one so both see the same machine. The fleet: 20
 * agents, each with a claimed work item, a lease and (but the last) an open wait; 2 revoked agents whose work
 * and lease are orphaned; 50 channels, each with a decision followed by 10 other posts (the latest-decision
 * walk is not one step). Cases: panorama compact (the default) and whole (`compact: false`). On a SQLite file
 * and, when it answers, on Postgres (a fresh database, dropped afterwards; SOPHIA_BENCH_POSTGRES_URL).
 * Aim (no target given): panorama ≤ 3× orient.
 */
import { Effect, Layer, ManagedRuntime } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { Caller } from "../src/domain/Auth.js"
import { SophiaLive } from "../src/layers/App.js"
import { StoreChoice } from "../src/layers/Sql.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { Auth } from "../src/services/Auth.js"
import { BENCH_POSTGRES_URL, freshDatabase } from "./support/PgDatabase.js"

const PG_BASE = BENCH_POSTGRES_URL
const CALLS = Number(process.env.PANORAMA_BENCH_CALLS ?? 600)
const WARMUP = 60

const quantile = (xs: ReadonlyArray<number>, q: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]
}
const fmt = (ms: number) => ms < 1 ? `${(ms * 1000).toFixed(0)} µs` : `${ms.toFixed(2)} ms`

const callerOf = (name: string) =>
  Effect.flatMap(Auth, (auth) => Effect.flatMap(auth.createConnection({ name, profile: "full" }), (m) => Effect.orDie(auth.authenticate(m.bearer))))

const call = (caller: Caller, tool: string, args: unknown) =>
  Effect.flatMap(Dispatcher, (d) => d.call(caller, tool, args)).pipe(
    Effect.flatMap((o) => (o.ok ? Effect.succeed(o.body as any) : Effect.die(new Error(`${tool}: ${JSON.stringify(o.body)}`))))
  )

/** The fleet; returns the caller the reads run as. */
const seed = Effect.gen(function*() {
  const agents: Array<Caller> = []
  for (let i = 0; i < 22; i++) agents.push(yield* callerOf(`agent-${String(i).padStart(2, "0")}`))
  for (const [i, a] of agents.entries()) {
    yield* call(a, "sophia.ledger_append", {
      work_id: `issue-${1000 + i}`,
      expected_head: null,
      events: [{ type: "opened", title: "A work item with a title of ordinary length" }, { type: "claimed" }]
    })
    yield* call(a, "sophia.lease_acquire", { resources: [`path:packages/service-${i}/src/**`], reason: "editing" })
    if (i < 19) {
      yield* call(a, "sophia.declare_wait", {
        on: agents[i + 1].connectionId,
        predicate: { type: "post_exists", channel: `arc:handoff-${i}` },
        reason: "handoff"
      })
    }
  }
  const body = "We keep the public API stable and move the storage layer behind the new interface. ".repeat(4)
  for (let c = 0; c < 50; c++) {
    const a = agents[c % 20]
    yield* call(a, "sophia.coordination_post", { channel: `arc:feature-${c}`, kind: "decision", body })
    for (let k = 0; k < 10; k++) {
      yield* call(agents[(c + k) % 20], "sophia.coordination_post", { channel: `arc:feature-${c}`, kind: "status", body: `progress ${k}` })
    }
  }
  const auth = yield* Auth
  for (const gone of agents.slice(20)) yield* auth.revoke(gone.connectionId)
  return agents[0]
})

interface Row {
  readonly store: string
  readonly orient: ReadonlyArray<number>
  readonly compact: ReadonlyArray<number>
  readonly whole: ReadonlyArray<number>
}

/** orient, panorama compact and panorama whole, one call each in turn, `CALLS` times (after a warm-up). */
const measure = (store: string, layer: Layer.Layer<any, any, never>) =>
  Effect.gen(function*() {
    const me = yield* seed
    const sides = {
      orient: call(me, "sophia.orient", {}),
      compact: call(me, "sophia.panorama", {}),
      whole: call(me, "sophia.panorama", { compact: false })
    }
    const first = yield* sides.compact
    if (first.connections.length !== 20) throw new Error(`the fleet: ${first.connections.length} connections`)
    const times = { orient: [] as Array<number>, compact: [] as Array<number>, whole: [] as Array<number> }
    for (let i = 0; i < WARMUP + CALLS; i++) {
      for (const side of ["orient", "compact", "whole"] as const) {
        const t0 = performance.now()
        yield* sides[side]
        if (i >= WARMUP) times[side].push(performance.now() - t0)
      }
    }
    return { store, ...times } satisfies Row
  }).pipe(Effect.provide(layer))

/** A fresh database, or nothing when no Postgres answers (the bench then measures SQLite only). */
const pgDatabase = () => freshDatabase(PG_BASE).catch(() => undefined)

const run = async (store: string, layer: Layer.Layer<any, any, never>) => {
  const runtime = ManagedRuntime.make(Layer.empty)
  try {
    return await runtime.runPromise(measure(store, layer))
  } finally {
    await runtime.dispose()
  }
}

const main = async () => {
  const rows: Array<Row> = []
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "sophia-panorama-bench-")), "p.db")
  rows.push(await run("SQLite file", SophiaLive(file)))
  const pg = await pgDatabase()
  if (pg !== undefined) {
    try {
      rows.push(await run("Postgres", SophiaLive(StoreChoice.postgres(pg.url))))
    } finally {
      await pg.drop()
    }
  }
  console.log(`## Panorama\n`)
  console.log(`20 live agents (claim, lease, wait each), 2 revoked (orphans), 50 channels (a decision, then 10 posts);`)
  console.log(`${CALLS} calls of each, alternating, through the Dispatcher. Aim: panorama ≤ 3× orient.\n`)
  console.log(`| store | orient p50 / p99 | panorama compact p50 / p99 | ratio p50 / p99 | panorama whole p50 / p99 | ratio p50 / p99 |`)
  console.log(`|---|---|---|---|---|---|`)
  for (const r of rows) {
    const [o50, o99, c50, c99, w50, w99] = [r.orient, r.compact, r.whole].flatMap((xs) => [quantile(xs, 0.5), quantile(xs, 0.99)])
    console.log(`| ${r.store} | ${fmt(o50)} / ${fmt(o99)} | ${fmt(c50)} / ${fmt(c99)} | **${(c50 / o50).toFixed(2)}× / ${
      (c99 / o99).toFixed(2)
    }×** | ${fmt(w50)} / ${fmt(w99)} | ${(w50 / o50).toFixed(2)}× / ${(w99 / o99).toFixed(2)}× |`)
  }
  if (pg === undefined) console.log(`\n(Postgres did not answer at ${PG_BASE}: SQLite only.)`)
  console.log()
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
