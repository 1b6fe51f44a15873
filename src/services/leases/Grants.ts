import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import type { Caller } from "../../domain/Auth.js"
import { ValidationError } from "../../domain/Errors.js"
import { LeaseChanged } from "../../domain/Events.js"
import type { ParsedResource } from "../../domain/LeaseGlobs.js"
import { baseKey, parseResource } from "../../domain/LeaseGlobs.js"
import type { LeaseAcquireInput, LeaseGrant, LeaseMode, LeaseTakeover } from "../../domain/Leases.js"
import { DEFAULT_PROJECT, LEASE_TTL_DEFAULT_S, LeaseConflict } from "../../domain/Leases.js"
import type { Events } from "../Events.js"
import { LEASES_LOCK, serialize } from "../store/Locking.js"
import type { Conflicts } from "./Conflicts.js"
import type { HoldInsert, HoldRow, LeaseStore } from "./Store.js"
import { NO_REVALIDATION } from "./Store.js"

/**
 * Granting a lease: all or nothing, race-free across daemons. The decision over one project is serialized
 * (`serialize` on `leases/<user>/<project>`: an advisory lock on Postgres, the single writer on SQLite), so of
 * two writers asking for the same resource one decides first and the other sees its holds. A grant that would
 * close a cycle of waits (a waiter it stands in the way of is waited on, directly or not, by its holder) is
 * refused `WaitCycle` by Waits, the refusing subscriber of the granted `LeaseChanged`, and rolls back whole. A lease whose only
 * obstacles are orphaned leases (their holders revoked or silent) takes them over — they end, recorded in
 * `lease_takeovers` with the previous holder, why and since when — and is granted.
 */

const iso = (ms: number) => new Date(ms).toISOString()

/** The resources asked for, normalized and without repeats; a string saying what is wrong otherwise. */
export const parseResources = (texts: ReadonlyArray<string>): ReadonlyArray<ParsedResource> | string => {
  const out = new Map<string, ParsedResource>()
  for (const text of texts) {
    const parsed = parseResource(text)
    if (typeof parsed === "string") return parsed
    out.set(parsed.resource, parsed)
  }
  return [...out.values()]
}

/** What a refused lease says to do next. */
export const conflictHint = (project: string, resource: string) =>
  `wait for it: repeat with wait_s (≤ 60), or sophia.declare_wait({ predicate: { type: "lease_free", resource: ${
    JSON.stringify(resource)
  }${project === DEFAULT_PROJECT ? "" : `, project: ${JSON.stringify(project)}`} }, reason: "…" }); ask its holder; or take it over once its holder is revoked or silent`

export const makeGrants = (deps: {
  readonly sql: SqlClient.SqlClient
  readonly store: LeaseStore
  readonly conflicts: Conflicts
  readonly events: Events
}) => {
  const { conflicts, events, sql, store } = deps

  /** End an orphaned lease in favour of `by` (its holds go with it), the takeover recorded. */
  const takeOver = (userId: string, by: string, held: HoldRow, gone: { reason: "revoked" | "silent"; since: string }, at: string) =>
    Effect.gen(function*() {
      const [ended] = yield* store.end({ id: held.lease_id, status: "taken_over", at, by })
      if (ended === undefined) return undefined
      yield* store.insertTakeover({
        leaseId: by,
        previous: held.lease_id,
        previousConnection: held.connection_id,
        reason: gone.reason,
        since: gone.since,
        at
      })
      yield* events.publish(
        new LeaseChanged({
          user_id: userId,
          lease_id: ended.id,
          connection_id: ended.connection_id,
          project: ended.project,
          resources: ended.resources,
          change: "taken_over",
          at
        }, NO_REVALIDATION)
      )
      const taken: LeaseTakeover = { lease_id: ended.id, connection_id: ended.connection_id, reason: gone.reason, since: gone.since }
      return taken
    })

  /** The new lease's rows: the lease, one hold per resource (a path's by its base, a slot's by its name). */
  const write = (caller: Caller, lease: {
    readonly id: string
    readonly project: string
    readonly mode: LeaseMode
    readonly resources: ReadonlyArray<ParsedResource>
    readonly input: LeaseAcquireInput
    readonly ttlS: number
    readonly now: number
  }) =>
    Effect.gen(function*() {
      const { id, mode, now, project, resources, ttlS } = lease
      const expiresMs = now + ttlS * 1000
      yield* store.insertLease({
        id,
        userId: caller.userId,
        connectionId: caller.connectionId,
        project,
        mode,
        resources: JSON.stringify(resources.map((r) => r.resource)),
        reason: lease.input.reason,
        workId: lease.input.work_id ?? null,
        ttlS,
        createdAt: iso(now),
        expiresAt: iso(expiresMs),
        expiresMs
      })
      const holds: Array<HoldInsert> = []
      for (const r of resources) {
        const base = r.kind === "slot" ? r.name : baseKey(r.glob)
        holds.push({
          lease_id: id,
          user_id: caller.userId,
          project,
          kind: r.kind,
          resource: r.resource,
          base,
          connection_id: caller.connectionId,
          mode,
          expires_ms: expiresMs
        })
        if (r.kind === "slot") {
          yield* store.insertSlot({ userId: caller.userId, project, name: r.name, capacity: lease.input.capacity ?? 1, at: iso(now) })
        }
      }
      yield* store.insertHolds(holds)
      // its refusing subscriber (Waits) refuses a grant that would close a cycle of waits
      yield* events.publishOrRefuse(
        new LeaseChanged({
          user_id: caller.userId,
          lease_id: id,
          connection_id: caller.connectionId,
          project,
          resources: resources.map((r) => r.resource),
          change: "granted",
          at: iso(now)
        }, NO_REVALIDATION)
      )
      return iso(expiresMs)
    })

  /** One attempt at `sophia.lease_acquire` (no waiting): granted whole, or refused `LeaseConflict` naming every live holder. */
  const tryAcquire = (caller: Caller, input: LeaseAcquireInput) =>
    Effect.gen(function*() {
      const resources = parseResources(input.resources)
      if (typeof resources === "string") return yield* new ValidationError({ detail: `resources: ${resources}` })
      const project = input.project ?? DEFAULT_PROJECT
      const mode = input.mode ?? "exclusive"
      const slots = resources.filter((r) => r.kind === "slot")
      if (input.capacity !== undefined && slots.length === 0) {
        return yield* new ValidationError({ detail: "capacity: only for slot: resources" })
      }
      yield* serialize(sql, LEASES_LOCK(caller.userId, project))
      const { asked, decision, gone, now } = yield* conflicts.inTheWay(caller, project, resources, mode, input.capacity)
      for (const a of asked) {
        if (a.fixed !== undefined && input.capacity !== undefined && a.fixed !== input.capacity) {
          return yield* new ValidationError({
            detail: `capacity: ${a.wanted.resource} holds ${a.fixed} (fixed by its first lease); leave capacity out or ask ${a.fixed}`
          })
        }
      }
      if (decision.live.length > 0) {
        return yield* new LeaseConflict({
          holders: yield* conflicts.holdersOf(decision.live),
          hint: conflictHint(project, decision.live[0].resource)
        })
      }
      const id = `lease-${randomUUID()}`
      const ttlS = input.ttl_s ?? LEASE_TTL_DEFAULT_S
      const expiresAt = yield* write(caller, { id, project, mode, resources, input, ttlS, now })
      const tookOver: Array<LeaseTakeover> = []
      for (const held of decision.orphaned) {
        if (tookOver.some((t) => t.lease_id === held.lease_id)) continue
        const taken = yield* takeOver(caller.userId, id, held, gone(held.connection_id)!, iso(now))
        if (taken) tookOver.push(taken)
      }
      const grant: LeaseGrant = {
        lease_id: id,
        resources: resources.map((r) => r.resource),
        mode,
        project,
        expires_at: expiresAt,
        ...(tookOver.length > 0 ? { took_over: tookOver.map((t) => t.lease_id) } : {})
      }
      return grant
    })

  return { tryAcquire } as const
}
