import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import type { LeaseChanged } from "../../domain/Events.js"
import type { WaitCycle } from "../../domain/Waits.js"
import { serialize, WAIT_GRAPH_LOCK } from "../store/Locking.js"
import { makeStatements } from "../store/Statements.js"
import { cycleThrough } from "./Cycles.js"
import type { makeRecording } from "./Recording.js"

/**
 * A lease granted may make a waiter wait on its new holder: a `lease_free` wait whose resource the lease now
 * stands in the way of gains an edge to the holder. When the holder itself waits, directly or not, on that
 * waiter, the edge closes a cycle nobody could break, and the grant is refused `wait_cycle` — the `refusing`
 * subscriber of a granted `LeaseChanged`, inside the grant's transaction, after its holds are written (so the
 * edges read here are those the grant makes).
 *
 * A grant and a declaration decide over the same graph, so they go one at a time: this takes the user's
 * `wait-graph` lock as a declaration does (after the grant's own `leases/<user>/<project>` lock: the fixed order
 * of store/Locking.ts). Whichever of a grant and its holder's racing wait decides second sees the other and
 * refuses. Cheap when the holder waits on nobody (nearly always): one indexed look, no graph read.
 */

const decodeOpen = Schema.decodeUnknown(Schema.Array(Schema.Struct({ open: Schema.Union(Schema.Number, Schema.Boolean) })))

export const makeGrantCycles = (recording: Effect.Effect.Success<ReturnType<typeof makeRecording>>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const { named } = yield* makeStatements

    const waitsOpen = named("Waits.anyOpen", (p: { waiter: string }) =>
      sql`SELECT EXISTS (SELECT 1 FROM waits WHERE waiter_connection_id = ${p.waiter} AND status = 'open') AS open`)

    /** A granted `LeaseChanged`: refused `WaitCycle` when a waiter it now stands in the way of is reachable from its holder. */
    const onLeaseGranted = (event: LeaseChanged): Effect.Effect<void, WaitCycle> =>
      Effect.gen(function*() {
        yield* serialize(sql, WAIT_GRAPH_LOCK(event.user_id))
        const [row] = yield* Effect.flatMap(waitsOpen({ waiter: event.connection_id }), decodeOpen)
        // a holder that waits on nobody has no edge out: no cycle can pass through it
        if (row === undefined || !row.open) return
        const edges = yield* recording.edgesOf(event.user_id)
        for (const [waiter, on] of edges) {
          if (on !== event.connection_id || waiter === on) continue
          // waiter → holder, and a path holder → … → waiter
          const cycle = cycleThrough(edges, waiter, on)
          if (cycle === undefined) continue
          // said from the holder's side: holder → … → waiter → holder
          const fromHolder = [...cycle.slice(1), cycle[0]]
          return yield* Effect.flip(recording.cycleRefusal(fromHolder, {
            resources: event.resources,
            hint: "the lease would make a connection that waits for it wait on you while you wait on it: " +
              "cancel your wait (sophia.cancel_wait) or let it end, then acquire again"
          }))
        }
      }).pipe(Effect.catchTag("SqlError", "ParseError", Effect.die))

    return { onLeaseGranted } as const
  })
