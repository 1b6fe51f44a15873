import { Effect } from "effect"
import type { Caller } from "../domain/Auth.js"
import type { OrientInput, OrientOutput, SurfaceSummary } from "../domain/Orient.js"
import { Embeddings } from "./Embeddings.js"
import { Leases } from "./Leases.js"
import { Ledger } from "./Ledger.js"
import { ReadModel } from "./readmodel/ReadModel.js"
import { spanned } from "./Spans.js"
import { Waits } from "./Waits.js"

const noBlocking: OrientOutput["my_open_waits"] = []
const noWork: OrientOutput["my_claimed_work"] = []
const noOrphanedWork: OrientOutput["orphaned"]["work"] = []

/**
 * The use case behind `sophia.orient`: what one call needs to bootstrap a session — who the caller is,
 * counts across its user (documents within its entity scope), its unread, its open waits, the work
 * it has claimed and the leases it holds. It owns no table: the counts are the read model's
 * (`ReadModel.counts`, each asked of the service that owns it), the work of the Ledger, the leases of Leases. What only some callers have — open waits, claimed work,
 * orphans, an entity scope — is read only when the counts say it exists. Nothing here writes (the
 * caller's wait signals are read without being delivered; the envelope delivers those).
 */
export class Orient extends Effect.Service<Orient>()("sophia/Orient", {
  effect: Effect.gen(function*() {
    const readModel = yield* ReadModel
    const waits = yield* Waits
    const ledger = yield* Ledger
    const leases = yield* Leases
    const embeddings = yield* Embeddings

    const orient = spanned("Orient.orient", Effect.fnUntraced(function*(caller: Caller, input: OrientInput, surface: SurfaceSummary) {
      const n = yield* readModel.counts(caller)
      // (the work count stays a call of the Ledger's own method: the Ledger is the service built to be
      // swapped for one that keeps no table — test/Architecture.test.ts runs orient over such a fake)
      const workItems = yield* ledger.countWork(caller.userId)
      const blocking = n.open
        ? (yield* waits.signalsAfter(caller, { open: true, undelivered: false }, false)).blocking
        : noBlocking
      const claimed = workItems > 0 ? yield* ledger.claimedBy(caller.userId, caller.connectionId) : noWork
      const orphanedWork = workItems > 0 ? yield* ledger.orphanedWork(caller.userId) : noOrphanedWork
      const orphanedWaits = n.open_waits > 0 ? yield* waits.countOrphaned(caller) : 0
      const myLeases = yield* leases.mine(caller)
      const dense = embeddings.status()
      const result: OrientOutput = {
        connection_id: caller.connectionId,
        connection_short: caller.connectionShort,
        name: caller.name,
        profile: caller.profile,
        user_id: caller.userId,
        entity_scope: caller.entityScope,
        ...(input.goal !== undefined ? { goal: input.goal } : {}),
        counts: {
          posts: n.posts,
          channels: n.channels,
          open_waits: n.open_waits,
          work_items: workItems,
          documents: n.documents,
          ...(dense !== undefined ? { embedding_backlog: dense.backlog } : {})
        },
        unread: n.unread,
        my_open_waits: blocking,
        my_claimed_work: claimed,
        my_leases: myLeases,
        orphaned: { work: orphanedWork, waits: orphanedWaits },
        total_tools: surface.total_tools,
        version_hash: surface.version_hash,
        server_git_sha: surface.server_git_sha
      }
      return result
    }))

    return { orient } as const
  })
}) {}
