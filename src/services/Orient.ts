import { Effect } from "effect"
import type { Caller } from "../domain/Auth.js"
import type { OrientInput, OrientOutput, SurfaceSummary } from "../domain/Orient.js"
import { Coordination } from "./Coordination.js"
import { Knowledge } from "./Knowledge.js"
import { Ledger } from "./Ledger.js"
import { Waits } from "./Waits.js"

/**
 * The use case behind `sophia.orient`: what one call needs to bootstrap a session — who the caller is,
 * counts across its user (documents within its entity scope), its unread, its open waits and the work
 * it has claimed. It owns no table: each part is asked of the service that owns it. Nothing here writes
 * (the caller's wait signals are read without being delivered; the envelope delivers those).
 */
export class Orient extends Effect.Service<Orient>()("sophia/Orient", {
  effect: Effect.gen(function*() {
    const coordination = yield* Coordination
    const waits = yield* Waits
    const ledger = yield* Ledger
    const knowledge = yield* Knowledge

    const orient = Effect.fn("Orient.orient")(function*(caller: Caller, input: OrientInput, surface: SurfaceSummary) {
      const [posts, openWaits, workItems, documents, unread, signals, claimed, graph] = yield* Effect.all([
        coordination.counts(caller.userId),
        waits.countOpen(caller.userId),
        ledger.countWork(caller.userId),
        knowledge.countDocuments(caller),
        coordination.unreadCount(caller),
        waits.signals(caller, false),
        ledger.claimedBy(caller.userId, caller.connectionId),
        waits.graph(caller)
      ])
      const result: OrientOutput = {
        connection_id: caller.connectionId,
        connection_short: caller.connectionShort,
        name: caller.name,
        profile: caller.profile,
        user_id: caller.userId,
        entity_scope: caller.entityScope,
        ...(input.goal !== undefined ? { goal: input.goal } : {}),
        counts: { posts: posts.posts, channels: posts.channels, open_waits: openWaits, work_items: workItems, documents },
        unread,
        my_open_waits: signals.blocking,
        my_claimed_work: claimed,
        orphaned: { work: graph.orphaned.work, waits: graph.orphaned.waits.length },
        total_tools: surface.total_tools,
        version_hash: surface.version_hash,
        server_git_sha: surface.server_git_sha
      }
      return result
    })

    return { orient } as const
  })
}) {}
