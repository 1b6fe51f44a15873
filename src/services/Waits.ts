import { Effect } from "effect"
import { makeDeclaration } from "./waits/Declaration.js"
import { makeGrantCycles } from "./waits/GrantCycles.js"
import { makeGraph } from "./waits/Graph.js"
import { makeHandlers } from "./waits/Handlers.js"
import { makeLeaseWaits } from "./waits/LeaseWaits.js"
import { makeRecording } from "./waits/Recording.js"
import { makeResolutions } from "./waits/Resolutions.js"
import { makeSignals } from "./waits/Signals.js"
import { makeSweep } from "./waits/Sweep.js"

export { findCycles } from "./waits/Cycles.js"

/**
 * Waits: declarative blocking over posts. Owns `waits`; names come from Auth, posts from Coordination.
 *
 * A wait is checked (1) inside the transaction of every post written to its channel (`onPostLanded`,
 * subscribed to `PostLanded`), (2) at declaration, against what the channel already holds, (3) inside
 * the transaction that revokes the awaited connection (`onConnectionRevoked`: `unverifiable` then, not
 * at the deadline), and (4) by the sweep, which marks overdue waits `unsatisfied`. A `lease_free` wait
 * (`LeaseWaits`) is checked instead inside the transaction of every lease that ends (`onLeaseChanged`,
 * subscribed to `LeaseChanged`) and every revocation, at declaration and by the sweep; its edges in the
 * graph run to the live holders in its way, asked of Leases, and a grant that would close a cycle through them
 * is refused (`onLeaseGranted`, the refusing subscriber of a granted `LeaseChanged`). Every resolution is
 * one conditional update `... WHERE status = 'open'`, so a wait resolves exactly once whichever daemon,
 * sweep or post gets there first, and publishes `WaitResolved` in the same transaction. `satisfied`
 * always names the post that satisfied it and its author.
 *
 * One job a file, under waits/: declaring and cancelling (`Declaration`), how a wait resolves
 * (`Resolutions`), the event handlers (`Handlers`), the sweep (`Sweep`), the envelope's signals and their
 * delivery (`Signals`), the graph with its cycles, orphans and counts (`Graph`, `Cycles`), waits on leases
 * (`LeaseWaits`), grants that would close a cycle (`GrantCycles`).
 */
export class Waits extends Effect.Service<Waits>()("sophia/Waits", {
  effect: Effect.gen(function*() {
    const resolutions = yield* makeResolutions
    const leaseWaits = yield* makeLeaseWaits(resolutions)
    const recording = yield* makeRecording(leaseWaits)
    const { cancel, declare } = yield* makeDeclaration(resolutions, leaseWaits, recording)
    const { onLeaseGranted } = yield* makeGrantCycles(recording)
    const { onConnectionRevoked, onPostLanded } = yield* makeHandlers(resolutions, leaseWaits)
    const { sweep } = yield* makeSweep(resolutions, leaseWaits)
    const { graph, countOpen, countOrphaned, orphaned, openCountsByWaiter } = yield* makeGraph(leaseWaits)
    const { flags, signals, signalsAfter } = yield* makeSignals
    return {
      declare,
      cancel,
      sweep,
      signals,
      signalsAfter,
      flags,
      countOpen,
      openCountsByWaiter,
      graph,
      countOrphaned,
      orphaned,
      onPostLanded,
      onConnectionRevoked,
      onLeaseChanged: leaseWaits.onLeaseChanged,
      onLeaseGranted
    } as const
  })
}) {}
