/**
 * Two real `sophia serve` processes on one Postgres database share the outbox (docs/architecture.md,
 * "Notifications"): 200 notifications queued while both serve are each delivered once — the receiver hears each
 * `Sophia-Delivery` exactly once and every row ends `delivered` after one attempt — the rows claimed with
 * `FOR UPDATE SKIP LOCKED`. Runs in the vitest `postgres` project only.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, ManagedRuntime, Option } from "effect"
import { randomUUID } from "node:crypto"
import Pg from "pg"
import { afterAll, beforeAll } from "vitest"
import { SophiaLive } from "../../src/layers/App.js"
import { StoreChoice } from "../../src/layers/Sql.js"
import { Auth } from "../../src/services/Auth.js"
import { Notifications } from "../../src/services/Notifications.js"
import type { Daemon } from "../support/Daemon.js"
import { startDaemon } from "../support/Daemon.js"
import { admin, PG_BASE } from "../support/PgAdmin.js"
import { type Receiver, startReceiver } from "../support/Receiver.js"

const N = 200
const dbName = `sophia_nt_${randomUUID().replaceAll("-", "").slice(0, 16)}`
const dbUrl = (() => {
  const u = new URL(PG_BASE)
  u.pathname = `/${dbName}`
  return u.toString()
})()

let daemons: Array<Daemon> = []
let receiver: Receiver

beforeAll(async () => {
  await admin(`CREATE DATABASE ${dbName}`)
  daemons = await Promise.all([0, 1].map(() => startDaemon("/nonexistent/ignored.db", { SOPHIA_DATABASE_URL: dbUrl })))
  // a receiver that takes a few ms a request, as a real one does: both daemons find work to do
  receiver = await startReceiver(() => 200)
}, 180_000)

afterAll(async () => {
  await Promise.all(daemons.map((d) => d.kill("SIGTERM")))
  await receiver?.close()
  await admin(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`)
}, 60_000)

describe.sequential("two daemons on one Postgres database", () => {
  it(`each of ${N} notifications is delivered once`, { timeout: 120_000 }, async () => {
    const runtime = ManagedRuntime.make(SophiaLive(StoreChoice.postgres(dbUrl)))
    try {
      const ids = await runtime.runPromise(Effect.gen(function*() {
        const owner = Option.getOrThrow(yield* Effect.flatMap(Auth, (a) => a.userIdOf()))
        const n = yield* Notifications
        const target = yield* n.addTarget(owner, { url: receiver.url, events: ["orphan"] })
        return yield* Effect.forEach(Array.from({ length: N }), () => Effect.map(n.sendTest(owner, target.id), (t) => t.notification_id), {
          concurrency: 8
        })
      }))
      await receiver.waitFor(N, 60_000)
      // anything sent twice would arrive by now
      await new Promise((r) => setTimeout(r, 2000))
      const heard = receiver.received.map((r) => r.headers["sophia-delivery"] as string)
      assert.strictEqual(heard.length, N, "no notification sent twice")
      assert.deepStrictEqual(new Set(heard), new Set(ids))
      const c = new Pg.Client({ connectionString: dbUrl })
      await c.connect()
      try {
        const rows = await c.query("SELECT status, attempts, claimed_by FROM notify_outbox")
        assert.strictEqual(rows.rows.length, N)
        assert.isTrue(rows.rows.every((r) => r.status === "delivered" && Number(r.attempts) === 1))
        const byDaemon = new Map<string, number>()
        for (const r of rows.rows) byDaemon.set(r.claimed_by, (byDaemon.get(r.claimed_by) ?? 0) + 1)
        console.log(`notifications sent per daemon: ${[...byDaemon.values()].join(", ")}`)
      } finally {
        await c.end()
      }
    } finally {
      await runtime.dispose()
    }
  })
})
