/**
 * `sophia notify add|list|remove|test`: the owner's notification targets over an existing graph
 * (docs/architecture.md, "Notifications"). Effect programs in the style of Owner.ts.
 *
 * `notify test` queues a test notification (event `test`) in the outbox: the daemon serving this database sends
 * it (its worker looks at least every second), so no CLI process has to stay up for a delivery, and the test goes
 * the way every real notification goes (claim, format, signature, retries). With no daemon serving, it waits in
 * the outbox until one starts; the command says so on stderr.
 */
import { Console, Effect, Layer, Option } from "effect"
import { commandOn } from "../layers/Commands.js"
import type { StoreChoice } from "../layers/Commands.js"
import { Auth } from "../services/Auth.js"
import { Daemons } from "../services/Daemons.js"
import { Leases } from "../services/Leases.js"
import { Ledger } from "../services/Ledger.js"
import { Notifications } from "../services/Notifications.js"
import { Portal } from "../services/Portal.js"
import type { Globals } from "./Store.js"
import { CliFailure, existingStoreOf, printJson } from "./Store.js"

/**
 * Notifications and the services it asks (layers/Commands.ts): adding, listing, removing a target and queueing
 * a test publish no event (the outbox's other rows are written by the subscribers of the events they report).
 */
const withServices = <A, E>(store: StoreChoice, effect: Effect.Effect<A, E, Notifications | Auth | Daemons>) =>
  Effect.provide(
    effect,
    commandOn(
      store,
      Notifications.Default.pipe(
        Layer.provideMerge(Layer.mergeAll(Ledger.Default, Leases.Default, Portal.Default, Daemons.Default)),
        Layer.provideMerge(Auth.Default)
      )
    )
  )

interface UserOption {
  readonly user?: string | undefined
}

/** The user whose targets the command means (the owner unless `--user`). */
const userOf = (user: string | undefined) =>
  Effect.flatMap(Effect.flatMap(Auth, (auth) => auth.userIdOf(user)), (id) =>
    Option.match(id, {
      onNone: () => Effect.fail(new CliFailure({ message: `no user ${JSON.stringify(user ?? "owner")} in this database` })),
      onSome: (id) => Effect.succeed(id)
    }))

export const notifyAdd = (
  o: Globals & UserOption & { readonly url: string; readonly events: string; readonly format?: string | undefined; readonly secret?: string | undefined }
) =>
  Effect.gen(function*() {
    const store = yield* existingStoreOf(o)
    const target = yield* withServices(
      store,
      Effect.gen(function*() {
        const userId = yield* userOf(o.user)
        const notifications = yield* Notifications
        return yield* notifications.addTarget(userId, {
          url: o.url,
          events: o.events.split(",").map((e) => e.trim()).filter((e) => e !== ""),
          format: o.format ?? "json",
          ...(o.secret !== undefined ? { secret: o.secret } : {})
        })
      })
    )
    yield* Console.log(target.id)
  })

export const notifyList = (o: Globals & UserOption & { readonly json: boolean }) =>
  Effect.gen(function*() {
    const store = yield* existingStoreOf(o)
    const targets = yield* withServices(store, Effect.flatMap(userOf(o.user), (userId) => Effect.flatMap(Notifications, (n) => n.listTargets(userId))))
    if (o.json) return yield* printJson(targets)
    if (targets.length === 0) return yield* Console.log("no notification targets (sophia notify add --url URL --events approval_requested,…)")
    const rows = targets.map((t) => [t.id, t.format, t.signed ? "yes" : "no", t.events.join(","), t.url])
    const header = ["ID", "FORMAT", "SIGNED", "EVENTS", "URL"]
    const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)))
    yield* Console.log([header, ...rows].map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join("  ")).join("\n"))
  })

export const notifyRemove = (o: Globals & UserOption & { readonly id: string }) =>
  Effect.flatMap(existingStoreOf(o), (store) =>
    withServices(store, Effect.flatMap(userOf(o.user), (userId) => Effect.flatMap(Notifications, (n) => n.removeTarget(userId, o.id))))
      .pipe(Effect.flatMap(printJson)))

export const notifyTest = (o: Globals & UserOption & { readonly id: string }) =>
  Effect.gen(function*() {
    const store = yield* existingStoreOf(o)
    const { queued, serving } = yield* withServices(
      store,
      Effect.gen(function*() {
        const userId = yield* userOf(o.user)
        const queued = yield* Effect.flatMap(Notifications, (n) => n.sendTest(userId, o.id))
        const serving = (yield* Effect.flatMap(Daemons, (d) => d.addresses())).length > 0
        return { queued, serving }
      })
    )
    yield* printJson({ ...queued, queued: true })
    yield* Console.error(
      serving
        ? "queued: the daemon serving this database sends it within about a second (see the portal's Notifications page)"
        : "queued: no daemon is recorded serving this database; it is sent when `sophia serve` starts"
    )
  })

/** The runner of this module's programs (cli/Program.ts: one bundle, one Effect). */
export { runEffect } from "./RunEffect.js"
