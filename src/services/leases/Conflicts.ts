import { Clock, Effect } from "effect"
import type { ConnectionInfo } from "../../domain/Auth.js"
import type { ParsedResource } from "../../domain/LeaseGlobs.js"
import { baseKey, globsOverlap } from "../../domain/LeaseGlobs.js"
import type { LeaseHolder, LeaseMode } from "../../domain/Leases.js"
import type { Orphaning } from "../../domain/Orphans.js"
import { orphanOf } from "../../domain/Orphans.js"
import type { Auth } from "../Auth.js"
import type { HoldRow, LeaseStore } from "./Store.js"

/**
 * Who stands in the way of a lease: for each resource asked, the active holds it conflicts with, and which
 * of their holders are live (they refuse the lease) or orphaned — revoked or silent (their leases may be
 * taken over). The rule of `path:` overlap is `domain/LeaseGlobs.ts`; the rest:
 *
 * - exclusive conflicts with every other holder, shared only with exclusive;
 * - a connection's own `path:` leases never stand in its way (it holds them already);
 * - a slot holds at most its `capacity` leases, the caller's own included, whatever their mode;
 * - a hold past its expiry holds nothing, swept or not.
 */

/** A resource asked for, with what holds it now (expired holds already left out). */
export interface Asked {
  readonly wanted: ParsedResource
  readonly holds: ReadonlyArray<HoldRow>
  /** a slot's capacity (fixed by its first lease) */
  readonly capacity: number
}

export interface Decision {
  /** live holds in the way, each with the resource it holds */
  readonly live: ReadonlyArray<HoldRow>
  /** orphaned holds in the way (their leases are taken over if the lease is granted) */
  readonly orphaned: ReadonlyArray<HoldRow>
}

const conflictingModes = (a: LeaseMode, b: LeaseMode) => a === "exclusive" || b === "exclusive"

/**
 * The decision over every resource asked (all or nothing): the live holds that refuse it, or, when there are
 * none, the orphaned holds to take over. `orphanOf` says whether a holder is gone.
 */
export const decide = (
  asked: ReadonlyArray<Asked>,
  connectionId: string,
  mode: LeaseMode,
  gone: (connectionId: string) => Orphaning | undefined
): Decision => {
  const live = new Map<string, HoldRow>()
  const orphaned = new Map<string, HoldRow>()
  const keyOf = (h: HoldRow) => `${h.lease_id}\u0000${h.resource}`
  const add = (h: HoldRow) => (gone(h.connection_id) === undefined ? live : orphaned).set(keyOf(h), h)
  for (const { capacity, holds, wanted } of asked) {
    if (wanted.kind === "path") {
      for (const h of holds) {
        if (h.connection_id !== connectionId && conflictingModes(mode, h.mode) && globsOverlap(wanted.glob, h.resource.slice(5))) add(h)
      }
      continue
    }
    // a slot: every mode-conflicting holder is in the way, and then as many more as it takes to leave a place
    const inWay = holds.filter((h) => conflictingModes(mode, h.mode))
    inWay.forEach(add)
    const rest = holds.filter((h) => !conflictingModes(mode, h.mode))
    const restLive = rest.filter((h) => gone(h.connection_id) === undefined)
    const restGone = rest.filter((h) => gone(h.connection_id) !== undefined).sort((a, b) => a.expires_ms - b.expires_ms)
    const excess = rest.length - capacity + 1
    if (excess <= 0) continue
    if (restGone.length >= excess) restGone.slice(0, excess).forEach(add)
    else [...restLive, ...restGone].forEach(add)
  }
  return { live: [...live.values()], orphaned: [...orphaned.values()] }
}

export const makeConflicts = (store: LeaseStore, auth: Auth, silentAfterS: number) => {
  /** The active holds a resource could conflict with (its chain of bases, or its slot), unexpired at `now`. */
  const holdsNear = (userId: string, project: string, wanted: ParsedResource, now: number) =>
    Effect.map(
      wanted.kind === "slot"
        ? store.holdsOfSlot(userId, project, wanted.name)
        : store.holdsOnChain(userId, project, baseKey(wanted.glob)),
      (holds) => holds.filter((h) => h.expires_ms > now)
    )

  /** Whether each holder among `holds` is gone (revoked or silent), asked of Auth in one statement. */
  const orphansAmong = (holds: ReadonlyArray<HoldRow>, now: number) =>
    Effect.map(auth.connections(holds.map((h) => h.connection_id)), (connections: ReadonlyMap<string, ConnectionInfo>) =>
      (connectionId: string) => orphanOf(connections.get(connectionId), now, silentAfterS))

  /** Holds as a refusal names them: with the lease's reason and expiry and the holder's name. */
  const holdersOf = (holds: ReadonlyArray<HoldRow>) =>
    Effect.gen(function*() {
      const leases = new Map((yield* store.byIds([...new Set(holds.map((h) => h.lease_id))])).map((l) => [l.id, l]))
      const names = yield* auth.names(holds.map((h) => h.connection_id))
      return holds.map((h): LeaseHolder => ({
        lease_id: h.lease_id,
        connection_id: h.connection_id,
        agent_name: names.get(h.connection_id) ?? h.connection_id.slice(0, 8),
        resource: h.resource,
        mode: h.mode,
        expires_at: leases.get(h.lease_id)?.expires_at ?? new Date(h.expires_ms).toISOString(),
        reason: leases.get(h.lease_id)?.reason ?? ""
      }))
    })

  /** A slot's capacity: fixed by its first lease, else what this one asks (default 1). */
  const capacityOf = (userId: string, project: string, wanted: ParsedResource, asked: number | undefined) =>
    wanted.kind === "slot"
      ? Effect.map(store.slotCapacity(userId, project, wanted.name), (fixed) => ({ fixed, capacity: fixed ?? asked ?? 1 }))
      : Effect.succeed({ fixed: undefined, capacity: 1 })

  /**
   * Who stands in the way of `connectionId` holding `resources` in `mode` now: the decision, with the
   * holds read (for the capacity check of a slot the caller names).
   */
  const inTheWay = (
    who: { readonly userId: string; readonly connectionId: string },
    project: string,
    resources: ReadonlyArray<ParsedResource>,
    mode: LeaseMode,
    capacity?: number
  ) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const asked: Array<Asked & { readonly fixed: number | undefined }> = []
      for (const wanted of resources) {
        const holds = yield* holdsNear(who.userId, project, wanted, now)
        const slot = yield* capacityOf(who.userId, project, wanted, capacity)
        asked.push({ wanted, holds, ...slot })
      }
      const all = asked.flatMap((a) => a.holds).filter((h) => h.connection_id !== who.connectionId)
      const gone = all.length === 0 ? () => undefined : yield* orphansAmong(all, now)
      return { decision: decide(asked, who.connectionId, mode, gone), asked, now, gone }
    })

  /** Whether a hold near `wanted` shares something with it, whatever the modes. */
  const overlapsHold = (wanted: ParsedResource, hold: HoldRow) =>
    wanted.kind === "slot" ? hold.resource === wanted.resource : hold.resource.startsWith("path:") && globsOverlap(wanted.glob, hold.resource.slice(5))

  return { inTheWay, holdersOf, holdsNear, overlapsHold } as const
}

export type Conflicts = ReturnType<typeof makeConflicts>
