import { Clock, Effect, Option } from "effect"
import type { Caller } from "../../domain/Auth.js"
import { orphanOf, silentAfterSConfig } from "../../domain/Orphans.js"
import type { PanoramaInput, PanoramaOutput } from "../../domain/Panorama.js"
import { PANORAMA_SINCE_H_DEFAULT } from "../../domain/Panorama.js"
import { Approvals } from "../Approvals.js"
import { Auth } from "../Auth.js"
import { Coordination } from "../Coordination.js"
import { Leases } from "../Leases.js"
import { Ledger } from "../Ledger.js"
import { spanned } from "../Spans.js"
import { StoreVersion } from "../store/Statements.js"
import { Waits } from "../Waits.js"
import { COMPACT_CAPS, COMPACT_CHANNELS, panoramaView, WHOLE_CHANNELS } from "./PanoramaView.js"

/**
 * `sophia.panorama`'s read: the caller's user's fleet, each part asked of its owner through a batch method —
 * the connections of Auth, open waits per waiter and the orphaned waits of Waits, claims per claimant and
 * the orphaned work of the Ledger, leases per holder of Leases, the recent channels with their latest
 * decision of Coordination, the caller's pending approvals of Approvals — a fixed number of statements
 * whatever the number of connections or channels, every one of them bound to the caller's user. What the
 * reply shows of it, and the compact budget, is `PanoramaView.ts`. Nothing is written.
 */
export const makePanorama = Effect.gen(function*() {
  const auth = yield* Auth
  const coordination = yield* Coordination
  const waits = yield* Waits
  const ledger = yield* Ledger
  const leases = yield* Leases
  const approvals = yield* Approvals
  const silentAfterS = yield* Effect.orDie(silentAfterSConfig)
  // one statement after another where a statement is a few µs in process (SQLite: the store that offers a
  // version); where each is a round trip (Postgres), a few at once on the pool's connections
  const concurrency = Option.isSome(yield* Effect.serviceOption(StoreVersion)) ? 1 : 4

  const panorama = spanned("ReadModel.panorama", Effect.fnUntraced(function*(caller: Caller, input: PanoramaInput) {
    const compact = input.compact ?? true
    const sinceH = input.since_h ?? PANORAMA_SINCE_H_DEFAULT
    const now = yield* Clock.currentTimeMillis
    const since = new Date(now - sinceH * 3_600_000).toISOString()
    const userId = caller.userId
    const parts = yield* Effect.all({
      connections: auth.liveOf(userId),
      openWaits: waits.openCountsByWaiter(userId),
      claims: ledger.claimedByConnections(userId),
      leases: leases.byConnection(userId),
      recent: coordination.recentChannels(userId, {
        since,
        limit: compact ? COMPACT_CHANNELS : WHOLE_CHANNELS,
        bodyChars: compact ? COMPACT_CAPS.body : 1000
      }),
      orphanedWork: ledger.orphanedWork(userId),
      orphanedWaits: waits.orphaned(userId),
      approvals: approvals.pendingOfCaller(caller)
    }, { concurrency })
    const live = parts.connections.filter((c) => orphanOf(c, now, silentAfterS) === undefined)
    // the names of the connections orphans name (gone ones among them: revoked rows are not in `connections`)
    const known = new Map(parts.connections.map((c) => [c.connection_id, c.name] as const))
    const unknown = [
      ...parts.orphanedWork.map((w) => w.connection_id),
      ...parts.orphanedWaits.flatMap((w) => [w.waiter, w.on])
    ].filter((id) => !known.has(id))
    const names = unknown.length === 0 ? known : new Map([...known, ...(yield* auth.names(unknown))])
    const result: PanoramaOutput = panoramaView({
      caller: caller.connectionId,
      now,
      live,
      silent: parts.connections.length - live.length,
      openWaits: parts.openWaits,
      claims: parts.claims,
      leases: parts.leases,
      channels: parts.recent.channels,
      channelsTotal: parts.recent.total,
      orphanedWork: parts.orphanedWork,
      orphanedWaits: parts.orphanedWaits,
      names,
      approvals: parts.approvals
    }, compact)
    return result
  }))

  return { panorama } as const
})
