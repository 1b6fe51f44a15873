import { Clock, Effect } from "effect"
import type { Caller } from "../../domain/Auth.js"
import { NotFound, ValidationError } from "../../domain/Errors.js"
import { LeaseChanged } from "../../domain/Events.js"
import { NO_REVALIDATION } from "./Store.js"
import { InvalidTransition } from "../../domain/Ledger.js"
import type { LeaseRenewInput } from "../../domain/Leases.js"
import type { Events } from "../Events.js"
import type { EndedRow, LeaseStore } from "./Store.js"

/**
 * How a lease lives on and ends: renewed by its holder (from now, by `ttl_s` or its own ttl again), released
 * by its holder or the owner (the portal's `Release`), expired by the sweep. Every end is one conditional
 * update (`... WHERE status = 'active'`), so a lease ends exactly once whichever daemon, sweep or call gets
 * there first; its holds go in that same statement (the store's trigger, migration 0023), and `LeaseChanged`
 * is published in its transaction (a `lease_free` wait resolves with it).
 */

const iso = (ms: number) => new Date(ms).toISOString()

export const makeEnds = (deps: { readonly store: LeaseStore; readonly events: Events }) => {
  const { events, store } = deps

  const published = (ended: EndedRow, change: "released" | "expired" | "renewed", at: string) =>
    events.publish(
      new LeaseChanged({
        user_id: ended.user_id,
        lease_id: ended.id,
        connection_id: ended.connection_id,
        project: ended.project,
        resources: ended.resources,
        change,
        at
      }, NO_REVALIDATION)
    )

  /** The caller's own active lease, or the refusal that says why not. */
  const ownActive = (caller: Caller, leaseId: string, now: number, verb: string) =>
    Effect.gen(function*() {
      const lease = yield* store.find(caller.userId, leaseId)
      if (lease === undefined) return yield* new NotFound({ what: "lease", id: leaseId })
      if (lease.connection_id !== caller.connectionId) {
        return yield* new ValidationError({ detail: `lease ${leaseId} is held by another connection; only its holder can ${verb} it` })
      }
      if (lease.status !== "active" || lease.expires_ms <= now) {
        const status = lease.status === "active" ? `expired (${lease.expires_at})` : lease.status
        return yield* new InvalidTransition({ detail: `lease ${leaseId} is ${status}; acquire a new one` })
      }
      return lease
    })

  /** `sophia.lease_renew`: the holder extends an active lease from now. */
  const renew = (caller: Caller, input: LeaseRenewInput) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const lease = yield* ownActive(caller, input.lease_id, now, "renew")
      const ttlS = input.ttl_s ?? lease.ttl_s
      const expiresMs = now + ttlS * 1000
      const renewed = yield* store.renew({ id: lease.id, expiresAt: iso(expiresMs), expiresMs, ttlS, now })
      if (!renewed) return yield* new InvalidTransition({ detail: `lease ${lease.id} ended meanwhile; acquire a new one` })
      yield* published(lease, "renewed", iso(now))
      return { lease_id: lease.id, expires_at: iso(expiresMs) }
    })

  /** End an active lease as `released` (`by`: who released it); false when it had ended already. */
  const endReleased = (leaseId: string, by: string, now: number) =>
    Effect.gen(function*() {
      const [ended] = yield* store.end({ id: leaseId, status: "released", at: iso(now), by })
      if (ended === undefined) return false
      yield* published(ended, "released", iso(now))
      return true
    })

  /** `sophia.lease_release`: the holder ends its lease now (one conditional update; the refusal read only when it fails). */
  const release = (caller: Caller, leaseId: string) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const [ended] = yield* store.endOwn({ id: leaseId, userId: caller.userId, connectionId: caller.connectionId, at: iso(now), now })
      if (ended === undefined) {
        yield* ownActive(caller, leaseId, now, "release")
        return yield* new InvalidTransition({ detail: `lease ${leaseId} ended meanwhile` })
      }
      yield* published(ended, "released", iso(now))
      return { lease_id: ended.id, status: "released" as const }
    })

  /** The owner (the portal's `Release`, `by` its connection) ends any active lease, whichever user's. */
  const releaseAsOwner = (by: string, leaseId: string) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const [lease] = yield* store.byIds([leaseId])
      if (lease === undefined) return yield* new NotFound({ what: "lease", id: leaseId })
      if (!(yield* endReleased(lease.id, by, now))) {
        return yield* new InvalidTransition({ detail: `lease ${leaseId} is ${lease.status} already` })
      }
      return lease
    })

  /** One lease past its expiry, ended `expired` (in the caller's transaction); 1 when this call ended it. */
  const expireOne = (leaseId: string, now: number) =>
    Effect.gen(function*() {
      const [ended] = yield* store.expire({ id: leaseId, at: iso(now), now })
      if (ended === undefined) return 0
      yield* published(ended, "expired", iso(now))
      return 1
    })

  return { renew, release, releaseAsOwner, expireOne } as const
}
