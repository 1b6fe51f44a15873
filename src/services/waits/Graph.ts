import { SqlClient } from "@effect/sql"
import { Clock, Effect, Schema } from "effect"
import type { Caller, ConnectionInfo } from "../../domain/Auth.js"
import { connectionShort } from "../../domain/Auth.js"
import type { OrphanReason } from "../../domain/Orphans.js"
import { orphanOf, silentAfterSConfig } from "../../domain/Orphans.js"
import type { WaitEdge, WaitGraphResult } from "../../domain/Waits.js"
import { connectionRef } from "../../domain/Waits.js"
import { Auth } from "../Auth.js"
import { Ledger } from "../Ledger.js"
import { spanned } from "../Spans.js"
import { makeStatements } from "../store/Statements.js"
import { findCycles } from "./Cycles.js"
import type { makeLeaseWaits } from "./LeaseWaits.js"

/**
 * The user's wait graph as a whole: who is blocked on whom, its cycles, the waits nobody will answer
 * (orphaned: their awaited connection revoked or silent), and its counts (open waits in all and per
 * waiter, orphaned waits) for the read model and the portal.
 */

const JsonObject = Schema.parseJson(Schema.Record({ key: Schema.String, value: Schema.Unknown }))

const EdgeRow = Schema.Struct({
  id: Schema.String,
  pred_type: Schema.String,
  waiter_connection_id: Schema.String,
  on_connection_id: Schema.String,
  predicate: JsonObject,
  reason: Schema.String,
  expires_at: Schema.String,
  created_at: Schema.String
})
const decodeEdges = Schema.decodeUnknown(Schema.Array(EdgeRow))
const decodeTargets = Schema.decodeUnknown(Schema.Array(Schema.Struct({
  id: Schema.String,
  waiter_connection_id: Schema.String,
  on_connection_id: Schema.String,
  created_at: Schema.String
})))

/** An open wait nobody will answer: who waits, on whom (connection ids), why and since when. */
export interface OrphanedWait {
  readonly wait_id: string
  readonly waiter: string
  readonly on: string
  readonly reason: OrphanReason
  readonly since: string
}

export const makeGraph = (leaseWaits: Effect.Effect.Success<ReturnType<typeof makeLeaseWaits>>) => Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const auth = yield* Auth
  const ledger = yield* Ledger
  const { named, namedValues } = yield* makeStatements
  const silentAfterS = yield* Effect.orDie(silentAfterSConfig)

  /** Why an open wait will never be answered (its awaited connection revoked or silent), or undefined. */
  const orphanedWait = (
    wait: { readonly on_connection_id: string; readonly created_at: string },
    connections: ReadonlyMap<string, ConnectionInfo>,
    now: number
  ) => {
    const awaited = connections.get(wait.on_connection_id)
    // a connection never seen is silent since the wait was declared
    return orphanOf(awaited && { ...awaited, created_at: awaited.last_seen_at ?? wait.created_at }, now, silentAfterS)
  }

  const openEdges = named("Waits.graphEdges", (p: { userId: string }) =>
    sql`SELECT id, pred_type, waiter_connection_id, on_connection_id, predicate, reason, expires_at, created_at
      FROM waits WHERE user_id = ${p.userId} AND status = 'open'
      ORDER BY created_at, id`)

  /** Who is blocked on whom across the caller's user, with cycles and the waits and work nobody will answer. */
  const graph = spanned("Waits.graph", Effect.fnUntraced(function*(caller: Caller) {
    const waits = yield* Effect.flatMap(openEdges({ userId: caller.userId }), decodeEdges)
    // a `lease_free` wait's edges run to the live holders in its way now (none: it is about to hold)
    const leaseEdges = waits.some((w) => w.pred_type === "lease_free") ? yield* leaseWaits.edgesOf(caller.userId) : []
    const rows = waits.flatMap((w) =>
      w.pred_type !== "lease_free" ? [w] : leaseEdges.filter((e) => e.waitId === w.id).map((e) => ({ ...w, on_connection_id: e.on }))
    )
    const now = yield* Clock.currentTimeMillis
    const connections = yield* auth.connections(rows.flatMap((r) => [r.waiter_connection_id, r.on_connection_id]))
    const nameOf = (id: string) => connections.get(id)?.name ?? connectionShort(id)
    const ref = (id: string) => connectionRef(id, nameOf(id))
    const edges: Array<WaitEdge> = rows.map((r) => ({
      wait_id: r.id,
      waiter: ref(r.waiter_connection_id),
      on: ref(r.on_connection_id),
      predicate: r.predicate,
      reason: r.reason,
      expires_at: r.expires_at
    }))
    const cycles = findCycles(rows.map((r) => [r.waiter_connection_id, r.on_connection_id] as const)).map((cycle) =>
      [...cycle, cycle[0]].map(ref)
    )
    // (a `lease_free` wait is never orphaned: a holder gone makes it hold, it does not leave it unanswered)
    const orphaned = rows.flatMap((r): Array<WaitGraphResult["orphaned"]["waits"][number]> => {
      const gone = r.pred_type === "lease_free" ? undefined : orphanedWait(r, connections, now)
      return gone === undefined ? [] : [{
        wait_id: r.id,
        connection_id: r.on_connection_id,
        on: ref(r.on_connection_id),
        reason: gone.reason,
        why: gone.reason,
        since: gone.since
      }]
    })
    const result: WaitGraphResult = {
      edges,
      cycles,
      orphaned: { waits: orphaned, work: yield* ledger.orphanedWork(caller.userId), silent_after_s: silentAfterS }
    }
    return result
  }, Effect.catchTag("SqlError", "ParseError", Effect.die)))

  /**
   * The open waits of the user nobody will answer (those `wait_graph` lists as orphaned), without building
   * the graph: only who each wait is on and since when.
   */
  const openTargets = named("Waits.openTargets", (p: { userId: string }) =>
    sql`SELECT id, waiter_connection_id, on_connection_id, created_at FROM waits
      WHERE user_id = ${p.userId} AND status = 'open' AND pred_type <> 'lease_free' ORDER BY created_at, id`)
  const orphanedOf = (userId: string) =>
    Effect.gen(function*() {
      const rows = yield* Effect.flatMap(openTargets({ userId }), decodeTargets)
      if (rows.length === 0) return []
      const connections = yield* auth.connections(rows.map((r) => r.on_connection_id))
      const now = yield* Clock.currentTimeMillis
      return rows.flatMap((r): Array<OrphanedWait> => {
        const gone = orphanedWait(r, connections, now)
        return gone === undefined ? [] : [{ wait_id: r.id, waiter: r.waiter_connection_id, on: r.on_connection_id, ...gone }]
      })
    }).pipe(Effect.catchTag("SqlError", "ParseError", Effect.die))
  /** How many open waits of the user nobody will answer. */
  const countOrphaned = spanned("Waits.countOrphaned", (caller: Caller) => Effect.map(orphanedOf(caller.userId), (w) => w.length))
  /** The open waits of the user nobody will answer, oldest first (`panorama`'s orphans). */
  const orphaned = spanned("Waits.orphaned", (userId: string) => orphanedOf(userId))

  const countOpenOf = namedValues("Waits.countOpen", (p: { userId: string }) =>
    sql`SELECT COUNT(*) FROM waits WHERE user_id = ${p.userId} AND status = 'open'`)
  /** How many open waits the user has. */
  const countOpen = spanned("Waits.countOpen", (userId: string): Effect.Effect<number> =>
    countOpenOf({ userId }).pipe(
      Effect.map((rows) => Number(rows[0][0])),
      Effect.catchTag("SqlError", Effect.die)
    ))

  const openByWaiter = namedValues("Waits.openCountsByWaiter", (p: { userId: string }) =>
    sql`SELECT waiter_connection_id, COUNT(*) FROM waits WHERE user_id = ${p.userId} AND status = 'open'
      GROUP BY waiter_connection_id`)
  /** The user's open waits per waiting connection (a connection with none is absent): the portal's fleet. */
  const openCountsByWaiter = spanned("Waits.openCountsByWaiter", (userId: string): Effect.Effect<ReadonlyMap<string, number>> =>
    openByWaiter({ userId }).pipe(
      Effect.map((rows) => new Map(rows.map(([waiter, n]) => [String(waiter), Number(n)]))),
      Effect.catchTag("SqlError", Effect.die)
    ))

  return { graph, countOrphaned, orphaned, countOpen, openCountsByWaiter } as const
})
