/**
 * The `sophia notify` handlers (src/cli/Notify.ts) run as the CLI runs them, over a SQLite file the daemon would
 * use: `add` prints the id, `list` shows it (never the secret), `test` queues a notification for the serving
 * daemon's worker and says so, `remove` removes it; a bad flag value and an unknown id are one refusal each, and
 * a database that does not exist is refused without creating anything.
 */
import { assert, describe, it } from "@effect/vitest"
import { Console, Effect, ManagedRuntime, Option } from "effect"
import * as fs from "node:fs"
import { notifyAdd, notifyList, notifyRemove, notifyTest } from "../src/cli/Notify.js"
import { SophiaLive } from "../src/layers/App.js"
import { Auth } from "../src/services/Auth.js"
import { Notifications } from "../src/services/Notifications.js"
import { tempDb } from "./support/Cli.js"

/** Run a handler, its stdout and stderr lines captured. */
const run = <E>(effect: Effect.Effect<void, E>) =>
  Effect.gen(function*() {
    const out: Array<string> = []
    const err: Array<string> = []
    const current = yield* Effect.console
    const console: Console.Console = {
      ...current,
      log: (...args) => Effect.sync(() => void out.push(args.join(" "))),
      error: (...args) => Effect.sync(() => void err.push(args.join(" ")))
    } as Console.Console
    const exit = yield* Effect.exit(Effect.withConsole(effect, console))
    return { exit, out, err }
  })

describe("sophia notify (the handlers)", () => {
  it.live("add prints the id; list shows it without its secret; test queues it; remove removes it", () =>
    Effect.gen(function*() {
      const db = tempDb()
      // the graph exists (as `sophia serve` leaves it): the owner and a first connection
      const app = ManagedRuntime.make(SophiaLive(db))
      yield* Effect.promise(() => app.runPromise(Effect.flatMap(Auth, (a) => a.bootstrapOwner())))
      const g = { db, databaseUrl: undefined }
      const added = yield* run(notifyAdd({ ...g, url: "https://ntfy.sh/sophia-test", events: "approval_requested, orphan", format: "ntfy", secret: "s3" }))
      assert.isTrue(added.exit._tag === "Success", String(added.exit))
      const id = added.out[0]
      assert.match(id, /^[0-9a-f-]{36}$/)
      const listed = yield* run(notifyList({ ...g, json: true }))
      const targets = JSON.parse(listed.out[0])
      assert.deepStrictEqual(targets.map((t: any) => [t.id, t.format, t.signed, t.events]), [[id, "ntfy", true, ["approval_requested", "orphan"]]])
      assert.notInclude(listed.out.join("\n"), "s3\"")
      const table = yield* run(notifyList({ ...g, json: false }))
      assert.match(table.out[0], /^ID\s+FORMAT\s+SIGNED\s+EVENTS\s+URL/)
      const tested = yield* run(notifyTest({ ...g, id }))
      assert.strictEqual(JSON.parse(tested.out[0]).queued, true)
      assert.match(tested.err[0], /no daemon is recorded serving this database/)
      const queued = yield* Effect.promise(() =>
        app.runPromise(Effect.gen(function*() {
          const owner = Option.getOrThrow(yield* Effect.flatMap(Auth, (a) => a.userIdOf()))
          return yield* Effect.flatMap(Notifications, (n) => n.notifications(owner))
        }))
      )
      assert.deepStrictEqual(queued.recent.map((n) => [n.event, n.status]), [["test", "pending"]])
      const removed = yield* run(notifyRemove({ ...g, id }))
      assert.strictEqual(JSON.parse(removed.out[0]).id, id)
      assert.deepStrictEqual(JSON.parse((yield* run(notifyList({ ...g, json: true }))).out[0]), [])
      // refusals: a bad event, an unknown id
      const bad = yield* run(notifyAdd({ ...g, url: "https://x.test/", events: "approval_requsted" }))
      assert.isTrue(bad.exit._tag === "Failure")
      assert.match(String(bad.exit), /approval_requsted|Expected/)
      const unknown = yield* run(notifyRemove({ ...g, id }))
      assert.match(String(unknown.exit), /NotFound/)
      yield* Effect.promise(() => app.dispose())
      // no database there: refused, nothing created
      const missing = `${db}.nothing`
      const refused = yield* run(notifyList({ db: missing, databaseUrl: undefined, json: true }))
      assert.match(String(refused.exit), /no database at/)
      assert.isFalse(fs.existsSync(missing))
    }))
})
