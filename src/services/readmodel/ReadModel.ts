import { Effect } from "effect"
import type { Caller } from "../../domain/Auth.js"
import { Coordination } from "../Coordination.js"
import { Knowledge } from "../Knowledge.js"
import { spanned } from "../Spans.js"
import { Waits } from "../Waits.js"
import { makeEnvelope } from "./Envelope.js"
import { makeFleet } from "./Fleet.js"
import { makePanorama } from "./Panorama.js"

/** What `orient` counts for its caller (the work count is the Ledger's own: `Orient` asks it). */
export interface CallerCounts {
  readonly posts: number
  readonly channels: number
  readonly open_waits: number
  readonly unread: number
  /** Whether the caller has an open wait (its `_blocking` is then worth reading). */
  readonly open: boolean
  readonly documents: number
}

/**
 * The reads that span several services' tables: the envelope every response carries, the counts behind
 * `orient`, the portal's fleet, `panorama`. It owns no table: each part is asked of the service that owns it, through
 * its methods, so any of them can be replaced (an in-memory fake of the inbox leaves the envelope and
 * `orient` working — test/Architecture.test.ts). What it keeps is derived and disposable (the envelope's
 * quiet counts, `readmodel/Envelope.ts`). The portal's fleet is `readmodel/Fleet.ts`; `sophia.panorama` is
 * `readmodel/Panorama.ts` (the read) and `readmodel/PanoramaView.ts` (what it shows, compact within its budget).
 */
export class ReadModel extends Effect.Service<ReadModel>()("sophia/ReadModel", {
  effect: Effect.gen(function*() {
    const coordination = yield* Coordination
    const waits = yield* Waits
    const knowledge = yield* Knowledge
    const envelope = yield* makeEnvelope
    const { fleet } = yield* makeFleet
    const { panorama } = yield* makePanorama

    /**
     * The caller's counts across its user (documents within its entity scope), its unread and whether it
     * has an open wait. Each count is one statement of its owner; what a count says is the owner's rule.
     */
    const counts = spanned("ReadModel.counts", (caller: Caller): Effect.Effect<CallerCounts> =>
      Effect.gen(function*() {
        const totals = yield* coordination.totals(caller.userId)
        const unread = yield* coordination.unreadCount(caller)
        const openWaits = yield* waits.countOpen(caller.userId)
        const flags = openWaits > 0 ? yield* waits.flags(caller) : { open: false, undelivered: false }
        const documents = yield* knowledge.countDocuments(caller)
        return { posts: totals.posts, channels: totals.channels, open_waits: openWaits, unread, open: flags.open, documents }
      }))

    return { envelope, counts, fleet, panorama } as const
  })
}) {}
