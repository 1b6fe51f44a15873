import { assert, describe, it } from "@effect/vitest"
import { Effect, ManagedRuntime } from "effect"
import fc from "fast-check"
import type { Caller } from "../src/domain/Auth.js"
import type { Evidence } from "../src/domain/Ledger.js"
import { evidenceRank } from "../src/domain/Ledger.js"
import { SophiaTest } from "../src/layers/App.js"
import { settle } from "../src/domain/LedgerCore.js"
import { stateHash } from "../src/domain/LedgerHash.js"
import { replay } from "../src/domain/LedgerReplay.js"
import { Ledger } from "../src/services/Ledger.js"
import { connect } from "./support/Fixtures.js"

/**
 * Model-based: random sequences of appends (fresh and stale), observations, claims, reviews and
 * verdicts run against the real service on a fresh SQLite, and against a small model that predicts
 * each outcome. Afterwards the chain must verify and replay identically, and the history must show
 * that no downgrade and no self-certification ever got through, and that every verdict has its request.
 */

const WORK = "w"
const SHAS = ["1".repeat(64), "2".repeat(64)] as const
const FIELDS = ["status", "ci", "review"] as const

interface Model {
  seq: number
  heads: Array<string>
  closed: boolean
  claimant: number | null
  workers: Set<number>
  fields: Map<string, Evidence>
  requests: Array<{ id: string; sha: string; status: "pending" | "done" }>
}

interface Real {
  readonly runtime: ManagedRuntime.ManagedRuntime<Ledger, never>
  readonly callers: ReadonlyArray<Caller>
  readonly userId: string
}

type Outcome = { ok: true; head: string } | { ok: false; tag: string }

const run = (r: Real, f: (ledger: Ledger) => Effect.Effect<{ head: string }, { _tag: string }>) =>
  r.runtime.runPromise(
    Effect.flatMap(Ledger, f).pipe(
      Effect.map((x): Outcome => ({ ok: true, head: x.head })),
      Effect.catchAll((e) => Effect.succeed<Outcome>({ ok: false, tag: e._tag }))
    )
  )

const expectOutcome = (m: Model, got: Outcome, expected: string | "ok", label: string) => {
  if (expected === "ok") {
    assert.isTrue(got.ok, `${label}: expected success, got ${JSON.stringify(got)}`)
    if (got.ok) {
      m.seq += 1
      m.heads.push(got.head)
    }
  } else {
    assert.deepStrictEqual(got, { ok: false, tag: expected }, label)
  }
}

const head = (m: Model) => m.heads[m.heads.length - 1]

/** After every command, the settled state agrees with the model. */
const agree = async (m: Model, r: Real) => {
  const state = await r.runtime.runPromise(Effect.flatMap(Ledger, (l) => l.state(r.userId, WORK)))
  assert.strictEqual(state!.seq, m.seq)
  assert.strictEqual(state!.head, head(m))
  assert.strictEqual(state!.claimant, m.claimant === null ? null : r.callers[m.claimant].connectionId)
  assert.strictEqual(state!.status, m.closed ? "closed" : "open")
  for (const f of FIELDS) assert.strictEqual(state!.fields[f]?.evidence, m.fields.get(f), f)
}

class AssertCmd implements fc.AsyncCommand<Model, Real> {
  constructor(readonly who: number, readonly field: string, readonly stale: boolean) {}
  check = () => true
  async run(m: Model, r: Real) {
    const useStale = this.stale && m.heads.length > 1
    const expected = useStale ? m.heads[0] : head(m)
    const got = await run(r, (l) =>
      l.append(r.callers[this.who], { work_id: WORK, expected_head: expected, events: [{ type: "asserted", field: this.field, value: this.who }] }))
    const current = m.fields.get(this.field)
    // `review` is the verdict's field: agents may never assert it (checked before anything else)
    const prediction = this.field === "review"
      ? "ValidationError"
      : useStale
      ? "HeadMoved"
      : m.closed
      ? "InvalidTransition"
      : current && evidenceRank(current) > evidenceRank("asserted")
      ? "EvidenceDowngrade"
      : "ok"
    expectOutcome(m, got, prediction, this.toString())
    if (prediction === "ok") {
      m.fields.set(this.field, "asserted")
      m.workers.add(this.who)
    }
    await agree(m, r)
  }
  toString = () => `assert(c${this.who}, ${this.field}${this.stale ? ", stale" : ""})`
}

class ObserveCmd implements fc.AsyncCommand<Model, Real> {
  constructor(readonly field: string) {}
  check = () => true
  async run(m: Model, r: Real) {
    const got = await run(r, (l) => l.observe(r.userId, WORK, this.field, "seen", "property test"))
    const current = m.fields.get(this.field)
    const prediction = current && evidenceRank(current) > evidenceRank("observed") ? "EvidenceDowngrade" : "ok"
    expectOutcome(m, got, prediction, this.toString())
    if (prediction === "ok") m.fields.set(this.field, "observed")
    await agree(m, r)
  }
  toString = () => `observe(${this.field})`
}

class ClaimCmd implements fc.AsyncCommand<Model, Real> {
  constructor(readonly who: number, readonly release: boolean) {}
  check = () => true
  async run(m: Model, r: Real) {
    const got = await run(r, (l) =>
      l.append(r.callers[this.who], {
        work_id: WORK,
        expected_head: head(m),
        events: [{ type: this.release ? "released" : "claimed" }]
      }))
    const prediction = m.closed
      ? "InvalidTransition"
      : this.release
      ? (m.claimant === this.who ? "ok" : "InvalidTransition")
      : (m.claimant === null ? "ok" : "InvalidTransition")
    expectOutcome(m, got, prediction, this.toString())
    if (prediction === "ok") {
      m.claimant = this.release ? null : this.who
      if (!this.release) m.workers.add(this.who)
    }
    await agree(m, r)
  }
  toString = () => `${this.release ? "release" : "claim"}(c${this.who})`
}

class RequestCmd implements fc.AsyncCommand<Model, Real> {
  constructor(readonly who: number, readonly sha: number) {}
  check = () => true
  async run(m: Model, r: Real) {
    const res = await r.runtime.runPromise(Effect.flatMap(Ledger, (l) =>
      l.requestReview(r.callers[this.who], { work_id: WORK, expected_head: head(m), artifact: { uri: "art", sha256: SHAS[this.sha] } })))
    expectOutcome(m, { ok: true, head: res.head }, "ok", this.toString())
    assert.isFalse(m.requests.some((q) => q.id === res.request_id), "request ids are unique")
    m.requests.push({ id: res.request_id, sha: SHAS[this.sha], status: "pending" })
    m.workers.add(this.who)
    await agree(m, r)
  }
  toString = () => `request(c${this.who}, sha${this.sha})`
}

class VerdictCmd implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly who: number,
    readonly request: number,
    readonly approve: boolean,
    readonly rightSha: boolean
  ) {}
  check = () => true
  async run(m: Model, r: Real) {
    // pick 0: a request id nobody minted; 1: an answered request if any; else a pending one if any
    const pending = m.requests.filter((q) => q.status === "pending")
    const done = m.requests.filter((q) => q.status === "done")
    const req = this.request === 0
      ? undefined
      : this.request === 1 && done.length > 0
      ? done[0]
      : pending.length > 0
      ? pending[this.request % pending.length]
      : done[0]
    const sha = req ? (this.rightSha ? req.sha : SHAS.find((s) => s !== req.sha)!) : SHAS[0]
    const got = await run(r, (l) =>
      l.giveVerdict(r.callers[this.who], {
        request_id: req?.id ?? "rev_unknown",
        expected_head: head(m),
        verdict: this.approve ? "approved" : "rejected",
        artifact_sha256: sha
      }))
    const prediction = !req || req.status !== "pending"
      ? "InvalidTransition"
      : !this.rightSha
      ? "ValidationError"
      : m.workers.has(this.who)
      ? "SelfCertification"
      : "ok"
    expectOutcome(m, got, prediction, this.toString())
    if (prediction === "ok") {
      req!.status = "done"
      if (this.approve) m.fields.set("review", "verified")
    }
    await agree(m, r)
  }
  toString = () => `verdict(c${this.who}, req${this.request}, ${this.approve ? "approve" : "reject"}${this.rightSha ? "" : ", wrong sha"})`
}

class CloseCmd implements fc.AsyncCommand<Model, Real> {
  constructor(readonly who: number) {}
  check = () => true
  async run(m: Model, r: Real) {
    const got = await run(r, (l) =>
      l.append(r.callers[this.who], { work_id: WORK, expected_head: head(m), events: [{ type: "closed", resolution: "done" }] }))
    const prediction = m.closed ? "InvalidTransition" : "ok"
    expectOutcome(m, got, prediction, this.toString())
    if (prediction === "ok") m.closed = true
    await agree(m, r)
  }
  toString = () => `close(c${this.who})`
}

class EmptyCmd implements fc.AsyncCommand<Model, Real> {
  check = () => true
  async run(m: Model, r: Real) {
    const got = await run(r, (l) => l.append(r.callers[0], { work_id: WORK, expected_head: head(m), events: [] }))
    expectOutcome(m, got, "ValidationError", "empty append")
    await agree(m, r)
  }
  toString = () => "empty()"
}

/** c0..c2 do work; c3 and c4 only ever review (so verdicts both succeed and self-certify) */
const CONNECTIONS = 5
const worker = fc.integer({ min: 0, max: 2 })
const anyone = fc.integer({ min: 0, max: CONNECTIONS - 1 })
const verdict = fc.tuple(anyone, fc.integer({ min: 0, max: 9 }), fc.boolean(), fc.integer({ min: 0, max: 5 }).map((n) => n > 0))
  .map(([w, q, a, s]) => new VerdictCmd(w, q, a, s))
const request = fc.tuple(worker, fc.integer({ min: 0, max: 1 })).map(([w, s]) => new RequestCmd(w, s))
const commands = fc.commands(
  [
    fc.tuple(worker, fc.constantFrom(...FIELDS), fc.boolean()).map(([w, f, s]) => new AssertCmd(w, f, s)),
    fc.constantFrom(...FIELDS).map((f) => new ObserveCmd(f)),
    fc.tuple(worker, fc.boolean()).map(([w, rel]) => new ClaimCmd(w, rel)),
    request,
    request,
    verdict,
    verdict,
    verdict,
    worker.map((w) => new CloseCmd(w)),
    fc.constant(new EmptyCmd())
  ],
  { maxCommands: 40 }
)

describe("Ledger properties (model-based)", () => {
  it("random histories agree with the model; verify, replay, no downgrade, no self-certification", async () => {
    await fc.assert(
      fc.asyncProperty(commands, async (cmds) => {
        const runtime = ManagedRuntime.make(SophiaTest)
        try {
          const setup = await runtime.runPromise(Effect.gen(function*() {
            const callers: Array<Caller> = []
            for (let i = 0; i < CONNECTIONS; i++) callers.push((yield* connect(`c${i}`)).caller)
            const created = yield* (yield* Ledger).append(callers[0], {
              work_id: WORK,
              expected_head: null,
              events: [{ type: "opened", title: "t" }]
            })
            return { callers, head: created.head }
          }))
          const real: Real = {
            runtime: runtime as unknown as ManagedRuntime.ManagedRuntime<Ledger, never>,
            callers: setup.callers,
            userId: setup.callers[0].userId
          }
          const model: Model = {
            seq: 1,
            heads: [setup.head],
            closed: false,
            claimant: null,
            workers: new Set(),
            fields: new Map(),
            requests: []
          }
          await fc.asyncModelRun(() => ({ model, real }), cmds)

          const { events, report, stored } = await runtime.runPromise(Effect.gen(function*() {
            const ledger = yield* Ledger
            return {
              events: yield* ledger.events(real.userId, WORK),
              report: yield* ledger.verify(),
              stored: yield* ledger.state(real.userId, WORK)
            }
          }))
          assert.isTrue(report.ok, JSON.stringify(report))
          assert.strictEqual(events.length, model.seq)
          // replay determinism: twice from scratch, same state hash, equal to the settled tables
          const once = replay(events)
          const twice = replay(events)
          assert.isNull(once.break)
          assert.strictEqual(stateHash(settle(once.state!)), stateHash(settle(twice.state!)))
          assert.strictEqual(stateHash(settle(once.state!)), stateHash(stored!))
          // history-level invariants
          const bestSoFar = new Map<string, number>()
          const workers = new Set<string>()
          const requested = new Set<string>()
          for (const e of events) {
            if (e.type === "asserted" || e.type === "observed" || (e.type === "review_verdict" && e.data.verdict === "approved")) {
              const field = e.type === "review_verdict" ? "review" : e.data.field
              const rank = evidenceRank(e.evidence)
              assert.isAtLeast(rank, bestSoFar.get(field) ?? 0, `downgrade of ${field} at seq ${e.seq}`)
              bestSoFar.set(field, rank)
            }
            if (e.type === "claimed" || e.type === "asserted" || e.type === "review_requested") workers.add(e.actor)
            if (e.type === "review_requested") requested.add(e.data.request_id)
            if (e.type === "review_verdict") {
              assert.isTrue(requested.has(e.data.request_id), `verdict without its request at seq ${e.seq}`)
              assert.isFalse(workers.has(e.actor), `self-certification at seq ${e.seq}`)
            }
            if (e.evidence === "verified") assert.strictEqual(e.type, "review_verdict")
            if (e.evidence === "observed") assert.strictEqual(e.actor, "server")
          }
        } finally {
          await runtime.dispose()
        }
      }),
      { numRuns: 80 }
    )
  }, 180_000)
})
