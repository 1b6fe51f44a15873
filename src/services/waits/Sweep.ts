import { SqlClient } from "@effect/sql"
import { Clock, Effect, Schema } from "effect"
import { Auth } from "../Auth.js"
import { Events } from "../Events.js"
import { spanned } from "../Spans.js"
import { makeStatements } from "../store/Statements.js"
import type { makeLeaseWaits } from "./LeaseWaits.js"
import type { makeResolutions } from "./Resolutions.js"

/**
 * The sweep: every overdue wait resolves `unsatisfied` (and, as a fallback, every wait on a revoked
 * connection `unverifiable`). Run by the sweep fiber (layers/Sweep.ts) whether or not anyone is watching;
 * safe with several daemons on one database.
 */

const decodeIds = Schema.decodeUnknown(Schema.Array(Schema.Struct({ id: Schema.String })))
const decodeOpenOn = Schema.decodeUnknown(Schema.Array(Schema.Struct({ id: Schema.String, on_connection_id: Schema.String })))

export const makeSweep = (
  resolutions: Effect.Effect.Success<typeof makeResolutions>,
  leaseWaits: Effect.Effect.Success<ReturnType<typeof makeLeaseWaits>>
) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const auth = yield* Auth
    const events = yield* Events
    const { named } = yield* makeStatements

    const overdue = named("Waits.overdue", (p: { now: number }) =>
      sql`SELECT id FROM waits WHERE status = 'open' AND expires_ms <= ${p.now} ORDER BY expires_ms`)
    const allOpen = named("Waits.allOpen", () =>
      sql`SELECT id, on_connection_id FROM waits WHERE status = 'open' AND pred_type <> 'lease_free'`)

    /** Resolve what is overdue (or awaits a revoked connection). Returns how many waits this call resolved. */
    const sweep = spanned("Waits.sweep", Effect.fnUntraced(function*() {
      const now = yield* Clock.currentTimeMillis
      const at = new Date(now).toISOString()
      // Each wait resolves in its own short transaction — the conditional update, `WaitResolved` and what
      // its subscribers write (the ledger's observation) commit together or not at all — and no
      // transaction is held across waits, so a sweep never keeps the write lock while others wait for it.
      // A wait another daemon or a post resolved first is skipped by `status = 'open'` (0 rows).
      let resolved = 0
      for (const { id } of yield* Effect.flatMap(overdue({ now }), decodeIds)) {
        resolved += yield* events.transaction(resolutions.resolveOverdue(id, at))
      }
      // a `lease_free` wait holds once nobody live stands in its way (a holder gone silent, a lease past its
      // expiry, an end in another process of a SQLite file)
      resolved += yield* leaseWaits.sweep
      // the fallback for a revocation whose transaction did not resolve the waits on it (the revocation
      // itself resolves them; this only mops up): ask Auth which awaited connections are revoked
      const open = yield* Effect.flatMap(allOpen({}), decodeOpenOn)
      const connections = yield* auth.connections(open.map((w) => w.on_connection_id))
      for (const wait of open) {
        if (connections.get(wait.on_connection_id)?.revoked_at == null) continue
        resolved += yield* events.transaction(resolutions.resolve(wait.id, {
          status: "unverifiable",
          at,
          by: null,
          postId: null,
          how: "the awaited connection was revoked: the predicate can no longer be read"
        }))
      }
      return resolved
    }, Effect.catchTag("SqlError", "ParseError", Effect.die)))

    return { sweep } as const
  })
