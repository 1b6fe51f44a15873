/**
 * Leases race-free across daemons on one Postgres database: two real `sophia serve` processes on a fresh
 * database, 20 OS processes (half on each daemon, REST) asking for the same exclusive lease at the same moment
 * — exactly one wins, every other is refused naming the winner; a slot of capacity 3 admits exactly 3; a wait
 * for the lease's release on one daemon wakes a lease_acquire long poll on the other. Runs in the vitest
 * `postgres` project only.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, ManagedRuntime } from "effect"
import { randomUUID } from "node:crypto"
import Pg from "pg"
import { afterAll, beforeAll } from "vitest"
import { SophiaLive } from "../../src/layers/App.js"
import { StoreChoice } from "../../src/layers/Sql.js"
import { Auth } from "../../src/services/Auth.js"
import type { Daemon } from "../support/Daemon.js"
import { startDaemon } from "../support/Daemon.js"
import { restCall } from "../support/HeadHistory.js"
import type { RaceOutcome } from "../support/LeaseRace.js"
import { raceLeases } from "../support/LeaseRace.js"

const BASE = process.env.SOPHIA_TEST_POSTGRES_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const RACERS = 20

const admin = async <A>(url: string, f: (c: Pg.Client) => Promise<A>): Promise<A> => {
  const c = new Pg.Client({ connectionString: url })
  await c.connect()
  try {
    return await f(c)
  } finally {
    await c.end()
  }
}

const dbName = `sophia_lr_${randomUUID().replaceAll("-", "").slice(0, 16)}`
const dbUrl = (() => {
  const u = new URL(BASE)
  u.pathname = `/${dbName}`
  return u.toString()
})()

let daemons: Array<Daemon> = []
let bearers: Array<string> = []

beforeAll(async () => {
  await admin(BASE, (c) => c.query(`CREATE DATABASE ${dbName}`))
  const env = { SOPHIA_DATABASE_URL: dbUrl, SOPHIA_SWEEP_INTERVAL_MS: "60000" }
  daemons = await Promise.all([0, 1].map(() => startDaemon("/nonexistent/ignored.db", env)))
  const runtime = ManagedRuntime.make(SophiaLive(StoreChoice.postgres(dbUrl)))
  try {
    bearers = await runtime.runPromise(Effect.forEach(
      Array.from({ length: RACERS }, (_, i) => i),
      (i) => Effect.map(Effect.flatMap(Auth, (a) => a.createConnection({ name: `racer-${i}`, profile: "full" })), (m) => m.bearer),
      { concurrency: 4 }
    ))
  } finally {
    await runtime.dispose()
  }
}, 180_000)

afterAll(async () => {
  await Promise.all(daemons.map((d) => d.kill("SIGTERM")))
  await admin(BASE, (c) => c.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`))
}, 60_000)

const winners = (round: ReadonlyArray<RaceOutcome>) => round.filter((o): o is { lease_id: string } => "lease_id" in o)

describe.sequential("leases across two daemons on one Postgres database", () => {
  it("20 processes over two daemons race: one exclusive winner, a slot of 3 admits exactly 3", async () => {
    const [exclusive, slot] = await raceLeases("rest", (i) => daemons[i % 2].baseUrl, bearers, [
      { resources: ["path:src/**"], reason: "race" },
      { resources: ["slot:build"], mode: "shared", capacity: 3, reason: "race" }
    ])
    const won = winners(exclusive)
    assert.lengthOf(won, 1, JSON.stringify(exclusive))
    for (const o of exclusive) {
      if ("code" in o) {
        assert.strictEqual(o.code, "lease_conflict")
        assert.deepStrictEqual(o.holders.map((h) => h.lease_id), [won[0].lease_id])
      }
    }
    assert.lengthOf(winners(slot), 3, JSON.stringify(slot))
    const stored = await admin(dbUrl, (c) =>
      c.query("SELECT COUNT(*) AS n FROM leases WHERE status = 'active' AND resources LIKE '%slot:build%'"))
    assert.strictEqual(Number(stored.rows[0].n), 3)
  }, 300_000)

  it("a lease_acquire long poll on one daemon is granted when the holder releases on the other", async () => {
    const [a, b] = daemons
    const held = await restCall(a.baseUrl, bearers[0], "sophia.lease_acquire", { resources: ["slot:deploy"], reason: "deploying" })
    assert.strictEqual(held.status, 200, JSON.stringify(held.body))
    const started = Date.now()
    const waiting = restCall(b.baseUrl, bearers[1], "sophia.lease_acquire", { resources: ["slot:deploy"], reason: "next", wait_s: 30 })
    await new Promise((r) => setTimeout(r, 300))
    const released = await restCall(a.baseUrl, bearers[0], "sophia.lease_release", { lease_id: held.body.lease_id })
    assert.strictEqual(released.status, 200, JSON.stringify(released.body))
    const granted = await waiting
    assert.strictEqual(granted.status, 200, JSON.stringify(granted.body))
    assert.isBelow(Date.now() - started, 30_000)
  }, 120_000)
})
