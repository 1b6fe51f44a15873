import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import type { DomainEventOf } from "../../domain/Events.js"
import type { NotifyEvent } from "../../domain/Notifications.js"
import type { Leases } from "../Leases.js"
import type { Ledger } from "../Ledger.js"
import type { StoredData } from "./Content.js"
import type { NotifyStore } from "./Store.js"

/** What the outbox asks of the other services (through their methods). */
export interface OutboxDeps {
  readonly store: NotifyStore
  readonly ledger: Effect.Effect.Success<typeof Ledger>
  readonly leases: Effect.Effect.Success<typeof Leases>
}

/**
 * The outbox's writing side: the subscribers that turn a domain event into notification rows, inside the
 * event's own transaction (wired `atomic` in `layers/Wiring.ts`: the row is written with the write or neither
 * is). Only targets subscribed to the event get a row. A row holds the event's own facts (`Content.ts` renders
 * what it says, with names and links, when it is sent), so an event costs one indexed read of the user's
 * targets (`Notify.subscribed`) and, per subscribed target, one insert. `orphan` also records what the
 * connection held when it went (asked of the Ledger and Leases), and nothing when it held nothing.
 */
export const makeOutbox = ({ store, ledger, leases }: OutboxDeps) => {
  /** The user's targets subscribed to `event`. */
  const subscribers = (userId: string, event: NotifyEvent) =>
    Effect.map(store.subscribedOf(userId), (targets) => targets.filter((t) => t.events.includes(event)).map((t) => t.id))

  const enqueue = (userId: string, targetId: string, event: string, data: StoredData, at: string) =>
    store.insertRow({ id: randomUUID(), userId, targetId, event, content: JSON.stringify(data), at })

  /** One row per subscribed target, the same facts for each. */
  const write = (userId: string, event: NotifyEvent, at: string, data: StoredData) =>
    Effect.flatMap(subscribers(userId, event), (targets) => Effect.forEach(targets, (t) => enqueue(userId, t, event, data, at), { discard: true }))

  const onApprovalRequested = (e: DomainEventOf<"ApprovalRequested">) =>
    write(e.user_id, "approval_requested", e.at, { approval_id: e.approval_id, tool: e.tool, access: e.access, connection_id: e.connection_id })

  const onApprovalDecided = (e: DomainEventOf<"ApprovalDecided">) =>
    write(e.user_id, "approval_decided", e.at, { approval_id: e.approval_id, status: e.status, via: e.via, connection_id: e.connection_id })

  /** `wait_ended`: a wait that resolved unsatisfied or unverifiable (the `when` of its subscription). */
  const endsBadly = (e: DomainEventOf<"WaitResolved">) => e.resolution !== "satisfied"
  const onWaitResolved = (e: DomainEventOf<"WaitResolved">) =>
    write(e.user_id, "wait_ended", e.at, { wait_id: e.wait_id, resolution: e.resolution, channel: e.channel, waiter: e.waiter, resolved_by: e.resolved_by })

  /** `orphan`: the connection gone held claims or leases (asked of the Ledger and Leases); nothing when it held none. */
  const orphan = (userId: string, connectionId: string, reason: "revoked" | "silent", since: string, at: string) =>
    Effect.gen(function*() {
      const targets = yield* subscribers(userId, "orphan")
      if (targets.length === 0) return
      const work = yield* ledger.claimedBy(userId, connectionId)
      const held = yield* leases.heldBy(userId, connectionId)
      if (work.length === 0 && held.length === 0) return
      const data = { connection_id: connectionId, reason, since, work: work.map((w) => ({ work_id: w.work_id, title: w.title })), leases: held }
      for (const target of targets) yield* enqueue(userId, target, "orphan", data, at)
    })

  const onConnectionRevoked = (e: DomainEventOf<"ConnectionRevoked">) =>
    Effect.zipRight(
      write(e.user_id, "connection_revoked", e.at, { connection_id: e.connection_id }),
      orphan(e.user_id, e.connection_id, "revoked", e.at, e.at)
    )

  const onConnectionSilent = (e: DomainEventOf<"ConnectionSilent">) => orphan(e.user_id, e.connection_id, "silent", e.since, e.at)

  /** `sophia notify test`: one notification to one target, whatever it subscribes to. */
  const enqueueTest = (userId: string, targetId: string, at: string) =>
    Effect.gen(function*() {
      const id = randomUUID()
      yield* store.insertRow({ id, userId, targetId, event: "test", content: JSON.stringify({ target_id: targetId }), at })
      return id
    })

  return { onApprovalRequested, onApprovalDecided, endsBadly, onWaitResolved, onConnectionRevoked, onConnectionSilent, enqueueTest } as const
}
