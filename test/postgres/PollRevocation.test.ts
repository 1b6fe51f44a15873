/**
 * Long polls across daemons on Postgres (issue 28): app instances on one schema, each with its own pool and
 * LISTEN connection, as separate daemons — and one without (`cli`), as the `sophia` CLI is: it commits and
 * tells nobody. A poll parked on daemon B answers `unauthenticated` when A revokes its connection (NOTIFY) and
 * when the CLI does (B finds it by looking, `ForeignWrites`); an approval wait on B wakes on the CLI's
 * decision; the pending-approvals cap holds exactly with two daemons asking at once; a post on A wakes one
 * read on B for the parked polls of one connection. A `lease_acquire` long poll parked on B (issue 30) ends
 * `unauthenticated` on a revocation through A or the CLI, and is granted when A's holder releases. Runs in the vitest `postgres` project only.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, ManagedRuntime } from "effect"
import { randomUUID } from "node:crypto"
import type { Caller } from "../../src/domain/Auth.js"
import { SophiaLive } from "../../src/layers/App.js"
import { CrossDaemonEvents } from "../../src/layers/CrossDaemon.js"
import { withSearchPath } from "../../src/layers/Pg.js"
import { StoreChoice } from "../../src/layers/Sql.js"
import { Dispatcher } from "../../src/mcp/Dispatch.js"
import { Approvals } from "../../src/services/Approvals.js"
import { Auth } from "../../src/services/Auth.js"
import { Wakeups } from "../../src/services/Wakeups.js"
import { admin, PG_BASE } from "../support/PgAdmin.js"

const daemon = (url: string) => ManagedRuntime.make(CrossDaemonEvents.pipe(Layer.provideMerge(SophiaLive(StoreChoice.postgres(url)))))
/** What the CLI runs: the app over the store, without the cross-daemon channel. */
const cliApp = (url: string) => ManagedRuntime.make(SophiaLive(StoreChoice.postgres(url)))
type App = ReturnType<typeof cliApp>

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const within = <A>(p: Promise<A>, ms: number, what: string) =>
  Promise.race([p, sleep(ms).then(() => Promise.reject(new Error(`${what} did not end within ${ms} ms`)))])
const call = (app: App, caller: Caller, name: string, args: unknown) =>
  app.runPromise(Effect.flatMap(Dispatcher, (d) => d.call(caller, name, args))).then((o) => o.body as any)
const mint = async (app: App, on: App, name: string, profile: "full" | "assistant" = "full") => {
  const minted = await app.runPromise(Effect.flatMap(Auth, (auth) => auth.createConnection({ name, profile })))
  return on.runPromise(Effect.flatMap(Auth, (auth) => auth.authenticate(minted.bearer)))
}
const stats = (app: App) => app.runPromise(Effect.map(Wakeups, (w) => w.stats()))
const untilWaiting = async (app: App, n: number) => {
  for (let i = 0; i < 2_000 && (await stats(app)).waiting < n; i++) await sleep(5)
  assert.strictEqual((await stats(app)).waiting, n, "parked and waiting")
}

/** Daemons A and B and the CLI's app on a fresh schema, for the length of `body`. */
const withDaemons = async (body: (apps: { a: App; b: App; cli: App }) => Promise<void>) => {
  const schema = `t_${randomUUID().replaceAll("-", "")}`
  await admin(`CREATE SCHEMA ${schema}`)
  const url = withSearchPath(PG_BASE, schema)
  const apps = { a: daemon(url), b: daemon(url), cli: cliApp(url) }
  try {
    await apps.a.runPromise(Effect.void)
    await apps.b.runPromise(Effect.void)
    await body(apps)
  } finally {
    await Promise.all([apps.a.dispose(), apps.b.dispose(), apps.cli.dispose()])
    await admin(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
  }
}

describe("long polls across daemons (Postgres)", () => {
  it("revocation through another daemon, or the CLI; a decision by the CLI; the pending cap with two daemons; one read per post", async () => {
    await withDaemons(async ({ a, b, cli }) => {
      const writer = await mint(a, a, "writer")

      // revoked through daemon A while parked on daemon B: over NOTIFY
      const viaA = await mint(a, b, "revoked-on-a")
      const pollA = call(b, viaA, "sophia.coordination_inbox", { wait_s: 60 })
      await untilWaiting(b, 1)
      const startedA = Date.now()
      await a.runPromise(Effect.flatMap(Auth, (auth) => auth.revoke("revoked-on-a")))
      await call(a, writer, "sophia.coordination_post", { channel: "c", kind: "status", body: "after the revocation" })
      const endedA = await within(pollA, 15_000, "the poll on B")
      assert.strictEqual(endedA.error?.code, "unauthenticated", JSON.stringify(endedA))
      assert.isBelow(Date.now() - startedA, 15_000)
      await untilWaiting(b, 0)

      // revoked by the CLI (no NOTIFY): B finds it by looking
      const viaCli = await mint(a, b, "revoked-by-cli")
      const parked = call(b, viaCli, "sophia.coordination_inbox", { channel: "quiet", cursor: "p0", wait_s: 60 })
      await untilWaiting(b, 1)
      await cli.runPromise(Effect.flatMap(Auth, (auth) => auth.revoke("revoked-by-cli")))
      const endedCli = await within(parked, 15_000, "the poll on B after the CLI's revocation")
      assert.strictEqual(endedCli.error?.code, "unauthenticated", JSON.stringify(endedCli))

      // a decision by the CLI wakes an approval wait on B
      const helper = await mint(a, b, "helper", "assistant")
      const refused = await call(b, helper, "sophia.add_document", { title: "t", body: "b" })
      assert.strictEqual(refused.error?.code, "approval_required")
      const waiting = call(b, helper, "sophia.approval_status", { approval_id: refused.error.approval_id, wait_s: 60 })
      await untilWaiting(b, 1)
      await cli.runPromise(Effect.flatMap(Approvals, (approvals) => approvals.decide(refused.error.approval_id, "approved")))
      assert.strictEqual((await within(waiting, 15_000, "the approval wait on B")).status, "approved")

      // the pending cap with two daemons asking at once: exactly 50 pending, never more
      const asker = await mint(a, a, "asker", "assistant")
      const askerOnB = await b.runPromise(Effect.flatMap(Auth, (auth) => auth.get(asker.connectionId)))
      assert.isTrue(askerOnB._tag === "Some")
      for (let i = 0; i < 45; i++) await call(a, asker, "sophia.add_document", { title: `t${i}`, body: "b" })
      const burst = await Promise.all(Array.from({ length: 20 }, (_, i) =>
        call(i % 2 === 0 ? a : b, asker, "sophia.add_document", { title: `burst${i}`, body: "b" })))
      const codes = burst.map((r) => r.error?.code)
      assert.strictEqual(codes.filter((c) => c === "approval_required").length, 5, JSON.stringify(codes))
      assert.strictEqual(codes.filter((c) => c === "rate_limited").length, 15, JSON.stringify(codes))

      // a post on A wakes one read on B for the 8 polls of one connection
      const reader = await mint(a, b, "reader")
      const polls = Array.from({ length: 8 }, () => call(b, reader, "sophia.coordination_inbox", { channel: "wake", unread_only: true, wait_s: 60 }))
      // (the seven left parked end with the daemons)
      for (const p of polls) p.catch(() => undefined)
      await untilWaiting(b, 8)
      const before = (await stats(b)).wokenReads
      await call(a, writer, "sophia.coordination_post", { channel: "wake", kind: "status", body: "once" })
      const first = await within(Promise.race(polls), 15_000, "a poll on B")
      assert.deepStrictEqual(first.posts.map((p: any) => p.body), ["once"])
      await sleep(200)
      assert.strictEqual((await stats(b)).wokenReads - before, 1)
      assert.strictEqual((await stats(b)).waiting, 7)
    })
  }, 120_000)

  it("lease_acquire long polls on B: ended unauthenticated by a revocation through A or the CLI, granted by a release on A", async () => {
    await withDaemons(async ({ a, b, cli }) => {
      const holder = await mint(a, a, "holder")
      const held = await call(a, holder, "sophia.lease_acquire", { resources: ["slot:deploy"], reason: "deploying" })
      assert.isString(held.lease_id, JSON.stringify(held))

      // revoked through daemon A while its lease poll is parked on B (over NOTIFY, not at its deadline), and by
      // the CLI (no NOTIFY: B finds it by looking, since the poll holds its connection)
      for (const [name, revoker] of [["lease-revoked-on-a", a], ["lease-revoked-by-cli", cli]] as const) {
        const parked = await mint(a, b, name)
        const poll = call(b, parked, "sophia.lease_acquire", { resources: ["slot:deploy"], reason: "next", wait_s: 60 })
        await untilWaiting(b, 1)
        await revoker.runPromise(Effect.flatMap(Auth, (auth) => auth.revoke(name)))
        const ended = await within(poll, 15_000, `${name}'s lease poll on B`)
        assert.strictEqual(ended.error?.code, "unauthenticated", JSON.stringify(ended))
        await untilWaiting(b, 0)
      }

      // the holder releases on A: the poll on B is granted
      const next = await mint(a, b, "next")
      const waiting = call(b, next, "sophia.lease_acquire", { resources: ["slot:deploy"], reason: "next", wait_s: 60 })
      await untilWaiting(b, 1)
      assert.strictEqual((await call(a, holder, "sophia.lease_release", { lease_id: held.lease_id })).status, "released")
      const granted = await within(waiting, 15_000, "the lease poll on B after the release on A")
      assert.isString(granted.lease_id, JSON.stringify(granted))
    })
  }, 120_000)
})
