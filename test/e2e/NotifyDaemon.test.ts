/**
 * Notifications from a real `sophia serve` process over a SQLite file (docs/architecture.md, "Notifications"):
 * a local receiver hears `approval_requested` within 2 s of the gated call, signed; a daemon killed with SIGKILL
 * while it is sending (the row committed and claimed, the POST unanswered) delivers it after its restart, with
 * the same `Sophia-Delivery`, and exactly one row is delivered. Targets are added through the Notifications
 * service in this process, on the same file (the CLI's handlers do the same: src/cli/Notify.ts).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, ManagedRuntime, Option } from "effect"
import { SophiaLive } from "../../src/layers/App.js"
import { Auth } from "../../src/services/Auth.js"
import { Notifications } from "../../src/services/Notifications.js"
import { sophia, tempDb } from "../support/Cli.js"
import { type Daemon, startDaemon } from "../support/Daemon.js"
import { startReceiver, verifySignature } from "../support/Receiver.js"

const mint = (db: string, name: string, profile: string) => {
  const r = sophia(["connection", "create", "--name", name, "--profile", profile, "--db", db])
  assert.strictEqual(r.status, 0, r.stderr)
  return JSON.parse(r.stdout.trim().split("\n").pop()!).bearer as string
}

const rest = async (daemon: Daemon, bearer: string, tool: string, args: unknown) => {
  const r = await fetch(`${daemon.baseUrl}/api/tools/${tool}`, {
    method: "POST",
    headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json" },
    body: JSON.stringify(args)
  })
  return (await r.json()) as any
}

/** The services over the daemon's file, in this process: add a target for the owner; read the outbox. */
const onFile = (db: string) => {
  const runtime = ManagedRuntime.make(SophiaLive(db))
  return {
    addTarget: (input: Record<string, unknown>) =>
      runtime.runPromise(Effect.gen(function*() {
        const owner = Option.getOrThrow(yield* Effect.flatMap(Auth, (a) => a.userIdOf()))
        return yield* Effect.flatMap(Notifications, (n) => n.addTarget(owner, input))
      })),
    listed: () =>
      runtime.runPromise(Effect.gen(function*() {
        const owner = Option.getOrThrow(yield* Effect.flatMap(Auth, (a) => a.userIdOf()))
        return yield* Effect.flatMap(Notifications, (n) => n.notifications(owner))
      })),
    dispose: () => runtime.dispose()
  }
}

describe.sequential("notifications from a real daemon", () => {
  it("a receiver hears approval_requested within 2 s of the gated call, signed — a target that hangs beside it holds nothing back", { timeout: 120_000 }, async () => {
    const db = tempDb()
    const daemon = await startDaemon(db, { SOPHIA_APPROVAL_WAIT_MS: "0" })
    const receiver = await startReceiver()
    const hanging = await startReceiver(() => "hang")
    const app = onFile(db)
    try {
      await app.addTarget({ url: hanging.url, events: ["approval_requested"] })
      await app.addTarget({ url: receiver.url, events: ["approval_requested"], secret: "whsec_e2e" })
      const scribe = mint(db, "scribe", "assistant")
      const refused = await rest(daemon, scribe, "sophia.add_document", { title: "t", body: "b" })
      const calledAt = Date.now()
      assert.strictEqual(refused.error?.code, "approval_required")
      const [got] = await receiver.waitFor(1, 10_000)
      assert.isBelow(got.at - calledAt, 2000, `heard ${got.at - calledAt} ms after the call`)
      assert.strictEqual(got.headers["sophia-event"], "approval_requested")
      assert.isTrue(await verifySignature("whsec_e2e", got.headers["sophia-signature"] as string, got.body))
      const body = JSON.parse(got.body)
      assert.strictEqual(body.id, got.headers["sophia-delivery"])
      assert.strictEqual(body.data.approval_id, refused.error.approval_id)
      assert.match(body.links.approve, new RegExp(`^${daemon.baseUrl}/portal/approve/${refused.error.approval_id}\\?token=spa_`))
      // the hanging target holds its first POST open (10 s timeout); a second call still reaches the other at once
      await hanging.waitFor(1, 5000)
      const again = await rest(daemon, scribe, "sophia.add_document", { title: "t2", body: "b" })
      const againAt = Date.now()
      const [, second] = await receiver.waitFor(2, 10_000)
      assert.isBelow(second.at - againAt, 2000, `heard ${second.at - againAt} ms after the second call`)
      assert.strictEqual(JSON.parse(second.body).data.approval_id, again.error.approval_id)
    } finally {
      await app.dispose()
      await hanging.close()
      await receiver.close()
      await daemon.kill("SIGTERM")
    }
  })

  it("kill -9 of the daemon while it sends (committed, claimed, unanswered) → delivered after the restart, once", { timeout: 120_000 }, async () => {
    const db = tempDb()
    // the POST times out after 3 s, so a claim lapses 8 s after it was taken
    const env = { SOPHIA_APPROVAL_WAIT_MS: "0", SOPHIA_NOTIFY_TIMEOUT_MS: "3000" }
    let daemon = await startDaemon(db, env)
    const receiver = await startReceiver(() => "hang")
    const app = onFile(db)
    try {
      await app.addTarget({ url: receiver.url, events: ["approval_requested"] })
      const scribe = mint(db, "scribe", "assistant")
      const refused = await rest(daemon, scribe, "sophia.add_document", { title: "t", body: "b" })
      assert.strictEqual(refused.error?.code, "approval_required")
      const [inFlight] = await receiver.waitFor(1, 10_000)
      assert.strictEqual(await daemon.kill("SIGKILL"), null)
      receiver.answer = () => 200
      const killedAt = Date.now()
      daemon = await startDaemon(db, env)
      const [, delivered] = await receiver.waitFor(2, 30_000)
      assert.strictEqual(delivered.headers["sophia-delivery"], inFlight.headers["sophia-delivery"])
      assert.isBelow(delivered.at - killedAt, 20_000)
      // one row, delivered; nothing sent after it
      await new Promise((r) => setTimeout(r, 1500))
      const listed = await app.listed()
      assert.deepStrictEqual(listed.recent.map((n) => [n.id, n.status]), [[inFlight.headers["sophia-delivery"], "delivered"]])
      assert.lengthOf(receiver.received, 2)
    } finally {
      await app.dispose()
      await receiver.close()
      await daemon.kill("SIGTERM")
    }
  })
})
