/**
 * Several daemons on one Postgres database (docs/architecture.md, "Several daemons on one database"): three real
 * `sophia serve` processes started at the same moment on one fresh database, ≥ 30 REST clients spread over
 * them. Runs in the vitest `postgres` project only (it needs Postgres; CI makes that project mandatory).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, ManagedRuntime } from "effect"
import { randomUUID } from "node:crypto"
import Pg from "pg"
import { afterAll, beforeAll } from "vitest"
import { SophiaLive } from "../../src/layers/App.js"
import { StoreChoice } from "../../src/layers/Sql.js"
import { Auth } from "../../src/services/Auth.js"
import { sophia } from "../support/Cli.js"
import type { Daemon } from "../support/Daemon.js"
import { startDaemon } from "../support/Daemon.js"
import { restCall } from "../support/HeadHistory.js"

const BASE = process.env.SOPHIA_TEST_POSTGRES_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const CLIENTS = 33

const admin = async <A>(url: string, f: (c: Pg.Client) => Promise<A>): Promise<A> => {
  const c = new Pg.Client({ connectionString: url })
  await c.connect()
  try {
    return await f(c)
  } finally {
    await c.end()
  }
}

const dbName = `sophia_md_${randomUUID().replaceAll("-", "").slice(0, 16)}`
const dbUrl = (() => {
  const u = new URL(BASE)
  u.pathname = `/${dbName}`
  return u.toString()
})()

let daemons: Array<Daemon> = []
let bearers: Array<string> = []
let assistantBearer = ""
const env = { SOPHIA_DATABASE_URL: dbUrl, SOPHIA_APPROVAL_WAIT_MS: "0", SOPHIA_SWEEP_INTERVAL_MS: "60000" }

/** client i talks to daemon i mod 3 (unless told otherwise) */
const call = (i: number, tool: string, args: unknown, daemon = daemons[i % daemons.length]) =>
  restCall(daemon.baseUrl, bearers[i], tool, args)

beforeAll(async () => {
  await admin(BASE, (c) => c.query(`CREATE DATABASE ${dbName}`))
  // started at the same moment on an empty database: migrations run once, the owner is bootstrapped once
  daemons = await Promise.all([0, 1, 2].map(() => startDaemon("/nonexistent/ignored.db", env)))
  const runtime = ManagedRuntime.make(SophiaLive(StoreChoice.postgres(dbUrl)))
  try {
    const minted = await runtime.runPromise(Effect.gen(function*() {
      const auth = yield* Auth
      const full = yield* Effect.forEach(
        Array.from({ length: CLIENTS }, (_, i) => i),
        (i) => auth.createConnection({ name: `agent-${i}`, profile: "full" }),
        { concurrency: 8 }
      )
      const assistant = yield* auth.createConnection({ name: "assistant", profile: "assistant" })
      return { full, assistant }
    }))
    bearers = minted.full.map((m) => m.bearer)
    assistantBearer = minted.assistant.bearer
  } finally {
    await runtime.dispose()
  }
}, 180_000)

afterAll(async () => {
  await Promise.all(daemons.map((d) => d.kill("SIGTERM")))
  await admin(BASE, (c) => c.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`))
}, 60_000)

describe.sequential("three daemons on one Postgres database", () => {
  it("started together: migrations ran once and exactly one daemon bootstrapped the owner", async () => {
    assert.lengthOf(daemons, 3)
    assert.lengthOf(daemons.filter((d) => d.ownerBearer !== undefined), 1)
    const rows = await admin(dbUrl, (c) => c.query("SELECT migration_id FROM sophia_migrations ORDER BY migration_id"))
    const ids = rows.rows.map((r) => Number(r.migration_id))
    assert.deepStrictEqual(ids, [...new Set(ids)])
    const owners = await admin(dbUrl, (c) => c.query("SELECT COUNT(*) AS n FROM users WHERE is_owner = 1"))
    assert.strictEqual(Number(owners.rows[0].n), 1)
  })

  it(`${CLIENTS} clients racing appends on shared heads across the daemons: exactly one winner per head`, async () => {
    const items = ["race-a", "race-b", "race-c"]
    for (const workId of items) {
      const heads = new Map<string, string | null>()
      let expected: string | null = null
      for (let round = 0; round < 4; round++) {
        const replies = await Promise.all(Array.from({ length: CLIENTS }, (_, i) =>
          call(i, "sophia.ledger_append", {
            work_id: workId,
            expected_head: expected,
            events: round === 0 ? [{ type: "opened", title: workId }] : [{ type: "asserted", field: "round", value: round }]
          })))
        const winners = replies.filter((r) => r.status === 200)
        const losers = replies.filter((r) => r.status !== 200)
        assert.lengthOf(winners, 1, `round ${round} of ${workId}: ${JSON.stringify(replies.map((r) => r.body?.error?.code ?? "ok"))}`)
        for (const l of losers) {
          assert.strictEqual(l.body.error.code, "head_moved", JSON.stringify(l.body))
          assert.strictEqual(l.body.error.actual, winners[0].body.head)
        }
        assert.strictEqual(winners[0].body.seq, round + 1)
        heads.set(`${round}`, winners[0].body.head)
        expected = winners[0].body.head
      }
      const status = await call(0, "sophia.ledger_status", { work_id: workId })
      assert.strictEqual(status.body.settled.head, expected)
      assert.strictEqual(status.body.settled.seq, 4)
    }
  }, 180_000)

  it(`${CLIENTS} clients posting to one channel through three daemons: channel_seq unique and gapless`, async () => {
    const PER = 6
    const seqs = (await Promise.all(Array.from({ length: CLIENTS }, async (_, i) => {
      const mine: Array<number> = []
      for (let n = 0; n < PER; n++) {
        const r = await call(i, "sophia.coordination_post", { channel: "shared", kind: "status", body: `c${i} n${n}` })
        assert.strictEqual(r.status, 200, JSON.stringify(r.body))
        mine.push(r.body.channel_seq)
      }
      // each client's own posts land in its order
      for (let k = 1; k < mine.length; k++) assert.isAbove(mine[k], mine[k - 1])
      return mine
    }))).flat().sort((a, b) => a - b)
    assert.deepStrictEqual(seqs, Array.from({ length: CLIENTS * PER }, (_, k) => k + 1))
    const stored = await admin(dbUrl, (c) =>
      c.query("SELECT channel_seq FROM posts WHERE channel = 'shared' ORDER BY channel_seq"))
    assert.deepStrictEqual(stored.rows.map((r) => Number(r.channel_seq)), seqs)
    // unread counters exact across daemons: a client that never read sees every other client's post
    const fresh = await call(0, "sophia.coordination_inbox", { peek: true, limit: 1 })
    assert.strictEqual(fresh.body.unread_count, (CLIENTS - 1) * PER)
  }, 180_000)

  it("a wait declared on daemon A is satisfied by a post on daemon C", async () => {
    const [a, , c] = daemons
    const waiter = 1
    const awaited = 2
    const me = await call(awaited, "sophia.orient", {}, c)
    const awaitedName = me.body.you?.name ?? me.body.connection?.name ?? `agent-${awaited}`
    const declared = await call(waiter, "sophia.declare_wait", {
      on: awaitedName,
      predicate: { type: "post_exists", channel: "handoff", kind: "answer" },
      reason: "needs the answer"
    }, a)
    assert.strictEqual(declared.status, 200, JSON.stringify(declared.body))
    assert.isUndefined(declared.body.resolution)
    const posted = await call(awaited, "sophia.coordination_post", { channel: "handoff", kind: "answer", body: "42" }, c)
    assert.strictEqual(posted.status, 200)
    // the post's own transaction resolved it (on C); A reports it on the waiter's next response, once
    const next = await call(waiter, "sophia.coordination_inbox", { peek: true, limit: 1 }, a)
    const resolved = next.body._wait_resolved as Array<any>
    assert.isArray(resolved)
    assert.strictEqual(resolved.find((r) => r.wait_id === declared.body.wait_id)?.resolution, "satisfied")
    const again = await call(waiter, "sophia.coordination_inbox", { peek: true, limit: 1 }, daemons[1])
    assert.isUndefined(again.body._wait_resolved)
  }, 60_000)

  it("an approval retried on two daemons at once executes once; `sophia approvals` and `ledger verify` work on Postgres", async () => {
    const [a, b] = daemons
    const args = { title: "approved once", body: "a document written by an approved call" }
    const first = await restCall(a.baseUrl, assistantBearer, "sophia.add_document", args)
    assert.strictEqual(first.body.error?.code, "approval_required", JSON.stringify(first.body))
    const approvalId = first.body.error.approval_id as string
    const listed = sophia(["approvals", "list"], { SOPHIA_DATABASE_URL: dbUrl })
    assert.strictEqual(listed.status, 0, listed.stderr)
    assert.include(listed.stdout, approvalId)
    const approved = sophia(["approvals", "approve", approvalId], { SOPHIA_DATABASE_URL: dbUrl })
    assert.strictEqual(approved.status, 0, approved.stderr)
    const retried = await Promise.all(
      [a, b, a, b].map((d) => restCall(d.baseUrl, assistantBearer, "sophia.add_document", { ...args, approval_id: approvalId }))
    )
    for (const r of retried) assert.strictEqual(r.status, 200, JSON.stringify(r.body))
    const ids = new Set(retried.map((r) => r.body.document_id))
    assert.strictEqual(ids.size, 1)
    const docs = await admin(dbUrl, (c) => c.query("SELECT id FROM documents WHERE title = 'approved once'"))
    assert.lengthOf(docs.rows, 1)

    const verify = sophia(["ledger", "verify"], { SOPHIA_DATABASE_URL: dbUrl })
    assert.strictEqual(verify.status, 0, verify.stderr + verify.stdout)
    assert.isTrue(JSON.parse(verify.stdout).ok)
  }, 120_000)

  it("killing one of three daemons under load loses no acknowledged write; the other two keep serving", async () => {
    const acked: Array<{ post_id: string; channel_seq: number }> = []
    const victim = daemons[1]
    const alive = [daemons[0], daemons[2]]
    const stop = { stopped: false }
    let afterKill = 0
    let killed = false
    const client = async (i: number) => {
      let n = 0
      while (!stop.stopped) {
        // clients of the victim fail over to a live daemon once it is gone
        const target = daemons[i % 3] === victim && killed ? alive[i % 2] : daemons[i % 3]
        try {
          const r = await restCall(target.baseUrl, bearers[i], "sophia.coordination_post", {
            channel: "under-load",
            kind: "status",
            body: `c${i} n${n++}`
          })
          assert.strictEqual(r.status, 200, JSON.stringify(r.body))
          acked.push({ post_id: r.body.post_id, channel_seq: r.body.channel_seq })
          if (killed && target !== victim) afterKill++
        } catch (e) {
          // a connection the victim dropped mid-call is not acknowledged
          if (target !== victim) throw e
        }
      }
    }
    const running = Promise.all(Array.from({ length: CLIENTS }, (_, i) => client(i)))
    await new Promise((r) => setTimeout(r, 1500))
    await victim.kill("SIGKILL")
    killed = true
    await new Promise((r) => setTimeout(r, 2500))
    stop.stopped = true
    await running
    assert.isAbove(afterKill, 10, "the two live daemons kept serving")
    const stored = await admin(dbUrl, (c) =>
      c.query("SELECT id, channel_seq FROM posts WHERE channel = 'under-load' ORDER BY channel_seq"))
    const byId = new Map(stored.rows.map((r) => [r.id as string, Number(r.channel_seq)]))
    for (const a of acked) assert.strictEqual(byId.get(a.post_id), a.channel_seq, `acknowledged ${a.post_id} is stored`)
    const seqs = stored.rows.map((r) => Number(r.channel_seq))
    assert.deepStrictEqual(seqs, Array.from({ length: seqs.length }, (_, k) => k + 1))
    for (const d of alive) {
      const r = await restCall(d.baseUrl, bearers[0], "sophia.orient", {})
      assert.strictEqual(r.status, 200)
    }
    daemons = alive
  }, 120_000)
})
