/**
 * Leases benchmark (`npm run bench leases`), over a SQLite file, in one run:
 *  - `lease_acquire` + `lease_release` against one `coordination_post` (target ≤ 1.5×), each through the
 *    Dispatcher as an agent's call runs (envelope included) and at the service, in alternating blocks;
 *  - the conflict check with 10,000 active leases against 10 (target ≤ 2×): a refused `lease_acquire`
 *    overlapping one held glob, and a granted acquire + release beside them, at both sizes. The leases are
 *    held by 20 other connections on distinct folders (`path:pkg/<i>/**`), a realistic spread: the check reads
 *    the holds on the asked glob's chain of bases only.
 */
import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { Caller } from "../src/domain/Auth.js"
import { SophiaLive } from "../src/layers/App.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { Auth } from "../src/services/Auth.js"
import { Coordination } from "../src/services/Coordination.js"
import { Leases } from "../src/services/Leases.js"

const fmt = (ms: number) => ms < 1 ? `${(ms * 1000).toFixed(0)} µs` : `${ms.toFixed(2)} ms`
const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const tempDb = () => path.join(fs.mkdtempSync(path.join(os.tmpdir(), "sophia-leases-bench-")), "l.db")

const callerOf = (name: string) =>
  Effect.flatMap(Auth, (auth) => Effect.flatMap(auth.createConnection({ name, profile: "full" }), (m) => Effect.orDie(auth.authenticate(m.bearer))))

/** The per-op median of `op` over `blocks` blocks of `n`, alternating with the other side (`interleave`). */
const timed = (op: Effect.Effect<unknown, unknown>, n: number) =>
  Effect.gen(function*() {
    const t0 = performance.now()
    for (let i = 0; i < n; i++) yield* op
    return (performance.now() - t0) / n
  })

const mustOk = (o: { ok: boolean; body: unknown }) => (o.ok ? Effect.void : Effect.die(new Error(JSON.stringify(o.body))))

/** acquire + release vs post, through the Dispatcher and at the service, 8 alternating blocks each. */
const versusPost = Effect.gen(function*() {
  const dispatcher = yield* Dispatcher
  const coordination = yield* Coordination
  const leases = yield* Leases
  const me = yield* callerOf("agent")
  let k = 0
  const postCall = Effect.flatMap(
    dispatcher.call(me, "sophia.coordination_post", { channel: "bench", kind: "status", body: `post ${k++}` }),
    mustOk
  )
  const leaseCall = Effect.gen(function*() {
    const held = yield* dispatcher.call(me, "sophia.lease_acquire", { resources: [`path:src/f${k++ % 50}.ts`], reason: "bench" })
    yield* mustOk(held)
    yield* Effect.flatMap(dispatcher.call(me, "sophia.lease_release", { lease_id: (held.body as any).lease_id }), mustOk)
  })
  const postService = Effect.asVoid(coordination.post(me, { channel: "bench", kind: "status", body: `post ${k++}` }))
  const leaseService = Effect.gen(function*() {
    const held = yield* leases.acquire(me, { resources: [`path:src/f${k++ % 50}.ts`], reason: "bench" })
    yield* leases.release(me, held.lease_id)
  })
  // warm up both paths (statements prepared, the JIT settled)
  for (const op of [postCall, leaseCall, postService, leaseService]) yield* timed(op, 100)
  const sides = { postCall: [] as Array<number>, leaseCall: [] as Array<number>, postService: [] as Array<number>, leaseService: [] as Array<number> }
  for (let block = 0; block < 8; block++) {
    sides.postCall.push(yield* timed(postCall, 200))
    sides.leaseCall.push(yield* timed(leaseCall, 200))
    sides.postService.push(yield* timed(postService, 200))
    sides.leaseService.push(yield* timed(leaseService, 200))
  }
  return {
    postCall: median(sides.postCall),
    leaseCall: median(sides.leaseCall),
    postService: median(sides.postService),
    leaseService: median(sides.leaseService)
  }
})

/** A database with `n` active leases of 20 other connections; the median refused check and granted acquire + release. */
const checkWith = (n: number) =>
  Effect.gen(function*() {
    const leases = yield* Leases
    const holders: Array<Caller> = []
    for (let i = 0; i < 20; i++) holders.push(yield* callerOf(`holder-${i}`))
    for (let i = 0; i < n; i++) {
      yield* leases.acquire(holders[i % 20], { resources: [`path:pkg/${i}/**`], reason: "held", ttl_s: 86400 })
    }
    const me = yield* callerOf("asker")
    const refused = Effect.flip(leases.acquire(me, { resources: [`path:pkg/${Math.floor(n / 2)}/src/x.ts`], reason: "check" }))
    const granted = Effect.gen(function*() {
      const held = yield* leases.acquire(me, { resources: ["path:apps/web/src/page.ts"], reason: "check" })
      yield* leases.release(me, held.lease_id)
    })
    yield* timed(refused, 100)
    yield* timed(granted, 100)
    const r: Array<number> = []
    const g: Array<number> = []
    for (let block = 0; block < 8; block++) {
      r.push(yield* timed(refused, 100))
      g.push(yield* timed(granted, 100))
    }
    return { refused: median(r), granted: median(g) }
  }).pipe(Effect.provide(SophiaLive(tempDb())))

const main = Effect.gen(function*() {
  const vs = yield* versusPost.pipe(Effect.provide(SophiaLive(tempDb())))
  const small = yield* checkWith(10)
  const large = yield* checkWith(10_000)
  console.log(`## Leases\n`)
  console.log(`| measure | value |`)
  console.log(`|---|---|`)
  console.log(`| coordination_post, one call through the Dispatcher (median of 8 blocks of 200) | ${fmt(vs.postCall)} |`)
  console.log(`| lease_acquire + lease_release, two calls through the Dispatcher | ${fmt(vs.leaseCall)} |`)
  console.log(`| **ratio acquire + release / post, calls** (target ≤ 1.5) | **${(vs.leaseCall / vs.postCall).toFixed(2)}** |`)
  console.log(`| Coordination.post at the service | ${fmt(vs.postService)} |`)
  console.log(`| Leases.acquire + Leases.release at the service | ${fmt(vs.leaseService)} |`)
  console.log(`| **ratio acquire + release / post, service** | **${(vs.leaseService / vs.postService).toFixed(2)}** |`)
  console.log(`| refused acquire (conflict check), 10 active leases (median of 8 blocks of 100) | ${fmt(small.refused)} |`)
  console.log(`| refused acquire (conflict check), 10,000 active leases | ${fmt(large.refused)} |`)
  console.log(`| **ratio 10,000 / 10, refused** (target ≤ 2) | **${(large.refused / small.refused).toFixed(2)}** |`)
  console.log(`| granted acquire + release beside 10 / 10,000 active leases | ${fmt(small.granted)} / ${fmt(large.granted)} (${(large.granted / small.granted).toFixed(2)}×) |`)
  console.log()
})

Effect.runPromise(main).catch((e) => {
  console.error(e)
  process.exit(1)
})
