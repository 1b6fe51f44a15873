import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import type { DomainEventOf } from "../../domain/Events.js"
import type { NotificationContent, NotifyEvent } from "../../domain/Notifications.js"
import type { Auth } from "../Auth.js"
import type { Leases } from "../Leases.js"
import type { Ledger } from "../Ledger.js"
import type { Portal } from "../Portal.js"
import type { NotifyStore } from "./Store.js"

/** What the outbox asks of the other services (through their methods). */
export interface OutboxDeps {
  readonly store: NotifyStore
  readonly auth: Effect.Effect.Success<typeof Auth>
  readonly ledger: Effect.Effect.Success<typeof Ledger>
  readonly leases: Effect.Effect.Success<typeof Leases>
  readonly portal: Effect.Effect.Success<typeof Portal>
}

const plural = (n: number, one: string) => `${n} ${one}${n === 1 ? "" : "s"}`

/**
 * The outbox's writing side: the subscribers that turn a domain event into notification rows, inside the
 * event's own transaction (wired `atomic` in `EventWiring`: the row is written with the write or neither is).
 * Only targets subscribed to the event get a row. With no target of the user subscribed, an event costs one
 * indexed read of the user's targets (`Notify.subscribed`) and nothing more: no name, no claim, no lease is
 * read. The content (summary, data, portal paths) is fixed here, once; an `approval_requested` row gets its own
 * approve link (a one-time login limited to the approval, from Portal) per target.
 */
export const makeOutbox = ({ store, auth, ledger, leases, portal }: OutboxDeps) => {
  /** The user's targets subscribed to `event`. */
  const subscribers = (userId: string, event: NotifyEvent) =>
    Effect.map(store.subscribedOf(userId), (targets) => targets.filter((t) => t.events.includes(event)).map((t) => t.id))

  const enqueue = (userId: string, targetId: string, event: string, content: NotificationContent, at: string) =>
    store.insertRow({ id: randomUUID(), userId, targetId, event, content: JSON.stringify(content), at })

  /** One row per subscribed target, the same content for each. */
  const write = (userId: string, event: NotifyEvent, at: string, content: (targets: ReadonlyArray<string>) => Effect.Effect<NotificationContent>) =>
    Effect.gen(function*() {
      const targets = yield* subscribers(userId, event)
      if (targets.length === 0) return
      const c = yield* content(targets)
      for (const target of targets) yield* enqueue(userId, target, event, c, at)
    })

  const nameOf = (id: string) => Effect.map(auth.names([id]), (names) => names.get(id) ?? id.slice(0, 8))

  const onApprovalRequested = (e: DomainEventOf<"ApprovalRequested">) =>
    Effect.gen(function*() {
      const targets = yield* subscribers(e.user_id, "approval_requested")
      if (targets.length === 0) return
      const agent = yield* nameOf(e.connection_id)
      const portalPath = `/portal/approvals?approval=${encodeURIComponent(e.approval_id)}`
      for (const target of targets) {
        const link = yield* portal.mintApproveLink(e.user_id, e.approval_id)
        yield* enqueue(e.user_id, target, "approval_requested", {
          summary: `${agent} asks to run ${e.tool} (${e.access}); approval ${e.approval_id} waits for you`,
          data: { approval_id: e.approval_id, tool: e.tool, access: e.access, connection_id: e.connection_id, agent_name: agent },
          links: {
            approve: `/portal/approve/${encodeURIComponent(e.approval_id)}?token=${link.token}`,
            portal: portalPath
          }
        }, e.at)
      }
    })

  const onApprovalDecided = (e: DomainEventOf<"ApprovalDecided">) =>
    write(e.user_id, "approval_decided", e.at, () =>
      Effect.map(nameOf(e.connection_id), (agent) => ({
        summary: `approval ${e.approval_id} for ${agent} was ${e.status} (${e.via})`,
        data: { approval_id: e.approval_id, status: e.status, via: e.via, connection_id: e.connection_id, agent_name: agent },
        links: { portal: `/portal/approvals?approval=${encodeURIComponent(e.approval_id)}` }
      })))

  /** `wait_ended`: a wait that resolved unsatisfied or unverifiable (the `when` of its subscription). */
  const endsBadly = (e: DomainEventOf<"WaitResolved">) => e.resolution !== "satisfied"
  const onWaitResolved = (e: DomainEventOf<"WaitResolved">) =>
    write(e.user_id, "wait_ended", e.at, () =>
      Effect.map(nameOf(e.waiter), (waiter) => ({
        summary: `${waiter}'s wait on ${e.channel} ended ${e.resolution}`,
        data: { wait_id: e.wait_id, resolution: e.resolution, channel: e.channel, waiter: e.waiter, waiter_name: waiter, resolved_by: e.resolved_by },
        links: { portal: "/portal/waits" }
      })))

  /** `orphan`: the connection gone held claims or leases (asked of the Ledger and Leases); nothing when it held none. */
  const orphan = (userId: string, connectionId: string, reason: "revoked" | "silent", since: string, at: string) =>
    Effect.gen(function*() {
      const targets = yield* subscribers(userId, "orphan")
      if (targets.length === 0) return
      const work = yield* ledger.claimedBy(userId, connectionId)
      const held = yield* leases.heldBy(userId, connectionId)
      if (work.length === 0 && held.length === 0) return
      const agent = yield* nameOf(connectionId)
      const holding = [work.length > 0 ? plural(work.length, "claimed work item") : "", held.length > 0 ? plural(held.length, "lease") : ""]
        .filter((s) => s !== "").join(" and ")
      const content: NotificationContent = {
        summary: `${agent} is ${reason === "revoked" ? "revoked" : "silent"} holding ${holding}; another agent may take them over`,
        data: {
          connection_id: connectionId,
          agent_name: agent,
          reason,
          since,
          work: work.map((w) => ({ work_id: w.work_id, title: w.title })),
          leases: held
        },
        links: { portal: "/portal" }
      }
      for (const target of targets) yield* enqueue(userId, target, "orphan", content, at)
    })

  const onConnectionRevoked = (e: DomainEventOf<"ConnectionRevoked">) =>
    Effect.gen(function*() {
      yield* write(e.user_id, "connection_revoked", e.at, () =>
        Effect.map(nameOf(e.connection_id), (agent) => ({
          summary: `${agent} was revoked: its bearer opens nothing any more`,
          data: { connection_id: e.connection_id, agent_name: agent },
          links: { portal: "/portal" }
        })))
      yield* orphan(e.user_id, e.connection_id, "revoked", e.at, e.at)
    })

  const onConnectionSilent = (e: DomainEventOf<"ConnectionSilent">) => orphan(e.user_id, e.connection_id, "silent", e.since, e.at)

  /** `sophia notify test`: one notification to one target, whatever it subscribes to. */
  const enqueueTest = (userId: string, targetId: string, at: string) =>
    Effect.gen(function*() {
      const id = randomUUID()
      const content: NotificationContent = {
        summary: "Test notification from Sophia: this target is reachable",
        data: { target_id: targetId },
        links: { portal: "/portal/notifications" }
      }
      yield* store.insertRow({ id, userId, targetId, event: "test", content: JSON.stringify(content), at })
      return id
    })

  return { onApprovalRequested, onApprovalDecided, endsBadly, onWaitResolved, onConnectionRevoked, onConnectionSilent, enqueueTest } as const
}
