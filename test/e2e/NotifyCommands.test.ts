/**
 * `sophia notify` as the owner runs it (the built CLI, a real daemon on the same SQLite file, a local
 * receiver): `add` prints the id, `list --json` shows the target without its secret, `test` queues a
 * notification that the serving daemon sends, signed; a revocation made by the CLI (`connection revoke`, which
 * runs on the command layer, layers/Services.ts) is notified too — the outbox row is written by the CLI's own
 * transaction and sent by the daemon; `remove` ends it all.
 */
import { assert, describe, it } from "@effect/vitest"
import { sophia, tempDb } from "../support/Cli.js"
import { startDaemon } from "../support/Daemon.js"
import { startReceiver, verifySignature } from "../support/Receiver.js"

const noPg = { SOPHIA_DATABASE_URL: "" }

describe("sophia notify (the built CLI, a real daemon)", { timeout: 120_000 }, () => {
  it("add, list, test, a CLI revocation notified, remove", async () => {
    const db = tempDb()
    const daemon = await startDaemon(db)
    const receiver = await startReceiver()
    try {
      const added = sophia(["notify", "add", "--url", receiver.url, "--events", "connection_revoked", "--secret", "s3cret", "--db", db], noPg)
      assert.strictEqual(added.status, 0, added.stderr)
      const id = added.stdout.trim().split("\n").pop()!.trim()
      const listed = sophia(["notify", "list", "--json", "--db", db], noPg)
      assert.strictEqual(listed.status, 0, listed.stderr)
      const targets = JSON.parse(listed.stdout)
      assert.lengthOf(targets, 1)
      assert.include(JSON.stringify(targets[0]), id.length > 12 ? id.slice(0, 8) : id)
      assert.notInclude(listed.stdout, "s3cret", "a secret is never shown")

      const tested = sophia(["notify", "test", id, "--db", db], noPg)
      assert.strictEqual(tested.status, 0, tested.stderr)
      const [test] = await receiver.waitFor(1, 20_000)
      assert.strictEqual(test!.headers["sophia-event"], "test")
      assert.isTrue(await verifySignature("s3cret", test!.headers["sophia-signature"] as string, test!.body), "signed with the target's secret")

      const doomed = JSON.parse(sophia(["connection", "create", "--name", "doomed", "--profile", "observer", "--db", db], noPg).stdout)
      const revoked = sophia(["connection", "revoke", "doomed", "--db", db], noPg)
      assert.strictEqual(revoked.status, 0, revoked.stderr)
      const all = await receiver.waitFor(2, 20_000)
      const notice = all.find((r) => r.headers["sophia-event"] === "connection_revoked")
      assert.isDefined(notice, "the CLI's revocation was notified")
      assert.strictEqual(JSON.parse(notice!.body).data.connection_id, doomed.connection_id)

      const removed = sophia(["notify", "remove", id, "--db", db], noPg)
      assert.strictEqual(removed.status, 0, removed.stderr)
      assert.deepStrictEqual(JSON.parse(sophia(["notify", "list", "--json", "--db", db], noPg).stdout), [])
      const wrong = sophia(["notify", "add", "--url", receiver.url, "--events", "approval_requestd", "--db", db], noPg)
      assert.strictEqual(wrong.status, 1)
      assert.match(wrong.stderr.trim(), /^sophia: .*approval_requestd/)
    } finally {
      await receiver.close()
      await daemon.kill()
    }
  })
})
