/**
 * Ledger benchmarks (run by `npm run bench ledger`):
 *  - appends/s through `Ledger.append` (head check, CAS on the head row, hash chain, settled field) on one
 *    work item and round-robin over 1k items, vs a raw better-sqlite3 transaction doing the same insert +
 *    conditional head update (with the same JCS + sha256 hash) on the same file;
 *  - replay: `Ledger.verify` (read every event, recompute every hash, fold every state, compare with the
 *    tables) in events/s vs the bare cost of JCS (`canonicalize`) + sha256 (the product's sha256 call) over
 *    the same events in memory, spelled out here so the baseline stays what it says whatever the product's
 *    hashing becomes; a second row compares with the product's own `eventHash` (which writes the fixed
 *    envelope itself and canonicalizes only the data, so it is faster than the bare baseline).
 * Env: LEDGER_BENCH_APPENDS (default 4000), LEDGER_BENCH_REPLAY (default 200000 events: 1M takes ~4 min to build and verify on the 2-core box, over the ~3 min budget).
 */
import { Effect, Layer, ManagedRuntime } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { LedgerEvent } from "../src/domain/Ledger.js"
import { ServicesLive } from "../src/layers/App.js"
import { SophiaWithRaw, SqliteStore, StoreWithRaw, tempDb } from "./support/Raw.js"
import { Auth } from "../src/services/Auth.js"
import canonicalize from "canonicalize"
import * as crypto from "node:crypto"
import { LEDGER_HASH_DOMAIN } from "../src/domain/Ledger.js"
import { settle } from "../src/domain/LedgerCore.js"
import { eventHash, jcs } from "../src/domain/LedgerHash.js"
import { replay } from "../src/domain/LedgerReplay.js"
import { Ledger } from "../src/services/Ledger.js"

/** sha256 hex through the same primitive the product uses (Node's one-shot `crypto.hash` where present) */
const sha256Hex = (text: string): string =>
  typeof crypto.hash === "function"
    ? crypto.hash("sha256", text, "hex")
    : crypto.createHash("sha256").update(text).digest("hex")

const APPENDS = Number(process.env.LEDGER_BENCH_APPENDS ?? 4000)
const REPLAY_EVENTS = Number(process.env.LEDGER_BENCH_REPLAY ?? 200_000)
const REPLAY_ITEMS = 1000

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sophia-ledger-bench-"))
const fmt = (n: number) => Math.round(n).toLocaleString("en-US")
const rows: Array<[string, string, string, string]> = []

const makeRuntime = (file: string) => ManagedRuntime.make(ServicesLive.pipe(Layer.provideMerge(StoreWithRaw(file))))

const appendBench = async (items: number) => {
  const file = path.join(dir, `append-${items}.db`)
  const runtime = makeRuntime(file)
  const { caller, raw } = await runtime.runPromise(Effect.gen(function*() {
    const auth = yield* Auth
    const minted = yield* auth.createConnection({ name: "bench", profile: "full" })
    return { caller: yield* Effect.orDie(auth.authenticate(minted.bearer)), raw: (yield* SqliteStore).raw }
  }))
  const heads = new Map<string, string>()
  const ids = Array.from({ length: items }, (_, i) => `item-${i}`)
  // create the items (not timed)
  await runtime.runPromise(Effect.gen(function*() {
    const ledger = yield* Ledger
    for (const id of ids) {
      heads.set(id, (yield* ledger.append(caller, { work_id: id, expected_head: null, events: [{ type: "opened", title: id }] })).head)
    }
  }))
  // raw: the same rows, another user, one BEGIN IMMEDIATE transaction per append
  const rawUser = "raw-user"
  const rawHeads = new Map<string, { head: string; seq: number }>()
  const insertWork = raw.prepare(`INSERT INTO ledger_work (user_id, work_id, head, seq, title, status, resolution, claimant,
    workers, created_at, updated_at) VALUES (?, ?, ?, 1, ?, 'open', NULL, NULL, '[]', ?, ?)`)
  for (const id of ids) {
    const head = "0".repeat(64)
    insertWork.run(rawUser, id, head, id, new Date().toISOString(), new Date().toISOString())
    rawHeads.set(id, { head, seq: 1 })
  }
  const insertEvent = raw.prepare(`INSERT INTO ledger_events (user_id, work_id, seq, parent, type, data, evidence, actor, at, hash)
    VALUES (?, ?, ?, ?, 'asserted', ?, 'asserted', ?, ?, ?)`)
  const cas = raw.prepare(`UPDATE ledger_work SET head = ?, seq = ?, updated_at = ? WHERE user_id = ? AND work_id = ? AND head = ?`)
  const one = raw.transaction((id: string, i: number) => {
    const cur = rawHeads.get(id)!
    const at = new Date().toISOString()
    const data = { field: "progress", value: i }
    const body = {
      work_id: id,
      seq: cur.seq + 1,
      parent: cur.head,
      type: "asserted" as const,
      data,
      evidence: "asserted" as const,
      actor: caller.connectionId,
      at
    }
    const hash = eventHash(body)
    insertEvent.run(rawUser, id, cur.seq + 1, cur.head, jcs(data), caller.connectionId, at, hash)
    if (cas.run(hash, cur.seq + 1, at, rawUser, id, cur.head).changes !== 1) throw new Error("head moved")
    rawHeads.set(id, { head: hash, seq: cur.seq + 1 })
  })
  // Sophia: Ledger.append, one asserted event per append
  const sophiaAppends = (from: number, n: number) =>
    runtime.runPromise(Effect.gen(function*() {
      const ledger = yield* Ledger
      for (let i = from; i < from + n; i++) {
        const id = ids[i % items]
        const r = yield* ledger.append(caller, {
          work_id: id,
          expected_head: heads.get(id)!,
          events: [{ type: "asserted", field: "progress", value: i }]
        })
        heads.set(id, r.head)
      }
    }).pipe(Effect.orDie))
  // the two sides alternate in blocks, so the machine's load moves both alike
  const BLOCKS = 8
  const per = Math.ceil(APPENDS / BLOCKS)
  let sophiaMs = 0
  let rawMs = 0
  for (let b = 0; b < BLOCKS; b++) {
    const t0 = performance.now()
    await sophiaAppends(b * per, per)
    sophiaMs += performance.now() - t0
    const t1 = performance.now()
    for (let i = b * per; i < (b + 1) * per; i++) one.immediate(ids[i % items], i)
    rawMs += performance.now() - t1
  }
  const sophia = (BLOCKS * per) / (sophiaMs / 1000)
  const rawRate = (BLOCKS * per) / (rawMs / 1000)
  await runtime.dispose()
  rows.push([`append, ${items === 1 ? "1 work item" : `${fmt(items)} work items`} (${fmt(BLOCKS * per)} appends, 8 alternating blocks)`, `${fmt(sophia)}/s`, `${fmt(rawRate)}/s`, (sophia / rawRate).toFixed(2)])
}

const replayBench = async () => {
  const file = path.join(dir, "replay.db")
  const runtime = makeRuntime(file)
  const raw = await runtime.runPromise(Effect.map(SqliteStore, (s) => s.raw))
  const user = "bench-user"
  const actor = "00000000-0000-4000-8000-000000000000"
  const perItem = Math.ceil(REPLAY_EVENTS / REPLAY_ITEMS)
  // build the chains directly (the append path is measured above), with the real hash and fold
  const insertEvent = raw.prepare(`INSERT INTO ledger_events (user_id, work_id, seq, parent, type, data, evidence, actor, at, hash)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
  const insertWork = raw.prepare(`INSERT INTO ledger_work (user_id, work_id, head, seq, title, status, resolution, claimant,
    workers, created_at, updated_at) VALUES (?, ?, ?, ?, ?, 'open', NULL, NULL, ?, ?, ?)`)
  const insertField = raw.prepare(`INSERT INTO ledger_fields (user_id, work_id, field, value, evidence, set_by, at, seq)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)
  const bodies: Array<Omit<LedgerEvent, "hash">> = []
  const tb = performance.now()
  const build = raw.transaction((item: number) => {
    const id = `item-${item}`
    const events: Array<LedgerEvent> = []
    let parent: string | null = null
    for (let seq = 1; seq <= perItem; seq++) {
      const at = new Date(1_700_000_000_000 + seq * 1000).toISOString()
      const body = (seq === 1
        ? { work_id: id, seq, parent, type: "opened", data: { title: id }, evidence: "asserted", actor, at }
        : {
          work_id: id,
          seq,
          parent,
          type: "asserted",
          data: { field: `f${seq % 8}`, value: { n: seq, note: "progress report", done: seq % 3 === 0 } },
          evidence: "asserted",
          actor,
          at
        }) as Omit<LedgerEvent, "hash">
      const hash = eventHash(body)
      bodies.push(body)
      events.push({ ...body, hash } as LedgerEvent)
      insertEvent.run(user, id, seq, parent, body.type, jcs(body.data), body.evidence, actor, at, hash)
      parent = hash
    }
    const state = settle(replay(events).state!)
    insertWork.run(user, id, state.head, state.seq, state.title, JSON.stringify(state.workers), state.fields.f1?.at ?? "", state.fields.f1?.at ?? "")
    for (const [name, f] of Object.entries(state.fields)) insertField.run(user, id, name, jcs(f.value), f.evidence, f.set_by, f.at, f.seq)
  })
  for (let item = 0; item < REPLAY_ITEMS; item++) build(item)
  const buildSeconds = (performance.now() - tb) / 1000

  // three rounds, each side once per round in turn (the machine's load moves them alike); medians reported
  const ROUNDS = 3
  let sink = 0
  const bareRates: Array<number> = []
  const productRates: Array<number> = []
  const verifyRates: Array<number> = []
  let verifySeconds = 0
  let events = 0
  for (let round = 0; round < ROUNDS; round++) {
    // bare: JCS (`canonicalize`) + sha256 over the same events, in memory
    const t0 = performance.now()
    for (const b of bodies) sink ^= sha256Hex(LEDGER_HASH_DOMAIN + (b.parent ?? "") + canonicalize(b)!).charCodeAt(0)
    bareRates.push(bodies.length / ((performance.now() - t0) / 1000))
    // the product's own hash over the same events
    const t2 = performance.now()
    for (const b of bodies) sink ^= eventHash(b).charCodeAt(0)
    productRates.push(bodies.length / ((performance.now() - t2) / 1000))
    const t1 = performance.now()
    const report = await runtime.runPromise(Effect.flatMap(Ledger, (l) => l.verify()))
    verifySeconds = (performance.now() - t1) / 1000
    if (!report.ok) throw new Error(`bench chain does not verify: ${JSON.stringify(report.first_break)}`)
    events = report.events
    verifyRates.push(report.events / verifySeconds)
  }
  const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[xs.length >> 1]
  const bare = median(bareRates)
  const product = median(productRates)
  const verify = median(verifyRates)
  await runtime.dispose()
  rows.push([
    `replay (verify) of ${fmt(events)} events, ${fmt(REPLAY_ITEMS)} items (median of ${ROUNDS} alternating rounds)`,
    `${fmt(verify)} events/s`,
    `${fmt(bare)} events/s`,
    (verify / bare).toFixed(2)
  ])
  rows.push([
    `replay (verify), against the product's \`eventHash\` instead`,
    `${fmt(verify)} events/s`,
    `${fmt(product)} events/s`,
    (verify / product).toFixed(2)
  ])
  return { buildSeconds, verifySeconds, sink }
}

try {
  await appendBench(1)
  await appendBench(1000)
  const r = await replayBench()
  console.log(`## Ledger\n`)
  console.log(`| scenario | Sophia | raw baseline | ratio (target ≥ 0.5) |`)
  console.log(`|---|---|---|---|`)
  for (const row of rows) console.log(`| ${row.join(" | ")} |`)
  console.log(
    `\nraw baseline: append = a better-sqlite3 BEGIN IMMEDIATE transaction doing the same event insert + conditional head UPDATE (same hash, the product's \`eventHash\`); replay = bare JCS (\`canonicalize\`) + sha256 over the same events in memory (second replay row: the product's \`eventHash\` over them). Replay fixture built in ${r.buildSeconds.toFixed(1)} s, verified in ${r.verifySeconds.toFixed(1)} s.\n`
  )
} finally {
  fs.rmSync(dir, { recursive: true, force: true })
}
