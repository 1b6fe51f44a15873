/**
 * Revocation ends a running `execute_code` on Postgres, on every daemon (issue 28): two app instances on one
 * schema (each its own pool, its own sandbox, its own LISTEN connection, as two daemons). A connection's run
 * on daemon B ends `unauthenticated` when daemon A revokes it (the event crosses over NOTIFY), and when B
 * itself does — then nothing of it is written after `revoked_at`. Runs in the vitest `postgres` project only.
 */
import { SqlClient } from "@effect/sql"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, ManagedRuntime } from "effect"
import { randomUUID } from "node:crypto"
import { SophiaLive } from "../../src/layers/App.js"
import { CrossDaemonEvents } from "../../src/layers/CrossDaemon.js"
import { withSearchPath } from "../../src/layers/Pg.js"
import { StoreChoice } from "../../src/layers/Sql.js"
import { Dispatcher } from "../../src/mcp/Dispatch.js"
import { Auth } from "../../src/services/Auth.js"
import { admin, PG_BASE } from "../support/PgAdmin.js"

const daemon = (url: string) => ManagedRuntime.make(CrossDaemonEvents.pipe(Layer.provideMerge(SophiaLive(StoreChoice.postgres(url)))))
type Daemon = ReturnType<typeof daemon>

/** 24 posts, each followed by a 100 ms read: ~2.5 s of run, far from its 30 s deadline. */
const PACED = `
  for (let i = 0; i < 24; i++) {
    await sophia.coordinationPost({ channel: "paced", kind: "status", body: "post " + i })
    await sophia.search({ query: "nothing" + i })
    const t = Date.now(); while (Date.now() - t < 100) {}
  }
  return "finished"
`

const postsOf = (d: Daemon, connectionId: string) =>
  d.runPromise(Effect.orDie(Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ created_at: string }>`SELECT created_at FROM posts WHERE connection_id = ${connectionId}`)))

/** Run PACED on `runner` as the bearer's connection; revoke it on `revoker` once three posts landed. */
const revokeMidRun = async (runner: Daemon, revoker: Daemon, bearer: string, name: string) => {
  const caller = await runner.runPromise(Effect.flatMap(Auth, (auth) => auth.authenticate(bearer)))
  const run = runner.runPromise(Effect.flatMap(Dispatcher, (d) => d.call(caller, "sophia.execute_code", { code: PACED, timeout_ms: 30_000 })))
  for (let i = 0; i < 1000 && (await postsOf(runner, caller.connectionId)).length < 3; i++) await new Promise((r) => setTimeout(r, 20))
  const revokedWhen = Date.now()
  const info = await revoker.runPromise(Effect.flatMap(Auth, (auth) => auth.revoke(name)))
  const outcome = await run
  return { outcome, endedIn: Date.now() - revokedWhen, revokedAt: info.revoked_at!, posts: await postsOf(runner, caller.connectionId) }
}

describe("execute_code and revocation across daemons (Postgres)", () => {
  it("a run on daemon B ends when A revokes its connection; when B revokes it, nothing is written after revoked_at", async () => {
    const schema = `t_${randomUUID().replaceAll("-", "")}`
    await admin(`CREATE SCHEMA ${schema}`)
    const url = withSearchPath(PG_BASE, schema)
    const a = daemon(url)
    try {
      const [elsewhere, here] = await a.runPromise(Effect.all([
        Effect.flatMap(Auth, (auth) => auth.createConnection({ name: "revoked-elsewhere", profile: "full" })),
        Effect.flatMap(Auth, (auth) => auth.createConnection({ name: "revoked-here", profile: "full" }))
      ]))
      const b = daemon(url)
      try {
        // revoked on A while it runs on B: B hears it over NOTIFY and ends the run
        const crossed = await revokeMidRun(b, a, elsewhere.bearer, "revoked-elsewhere")
        assert.strictEqual((crossed.outcome.body as any).error?.code, "unauthenticated", JSON.stringify(crossed.outcome.body))
        assert.isBelow(crossed.endedIn, 10_000)
        assert.isBelow(crossed.posts.length, 24)

        // revoked on B itself: inside the revocation, exactly
        const local = await revokeMidRun(b, b, here.bearer, "revoked-here")
        assert.strictEqual((local.outcome.body as any).error?.code, "unauthenticated", JSON.stringify(local.outcome.body))
        assert.isBelow(local.endedIn, 10_000)
        assert.isAtLeast(local.posts.length, 3)
        assert.isBelow(local.posts.length, 24)
        for (const p of local.posts) assert.isTrue(p.created_at <= local.revokedAt, `${p.created_at} after ${local.revokedAt}`)
      } finally {
        await b.dispose()
      }
    } finally {
      await a.dispose()
      await admin(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
    }
  }, 120_000)
})
