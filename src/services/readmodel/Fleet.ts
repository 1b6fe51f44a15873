import { Effect, Option } from "effect"
import type { ConnectionInfo } from "../../domain/Auth.js"
import type { FleetConnection, FleetView } from "../../domain/Portal.js"
import { Auth } from "../Auth.js"
import { Coordination } from "../Coordination.js"
import { Ledger } from "../Ledger.js"
import { Portal } from "../Portal.js"
import { spanned } from "../Spans.js"
import { Waits } from "../Waits.js"

/**
 * The portal's Fleet page as one read: every connection with its unread count, open waits and claimed
 * work, and which one is the portal's own. Each part is asked of its owner through a batch method — the
 * connections of Auth, the unread counts of Coordination, the open waits of Waits, the claims of the
 * Ledger, the portal's connection of Portal — so the cost is a few statements per user, whatever the
 * number of connections (never one statement per connection).
 */
export const makeFleet = Effect.gen(function*() {
  const auth = yield* Auth
  const coordination = yield* Coordination
  const waits = yield* Waits
  const ledger = yield* Ledger
  const portal = yield* Portal

  /** One user's live connections, each with what its owners say of it. */
  const ofUser = (userId: string, live: ReadonlyArray<ConnectionInfo>) =>
    Effect.gen(function*() {
      const unread = yield* coordination.unreadOf(userId, live.map((c) => c.connection_id))
      const openWaits = yield* waits.openCountsByWaiter(userId)
      const claimed = yield* ledger.claimedByConnections(userId)
      const own = yield* portal.connectionOf(userId)
      return live.map((c): FleetConnection => ({
        connection: c,
        unread: unread.get(c.connection_id) ?? 0,
        open_waits: openWaits.get(c.connection_id) ?? 0,
        claimed: claimed.get(c.connection_id) ?? [],
        is_portal: Option.contains(own, c.connection_id)
      }))
    })

  const revoked = (c: ConnectionInfo): FleetConnection => ({ connection: c, unread: 0, open_waits: 0, claimed: [], is_portal: false })

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
      for (const [userId, live] of liveByUser) {
        for (const row of yield* ofUser(userId, live)) described.set(row.connection.connection_id, row)
      }
      return { connections: all.map((c) => described.get(c.connection_id) ?? revoked(c)) } satisfies FleetView as FleetView
    })
  )

  return { fleet } as const
})
