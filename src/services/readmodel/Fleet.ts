import { Effect, Option } from "effect"
import type { ConnectionInfo } from "../../domain/Auth.js"
import type { LeaseRow } from "../../domain/Leases.js"
import type { FleetConnection, FleetView } from "../../domain/Portal.js"
import { Auth } from "../Auth.js"
import { Coordination } from "../Coordination.js"
import { Leases } from "../Leases.js"
import { Ledger } from "../Ledger.js"
import { Portal } from "../Portal.js"
import { spanned } from "../Spans.js"
import { Waits } from "../Waits.js"

/**
 * The portal's Fleet page as one read: every connection with its unread count, open waits, claimed
 * work and leases, and which one is the portal's own. Each part is asked of its owner through a batch method — the
 * connections of Auth, the unread counts of Coordination, the open waits of Waits, the claims of the
 * Ledger, the leases of Leases, the portal's connection of Portal — so the cost is a few statements per user, whatever the
 * number of connections (never one statement per connection).
 */
export const makeFleet = Effect.gen(function*() {
  const auth = yield* Auth
  const coordination = yield* Coordination
  const waits = yield* Waits
  const ledger = yield* Ledger
  const leases = yield* Leases
  const portal = yield* Portal

  /** One user's live connections, each with what its owners say of it. */
  const ofUser = (userId: string, live: ReadonlyArray<ConnectionInfo>) =>
    Effect.gen(function*() {
      const unread = yield* coordination.unreadOf(userId, live.map((c) => c.connection_id))
      const openWaits = yield* waits.openCountsByWaiter(userId)
      const claimed = yield* ledger.claimedByConnections(userId)
      const held = yield* leases.byConnection(userId)
      const own = yield* portal.connectionOf(userId)
      const described = live.map((c): FleetConnection => ({
        connection: c,
        unread: unread.get(c.connection_id) ?? 0,
        open_waits: openWaits.get(c.connection_id) ?? 0,
        claimed: claimed.get(c.connection_id) ?? [],
        leases: held.get(c.connection_id) ?? [],
        is_portal: Option.contains(own, c.connection_id)
      }))
      return { described, held }
    })

  const revoked = (c: ConnectionInfo, held: ReadonlyMap<string, ReadonlyArray<LeaseRow>> | undefined): FleetConnection => ({
    connection: c,
    unread: 0,
    open_waits: 0,
    claimed: [],
    // a revoked holder's leases stay until taken over, expired or released by the owner
    leases: held?.get(c.connection_id) ?? [],
    is_portal: false
  })

  /** Every connection of every user, in `Auth.list` order. */
  const fleet = spanned(
    "ReadModel.fleet",
    Effect.fnUntraced(function*() {
      const all = yield* auth.list()
      const liveByUser = new Map<string, Array<ConnectionInfo>>()
      for (const c of all) {
        if (c.revoked_at !== null) continue
        const live = liveByUser.get(c.user_id)
        if (live === undefined) liveByUser.set(c.user_id, [c])
        else live.push(c)
      }
      const described = new Map<string, FleetConnection>()
      const heldByUser = new Map<string, ReadonlyMap<string, ReadonlyArray<LeaseRow>>>()
      for (const [userId, live] of liveByUser) {
        const { described: rows, held } = yield* ofUser(userId, live)
        heldByUser.set(userId, held)
        for (const row of rows) described.set(row.connection.connection_id, row)
      }
      return {
        connections: all.map((c) => described.get(c.connection_id) ?? revoked(c, heldByUser.get(c.user_id)))
      } satisfies FleetView as FleetView
    })
  )

  return { fleet } as const
})
