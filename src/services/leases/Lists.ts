import { Clock, Effect } from "effect"
import type { Caller } from "../../domain/Auth.js"
import { ValidationError } from "../../domain/Errors.js"
import { parseResource } from "../../domain/LeaseGlobs.js"
import type { LeaseRow, LeasesInput, LeaseTakeover } from "../../domain/Leases.js"
import { orphanOf } from "../../domain/Orphans.js"
import type { Auth } from "../Auth.js"
import type { Conflicts } from "./Conflicts.js"
import type { LeaseDbRow, LeaseStore } from "./Store.js"

/**
 * The active leases as the surface shows them — `sophia.leases`, `orient`, the portal's Fleet and a work
 * item's view: each with its holder's live name, whether it is orphaned (holder revoked or silent: another
 * connection may take it over) and the orphaned leases it took over.
 */
export const makeLists = (deps: {
  readonly store: LeaseStore
  readonly auth: Auth
  readonly conflicts: Conflicts
  readonly silentAfterS: number
}) => {
  const { auth, conflicts, silentAfterS, store } = deps

  /** Leases as rows, in the order given; `me`: the connection for which `mine` is said. */
  const rowsOf = (leases: ReadonlyArray<LeaseDbRow>, me: string | undefined, now: number) =>
    Effect.gen(function*() {
      if (leases.length === 0) return [] as Array<LeaseRow>
      const takeovers = yield* store.takeoversOf(leases.map((l) => l.id))
      const connections = yield* auth.connections([
        ...leases.map((l) => l.connection_id),
        ...takeovers.map((t) => t.previous_connection_id)
      ])
      const tookOver = new Map<string, Array<LeaseTakeover>>()
      for (const t of takeovers) {
        const list = tookOver.get(t.lease_id) ?? []
        list.push({ lease_id: t.previous_lease_id, connection_id: t.previous_connection_id, reason: t.reason, since: t.since })
        tookOver.set(t.lease_id, list)
      }
      return leases.map((l): LeaseRow => {
        const holder = connections.get(l.connection_id)
        const gone = orphanOf(holder, now, silentAfterS)
        const took = tookOver.get(l.id)
        return {
          lease_id: l.id,
          connection_id: l.connection_id,
          agent_name: holder?.name ?? l.connection_id.slice(0, 8),
          resources: l.resources,
          mode: l.mode,
          project: l.project,
          reason: l.reason,
          work_id: l.work_id,
          created_at: l.created_at,
          expires_at: l.expires_at,
          mine: l.connection_id === me,
          ...(gone !== undefined ? { orphaned: { reason: gone.reason, since: gone.since } } : {}),
          ...(took !== undefined ? { took_over: took } : {})
        }
      })
    })

  /** `sophia.leases`: the user's active leases, in a project, overlapping a resource, the caller's own. */
  const list = (caller: Caller, input: LeasesInput) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      let leases = input.project === undefined && input.resource === undefined
        ? yield* store.activeOfUser(caller.userId, now)
        : yield* store.activeOfProject(caller.userId, input.project ?? "default", now)
      if (input.resource !== undefined) {
        const wanted = parseResource(input.resource)
        if (typeof wanted === "string") return yield* new ValidationError({ detail: `resource: ${wanted}` })
        const holds = yield* conflicts.holdsNear(caller.userId, input.project ?? "default", wanted, now)
        const near = new Set(holds.filter((h) => conflicts.overlapsHold(wanted, h)).map((h) => h.lease_id))
        leases = leases.filter((l) => near.has(l.id))
      }
      if (input.mine === true) leases = leases.filter((l) => l.connection_id === caller.connectionId)
      return { leases: yield* rowsOf(leases, caller.connectionId, now) }
    })

  /** The caller's own active leases (orient). */
  const mine = (caller: Caller) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      return yield* rowsOf(yield* store.activeOfConnection(caller.userId, caller.connectionId, now), caller.connectionId, now)
    })

  /** The user's active leases by holder (the portal's Fleet). */
  const byConnection = (userId: string) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const rows = yield* rowsOf(yield* store.activeOfUser(userId, now), undefined, now)
      const out = new Map<string, Array<LeaseRow>>()
      for (const row of rows) {
        const list = out.get(row.connection_id) ?? []
        list.push(row)
        out.set(row.connection_id, list)
      }
      return out as ReadonlyMap<string, ReadonlyArray<LeaseRow>>
    })

  /** The active leases taken for a work item (its view). */
  const ofWork = (userId: string, workId: string) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      return yield* rowsOf(yield* store.activeOfWork(userId, workId, now), undefined, now)
    })

  return { list, mine, byConnection, ofWork } as const
}
