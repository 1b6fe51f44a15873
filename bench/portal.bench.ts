/**
 * Portal benchmark (`npm run bench portal`): the server time of each portal page over a populated graph
 * (50 connections, 10k posts, 1k work items, 200 open waits), and the time from a post's commit — and from
 * a gated call's new approval (`ApprovalRequested`) — to its SSE event reaching a client of `/portal/events`. Both measured over loopback HTTP against the real
 * HTTP layer; the raw baseline is `GET /healthz` on the same server in the same run (the cost of the
 * round trip itself).
 */
import { Effect, Layer } from "effect"
import type { Caller } from "../src/domain/Auth.js"
import { SophiaLive } from "../src/layers/App.js"
import * as Http from "../src/mcp/Http.js"
import { PortalRoutesLive } from "../src/mcp/portal/Routes.js"
import { Approvals } from "../src/services/Approvals.js"
import { Auth } from "../src/services/Auth.js"
import { Coordination } from "../src/services/Coordination.js"
import { Ledger } from "../src/services/Ledger.js"
import { Portal } from "../src/services/Portal.js"
import { Waits } from "../src/services/Waits.js"
import { tempDb } from "./support/Raw.js"

const CONNECTIONS = 50
const POSTS = 10_000
const WORK = 1_000
const WAITS = 200
const ROUNDS = 40
const SSE_SAMPLES = 100
const APPROVAL_SAMPLES = 20

const pct = (xs: Array<number>, p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]
const fmt = (ms: number) => `${ms.toFixed(1)} ms`

const program = Effect.gen(function*() {
  const auth = yield* Auth
  const coordination = yield* Coordination
  const ledger = yield* Ledger
  const waits = yield* Waits
  const portal = yield* Portal
  const approvals = yield* Approvals
  const http = yield* Http.HttpServer
  const t0 = performance.now()
  const callers: Array<Caller> = []
  for (let i = 0; i < CONNECTIONS; i++) {
    const m = yield* auth.createConnection({ name: `agent-${String(i).padStart(2, "0")}`, profile: "full" })
    callers.push(yield* Effect.orDie(auth.authenticate(m.bearer)))
  }
  for (let i = 0; i < POSTS; i++) {
    yield* Effect.orDie(coordination.post(callers[i % CONNECTIONS], {
      channel: i % 10 === 0 ? `arc:item-${i % 97}` : `team-${i % 20}`,
      kind: i % 7 === 0 ? "question" : "status",
      body: `post ${i}: ${"lorem ipsum ".repeat(4)}`
    }))
  }
  for (let i = 0; i < WORK; i++) {
    yield* Effect.orDie(ledger.append(callers[i % CONNECTIONS], {
      work_id: `item-${i}`,
      expected_head: null,
      events: [{ type: "opened", title: `Work item ${i}` }, { type: "claimed" }, { type: "asserted", field: "progress", value: i % 100 }]
    } as any))
  }
  // 200 open waits, acyclic: agent i waits on agent j > i
  for (let i = 0; i < WAITS; i++) {
    const a = i % (CONNECTIONS - 1)
    const b = a + 1 + (i % (CONNECTIONS - 1 - a))
    yield* Effect.orDie(waits.declare(callers[a], {
      on: callers[b].name,
      predicate: { type: "seq_reached", channel: `wait-${i}`, seq: 1 },
      reason: `bench wait ${i}`
    } as any))
  }
  const seeded = performance.now() - t0

  const { token } = yield* portal.mintLogin()
  const login = yield* Effect.promise(() => fetch(`${http.baseUrl}/portal/login?token=${token}`, { redirect: "manual" }))
  const cookie = /sophia_portal=([^;]+)/.exec(login.headers.get("set-cookie") ?? "")![1]
  const timeGet = (url: string, headers: Record<string, string> = {}) =>
    Effect.promise(async () => {
      const s = performance.now()
      const r = await fetch(url, { headers: { cookie: `sophia_portal=${cookie}`, ...headers } })
      const body = await r.text()
      if (r.status !== 200) throw new Error(`${url}: ${r.status} ${body.slice(0, 200)}`)
      return performance.now() - s
    })
  const pages = [
    ["Fleet", "/portal"],
    ["Approvals", "/portal/approvals"],
    ["Channels (list + one channel)", "/portal/channels?channel=team-3"],
    ["Waits (200 edges, SVG)", "/portal/waits"],
    ["Ledger (list)", "/portal/ledger"],
    ["Ledger item (status, chain, diff)", "/portal/ledger?work=item-7&from=" ],
    ["Knowledge", "/portal/knowledge"]
  ] as const
  // the diff needs a real head
  const events = yield* ledger.events(callers[7].userId, "item-7")
  const paths = pages.map(([name, p]) => [name, p.endsWith("from=") ? `${p}${events[0].hash}&to=${events[events.length - 1].hash}` : p] as const)

  const baseline: Array<number> = []
  for (let i = 0; i < ROUNDS; i++) baseline.push(yield* timeGet(`${http.baseUrl}/healthz`))
  const rows: Array<string> = []
  for (const [name, p] of paths) {
    yield* timeGet(`${http.baseUrl}${p}`) // warm
    const xs: Array<number> = []
    for (let i = 0; i < ROUNDS; i++) xs.push(yield* timeGet(`${http.baseUrl}${p}`))
    rows.push(`| ${name} | ${fmt(pct(xs, 0.5))} | ${fmt(pct(xs, 0.99))} | ${(pct(xs, 0.5) / pct(baseline, 0.5)).toFixed(1)}× |`)
  }

  // post → SSE event at a client
  const sse = yield* Effect.promise(async () => {
    const r = await fetch(`${http.baseUrl}/portal/events`, { headers: { cookie: `sophia_portal=${cookie}` } })
    const reader = r.body!.getReader()
    const decoder = new TextDecoder()
    let buffer = ""
    const next = async (pattern: RegExp) => {
      while (!pattern.test(buffer)) buffer += decoder.decode((await reader.read()).value)
      buffer = ""
    }
    await next(/event: ready/)
    return { next, close: () => reader.cancel() }
  })
  const latencies: Array<number> = []
  for (let i = 0; i < SSE_SAMPLES; i++) {
    const marker = `sse-${i}-${Date.now()}`
    const s = performance.now()
    const seen = Effect.promise(() => sse.next(new RegExp(`event: posts\\ndata: [^\\n]*"channel":"${marker}"`)))
    const fiber = yield* Effect.fork(seen)
    yield* Effect.orDie(coordination.post(callers[i % CONNECTIONS], { channel: marker, kind: "status", body: "ping" }))
    yield* fiber.await
    latencies.push(performance.now() - s)
  }
  // a gated call's new approval → the approvals event (the portal's Approvals page refreshes on it)
  const assistant = yield* Effect.orDie(auth.authenticate((yield* auth.createConnection({ name: "assistant", profile: "assistant" })).bearer))
  const approvalLatencies: Array<number> = []
  for (let i = 0; i < APPROVAL_SAMPLES; i++) {
    const title = `approval-${i}-${Date.now()}`
    const s = performance.now()
    const fiber = yield* Effect.fork(Effect.promise(() => sse.next(/event: approvals\ndata: [^\n]*"_tag":"ApprovalRequested"/)))
    yield* Effect.flip(approvals.gate({
      caller: assistant,
      tool: { name: "sophia.add_document", access: "write" },
      decision: "approval",
      args: { title, body: "b" },
      execute: Effect.succeed("not run")
    }))
    yield* fiber.await
    approvalLatencies.push(performance.now() - s)
  }
  yield* Effect.promise(() => sse.close())

  console.log(`#### Portal (${CONNECTIONS} connections, ${POSTS} posts, ${WORK} work items, ${WAITS} open waits; seeded in ${(seeded / 1000).toFixed(1)} s)\n`)
  console.log(`Loopback round trip of \`GET /healthz\` (raw baseline): p50 ${fmt(pct(baseline, 0.5))}, p99 ${fmt(pct(baseline, 0.99))}\n`)
  console.log(`| page | p50 | p99 | p50 vs baseline |\n|---|---|---|---|`)
  for (const r of rows) console.log(r)
  console.log(`\nPost (in-process \`Coordination.post\`, commit included) → its SSE event read by a client of \`/portal/events\`: ` +
    `p50 ${fmt(pct(latencies, 0.5))}, p99 ${fmt(pct(latencies, 0.99))} (${SSE_SAMPLES} samples)\n`)
  console.log(`A gated call's new approval (in-process \`Approvals.gate\`, commit included) → its \`approvals\` SSE event: ` +
    `p50 ${fmt(pct(approvalLatencies, 0.5))}, p99 ${fmt(pct(approvalLatencies, 0.99))} (${APPROVAL_SAMPLES} samples; ` +
    `until issue 26 the page polled every 500 ms)\n`)
})

const file = tempDb("portal.db")
const App = Http.layer({ host: "127.0.0.1", port: 0, naming: "underscore" }).pipe(
  Layer.provideMerge(PortalRoutesLive),
  Layer.provideMerge(SophiaLive(file))
)
Effect.runPromise(program.pipe(Effect.provide(App), Effect.scoped)).then(
  () => process.exit(0),
  (e) => {
    console.error(e)
    process.exit(1)
  }
)
