import { SqlClient } from "@effect/sql"
import { Clock, Effect, Either } from "effect"
import { randomUUID } from "node:crypto"
import type { Caller } from "../domain/Auth.js"
import { ValidationError } from "../domain/Errors.js"
import type { DomainEvent } from "../domain/Events.js"
import { parseResource } from "../domain/LeaseGlobs.js"
import type { LeaseAcquireInput, LeaseHolder, LeaseRenewInput, LeasesInput } from "../domain/Leases.js"
import { DEFAULT_PROJECT } from "../domain/Leases.js"
import { silentAfterSConfig } from "../domain/Orphans.js"
import { Auth } from "./Auth.js"
import { Events } from "./Events.js"
import { makeConflicts } from "./leases/Conflicts.js"
import { makeEnds } from "./leases/Ends.js"
import { makeGrants } from "./leases/Grants.js"
import { makeLists } from "./leases/Lists.js"
import { dieOnInfra, makeLeaseStore } from "./leases/Store.js"
import { spanned } from "./Spans.js"
import { Wakeups } from "./Wakeups.js"

/**
 * How often a waiting `lease_acquire` tries again with no event heard: what frees a lease without an event
 * here — a holder gone silent, a release by another process on the same SQLite file — is seen within this (a
 * holder's expiry is waited for exactly).
 */
const RECHECK_MS = 1000

/**
 * Leases: agents hold files (`path:<glob>`) and shared resources (`slot:<name>`) of a project for a while,
 * exclusive or shared, all or nothing. Owns `leases`, `lease_holds`, `lease_slots` and `lease_takeovers`; names
 * and liveness come from Auth.
 *
 * One job a file, under leases/: the statements (`Store`), who stands in the way of a lease (`Conflicts`,
 * with the overlap rule of `domain/LeaseGlobs.ts`), granting one with its takeovers (`Grants`), renewing and
 * ending (`Ends`), the lists the surface shows (`Lists`). Every change publishes `LeaseChanged` inside its
 * transaction: Waits resolves `lease_free` waits on it, long polls wake on it.
 */
export class Leases extends Effect.Service<Leases>()("sophia/Leases", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const auth = yield* Auth
    const events = yield* Events
    const wakeups = yield* Wakeups
    const silentAfterS = yield* Effect.orDie(silentAfterSConfig)
    const store = yield* makeLeaseStore
    const conflicts = makeConflicts(store, auth, silentAfterS)
    const { tryAcquire } = makeGrants({ sql, store, conflicts, events })
    const ends = makeEnds({ store, events })
    const lists = makeLists({ store, auth, conflicts, silentAfterS })
    const die = dieOnInfra

    /**
     * `wait_s`: a long poll of Wakeups (kind `lease`: counted in the connection's long-poll cap, ended
     * `unauthenticated` the moment its connection's revocation is heard). Its read is one attempt; while refused
     * `lease_conflict` it waits for a lease of the project to end or a connection of the user to be revoked (any
     * daemon), the earliest holder's expiry, or `RECHECK_MS`, then tries again; at the deadline the last refusal
     * stands. Each poll is its own group: an attempt is a write, never shared.
     */
    const longPoll = (caller: Caller, input: LeaseAcquireInput, waitS: number) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const project = input.project ?? DEFAULT_PROJECT
        const tried = yield* wakeups.poll("lease", {
          owner: caller,
          key: `lease:${randomUUID()}`,
          matches: (e: DomainEvent) =>
            (e._tag === "LeaseChanged" && e.project === project && e.change !== "granted" && e.change !== "renewed") ||
            (e._tag === "ConnectionRevoked" && e.connection_id !== caller.connectionId),
          sharing: "consumed",
          deadline: now + Math.round(waitS * 1000),
          read: Effect.either(attempt(caller, input)),
          found: (r) => Either.isRight(r) || r.left._tag !== "LeaseConflict",
          readAgainAt: (r, at) =>
            Either.isLeft(r) && r.left._tag === "LeaseConflict"
              ? Math.min(at + RECHECK_MS, ...r.left.holders.map((h) => Date.parse(h.expires_at) + 1))
              : at + RECHECK_MS
        })
        return yield* tried
      })

    // A lease's writes touch its own tables only: unless a subscriber resolved a wait (`WaitResolved`), its
    // commit changes no envelope, and the caller's next envelope is not read again for it.
    const transaction = events.neutralTransaction(["LeaseChanged"])

    const attempt = (caller: Caller, input: LeaseAcquireInput) => die(transaction(tryAcquire(caller, input)))

    /** `sophia.lease_acquire`: granted whole, or refused `lease_conflict` naming every live holder; `wait_s` waits. */
    const acquire = spanned("Leases.acquire", (caller: Caller, input: LeaseAcquireInput) => {
      const waitS = input.wait_s ?? 0
      return waitS > 0 ? longPoll(caller, input, waitS) : attempt(caller, input)
    })

    /** `sophia.lease_renew`. */
    const renew = spanned("Leases.renew", (caller: Caller, input: LeaseRenewInput) => die(transaction(ends.renew(caller, input))))

    /** `sophia.lease_release`. */
    const release = spanned("Leases.release", (caller: Caller, leaseId: string) => die(transaction(ends.release(caller, leaseId))))

    /** The owner ends any lease (the portal's `Release`): what it held, and whose it was. */
    const releaseAsOwner = spanned("Leases.releaseAsOwner", (owner: Caller, leaseId: string) =>
      die(transaction(ends.releaseAsOwner(owner.connectionId, leaseId))).pipe(
        Effect.flatMap((lease) =>
          Effect.map(auth.names([lease.connection_id]), (names) => ({
            lease_id: lease.id,
            resources: lease.resources,
            connection_id: lease.connection_id,
            agent_name: names.get(lease.connection_id) ?? lease.connection_id.slice(0, 8)
          }))
        )
      ))

    /** `sophia.leases`. */
    const list = spanned("Leases.list", (caller: Caller, input: LeasesInput) => lists.list(caller, input))

    /** The caller's own active leases (orient). */
    const mine = spanned("Leases.mine", (caller: Caller) => lists.mine(caller))

    /** The active leases a connection holds, as stored (a notification that its holder is gone names them). */
    const heldBy = spanned("Leases.heldBy", (userId: string, connectionId: string) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => store.activeOfConnection(userId, connectionId, now)).pipe(
        Effect.map((rows) => rows.map((l) => ({ lease_id: l.id, project: l.project, resources: l.resources })))
      ))

    /** The user's active leases by holder (the portal's Fleet). */
    const byConnection = spanned("Leases.byConnection", (userId: string) => lists.byConnection(userId))

    /** The active leases taken for a work item. */
    const ofWork = spanned("Leases.ofWork", (userId: string, workId: string) => lists.ofWork(userId, workId))

    /**
     * Who would refuse `who` an exclusive lease on `resource` now: the live holders in its way (the orphaned
     * ones could be taken over). A `lease_free` wait holds when there are none; its edges run to them.
     */
    const blockers = spanned("Leases.blockers", (
      who: { readonly userId: string; readonly connectionId: string },
      resource: string,
      project: string = DEFAULT_PROJECT
    ): Effect.Effect<ReadonlyArray<LeaseHolder>, ValidationError> =>
      Effect.gen(function*() {
        const wanted = parseResource(resource)
        if (typeof wanted === "string") return yield* new ValidationError({ detail: `resource: ${wanted}` })
        const { decision } = yield* conflicts.inTheWay(who, project, [wanted], "exclusive")
        return decision.live.length === 0 ? [] : yield* conflicts.holdersOf(decision.live)
      }))

    /** End every lease past its expiry, each in its own short transaction. Returns how many this call ended. */
    const sweep = spanned("Leases.sweep", () =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        let ended = 0
        for (const id of yield* store.due(now)) ended += yield* transaction(ends.expireOne(id, now))
        return ended
      }).pipe(die))

    return { acquire, renew, release, releaseAsOwner, list, mine, heldBy, byConnection, ofWork, blockers, sweep } as const
  })
}) {}
