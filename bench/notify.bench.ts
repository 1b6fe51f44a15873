/**
 * Notifications benchmark (`npm run bench notify`): what the outbox adds to the writes whose events it reports,
 * against the same writes with no notification configured, in one run (target ≤ 10 %). Three apps over SQLite
 * files, measured in alternating blocks:
 *  - none: no target at all (the subscriber's one indexed read of the user's targets finds nothing);
 *  - elsewhere: the owner has a target, subscribed to another event (`orphan`): the read finds it, nothing is written;
 *  - subscribed: a target hearing `approval_requested` and `wait_ended`: each write also writes its outbox row
 *    (and, for an approval, its approve link).
 * Measured: a gated call (an assistant's `add_document` through the Dispatcher, refused `approval_required` with
 * a new pending approval; each then denied, untimed, to stay under the pending cap) and a wait's resolution (the
 * sweep resolving 10 overdue waits `unsatisfied`, per wait). The apps take turns operation by operation and each
 * side reports the median of its operations' times: on a shared machine a load spike then hits all three sides
 * alike instead of one block. No worker runs: rows are written, not sent.
 */
import { Effect, Layer, ManagedRuntime, Option } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { Caller } from "../src/domain/Auth.js"
import { SophiaLive } from "../src/layers/App.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { Approvals } from "../src/services/Approvals.js"
import { Auth } from "../src/services/Auth.js"
import { Notifications } from "../src/services/Notifications.js"
import { Waits } from "../src/services/Waits.js"

const fmt = (ms: number) => (ms < 1 ? `${(ms * 1000).toFixed(0)} µs` : `${ms.toFixed(2)} ms`)
const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const tempDb = () => path.join(fs.mkdtempSync(path.join(os.tmpdir(), "sophia-notify-bench-")), "n.db")
/** Rounds: in each, every app takes its turn (the order rotating), one gated call or one sweep of `WAITS` waits. */
const CALL_ROUNDS = 1500
const SWEEP_ROUNDS = 300
const WAITS = 10

type Setup = "none" | "elsewhere" | "subscribed"

const callerOf = (name: string, profile: "assistant" | "full") =>
  Effect.flatMap(Auth, (auth) => Effect.flatMap(auth.createConnection({ name, profile }), (m) => Effect.orDie(auth.authenticate(m.bearer))))

/** One app: its agents, the target its setup asks for, and the two measures as effects (a block each). */
const makeApp = (setup: Setup) => {
  const runtime = ManagedRuntime.make(SophiaLive(tempDb()).pipe(Layer.orDie))
  const ready = runtime.runPromise(Effect.gen(function*() {
    const scribe = yield* callerOf("scribe", "assistant")
    const waiter = yield* callerOf("waiter", "full")
    yield* callerOf("awaited", "full")
    const owner = Option.getOrThrow(yield* Effect.flatMap(Auth, (a) => a.userIdOf()))
    const n = yield* Notifications
    if (setup === "elsewhere") yield* n.addTarget(owner, { url: "http://127.0.0.1:9/elsewhere", events: ["orphan"] })
    if (setup === "subscribed") yield* n.addTarget(owner, { url: "http://127.0.0.1:9/hook", events: ["approval_requested", "wait_ended"] })
    return { scribe, waiter }
  }))
  let k = 0

  /** Ms of one gated call (the denial after it untimed). */
  const gatedOne = (scribe: Caller) =>
    Effect.gen(function*() {
      const dispatcher = yield* Dispatcher
      const approvals = yield* Approvals
      const t0 = performance.now()
      const o = yield* dispatcher.call(scribe, "sophia.add_document", { title: `doc ${k++}`, body: "b" })
      const ms = performance.now() - t0
      const id = (o.body as any).error?.approval_id
      if (typeof id !== "string") return yield* Effect.dieMessage(`not gated: ${JSON.stringify(o.body)}`)
      yield* approvals.decide(id, "denied")
      return ms
    })

  /** Mean ms per wait of a sweep resolving `WAITS` overdue waits `unsatisfied`. */
  const sweepBlock = (waiter: Caller) =>
    Effect.gen(function*() {
      const dispatcher = yield* Dispatcher
      const waits = yield* Waits
      for (let i = 0; i < WAITS; i++) {
        const o = yield* dispatcher.call(waiter, "sophia.declare_wait", {
          on: "awaited",
          predicate: { type: "post_exists", channel: `arc:w${k++}` },
          reason: "bench",
          timeout_s: 0.001
        })
        if (!o.ok) return yield* Effect.dieMessage(JSON.stringify(o.body))
      }
      yield* Effect.sleep("2 millis")
      const t0 = performance.now()
      const resolved = yield* waits.sweep()
      const ms = performance.now() - t0
      if (resolved !== WAITS) return yield* Effect.dieMessage(`resolved ${resolved} of ${WAITS}`)
      return ms / WAITS
    })

  return {
    gated: () => ready.then(({ scribe }) => runtime.runPromise(gatedOne(scribe))),
    sweep: () => ready.then(({ waiter }) => runtime.runPromise(sweepBlock(waiter))),
    dispose: () => runtime.dispose()
  }
}

const main = async () => {
  const setups: ReadonlyArray<Setup> = ["none", "elsewhere", "subscribed"]
  const apps = Object.fromEntries(setups.map((s) => [s, makeApp(s)])) as Record<Setup, ReturnType<typeof makeApp>>
  const gated: Record<Setup, Array<number>> = { none: [], elsewhere: [], subscribed: [] }
  const swept: Record<Setup, Array<number>> = { none: [], elsewhere: [], subscribed: [] }
  // warm up every path, then take turns (the order rotating each round)
  for (const s of setups) {
    for (let i = 0; i < 100; i++) await apps[s].gated()
    for (let i = 0; i < 10; i++) await apps[s].sweep()
  }
  const orderOf = (round: number) => setups.map((_, i) => setups[(i + round) % setups.length])
  for (let round = 0; round < CALL_ROUNDS; round++) for (const s of orderOf(round)) gated[s].push(await apps[s].gated())
  for (let round = 0; round < SWEEP_ROUNDS; round++) for (const s of orderOf(round)) swept[s].push(await apps[s].sweep())
  for (const s of setups) await apps[s].dispose()
  const g = Object.fromEntries(setups.map((s) => [s, median(gated[s])])) as Record<Setup, number>
  const w = Object.fromEntries(setups.map((s) => [s, median(swept[s])])) as Record<Setup, number>
  const pct = (a: number, b: number) => `${a >= b ? "+" : ""}${((a / b - 1) * 100).toFixed(1)} %`
  console.log(`## Notifications\n`)
  console.log(`| measure (median of ${CALL_ROUNDS} calls / ${SWEEP_ROUNDS} sweeps a side, sides taking turns) | no target | a target for another event | a target subscribed |`)
  console.log(`|---|---|---|---|`)
  console.log(`| gated call (\`add_document\` by an assistant → \`approval_required\`), per call | ${fmt(g.none)} | ${fmt(g.elsewhere)} (${pct(g.elsewhere, g.none)}) | ${fmt(g.subscribed)} (${pct(g.subscribed, g.none)}) |`)
  console.log(`| a wait resolved \`unsatisfied\` by the sweep, per wait | ${fmt(w.none)} | ${fmt(w.elsewhere)} (${pct(w.elsewhere, w.none)}) | ${fmt(w.subscribed)} (${pct(w.subscribed, w.none)}) |`)
  console.log()
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
