/**
 * Sandbox (`sophia.execute_code`) bench. Run by `npm run bench sandbox` (the runner starts this file with
 * `--no-node-snapshot`, which isolated-vm needs in this process for the baseline).
 *
 * 1. warm latency of a `return 1` snippet through the pool vs a bare isolated-vm create+eval+dispose in
 *    this same process (the raw baseline; target ≤ 3×);
 * 2. one execute_code making 50 composed reads vs the same 50 reads as separate MCP calls over HTTP
 *    (real SDK client, real Streamable HTTP transport);
 * 3. cold start of the pool (spawn → warm children ready) and the first run on a cold pool;
 * 4. where one inner call's time goes (in process, same app): the bridge alone (isolate ⇄ child ⇄ pool with
 *    a host that answers at once), the Dispatcher alone (`Dispatcher.call` of the same read, no sandbox),
 *    and the two together (the snippet's reads through the Dispatcher), each per call.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { Effect, Layer, ManagedRuntime } from "effect"
import ivm from "isolated-vm"
import { SophiaTest } from "../src/layers/App.js"
import * as Http from "../src/mcp/Http.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { camelMapping } from "../src/mcp/SdkTypes.js"
import { Auth } from "../src/services/Auth.js"
import type { SandboxHost } from "../src/services/Sandbox.js"
import { make as makePool, Sandbox } from "../src/services/Sandbox.js"
import { TracingLive } from "../src/observability/Tracing.js"

const now = () => performance.now()
const median = (xs: Array<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const p95 = (xs: Array<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.95)]
const ms = (x: number) => `${x.toFixed(2)} ms`

const noHost: SandboxHost = { invoke: () => Effect.die("no calls in this bench"), methods: new Map() }
const rows: Array<[string, string, string, string]> = []

// --- 1 & 3: the pool on its own --------------------------------------------------------------------
{
  const WARM_RUNS = 200
  const runtime = ManagedRuntime.make(Layer.empty)
  const result = await runtime.runPromise(Effect.scoped(Effect.gen(function*() {
    const pool = yield* makePool({ warm: 2, max: 2, runsPerChild: 10_000, prewarm: false, abortGraceMs: 1000 })
    let t = now()
    yield* pool.warmUp
    const cold = now() - t
    t = now()
    yield* pool.run({ code: "return 1" }, noHost)
    const firstRun = now() - t
    // cold first run: a pool with no warm child yet
    const lazy = yield* makePool({ warm: 1, max: 1, runsPerChild: 10_000, prewarm: false, abortGraceMs: 1000 })
    t = now()
    yield* lazy.run({ code: "return 1" }, noHost)
    const coldRun = now() - t
    for (let i = 0; i < 20; i++) yield* pool.run({ code: "return 1" }, noHost) // warm-up
    const warm: Array<number> = []
    for (let i = 0; i < WARM_RUNS; i++) {
      const s = now()
      yield* pool.run({ code: "return 1" }, noHost)
      warm.push(now() - s)
    }
    // a different snippet every run: esbuild on the path (no compile cache hit)
    const distinct: Array<number> = []
    for (let i = 0; i < WARM_RUNS; i++) {
      const s = now()
      yield* pool.run({ code: `return ${i} as number` }, noHost)
      distinct.push(now() - s)
    }
    return { cold, firstRun, coldRun, warm, distinct }
  })))
  await runtime.dispose()

  // the raw baseline: a bare isolate create + eval + dispose in this process
  const bare: Array<number> = []
  for (let i = 0; i < WARM_RUNS + 20; i++) {
    const s = now()
    const isolate = new ivm.Isolate({ memoryLimit: 8 })
    const context = await isolate.createContext()
    await context.eval("1")
    isolate.dispose()
    if (i >= 20) bare.push(now() - s)
  }
  const ratio = median(result.warm) / median(bare)
  rows.push(["warm `return 1` (median / p95)", `${ms(median(result.warm))} / ${ms(p95(result.warm))}`, `bare isolate create+eval: ${ms(median(bare))} / ${ms(p95(bare))}`, `${ratio.toFixed(2)}× (target ≤ 3×)`])
  rows.push([
    "warm, a new snippet each run (esbuild on the path)",
    `${ms(median(result.distinct))} / ${ms(p95(result.distinct))}`,
    `bare isolate create+eval: ${ms(median(bare))}`,
    `${(median(result.distinct) / median(bare)).toFixed(2)}×`
  ])
  rows.push(["pool cold start (2 children ready)", ms(result.cold), "—", ""])
  rows.push(["first run on a just-warmed pool", ms(result.firstRun), "—", ""])
  rows.push(["first run on a cold pool (spawn inside)", ms(result.coldRun), "—", ""])
}

// --- 2: 50 composed reads vs 50 MCP calls over HTTP ---------------------------------------------------
{
  // the machines are shared: enough repeats that one descheduled run does not move the median
  const REPEAT = 11
  // observability as the daemon has it (`sophia serve`: no OTLP endpoint set, so no tracer)
  const app = Http.layer({ host: "127.0.0.1", port: 0, naming: "underscore" }).pipe(
    Layer.provideMerge(SophiaTest),
    Layer.provide(TracingLive({ name: "sophia", version: "bench" }))
  )
  const runtime = ManagedRuntime.make(app)
  const { mcpUrl, bearer } = await runtime.runPromise(Effect.gen(function*() {
    const server = yield* Http.HttpServer
    const auth = yield* Auth
    const minted = yield* auth.createConnection({ name: "bench", profile: "full" })
    return { mcpUrl: server.mcpUrl, bearer: minted.bearer }
  }))
  const client = new Client({ name: "sandbox-bench", version: "1.0.0" })
  await client.connect(new StreamableHTTPClientTransport(new URL(mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${bearer}` } } }))
  const composed = `
    const reads = await Promise.all(Array.from({ length: 50 }, (_, i) => sophia.orient({ goal: "read " + i })))
    return reads.length
  `
  // warm both paths
  await client.callTool({ name: "sophia_execute_code", arguments: { code: composed } })
  for (let i = 0; i < 10; i++) await client.callTool({ name: "sophia_orient", arguments: { goal: "warm" } })
  const oneRun: Array<number> = []
  const separate: Array<number> = []
  const sequentialRun: Array<number> = []
  for (let r = 0; r < REPEAT; r++) {
    let s = now()
    const out = await client.callTool({ name: "sophia_execute_code", arguments: { code: composed } })
    if (out.isError || (out.structuredContent as any).sophia_calls !== 50) throw new Error(JSON.stringify(out.content))
    oneRun.push(now() - s)
    s = now()
    await client.callTool({
      name: "sophia_execute_code",
      arguments: { code: `for (let i = 0; i < 50; i++) await sophia.orient({ goal: "read " + i }); return 50` }
    })
    sequentialRun.push(now() - s)
    s = now()
    for (let i = 0; i < 50; i++) await client.callTool({ name: "sophia_orient", arguments: { goal: `read ${i}` } })
    separate.push(now() - s)
  }
  await client.close()

  // 4: per inner call, in this process: the bridge, the Dispatcher, both
  const breakdown = await runtime.runPromise(Effect.gen(function*() {
    const sandbox = yield* Sandbox
    const dispatcher = yield* Dispatcher
    const caller = yield* (yield* Auth).authenticate(bearer)
    const methods = camelMapping(dispatcher.registry.tools.map((t) => t.name))
    const echo: SandboxHost = { invoke: () => Effect.succeed({ ok: true, body: { goal: "read" } }), methods }
    const real: SandboxHost = { invoke: (name, args) => dispatcher.call(caller, name, args, { viaSandbox: true }), methods }
    const sequential = `for (let i = 0; i < 50; i++) await sophia.orient({ goal: "read " + i }); return 50`
    const dispatchAll = Effect.forEach(
      Array.from({ length: 50 }, (_, i) => i),
      (i) => dispatcher.call(caller, "sophia.orient", { goal: `read ${i}` }, { viaSandbox: true }),
      { concurrency: "unbounded", discard: true }
    )
    const cases: Array<Effect.Effect<unknown, unknown>> = [
      sandbox.run({ code: "return 1" }, echo),
      sandbox.run({ code: composed }, echo),
      sandbox.run({ code: sequential }, echo),
      dispatchAll,
      sandbox.run({ code: composed }, real)
    ]
    const times = cases.map(() => [] as Array<number>)
    for (let r = 0; r < 3 + 3 * REPEAT; r++) {
      for (let c = 0; c < cases.length; c++) {
        const s = now()
        yield* cases[c]
        if (r >= 3) times[c].push(now() - s)
      }
    }
    return times.map(median)
  }))
  await runtime.dispose()
  rows.push([
    "50 reads: one execute_code (Promise.all) vs 50 MCP calls",
    ms(median(oneRun)),
    `50 separate MCP calls over HTTP: ${ms(median(separate))}`,
    `${(median(separate) / median(oneRun)).toFixed(1)}× fewer ms`
  ])
  rows.push([
    "50 reads: one execute_code (awaited one by one)",
    ms(median(sequentialRun)),
    `50 separate MCP calls over HTTP: ${ms(median(separate))}`,
    `${(median(separate) / median(sequentialRun)).toFixed(1)}× fewer ms`
  ])
  const [bare, echoAll, echoSeq, dispatchOnly, composedReal] = breakdown
  const perCall = (x: number) => `${((x / 50) * 1000).toFixed(0)} µs`
  rows.push([
    "per inner call: the bridge alone (isolate ⇄ child ⇄ pool, a host answering at once), Promise.all / one by one",
    `${perCall(echoAll - bare)} / ${perCall(echoSeq - bare)}`,
    `a run making no call: ${ms(bare)}`,
    ""
  ])
  rows.push(["per inner call: the Dispatcher alone (`Dispatcher.call` of orient, in process, 50 at once)", perCall(dispatchOnly), "—", ""])
  rows.push([
    "per inner call: composed in the sandbox through the Dispatcher (Promise.all)",
    perCall(composedReal - bare),
    `bridge + Dispatcher measured apart: ${perCall(echoAll - bare + dispatchOnly)}`,
    ""
  ])
}

console.log("## Sandbox (sophia.execute_code)\n")
console.log("| measure | sandbox | raw baseline (same run) | ratio |")
console.log("|---|---|---|---|")
for (const r of rows) console.log(`| ${r.join(" | ")} |`)
console.log("")
