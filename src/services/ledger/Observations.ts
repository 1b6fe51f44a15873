import { Effect } from "effect"
import { arcWorkId } from "../../domain/Coordination.js"
import type { ConnectionRevoked, PostLanded, WaitResolved } from "../../domain/Events.js"
import { spanned } from "../Spans.js"
import type { Lists } from "./Lists.js"
import type { Writes } from "./Writes.js"

/**
 * What the server witnessed elsewhere, as the ledger hears it (a module of the Ledger service): the
 * domain events it subscribes to (wired where the layers are composed), each becoming `observed`
 * evidence on the work item it concerns, inside the transaction that witnessed it.
 */
export const makeObservations = (deps: {
  readonly claimedBy: Lists["claimedBy"]
  readonly observe: Writes["observe"]
}) => {
  const { claimedBy, observe } = deps

  /** Observe on the item; nothing to observe (no such item) is not an error. */
  const witness = (userId: string, workId: string, field: string, value: unknown, source: string) =>
    observe(userId, workId, field, value, source).pipe(Effect.asVoid, Effect.catchTag("NotFound", () => Effect.void))

  /** Which posts and waits concern a work item (the rest never reach the observers). */
  const observesPost = (post: PostLanded) => post.kind === "closeout" && arcWorkId(post.channel) !== undefined
  const observesWait = (resolved: WaitResolved) => arcWorkId(resolved.channel) !== undefined

  /** `PostLanded`: a closeout on the item's `arc:<work_id>` channel. */
  const observePost = spanned("Ledger.observePost", (post: PostLanded) => {
    const workId = post.kind === "closeout" ? arcWorkId(post.channel) : undefined
    return workId === undefined ? Effect.void : witness(post.user_id, workId, "closeout", {
      post_id: post.post_id,
      by: post.author,
      channel_archived: post.archived
    }, `post ${post.post_id}`)
  })

  /** `ConnectionRevoked`: every open item the revoked connection held the claim on. */
  const observeRevocation = spanned("Ledger.observeRevocation", Effect.fnUntraced(function*(revoked: ConnectionRevoked) {
    for (const item of yield* claimedBy(revoked.user_id, revoked.connection_id)) {
      yield* witness(revoked.user_id, item.work_id, "claimant_revoked", {
        connection_id: revoked.connection_id,
        at: revoked.at
      }, `connection ${revoked.connection_id} revoked`)
    }
  }))

  /** `WaitResolved`: a wait on the item's `arc:<work_id>` channel resolved. */
  const observeWait = spanned("Ledger.observeWait", (resolved: WaitResolved) => {
    const workId = arcWorkId(resolved.channel)
    return workId === undefined ? Effect.void : witness(resolved.user_id, workId, "wait", {
      wait_id: resolved.wait_id,
      resolution: resolved.resolution,
      waiter: resolved.waiter,
      resolved_by: resolved.resolved_by
    }, `wait ${resolved.wait_id}`)
  })

  return { observesPost, observesWait, observePost, observeRevocation, observeWait } as const
}
