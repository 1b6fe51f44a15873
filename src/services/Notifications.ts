import { Config, Effect, Queue } from "effect"
import type { DomainEventOf } from "../domain/Events.js"
import { FIRST_BACKOFF_MS, SEND_TIMEOUT_MS } from "../domain/Notifications.js"
import { Auth } from "./Auth.js"
import { Daemons } from "./Daemons.js"
import { Leases } from "./Leases.js"
import { Ledger } from "./Ledger.js"
import { makeDelivery } from "./notifications/Delivery.js"
import { makeOutbox } from "./notifications/Outbox.js"
import { type ClaimedRow, makeNotifyStore } from "./notifications/Store.js"
import { makeTargets } from "./notifications/Targets.js"
import { Portal } from "./Portal.js"
import { spanned } from "./Spans.js"

type Infra = { readonly _tag: "SqlError" | "ParseError" }
const isInfra = (e: unknown): boolean =>
  typeof e === "object" && e !== null && "_tag" in e && (e._tag === "SqlError" || e._tag === "ParseError")
/** Store failures are defects at the service's edge; refusals stay typed. */
const die = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, Exclude<E, Infra>, R> =>
  Effect.catchIf(effect, (e): e is Extract<E, Infra> => isInfra(e), Effect.die) as Effect.Effect<A, Exclude<E, Infra>, R>

/**
 * Notifications (docs/architecture.md, "Notifications"): the owner's targets, and the outbox the events that
 * concern the owner write into inside their own transactions (the subscribers, wired in `EventWiring`), which
 * the served daemons' workers deliver (`deliverDue`, run by `layers/NotifyWorker.ts`) at least once, each row
 * by one daemon in the normal case. Owns `notify_targets` and `notify_outbox`.
 */
export class Notifications extends Effect.Service<Notifications>()("sophia/Notifications", {
  effect: Effect.gen(function*() {
    const auth = yield* Auth
    const ledger = yield* Ledger
    const leases = yield* Leases
    const portal = yield* Portal
    const daemons = yield* Daemons
    const store = yield* makeNotifyStore
    const { sql } = store
    const timeoutMs = yield* Config.integer("SOPHIA_NOTIFY_TIMEOUT_MS").pipe(Config.withDefault(SEND_TIMEOUT_MS), Effect.orDie)
    const outbox = makeOutbox({ store, ledger, leases })
    const targets = makeTargets(store, auth)
    // (the first retry's wait: 1 s; shorter only to see a dead letter soon, as the browser test does)
    const firstBackoffMs = yield* Config.integer("SOPHIA_NOTIFY_BACKOFF_MS").pipe(Config.withDefault(FIRST_BACKOFF_MS), Effect.orDie)
    const delivery = makeDelivery({ store, auth, portal, me: daemons.instanceId, timeoutMs, firstBackoffMs })
    // this process's workers look again at once when something was queued here outside an event (a test, a retry)
    const nudges = yield* Queue.dropping<void>(1)
    const nudge = Effect.asVoid(Queue.offer(nudges, undefined))

    /** Add a target: `{ url, events, format?, secret? }`, decoded (a bad URL or event is `validation_error`). */
    const addTarget = spanned("Notifications.addTarget", (userId: string, input: unknown) => die(targets.add(userId, input)))

    /** The user's targets, oldest first (a secret is never shown: `signed` says whether there is one). */
    const listTargets = spanned("Notifications.listTargets", (userId: string) => die(targets.list(userId)))

    /** Remove a target and its notifications; `not_found` unless it is the user's. */
    const removeTarget = spanned("Notifications.removeTarget", (userId: string, id: string) =>
      die(sql.withTransaction(targets.remove(userId, id))))

    /**
     * Queue a test notification to one of the user's targets (event `test`): the serving daemon's worker sends
     * it — this process's at once, another process's at its next look. Returns the notification's id.
     */
    const sendTest = spanned("Notifications.sendTest", (userId: string, targetId: string) =>
      Effect.gen(function*() {
        yield* targets.find(userId, targetId)
        const at = new Date(yield* Effect.clockWith((c) => c.currentTimeMillis)).toISOString()
        const id = yield* outbox.enqueueTest(userId, targetId, at)
        yield* nudge
        return { notification_id: id, target_id: targetId }
      }).pipe(die))

    /** The user's notifications, newest first, and the dead ones (the portal's dead letters). */
    const notifications = spanned("Notifications.notifications", (userId: string) => die(targets.notifications(userId)))

    /** `Retry` a dead notification: pending again, its attempts from zero; `not_found` unless it is a dead one of the user's. */
    const retry = spanned("Notifications.retry", (userId: string, id: string) =>
      Effect.tap(die(sql.withTransaction(targets.retry(userId, id))), () => nudge))

    /** One look of a worker: send what is due now; `baseUrl` makes the portal's links absolute. Returns how many were delivered. */
    const deliverDue = spanned("Notifications.deliverDue", (baseUrl: string) => die(delivery.deliverDue(baseUrl)))

    /**
     * The worker's two steps, for a worker that does not wait for one send before the next claim (a target that
     * hangs for its 10 s must not hold back another's notification): claim the due rows, then send each claimed
     * row (true when delivered).
     */
    const claimDue = spanned("Notifications.claimDue", () => die(delivery.claimDue))
    const sendClaimed = spanned("Notifications.sendClaimed", (row: ClaimedRow, baseUrl: string) => die(delivery.deliverOne(row, baseUrl)))

    /** When the next pending notification is due (null: none is pending). */
    const nextDue = spanned("Notifications.nextDue", () => die(store.nextDue))

    /** Resolves when something was queued in this process outside an event (a worker's wake-up). */
    const nudged: Effect.Effect<void> = Queue.take(nudges)

    // the subscribers (atomic, in the event's transaction: see EventWiring)
    const onApprovalRequested = (e: DomainEventOf<"ApprovalRequested">) => die(outbox.onApprovalRequested(e))
    const onApprovalDecided = (e: DomainEventOf<"ApprovalDecided">) => die(outbox.onApprovalDecided(e))
    const onWaitResolved = (e: DomainEventOf<"WaitResolved">) => die(outbox.onWaitResolved(e))
    const onConnectionRevoked = (e: DomainEventOf<"ConnectionRevoked">) => die(outbox.onConnectionRevoked(e))
    const onConnectionSilent = (e: DomainEventOf<"ConnectionSilent">) => die(outbox.onConnectionSilent(e))

    return {
      addTarget,
      listTargets,
      removeTarget,
      sendTest,
      notifications,
      retry,
      deliverDue,
      claimDue,
      sendClaimed,
      nextDue,
      nudged,
      endsBadly: outbox.endsBadly,
      onApprovalRequested,
      onApprovalDecided,
      onWaitResolved,
      onConnectionRevoked,
      onConnectionSilent
    } as const
  })
}) {}
