import { SqlClient } from "@effect/sql"
import { Clock, Effect, Schema } from "effect"
import type { LeaseChanged } from "../../domain/Events.js"
import { globsOverlap, parseResource } from "../../domain/LeaseGlobs.js"
import { DEFAULT_PROJECT } from "../../domain/Leases.js"
import { LeaseFree } from "../../domain/Waits.js"
import { Events } from "../Events.js"
import { Leases } from "../Leases.js"
import { makeStatements } from "../store/Statements.js"
import type { makeResolutions } from "./Resolutions.js"

/**
 * `lease_free` waits: satisfied once the resource could be granted to the waiter — no live holder's lease in
 * its way (an orphaned one could be taken over). Their edges in the wait graph run to those holders, read
 * live from Leases (they change as leases are granted and end), so a wait on a lease whose holder waits on the
 * waiter is a cycle. Checked inside the transaction of every lease that ends (`onLeaseChanged`) and of every
 * revocation (a revoked holder's leases are orphaned), at declaration, and by the sweep (a holder gone
 * silent, a lease past its expiry, an end in another process of a SQLite file).
 */

const LeaseWaitRow = Schema.Struct({
  id: Schema.String,
  user_id: Schema.String,
  waiter_connection_id: Schema.String,
  predicate: Schema.parseJson(LeaseFree)
})
type LeaseWaitRow = typeof LeaseWaitRow.Type
const decodeRows = Schema.decodeUnknown(Schema.Array(LeaseWaitRow))

/** Whether two resources (as written) share something: the same slot, or overlapping `path:` globs. */
const touches = (a: string, b: string) => {
  const x = parseResource(a)
  const y = parseResource(b)
  if (typeof x === "string" || typeof y === "string") return false
  if (x.kind === "slot" || y.kind === "slot") return x.resource === y.resource
  return globsOverlap(x.glob, y.glob)
}

export const makeLeaseWaits = (resolutions: Effect.Effect.Success<typeof makeResolutions>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const leases = yield* Leases
    const events = yield* Events
    const { named } = yield* makeStatements

    const openOfUser = named("Waits.openLeaseWaits", (p: { userId: string }) =>
      sql`SELECT id, user_id, waiter_connection_id, predicate FROM waits
        WHERE user_id = ${p.userId} AND status = 'open' AND pred_type = 'lease_free'`)
    const openAll = named("Waits.allOpenLeaseWaits", () =>
      sql`SELECT id, user_id, waiter_connection_id, predicate FROM waits WHERE status = 'open' AND pred_type = 'lease_free'`)
    const ofUser = (userId: string) => Effect.flatMap(openOfUser({ userId }), decodeRows)

    /** The live holders standing in the waiter's way now (none: the wait holds). */
    const holders = (userId: string, waiter: string, predicate: LeaseFree) =>
      leases.blockers({ userId, connectionId: waiter }, predicate.resource, predicate.project ?? DEFAULT_PROJECT)

    /** The user's `lease_free` waits as wait-graph edges: waiter → each live holder in its way. */
    const edgesOf = (userId: string) =>
      Effect.gen(function*() {
        const out: Array<{ readonly waitId: string; readonly waiter: string; readonly on: string }> = []
        for (const row of yield* ofUser(userId)) {
          const hs = yield* Effect.orElseSucceed(holders(userId, row.waiter_connection_id, row.predicate), () => [])
          for (const on of new Set(hs.map((h) => h.connection_id))) out.push({ waitId: row.id, waiter: row.waiter_connection_id, on })
        }
        return out
      })

    /** Resolve the wait `satisfied` if nobody live stands in its way now; 1 when this call resolved it. */
    const satisfiedIfFree = (row: LeaseWaitRow, at: string, by: string | null, how: string) =>
      Effect.gen(function*() {
        const hs = yield* Effect.orElseSucceed(holders(row.user_id, row.waiter_connection_id, row.predicate), () => [{}])
        if (hs.length > 0) return 0
        return yield* resolutions.resolve(row.id, { status: "satisfied", at, by, postId: null, how })
      })

    /** `LeaseChanged` (inside its transaction): a lease that ended may free the waits on what it held. */
    const onLeaseChanged = (event: LeaseChanged) =>
      Effect.gen(function*() {
        if (event.change === "granted" || event.change === "renewed") return
        for (const row of yield* ofUser(event.user_id)) {
          if ((row.predicate.project ?? DEFAULT_PROJECT) !== event.project) continue
          if (!event.resources.some((r) => touches(r, row.predicate.resource))) continue
          const how = `lease ${event.lease_id} ${event.change.replace("_", " ")}: ${row.predicate.resource} can be granted`
          yield* satisfiedIfFree(row, event.at, event.connection_id, how)
        }
      }).pipe(Effect.catchTag("SqlError", "ParseError", Effect.die))

    /** A connection of the user was revoked (inside the revocation): its leases are orphaned, a wait may hold. */
    const onHolderRevoked = (userId: string, at: string) =>
      Effect.gen(function*() {
        for (const row of yield* ofUser(userId)) {
          yield* satisfiedIfFree(row, at, null, `the holders in the way of ${row.predicate.resource} are revoked or silent: it can be taken over`)
        }
      })

    /** The sweep: every open `lease_free` wait that holds now resolves, each in its own short transaction. */
    const sweep = Effect.gen(function*() {
      const at = new Date(yield* Clock.currentTimeMillis).toISOString()
      let resolved = 0
      for (const row of yield* Effect.flatMap(openAll({}), decodeRows)) {
        resolved += yield* events.transaction(satisfiedIfFree(row, at, null, `${row.predicate.resource} can be granted`))
      }
      return resolved
    })

    return { holders, edgesOf, onLeaseChanged, onHolderRevoked, sweep } as const
  })
